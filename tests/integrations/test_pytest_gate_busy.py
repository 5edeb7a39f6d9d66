"""The gate on a machine kept busy during the new session only: a real
pytest session pinned to one CPU, a process spinning on that CPU beside
the new one. A test whose code did not change reads slower by its wall
time, and its CPU time clears it: said as the busy machine's, not
failed; a test made slower is still caught, its CPU time grown too."""
import os
import re
import subprocess
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.integrations.pytest_load import SESSION_FILE, read_session
from cli_runs import python_after
from plugin_args import PLUGIN, SUITE_HEAD

SUITE = SUITE_HEAD + """
import os

def test_same():
    for _ in range(30):
        with ap.stage("same"):
            busy(0.008)

def test_slower():
    scale = 1.5 if os.environ.get("CHANGED") == "1" else 1.0
    for _ in range(30):
        with ap.stage("slower"):
            busy(0.008 * scale)
"""

needs_linux = pytest.mark.skipif(
    not hasattr(os, "sched_setaffinity") or
    not Path("/proc/stat").exists(),
    reason="pins processes to a CPU and reads /proc/stat (Linux)")


def pinned(cpu):
    """A Python child pinned to `cpu` from its start."""
    return python_after(f"os.sched_setaffinity(0, {{{cpu}}})")


def session(folder, cpu, *args, changed=False):
    env = dict(os.environ, PYTHONPATH=str(Path(ap.__file__).parent.parent),
               CHANGED="1" if changed else "0")
    return subprocess.run(
        [*pinned(cpu), "-m", "pytest", "-q", "-p", "no:xdist",
         "-p", "no:cacheprovider", *PLUGIN, "test_suite.py", *args],
        cwd=folder, env=env, capture_output=True, text=True, timeout=300)


@needs_linux
def test_a_hog_beside_the_new_session_is_said_and_fails_no_unchanged_test(
        tmp_path):
    (tmp_path / "test_suite.py").write_text(SUITE)
    cpu = min(os.sched_getaffinity(0))
    base = session(tmp_path, cpu, "--aquaprof=base")
    assert base.returncode == 0, base.stdout + base.stderr
    quiet = read_session(tmp_path / "base")
    assert quiet is not None and quiet["cpus"] == 1, quiet
    hog = subprocess.Popen([*pinned(cpu), "-c", "while True: pass"])
    try:
        new = session(tmp_path, cpu, "--aquaprof=new",
                      "--aquaprof-compare=base", "--aquaprof-fail=5%",
                      changed=True)
    finally:
        hog.kill()
        hog.wait()
    out = new.stdout
    busy = read_session(tmp_path / "new")
    # the hog took about half the one CPU the session ran on
    assert busy is not None and busy["other_cpus"] >= 0.25, (quiet, busy)
    assert "how busy the machine was: other processes kept" in out
    assert ("test_suite.py::test_same: slower? the machine was busy: "
            "same (wall time grew, its CPU time did not: not failed") in out
    assert "? same: total" in out
    assert re.search(r"its CPU time a run [+-]\d+\.\d % \(same\) on a "
                     r"busier machine: slower\? the machine was busy", out)
    # slower code is caught on the busy machine all the same
    assert "test_suite.py::test_slower: REGRESSION: slower" in out
    assert "test_same: REGRESSION" not in out
    assert "aquaprof: FAILED: 1 test slower than the base reports by " \
        "more than 5% (test_suite.py::test_slower)" in out
    assert new.returncode == 1
    assert (tmp_path / "new" / SESSION_FILE).is_file()

"""`aquaprof run` against scripts that do what scripts do: change folder,
leave threads running, name things stdout cannot encode; and the other
commands' output under an ASCII stdout. Each runs the CLI in a
subprocess and reads its files back."""
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import aquaprof as ap

from cli_runs import AS_FROM_A_TERMINAL, python_after
from repo_paths import ROOT  # noqa: E402


def cli(*args, cwd, env=None, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT), **(env or {}))
    return subprocess.run([sys.executable, "-m", "aquaprof", *args],
                          capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=timeout)


def script(folder, text, name="job.py"):
    path = Path(folder) / name
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- chdir

CHDIR = """
import os
import aquaprof as ap
os.makedirs("elsewhere", exist_ok=True)
os.chdir("elsewhere")
with ap.stage("work"):
    sum(range(1000))
"""


@pytest.mark.parametrize("options, files", [
    ([], ["job.aquaprof.json", "job.trace.json"]),
    (["-o", "out"], ["out/job.aquaprof.json", "out/job.trace.json"]),
    (["-o", "out", "--html", "page.html"],
     ["out/job.aquaprof.json", "page.html"]),
    (["--html", "pages"], ["job.aquaprof.json", "pages/job.html"]),
])
def test_run_of_a_script_that_changes_folder_writes_where_it_was_told(
        tmp_path, options, files):
    script(tmp_path, CHDIR)
    (tmp_path / "pages").mkdir()
    out = cli("run", *options, "job.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    for name in files:
        assert (tmp_path / name).is_file(), name
    assert not list((tmp_path / "elsewhere").iterdir())
    saved = tmp_path / files[0]
    assert ap.Report.load(saved)["run job.py/work"].count == 1
    # the paths printed are the ones the user's shell can open
    assert f"report: {files[0]}\n" in out.stdout


# -------------------------------------------------------------- threads

THREADS = """
import threading, time
import aquaprof as ap

def batches(n):
    for _ in range(n):
        with ap.stage("batch"):
            time.sleep(0.01)

def chain():
    batches(2)
    # a thread started by a thread, after the module body returned
    threading.Thread(target=batches, args=(3,), name="late").start()

for i in range(4):
    threading.Thread(target=batches, args=(5,), name=f"worker-{i}").start()
threading.Thread(target=chain, name="chain").start()
# a daemon thread is not waited for, as Python does not wait for it
threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
"""


def test_run_waits_for_the_threads_the_script_leaves_running(tmp_path):
    script(tmp_path, THREADS)
    out = cli("run", "--no-sample", "job.py", cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    rep = ap.Report.load(tmp_path / "job.aquaprof.json")
    assert rep["batch"].count == 4 * 5 + 2 + 3
    assert rep["batch"].unclosed == 0
    # the run lasts until Python would have exited; its stage is the
    # module body's
    assert rep.wall - rep["run job.py"].wall.total >= 0.04


def test_run_ends_an_executor_the_script_never_shut_down(tmp_path):
    """Python's exit shuts down a ThreadPoolExecutor left open and waits
    for its work; so does run, which would otherwise wait for its idle
    workers for ever."""
    script(tmp_path, """
import time
from concurrent.futures import ThreadPoolExecutor
import aquaprof as ap

def job():
    with ap.stage("job"):
        time.sleep(0.2)

pool = ThreadPoolExecutor(2)
for _ in range(4):
    pool.submit(job)
""")
    out = cli("run", "--no-sample", "job.py", cwd=tmp_path, timeout=60)
    assert out.returncode == 0, out.stderr
    assert ap.Report.load(tmp_path / "job.aquaprof.json")["job"].count == 4


def test_run_waits_for_threads_after_the_script_exits_with_a_code(
        tmp_path):
    script(tmp_path, """
import sys, threading, time
import aquaprof as ap

def work():
    with ap.stage("after"):
        time.sleep(0.5)

threading.Thread(target=work).start()
sys.exit(3)
""")
    out = cli("run", "--no-sample", "job.py", cwd=tmp_path)
    assert out.returncode == 3, out.stderr
    after = ap.Report.load(tmp_path / "job.aquaprof.json")["after"]
    assert after.count == 1 and after.unclosed == 0
    assert after.wall.total >= 0.4


FOREVER = """
import pathlib, threading, time
import aquaprof as ap

def serve():
    while True:
        with ap.stage("batch"):
            time.sleep(0.01)
        pathlib.Path("started").touch()

threading.Thread(target=serve, name="server").start()
"""


def test_ctrl_c_while_waiting_for_threads_saves_what_they_recorded(
        tmp_path):
    script(tmp_path, FOREVER)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [*AS_FROM_A_TERMINAL, "-m", "aquaprof", "run", "--no-sample",
         "job.py"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True, env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        time.sleep(0.3)        # the module body has long returned
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == -signal.SIGINT, err      # as Python's end
    assert "Traceback" not in err
    assert "interrupted while waiting for 1 thread" in err
    assert "'server'" in err and "so far" in err
    rep = ap.Report.load(tmp_path / "job.aquaprof.json")
    assert rep["batch"].count >= 1
    assert "report: job.aquaprof.json" in out


# ------------------------------------------------------------- encoding

def test_run_of_a_script_whose_file_name_is_not_utf8(tmp_path):
    """A Linux file name of any bytes: os.fsdecode gives a lone surrogate,
    which names the run stage escaped and prints escaped."""
    name = os.fsdecode(b"data_\xff") + ".py"
    script(tmp_path, "import aquaprof as ap\nwith ap.stage('work'):\n"
           "    pass\n", name=name)
    out = cli("run", "--no-sample", name, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "run data_\\udcff.py" in out.stdout
    saved = tmp_path / (os.fsdecode(b"data_\xff") + ".aquaprof.json")
    assert os.fsencode(saved.name) == b"data_\xff.aquaprof.json"
    assert ap.Report.load(saved)["run data_\\udcff.py/work"].count == 1
    assert "report: data_\\udcff.aquaprof.json" in out.stdout


ETAPE = """
import aquaprof as ap
with ap.stage("\\u00e9tape"):
    sum(range(1000))
"""


def test_run_and_show_print_names_an_ascii_stdout_cannot_encode(
        tmp_path):
    script(tmp_path, ETAPE)
    ascii_out = {"PYTHONIOENCODING": "ascii"}
    out = cli("run", "--no-sample", "job.py", cwd=tmp_path, env=ascii_out)
    assert out.returncode == 0, out.stderr
    assert "run job.py/\\xe9tape" in out.stdout
    saved = tmp_path / "job.aquaprof.json"
    assert ap.Report.load(saved)["run job.py/\u00e9tape"].count == 1
    for args in (["show", saved], ["compare", saved, saved],
                 ["history", tmp_path / "h.db", "--add", saved,
                  "--stage", "\u00e9tape"]):
        out = cli(*map(str, args), cwd=tmp_path, env=ascii_out)
        assert out.returncode == 0, (args, out.stderr)
        assert "\\xe9tape" in out.stdout, args
        assert "Traceback" not in out.stderr


def test_the_scripts_own_output_keeps_pythons_encoding_errors(tmp_path):
    """Only aquaprof's own lines are escaped: a script that prints what
    stdout cannot encode fails as it would under python."""
    script(tmp_path, "print('\\u00e9tape')\n")
    out = cli("run", "--no-sample", "job.py", cwd=tmp_path,
              env={"PYTHONIOENCODING": "ascii"})
    assert out.returncode == 1
    assert "UnicodeEncodeError" in out.stderr
    assert (tmp_path / "job.aquaprof.json").is_file()


# ----------------------------------------------------------------- fork

FORKS = """
import os, sys
import aquaprof as ap
with ap.stage("before"):
    sum(range(1000))
pid = os.fork()
if pid == 0:
    with ap.stage("in_child"):
        sum(range(1000))
    if sys.argv[1] == "exit":
        sys.exit(0)
    if sys.argv[1] == "raise":
        raise ValueError("child failed")
    # "return": the child runs on to the end of the script
else:
    _, status = os.waitpid(pid, 0)
    print("child ended", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.parametrize("how, child_code", [("exit", 0), ("return", 0),
                                             ("raise", 1)])
def test_a_forked_child_ends_as_the_script_says(tmp_path, how, child_code):
    """A child the script forks without exec runs on into `run` once its
    copy of the script ends: its exit code stays the script's (it was 2,
    with an "internal error" line), and it writes and prints nothing."""
    script(tmp_path, FORKS)
    done = cli("run", "--no-sample", "job.py", how, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"child ended {child_code}" in done.stdout
    assert "internal error" not in done.stderr
    assert done.stdout.count("aquaprof report:") == 1
    if how == "raise":
        assert "ValueError: child failed" in done.stderr
    rep = ap.Report.load(tmp_path / "job.aquaprof.json")
    assert "run job.py/before" in rep and "run job.py/in_child" not in rep


# -------------------------------------------------------------- SIGTERM

SERVES = """
import pathlib, signal, sys, time
import aquaprof as ap
if sys.argv[1:] == ["own"]:
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(11))
while True:
    with ap.stage("batch"):
        time.sleep(0.01)
    pathlib.Path("started").touch()
"""


def _terminated(tmp_path, *args):
    """Runs SERVES under `aquaprof run`, sends SIGTERM once it serves."""
    script(tmp_path, SERVES)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    proc = subprocess.Popen(
        [*python_after("import signal; "
                       "signal.signal(signal.SIGTERM, signal.SIG_DFL)"),
         "-m", "aquaprof", "run", "--no-sample", "job.py", *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env=env, cwd=tmp_path)
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.01)
        time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return proc.returncode, out, err


def test_sigterm_saves_the_report_and_ends_the_run_by_the_signal(
        tmp_path):
    """`kill PID` (a scheduler's end, a container's stop) lost the whole
    profile: now the report up to there is saved and said, and the
    process still ends by SIGTERM, as it would unprofiled."""
    code, out, err = _terminated(tmp_path)
    assert code == -signal.SIGTERM, (out, err)
    assert "terminated by SIGTERM" in err and "job.aquaprof.json" in err
    assert "Traceback" not in err
    rep = ap.Report.load(tmp_path / "job.aquaprof.json")
    assert rep["run job.py/batch"].count >= 1
    assert rep["run job.py"].unclosed == 1      # cut there, and flagged
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_scripts_own_sigterm_handler_is_kept(tmp_path):
    code, out, err = _terminated(tmp_path, "own")
    assert code == 11, (out, err)
    assert "terminated by SIGTERM" not in err
    assert "failed (sys.exit(11), exit status 11)" in out


# `aquaprof run` with a SIGTERM planted as the Profiler stops (after the
# script, before the report is saved: the stop waits for child processes)
TERM_AT_STOP = r"""
import os, signal, sys
from aquaprof.record.profiler import Profiler
from aquaprof.integrations.cli import main
original = Profiler.stop
def planted(self):
    os.kill(os.getpid(), signal.SIGTERM)
    return original(self)
Profiler.stop = planted
sys.exit(main(sys.argv[1:]))
"""


def test_a_sigterm_as_the_run_stops_waits_for_the_report(tmp_path):
    """Between the script's end and the report saved, the Profiler stops
    (waiting for child processes' reports): a SIGTERM there killed the
    run with no report. It now waits for the save, says so and ends by
    the signal."""
    (tmp_path / "job.py").write_text(
        "import aquaprof as ap\nwith ap.stage('step'):\n    pass\n")
    (tmp_path / "driver.py").write_text(TERM_AT_STOP)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run(
        [sys.executable, "driver.py", "run", "job.py"], capture_output=True,
        text=True, env=env, cwd=tmp_path, timeout=60)
    assert done.returncode == -signal.SIGTERM, done.stderr
    assert "terminated by SIGTERM: the report of the run up to there is " \
        "saved (job.aquaprof.json)" in done.stderr
    rep = ap.Report.load(tmp_path / "job.aquaprof.json")
    assert rep["run job.py/step"].count == 1

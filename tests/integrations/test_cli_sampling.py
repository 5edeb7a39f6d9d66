"""`aquaprof run` samples call stacks by default: a script with no
stages of its own still shows where its time went."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import aquaprof

SCRIPT = '''
import time

def parse(n):
    return [str(i) * 3 for i in range(n)]

def crunch(rows):
    total = 0
    for row in rows:
        for c in row:
            total += ord(c)
    return total

def main():
    for _ in range(4):
        crunch(parse(50000))
        time.sleep(0.01)

main()
'''


from repo_paths import ROOT  # noqa: E402


def run(*args, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof", *map(str, args)],
                          capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=120)


def test_run_prints_the_call_tree_of_a_script_without_stages(tmp_path):
    script = tmp_path / "nostage.py"
    script.write_text(SCRIPT)
    proc = run("run", script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    tree = proc.stdout.split("call tree of 'run nostage.py'")[1]
    assert "[N frames hidden]" in tree.splitlines()[1]
    lines = tree.splitlines()[3:]
    # the script's own frames, outermost first (its module's, or main's
    # when every sample fell in main), aquaprof's and runpy's not
    assert "(nostage.py:1)" in lines[0] or "(nostage.py:14)" in lines[0]
    assert any("main (nostage.py:14)" in line for line in lines)
    assert any("crunch (nostage.py:7)" in line for line in lines)
    assert "runpy" not in tree and "cli.py" not in tree
    saved = aquaprof.Report.load(tmp_path / "nostage.aquaprof.json")
    assert saved.to_dict()["samples"]["stacks"]


POOL = '''
import concurrent.futures
import time

def spin(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass

def crunch():
    spin(0.01)

def job(i):
    crunch()

with concurrent.futures.ThreadPoolExecutor(2) as pool:
    list(pool.map(job, range(20)))
time.sleep(0.05)
'''


def test_run_prints_the_tree_of_the_threads_the_work_was_handed_to(
        tmp_path):
    """The script hands its work to a pool and waits: its own tree is the
    wait, and the pool's threads' tree shows the work, where before the
    output never named it."""
    script = tmp_path / "pool.py"
    script.write_text(POOL)
    proc = run("run", script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    own, _, others = proc.stdout.partition(
        "call tree of the script's 2 other threads that did more than wait"
        " (ThreadPoolExecutor-0_0, ThreadPoolExecutor-0_1;")
    assert "call tree of 'run pool.py'" in own and "crunch" not in own
    lines = others.split("\nreport:")[0].splitlines()
    assert any("crunch (pool.py:10)" in line for line in lines), others
    assert any("job (pool.py:13)" in line for line in lines)


def test_run_without_sampling_prints_no_call_tree(tmp_path):
    script = tmp_path / "nostage.py"
    script.write_text(SCRIPT)
    proc = run("run", "--no-sample", script, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "call tree" not in proc.stdout
    saved = aquaprof.Report.load(tmp_path / "nostage.aquaprof.json")
    assert "samples" not in saved.to_dict()


def test_run_refuses_a_bad_sampling_interval(tmp_path):
    script = tmp_path / "nostage.py"
    script.write_text(SCRIPT)
    for bad in ("0", "fast", "-1", "100"):
        proc = run("run", "--sample", bad, script, cwd=tmp_path)
        assert proc.returncode == 2
        assert "sampling interval" in proc.stderr


HELPERS = """
import time

def warm_up():
    end = time.thread_time() + 0.3
    while time.thread_time() < end:
        pass

warm_up()                  # work done while the script imports this
"""

IMPORTER = """
import json
import helpers

def dump():
    data = [{"row": i, "name": str(i) * 5} for i in range(20000)]
    for _ in range(6):
        json.dumps(data)

dump()
"""


def test_run_folds_the_import_machinery_into_the_line_that_imported(
        tmp_path):
    """A module of the script's own folder, imported: the import
    machinery between folds into one hidden line under the script's
    module, the imported module's frames stay; the standard library's
    json keeps the function called and its innermost frame."""
    (tmp_path / "helpers.py").write_text(HELPERS)
    (tmp_path / "importer.py").write_text(IMPORTER)
    proc = run("run", "importer.py", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    tree = proc.stdout.split("call tree of 'run importer.py'")[1]
    lines = tree.split("\nreport: ")[0].splitlines()[3:]
    assert "<module> (importer.py:1)" in lines[0]
    hidden = next(i for i, line in enumerate(lines) if "hidden]" in line)
    assert lines[hidden].endswith("importlib")
    assert "<module> (helpers.py:1)" in lines[hidden + 1]
    assert "warm_up (helpers.py:4)" in lines[hidden + 2]
    assert any("dumps (__init__.py" in line for line in lines), tree
    assert "frozen" not in tree and "_find_and_load" not in tree
    every = run("run", "--show-all", "importer.py", cwd=tmp_path).stdout
    assert "_find_and_load (<frozen importlib._bootstrap>" in every
    assert "hidden]" not in every

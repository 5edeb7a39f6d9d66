"""Which endings of a profiled script leave its profile on disk: the
docs' pattern before Profiler(save=...) (save after the `with` block)
against save=PATH.

Each ending runs in a fresh process: the block ends by itself, by an
error, by Ctrl-C (SIGINT), by SIGTERM while Python runs, by SIGTERM while
the main thread waits in a C call that signals do not interrupt (the GIL
let go, as torch.distributed's collectives wait for a rank that never
comes), and a run started and never stopped. For each: whether a report
file was written, and the exit status.

    .venv/bin/python benchmarks/run_endings.py
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

HEAD = """
import ctypes, os, sys, time
import aquaprof as ap
style, ending = sys.argv[1], sys.argv[2]
libc = ctypes.CDLL(None)
mutex = ctypes.create_string_buffer(64)
libc.pthread_mutex_lock(mutex)
prof = ap.Profiler(save="run.json" if style == "save" else None)

def work():
    with ap.stage("step"):
        pass
    if ending == "error":
        raise ValueError("planted")
    if ending in ("sigint", "sigterm"):
        print("ready", flush=True)
        while True:
            with ap.stage("loop"):
                time.sleep(0.01)
    if ending == "sigterm in C":
        print("ready", flush=True)
        with ap.stage("wait"):
            libc.pthread_mutex_lock(mutex)

if ending == "never stopped":
    prof.start()
    work()
else:
    with prof:
        work()
    if style == "after":
        prof.report().save("run.json")
"""

ENDINGS = ["whole", "error", "sigint", "sigterm", "sigterm in C",
           "never stopped"]
SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM,
           "sigterm in C": signal.SIGTERM}


def run(style: str, ending: str) -> tuple:
    with tempfile.TemporaryDirectory() as folder:
        prog = Path(folder) / "prog.py"
        prog.write_text(HEAD)
        proc = subprocess.Popen(
            [sys.executable, str(prog), style, ending], cwd=folder,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
        if ending in SIGNALS:
            proc.stdout.readline()
            time.sleep(0.2)
            proc.send_signal(SIGNALS[ending])
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        return (Path(folder, "run.json").exists(), proc.returncode)


def main() -> None:
    print(f"{'ending':<14}  {'save after the block':<22}  save=PATH")
    for ending in ENDINGS:
        cells = []
        for style in ("after", "save"):
            saved, code = run(style, ending)
            cells.append(f"{'saved' if saved else 'lost'} (exit {code})")
        print(f"{ending:<14}  {cells[0]:<22}  {cells[1]}")


if __name__ == "__main__":
    main()

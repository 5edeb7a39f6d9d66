"""`python -m aquaprof ...` run as a user runs it, and what a refused
command line must look like, for any room's tests of the CLI."""
import os
import subprocess
import sys

from repo_paths import ROOT


def cli(*args, cwd=None):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof", *map(str, args)],
                          capture_output=True, text=True, env=env,
                          cwd=cwd or ROOT)


def one_line_error(out, text):
    assert out.returncode == 2
    assert "Traceback" not in out.stderr
    assert text in out.stderr
    assert out.stderr.count("\n") == 1     # usage errors too


def python_after(setup):
    """How to start a Python child, its arguments after it, once `setup`
    (Python statements: a signal's disposition, an affinity, which exec
    keeps) has run in a Python of its own that then execs it. Not in a
    preexec_fn: that runs Python between fork and exec in the test
    runner's copy, which deadlocks where another of its threads held a
    lock at the fork (an allocator's under ASan)."""
    return [sys.executable, "-c",
            f"import os, sys; {setup}; "
            f"os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]


#: a Python child that a test interrupts: SIGINT at its default, as a
#: shell's foreground job has it. A test runner started in the background
#: (nohup, `make test &`) ignores SIGINT, its children inherit that, and
#: Python then never turns SIGINT into KeyboardInterrupt
AS_FROM_A_TERMINAL = python_after(
    "import signal; signal.signal(signal.SIGINT, signal.SIG_DFL)")

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


#: how to start a Python child that a test interrupts, its arguments
#: after it: SIGINT at its default, as a shell's foreground job has it. A
#: test runner started in the background (nohup, `make test &`) ignores
#: SIGINT, its children inherit that, and Python then never turns SIGINT
#: into KeyboardInterrupt. Reset in a Python of its own that then execs
#: the child, not in a preexec_fn: that runs Python between fork and exec
#: in the test runner's copy, which deadlocks where another of its threads
#: held a lock at the fork (an allocator's under ASan)
AS_FROM_A_TERMINAL = [
    sys.executable, "-c",
    "import os, signal, sys; signal.signal(signal.SIGINT, signal.SIG_DFL);"
    " os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]

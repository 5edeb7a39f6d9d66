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


def as_from_a_terminal():
    """preexec_fn for a child that a test interrupts: SIGINT at its
    default, as a shell's foreground job has it. A test runner started in
    the background (nohup, `make test &`) ignores SIGINT, its children
    inherit that, and Python then never turns SIGINT into
    KeyboardInterrupt."""
    import signal
    signal.signal(signal.SIGINT, signal.SIG_DFL)

"""A planted program run as its own process, as a user's would run: a
helper script of tests/support whose last act is to print its findings
as JSON. A process of its own keeps the test runner's threads and
history out of what the profiler sees."""
import json
import os
import subprocess
import sys

from repo_paths import ROOT, SUPPORT


def planted_json(script, *args, timeout=180):
    """What `script` (a file in tests/support) printed, parsed; fails the
    test with the script's error output where it failed."""
    out = subprocess.run(
        [sys.executable, str(SUPPORT / script), *map(str, args)],
        capture_output=True, text=True, timeout=timeout,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(
            [str(ROOT), str(SUPPORT)])))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)

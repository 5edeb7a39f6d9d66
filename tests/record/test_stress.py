"""benchmarks/stress.py at a size for the suite: 8 threads, random nesting,
many more spans than max_spans keeps."""
import subprocess
import sys
from pathlib import Path

from repo_paths import ROOT  # noqa: E402


def test_threads_and_drops_keep_aggregates_exact():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "stress.py"),
         "--threads", "8", "--spans", "200000", "--cap", "5000"],
        capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    lines = out.stdout.splitlines()
    assert lines[1].startswith("aggregates exact") and \
        lines[1].endswith("True")
    assert lines[2].endswith("True")       # kept + dropped = all spans
    kept = int(lines[2].split()[2].replace(",", ""))
    assert 0 < kept <= 5000

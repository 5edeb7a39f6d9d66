"""What writing the Chrome trace of a long run costs in memory: a run of
--spans stage calls (300,000 by default) recorded whole, then
to_chrome_trace, its peak of Python allocations (tracemalloc) and the
file's size. --root measures another tree's aquaprof (a git worktree of
an older commit), in a fresh process.

    .venv/bin/python benchmarks/trace_memory.py [--spans 300000] [--root TREE]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

CHILD = r'''
import os, sys, tracemalloc
import aquaprof as ap
spans, path = int(sys.argv[1]), sys.argv[2]
with ap.Profiler(max_spans=spans + 1) as prof:
    for i in range(spans):
        with ap.stage("step", items=i & 1):
            pass
rep = prof.report()
tracemalloc.start()
rep.to_chrome_trace(path)
_, peak = tracemalloc.get_traced_memory()
size = os.path.getsize(path)
print(f"{spans:,} spans: trace {size / 2**20:.1f} MiB, peak of Python "
      f"allocations while writing it {peak / 2**20:.1f} MiB "
      f"({peak / spans:.0f} B a span)")
'''


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--spans", type=int, default=300_000)
    p.add_argument("--root", type=Path,
                   default=Path(__file__).resolve().parents[1])
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as folder:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, str(a.spans),
             str(Path(folder) / "t.json")], cwd=a.root,
            env=dict(os.environ, PYTHONPATH=str(a.root)))
    return out.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

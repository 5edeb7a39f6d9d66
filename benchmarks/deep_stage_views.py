"""How large each view of a recursive stage thousands deep is: a
decorated recursive walk (stage paths as long as their depth) run
--calls times --depth deep, then the HTML page, the notebook's table,
the SVG flamegraph and the Chrome trace written. --root measures another
tree's aquaprof (a git worktree of an older commit), in a fresh process.

    .venv/bin/python benchmarks/deep_stage_views.py [--depth 2000]
        [--calls 10] [--root TREE]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

CHILD = r'''
import os, sys, tempfile
import aquaprof as ap
depth, calls = int(sys.argv[1]), int(sys.argv[2])
sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * depth))

@ap.stage("visit")
def visit(n):
    if n:
        visit(n - 1)

with ap.Profiler(max_stages=max(10000, depth + 1)) as prof:
    for _ in range(calls):
        visit(depth - 1)
rep = prof.report()
with tempfile.TemporaryDirectory() as folder:
    sizes = {
        "page": os.path.getsize(rep.to_html(os.path.join(folder, "p.html"))),
        "notebook table": len(rep._repr_html_().encode()),
        "flamegraph": os.path.getsize(
            rep.to_flamegraph(os.path.join(folder, "f.svg"))),
        "trace": os.path.getsize(
            rep.to_chrome_trace(os.path.join(folder, "t.json"))),
    }
print(f"{depth:,} deep, {calls} calls: " + ", ".join(
    f"{k} {v / 2**20:.1f} MiB" for k, v in sizes.items()))
'''


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--depth", type=int, default=2000)
    p.add_argument("--calls", type=int, default=10)
    p.add_argument("--root", type=Path,
                   default=Path(__file__).resolve().parents[1])
    a = p.parse_args(argv)
    return subprocess.run(
        [sys.executable, "-c", CHILD, str(a.depth), str(a.calls)],
        cwd=a.root, env=dict(os.environ, PYTHONPATH=str(a.root))).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

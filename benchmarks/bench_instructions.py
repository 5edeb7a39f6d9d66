"""Instructions the C core executes per stage pair (enter + exit), counted
by valgrind's callgrind: a figure that, unlike a timing, does not move
with the machine's load or the code's placement in memory, so that two
builds of the hot path can be compared exactly.

    python benchmarks/bench_instructions.py [--pairs N] [--root DIR ...]

Each --root is an aquaprof tree built in place (default: this one). A
child process runs N `with stage:` pairs under a running Profiler
(memory=True, raw spans kept) under callgrind; the figures are the
instructions of the extension's own functions (and of __tls_get_addr,
which they call) divided by N.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import sys
import aquaprof as ap
n = int(sys.argv[1])
stage = ap.stage("pair")
with ap.Profiler(max_spans=2**31 - 1, compensate=False, cuda=False):
    for _ in range(n):
        with stage:
            pass
"""


def count(root: Path, pairs: int) -> Dict[str, float]:
    """Instructions per pair, by function, of the core under root."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "callgrind.out"
        env = dict(os.environ, PYTHONPATH=str(root))
        subprocess.run(["valgrind", "--tool=callgrind",
                        f"--callgrind-out-file={out}", sys.executable, "-c",
                        CHILD, str(pairs)], env=env, cwd=str(root),
                       check=True, capture_output=True)
        text = subprocess.run(["callgrind_annotate", "--threshold=100",
                               str(out)], check=True, capture_output=True,
                              text=True).stdout
    figures: Dict[str, float] = {}
    for line in text.splitlines():
        parts = line.split()
        if len(parts) < 3 or not parts[0].replace(",", "").isdigit():
            continue
        where = parts[-2] if parts[-1].startswith("[") else parts[-1]
        name = where.rsplit(":", 1)[-1]
        in_core = "_core." in line
        if in_core or name == "__tls_get_addr":
            n = int(parts[0].replace(",", "")) / pairs
            if n >= 1:
                figures[name] = figures.get(name, 0.0) + n
    return figures


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--pairs", type=int, default=200_000)
    p.add_argument("--root", type=Path, action="append")
    a = p.parse_args(argv)
    if not shutil.which("valgrind") or not shutil.which("callgrind_annotate"):
        print("valgrind (callgrind) is not installed: nothing measured")
        return 1
    roots = a.root or [ROOT]
    results = {str(r.resolve()): count(r.resolve(), a.pairs) for r in roots}
    names = sorted({n for f in results.values() for n in f},
                   key=lambda n: -max(f.get(n, 0) for f in results.values()))
    print(f"instructions per stage pair ({a.pairs:,} pairs, callgrind)")
    width = max(len(n) for n in names + ["total"])
    print(" " * width + "".join(f"  {Path(r).name:>14}" for r in results))
    for name in names + ["total"]:
        cells = [sum(f.values()) if name == "total" else f.get(name, 0.0)
                 for f in results.values()]
        print(f"{name:<{width}}" + "".join(f"  {c:14.1f}" for c in cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""How large the SVG flamegraph, the HTML page and the notebook's
flamegraph of saved reports are, as one tree's aquaprof writes them:
--root measures another tree (a git worktree of an older commit), in a
fresh process, so that two versions are compared on the same reports.
Without a report, tests/support/training_script.py's (a small CNN, a
DataLoader of two worker processes, sampled at 1 ms) is recorded first,
into --keep or a temporary folder.

    .venv/bin/python benchmarks/saved_report_views.py [REPORT.json ...]
        [--root TREE] [--keep FOLDER]
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r'''
import os, sys, tempfile
import aquaprof as ap
for name in sys.argv[1:]:
    rep = ap.Report.load(name)
    with tempfile.TemporaryDirectory() as folder:
        sizes = {
            "flamegraph": os.path.getsize(
                rep.to_flamegraph(os.path.join(folder, "f.svg"))),
            "page": os.path.getsize(rep.to_html(os.path.join(folder,
                                                             "p.html"))),
            "notebook flamegraph": len(rep.flamegraph().html().encode()),
        }
    print(f"{os.path.basename(name)} ({os.path.getsize(name) / 2**10:,.1f} "
          f"KiB of JSON): " + ", ".join(f"{k} {v / 2**10:,.1f} KiB"
                                       for k, v in sizes.items()))
'''


def main(argv: list) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("reports", nargs="*", type=Path)
    p.add_argument("--root", type=Path, default=ROOT)
    p.add_argument("--keep", type=Path)
    a = p.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        reports = [r.resolve() for r in a.reports]
        if not reports:
            folder = a.keep or Path(scratch)
            folder.mkdir(parents=True, exist_ok=True)
            reports = [folder / "training.json"]
            subprocess.run([sys.executable, str(ROOT / "tests" / "support"
                                                / "training_script.py"),
                            str(reports[0])], check=True,
                           stdout=subprocess.DEVNULL)
        return subprocess.run(
            [sys.executable, "-c", CHILD, *map(str, reports)], cwd=a.root,
            env=dict(os.environ, PYTHONPATH=str(a.root))).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

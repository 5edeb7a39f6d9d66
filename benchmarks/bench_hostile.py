"""Reading crafted reports: seconds and peak memory (tracemalloc) to
load one, and seconds to render every view, as the crafted shape grows. Time that grows
with the size (not its square) is what the loader and the views promise;
files past aquaprof.model.limits are refused before any real work.

    python benchmarks/bench_hostile.py [--quick]

Shapes: a chain of stages nested N deep (its paths hold about N^2
characters, the one cost that must grow faster than N), N top-level
stages with 5 spans each, and a zlib bomb of N GiB declared as 3 spans.
"""
from __future__ import annotations

import argparse
import base64
import json
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))
import aquaprof as ap  # noqa: E402
import crafted  # noqa: E402


def views(report: ap.Report, folder: Path) -> None:
    str(report)
    report._repr_html_()
    report.to_chrome_trace(folder / "t.json")
    report.to_flamegraph(folder / "f.svg")
    report.to_folded(folder / "f.txt")
    report.to_speedscope(folder / "s.json")
    str(report.compare(report))
    ap.merge([report, report])


def measure(doc: dict, folder: Path) -> str:
    """Loading (seconds and peak memory, under tracemalloc) and then every
    view (seconds, untraced: tracemalloc slows Python code down)."""
    path = folder / "r.json"
    path.write_text(json.dumps(doc))
    tracemalloc.start()
    began = time.perf_counter()
    try:
        report = ap.Report.load(path)
        error = None
    except ap.ReportError as e:
        report, error = None, str(e).split(": ", 1)[1]
    took = time.perf_counter() - began
    peak = tracemalloc.get_traced_memory()[1] / 2**20
    tracemalloc.stop()
    if report is None:
        return f"refused in {took:6.3f} s, peak {peak:6.1f} MiB: {error}"
    began = time.perf_counter()
    views(report, folder)
    shown = time.perf_counter() - began
    return (f"load {took:6.3f} s, peak {peak:6.1f} MiB; every view "
            f"{shown:6.3f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="the smaller sizes only")
    quick = parser.parse_args().quick
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        depths = [1000, 2000, 4096] if quick else [1000, 2000, 4096,
                                                   20000]
        for depth in depths:
            # calibrated, as a profiled run's report is: the compensation
            # counts the calls below each stage
            doc = dict(crafted.chain(depth),
                       overhead={"span_ns": 60.0, "inside_ns": 30.0})
            print(f"chain {depth:6d} deep:      {measure(doc, folder)}",
                  flush=True)
        widths = [5000, 10000] if quick else [5000, 10000, 20000, 40000]
        for width in widths:
            print(f"{width:6d} stages x 5 spans: "
                  f"{measure(crafted.flat(width, 5), folder)}", flush=True)
        for gib in ([1] if quick else [1, 4]):
            doc = crafted.flat(1, 3)
            doc["spans"]["data"] = base64.b64encode(
                crafted.zlib_bomb(gib << 30)).decode("ascii")
            print(f"zlib bomb of {gib} GiB:     {measure(doc, folder)}",
                  flush=True)


if __name__ == "__main__":
    main()

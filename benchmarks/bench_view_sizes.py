"""How large each view of a real training run is: tests/support/training_script.py
(a small CNN, a DataLoader with two worker processes, sampled at 1 ms,
torch_modules on) profiled by its own Profiler, and every view of its
report written: the SVG flamegraph, the HTML page, the notebook outputs
(the report's table and its flamegraph), the Chrome trace, speedscope
and the folded stacks, each with its ratio to the report's JSON. Then
pyinstrument's HTML page of the same script (its main process only:
pyinstrument follows no worker), and `aquaprof run --html` on the same
script training for --seconds (10 by default).

    .venv/bin/python benchmarks/bench_view_sizes.py [--seconds 10]
        [--keep FOLDER]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Tuple

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "tests" / "support" / "training_script.py"
sys.path.insert(0, str(ROOT))
import aquaprof as ap  # noqa: E402

MB = 1 << 20


def run(argv: List[str], cwd: Path) -> float:
    """Runs a command with this checkout's aquaprof first on the path;
    returns its wall seconds."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    t0 = time.perf_counter()
    done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    return time.perf_counter() - t0


def views(report_path: Path, folder: Path) -> Dict[str, int]:
    """The bytes of every view of the report."""
    rep = ap.Report.load(report_path)
    files = {"SVG flamegraph": rep.to_flamegraph(folder / "f.svg"),
             "HTML page": rep.to_html(folder / "p.html"),
             "Chrome trace": rep.to_chrome_trace(folder / "t.json"),
             "speedscope": rep.to_speedscope(folder / "s.json"),
             "folded stacks": rep.to_folded(folder / "f.folded")}
    sizes = {name: path.stat().st_size for name, path in files.items()}
    sizes["notebook: report"] = len(rep._repr_html_().encode())
    sizes["notebook: flamegraph"] = len(
        rep.flamegraph()._repr_html_().encode())
    return sizes


def drawn(rep: "ap.Report") -> str:
    """How many frames the flamegraph draws, merges and folds."""
    from aquaprof.views.flamegraph import MIN_SHARE, frame_groups
    drawing = frame_groups(rep)
    frames = drawing.groups.count('<g class="f')
    every = frame_groups(rep, min_share=0.0).groups.count('<g class="f')
    return (f"{frames:,} frames drawn, {every - frames:,} code frames "
            f"under {MIN_SHARE * 100:g} % merged, "
            f"{drawing.idle_threads} idle threads folded")


def pyinstrument_page(folder: Path) -> Tuple[int, float]:
    """pyinstrument's HTML page of the script with no aquaprof Profiler
    of its own: (bytes, wall seconds); (0, 0) without pyinstrument."""
    if importlib.util.find_spec("pyinstrument") is None:
        return 0, 0.0
    page = folder / "pyinstrument.html"
    took = run([sys.executable, "-m", "pyinstrument", "-r", "html", "-o",
                str(page), str(SCRIPT), "--no-profiler"], folder)
    return page.stat().st_size, took


def aquaprof_run(folder: Path, seconds: float) -> Tuple[Dict[str, int],
                                                        float]:
    """`aquaprof run --html` on the script training `seconds`: the bytes
    of its report, page and trace, and the run's wall seconds."""
    out = folder / "run"
    out.mkdir()
    took = run([sys.executable, "-m", "aquaprof", "run", "-o", str(out),
                "--html", str(out / "page.html"), str(SCRIPT),
                "--no-profiler", "--seconds", str(seconds)], folder)
    return {"JSON report": (out / "training_script.aquaprof.json")
            .stat().st_size,
            "HTML page": (out / "page.html").stat().st_size,
            "Chrome trace": (out / "training_script.trace.json")
            .stat().st_size}, took


def row(name: str, size: int, json_size: int) -> str:
    return (f"  {name:<22} {size / MB:9.2f} MB   "
            f"{size / json_size:6.2f}x the JSON")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="how long `aquaprof run` trains")
    parser.add_argument("--keep", type=Path,
                        help="write the files here and keep them")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        report = folder / "train.json"
        took = run([sys.executable, str(SCRIPT), str(report)], folder)
        json_size = report.stat().st_size
        rep = ap.Report.load(report)
        print(f"tests/support/training_script.py: {took:.1f} s, run "
              f"{rep.wall:.2f} s wall, {len(rep.processes)} processes")
        print(f"  {'JSON report':<22} {json_size / MB:9.2f} MB")
        for name, size in views(report, folder).items():
            print(row(name, size, json_size))
        print(f"  flamegraph: {drawn(rep)}")
        size, took = pyinstrument_page(folder)
        if size:
            print(row("pyinstrument's page", size, json_size)
                  + f" ({took:.1f} s, main process only)")
        else:
            print("  pyinstrument is not installed: its page not measured")
        sizes, took = aquaprof_run(folder, args.seconds)
        print(f"aquaprof run --html, training {args.seconds:g} s "
              f"({took:.1f} s in all):")
        for name, size in sizes.items():
            print(row(name, size, sizes["JSON report"]))


if __name__ == "__main__":
    main()

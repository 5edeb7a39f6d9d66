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

With --programs, real programs instead, each a fresh process run by
`aquaprof run --html` sampled and with --no-sample: the training script
for --seconds (20 here) with its DataLoader workers, and the asyncio
server, the 64 idle threads and the 2,000,000 stage calls of
benchmarks/view_programs.py. For each, every view's size, what the
folded stacks give the idle threads' frame, the runner's runpy frames
and the code outside any stage, whether the trace parses and names
every process and thread, the speedscope profiles titled idle, the
processes the page's header lists, and, where Playwright and
/usr/bin/chromium are found, whether the page renders without console
errors and shows each stage's count and total as the table does.
--root TREE measures another checkout (its aquaprof built).

    .venv/bin/python benchmarks/bench_view_sizes.py --programs
        [--seconds 20] [--only server,idle] [--root TREE] [--keep FOLDER]
"""
from __future__ import annotations

import argparse
import importlib.util
import json
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


def run(argv: List[str], cwd: Path, root: Path = ROOT) -> float:
    """Runs a command with root's aquaprof first on the path; returns its
    wall seconds."""
    env = dict(os.environ, PYTHONPATH=str(root))
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


# ------------------------------------------------------------ programs

PROGRAMS = ROOT / "benchmarks" / "view_programs.py"

#: run in a fresh process with the measured checkout's aquaprof: writes
#: every view of the report and prints what the bench reports, as JSON
_MEASURE = r"""
import json, re, sys
from pathlib import Path
import aquaprof as ap
from aquaprof.common.units import fmt_time
report, folder = Path(sys.argv[1]), Path(sys.argv[2])
rep = ap.Report.load(report)
files = {"SVG flamegraph": rep.to_flamegraph(folder / "f.svg"),
         "HTML page": rep.to_html(folder / "p.html"),
         "Chrome trace": rep.to_chrome_trace(folder / "t.json"),
         "speedscope": rep.to_speedscope(folder / "s.json"),
         "folded stacks": rep.to_folded(folder / "f.folded")}
sizes = {name: path.stat().st_size for name, path in files.items()}
sizes["notebook: report"] = len(rep._repr_html_().encode())
sizes["notebook: flamegraph"] = len(rep.flamegraph()._repr_html_().encode())
stages = {s.path.split("/")[0] for s in rep.stages}
folded = {"all": 0, "idle": 0, "runpy": 0, "outside": 0}
for line in files["folded stacks"].read_text().splitlines():
    stack, ns = line.rsplit(" ", 1)
    first = stack.split(";")[0]
    folded["all"] += int(ns)
    folded["idle"] += int(ns) * first.startswith("idle threads (")
    folded["runpy"] += int(ns) * ("(<frozen runpy>" in stack)
    folded["outside"] += int(ns) * (first not in stages
                                    and not first.startswith("idle threads ("))
trace = json.loads(files["Chrome trace"].read_text())
events = trace["traceEvents"]
named = {(e["pid"], e.get("tid")) for e in events if e.get("ph") == "M"
         and e["name"] in ("process_name", "thread_name")}
pids = {e["pid"] for e in events if e.get("ph") == "X"}
tids = {(e["pid"], e["tid"]) for e in events if e.get("ph") == "X"}
scope = json.loads(files["speedscope"].read_text())
page = files["HTML page"].read_text()
header = page[:page.index("<nav>")]
print(json.dumps({
    "wall": rep.wall, "processes": len(rep.processes),
    "threads": len(rep.threads), "spans": rep.spans_recorded,
    "dropped": rep.spans_dropped, "sizes": sizes, "folded": folded,
    "trace": {"events": len(events), "pids": len(pids),
              "pids_unnamed": len({(p, None) for p in pids} - named),
              "threads": len(tids), "threads_unnamed": len(tids - named)},
    "speedscope": {"profiles": len(scope["profiles"]),
                   "idle": sum(p["name"].endswith(", idle")
                               for p in scope["profiles"])},
    "header_processes": header.count("<dt>process</dt>"),
    "table": [(s.path, f"{s.count:,}", fmt_time(s.wall.total))
              for s in rep.stages]}))
"""


def program_runs(seconds: float, only: List[str]) -> List[Tuple[str,
                                                                  List[str]]]:
    """(name, the script and its arguments) of each program."""
    runs = [("torch training, DataLoader num_workers=2",
             [str(SCRIPT), "--no-profiler", "--seconds", f"{seconds:g}"]),
            ("asyncio server, 200 requests", [str(PROGRAMS), "server"]),
            ("64 idle threads and a busy one", [str(PROGRAMS), "idle"]),
            ("2,000,000 stage calls", [str(PROGRAMS), "long"])]
    keys = ["torch", "server", "idle", "long"]
    return [r for key, r in zip(keys, runs) if not only or key in only]


def measured(report: Path, folder: Path, root: Path) -> Dict:
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "-c", _MEASURE, str(report),
                           str(folder)], cwd=folder, env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"measuring {report} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout)


def browsed(page: Path, table: List[List[str]]) -> str:
    """What chromium makes of the page: its console errors, and the
    table's stages whose count or total the page's Stages section lacks;
    or why it was not opened."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return "not opened (no Playwright)"
    if not Path("/usr/bin/chromium").exists():
        return "not opened (no /usr/bin/chromium)"
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path="/usr/bin/chromium")
        tab = browser.new_page(viewport={"width": 1400, "height": 900})
        errors: List[str] = []
        tab.on("console", lambda m: errors.append(m.text)
               if m.type == "error" else None)
        tab.on("pageerror", lambda e: errors.append(str(e)))
        t0 = time.perf_counter()
        tab.goto(page.as_uri())
        tab.wait_for_load_state("load")
        took = time.perf_counter() - t0
        shown = tab.inner_text("section#stages")
        top = tab.locator("section#stages").bounding_box()["y"]
        browser.close()
    rows = [" ".join(line.split()) for line in shown.splitlines()]
    missing = [path for path, count, total in table
               if not any(f" {count} {total} " in f" {r} " for r in rows)]
    return (f"loaded in {took:.1f} s, {len(errors)} console errors"
            f"{': ' + errors[0][:200] if errors else ''}; stage table "
            f"{top:,.0f} px from the top; stages whose count and total "
            f"the page lacks: {', '.join(missing) or 'none'}")


def programs(folder: Path, seconds: float, only: List[str],
             root: Path) -> None:
    print(f"aquaprof from {root}")
    for name, argv in program_runs(seconds, only):
        for sampled in (True, False):
            out = folder / f"{Path(argv[0]).stem}{argv[1] if len(argv) == 2 else ''}-{'sampled' if sampled else 'unsampled'}"
            out.mkdir()
            flags = [] if sampled else ["--no-sample"]
            took = run([sys.executable, "-m", "aquaprof", "run", "-o",
                        str(out), "--html", str(out / "page.html"), *flags,
                        *argv], folder, root)
            report = next(out.glob("*.aquaprof.json"))
            m = measured(report, out, root)
            json_size = report.stat().st_size
            print(f"{name}, {'sampled at 1 ms' if sampled else 'not sampled'}"
                  f": aquaprof run {took:.1f} s, run {m['wall']:.2f} s wall,"
                  f" {m['processes']} processes, {m['threads']} threads, "
                  f"{m['spans']:,} spans kept, {m['dropped']:,} dropped")
            print(f"  {'JSON report':<22} {json_size / MB:9.2f} MB")
            print(row("aquaprof run's trace", next(out.glob(
                "*.trace.json")).stat().st_size, json_size))
            print(row("aquaprof run's page", (out / "page.html")
                      .stat().st_size, json_size))
            for view, size in m["sizes"].items():
                print(row(view, size, json_size))
            f = m["folded"]
            share = {k: v / f["all"] * 100 if f["all"] else 0.0
                     for k, v in f.items()}
            print(f"  folded stacks: {f['all'] * 1e-9:.2f} s in all; "
                  f"under 'idle threads (N)' {share['idle']:.1f} %, code "
                  f"outside any stage unlabelled {share['outside']:.1f} %, "
                  f"under runpy's frames {share['runpy']:.1f} %")
            t = m["trace"]
            print(f"  trace: parses, {t['events']:,} events; processes "
                  f"{t['pids']} ({t['pids_unnamed']} unnamed), threads "
                  f"{t['threads']} ({t['threads_unnamed']} unnamed); "
                  f"speedscope: {m['speedscope']['profiles']} profiles, "
                  f"{m['speedscope']['idle']} titled idle")
            print(f"  page: {m['header_processes']} process lines in its "
                  f"header; chromium: "
                  f"{browsed(out / 'page.html', m['table'])}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0,
                        help="how long `aquaprof run` trains")
    parser.add_argument("--keep", type=Path,
                        help="write the files here and keep them")
    parser.add_argument("--programs", action="store_true",
                        help="profile the real programs instead")
    parser.add_argument("--only", default="",
                        help="with --programs: torch,server,idle,long")
    parser.add_argument("--root", type=Path, default=ROOT,
                        help="with --programs: the checkout to measure")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        if args.programs:
            programs(folder, args.seconds if "--seconds" in sys.argv
                     else 20.0, [o for o in args.only.split(",") if o],
                     args.root.resolve())
            return
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

"""A long notebook session: one cell run again and again in a real Jupyter
kernel (ipykernel, driven by jupyter_client as a front end drives it),
profiled and not, and what the kernel holds as the runs go on:

    python benchmarks/notebook_session.py [--runs 200] [--root DIR]

The cell calls work(): 200 pairs of nested stages and 20 ms of Python
in a stage, so that a sampled run keeps samples. Each mode has a kernel
of its own:

- unprofiled: `work()`;
- %%aquaprof: the cell magic (sampled, as by default), its report the
  cell's output, shown as HTML;
- with + flamegraph: `with ap.Profiler(sample=0.001)`, then the report's
  flamegraph as the cell's output.

Every 20 runs a probe reads how much output IPython itself keeps (the
mime bundles of the outputs in its history, HTML included, and Out),
then drops IPython's caches of outputs (Out and `_N`, `_`, the history's
bundles) and collects garbage: what is left grows only where something
else keeps it. Printed per mode: the kernel's RSS growth a run from the
first probe (runs 1-20 warm the kernel up: imports, calibration) to the
last, the growth of objects the garbage collector tracks, the Reports
alive at the end once IPython's caches are dropped (IPython keeps its
last results, `_` to `___` and its last cell's, whatever drops them), and
what IPython's caches had kept a run.

--root runs the kernels against the aquaprof tree at DIR (built in
place); the kernel driver is this tree's (tests/support/kernel.py).
"""
from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Dict, List

ROOT = Path(__file__).resolve().parent.parent

SETUP = """\
import gc, time
import aquaprof as ap
%load_ext aquaprof
def work():
    for _ in range(200):
        with ap.stage("step"):
            with ap.stage("inner"):
                sum(range(300))
    with ap.stage("spin"):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.02:
            pass
"""

MODES = {
    "unprofiled": "work()",
    "%%aquaprof": "%%aquaprof\nwork()",
    "with + flamegraph": "with ap.Profiler(sample=0.001) as prof:\n"
                         "    work()\n"
                         "prof.report().flamegraph()",
}

# kept output bytes, then (caches dropped) RSS KiB, Reports alive, objects
PROBE = """\
shell = get_ipython()
kept = sum(len(v) for outs in shell.history_manager.outputs.values()
           for o in outs for v in o.bundle.values() if isinstance(v, str))
shell.displayhook.flush()
shell.history_manager.outputs.clear()
for name in ("_", "__", "___"):
    globals().pop(name, None)
gc.collect()
rss = [l for l in open("/proc/self/status") if l.startswith("VmRSS")]
print(kept, int(rss[0].split()[1]),
      sum(type(o) is ap.Report for o in gc.get_objects()),
      len(gc.get_objects()))
"""

EVERY = 20


def session(root: Path, cell: str, runs: int) -> Dict[str, float]:
    sys.path.insert(0, str(ROOT / "tests" / "support"))
    from kernel import Kernel
    with tempfile.TemporaryDirectory() as folder:
        kernel = Kernel(str(root), folder)
        try:
            def checked(code: str) -> str:
                out = kernel.run(code, timeout=120)
                errors = [text for kind, text in out if kind == "error"]
                if errors:
                    raise RuntimeError(f"{code!r}: {errors}")
                return "".join(text for kind, text in out
                               if kind == "stream")
            checked(SETUP)
            probes: List[List[int]] = []
            for run in range(1, runs + 1):
                checked(cell)
                if run % EVERY == 0:
                    probes.append([int(v) for v in checked(PROBE).split()])
        finally:
            kernel.close()
    first, last = probes[0], probes[-1]
    span = EVERY * (len(probes) - 1)
    return {"rss_per_run": (last[1] - first[1]) * 1024 / span,
            "objects_per_run": (last[3] - first[3]) / span,
            "reports_alive": last[2],
            "ipython_kept_per_run": sum(p[0] for p in probes[1:]) / span}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=200,
                   help="runs of the cell in each kernel (default 200)")
    p.add_argument("--root", type=Path, default=ROOT,
                   help="the aquaprof tree the kernels import")
    args = p.parse_args()
    if args.runs < 2 * EVERY:
        p.error(f"--runs: at least {2 * EVERY}")
    print(f"aquaprof from {args.root}, {args.runs} runs of the cell")
    print(f"{'mode':<20} {'RSS/run':>10} {'objects/run':>12} "
          f"{'Reports alive':>14} {'IPython kept/run':>17}")
    for mode, cell in MODES.items():
        f = session(args.root.resolve(), cell, args.runs)
        print(f"{mode:<20} {f['rss_per_run']:>8.0f} B "
              f"{f['objects_per_run']:>12.1f} {f['reports_alive']:>14} "
              f"{f['ipython_kept_per_run'] / 1024:>13.1f} KiB", flush=True)


if __name__ == "__main__":
    main()

"""Instructions the CPU plane sweep executes per sample (pixel x depth x
source view), function by function, counted by valgrind's callgrind: a
figure that does not move with the machine's load, and that with the
time per sample says how far instruction count, rather than waiting,
bounds the sweep.

    python benchmarks/mvs/mvs_instructions.py [--cost ncc] [--parity textbook]
        [--height 240] [--width 320] [--views 4] [--planes 8]

A child process builds the volume of --planes more depths than a base
under callgrind twice, the base's planes alone and all of it (one
thread, refractive flat scene, window 11), counting only inside the
sweep's C entry point; the difference, divided by the extra samples,
leaves out the per-call setup. The base is the fewest planes of at
least four plane-views, from which SSIM makes the reference's sums as
the whole volume does. The two
volumes are then timed without valgrind (each the least of 5), and the
difference of their times, with the clock rate /proc/cpuinfo reports,
gives cycles and instructions per cycle.
"""
from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parents[2]

CHILD = r"""
import sys, time
import numpy as np
sys.path.insert(0, sys.argv[1])
from aquaprof import _mvs
from aquaprof.mvs import scenes
from aquaprof.mvs.plane_sweep import COSTS, PARITIES
cost, parity, h, w, views, total, planes, repeats = sys.argv[2:10]
h, w, views, total, planes, repeats = map(
    int, (h, w, views, total, planes, repeats))
scene = scenes.make_scene("flat", "refractive", views + 1, h, w)
depths = np.linspace(*scene.depth_range(0.03), total)
stack = np.stack(scene.images[1:])
cams = np.stack([c.params for c in scene.cameras[1:]])
out = np.empty((h, w, total), np.float32)
best = float("inf")
for _ in range(repeats):
    start = time.perf_counter()
    _mvs.cost_volume(scene.ref, stack, scene.ref_cam.params, cams, depths,
                     0, planes, COSTS[cost], 11, 1, out, PARITIES[parity])
    best = min(best, time.perf_counter() - start)
print(best)
"""

ENTRY = "ap_cost_volume"


def base_planes(args: argparse.Namespace) -> int:
    """The planes of the run whose count is taken away: four plane-views
    at least."""
    return -(-4 // args.views)


def child(args: argparse.Namespace, planes: int,
          repeats: int) -> List[str]:
    """The child's command line: the first `planes` planes of the volume,
    the least time of `repeats` printed."""
    return [sys.executable, "-c", CHILD, str(ROOT), args.cost, args.parity,
            str(args.height), str(args.width), str(args.views),
            str(base_planes(args) + args.planes), str(planes),
            str(repeats)]


def run(command: List[str]) -> str:
    """The command's output; its error output, and an exit, if it
    fails."""
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(f"{command[0]} failed (exit {done.returncode})")
    return done.stdout


def counted(args: argparse.Namespace, planes: int,
            work: Path) -> Dict[str, int]:
    """Instructions by function inside the sweep, for a volume of
    `planes` planes."""
    out = work / f"callgrind.{planes}"
    run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
         f"--toggle-collect={ENTRY}"] + child(args, planes, 1))
    text = run(["callgrind_annotate", "--threshold=100", str(out)])
    counts: Dict[str, int] = {}
    for line in text.splitlines():
        match = re.match(r"\s*([\d,]+) \([^)]*\)\s+\S*?:(\S+)", line)
        if match and "PROGRAM TOTALS" not in line:
            name = match.group(2).split(".arch_")[0]
            counts[name] = counts.get(name, 0) + int(
                match.group(1).replace(",", ""))
    return counts


def clock_ghz() -> Tuple[float, str]:
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return float("nan"), "unknown"
    found = re.findall(r"cpu MHz\s*:\s*([\d.]+)", text)
    model = re.search(r"model name\s*:\s*(.+)", text)
    ghz = float(found[0]) / 1000 if found else float("nan")
    return ghz, model.group(1).strip() if model else "unknown"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cost", choices=["ncc", "ssim", "sad"],
                        default="ncc")
    parser.add_argument("--parity", choices=["textbook", "aquamvs"],
                        default="textbook")
    parser.add_argument("--height", type=int, default=240)
    parser.add_argument("--width", type=int, default=320)
    parser.add_argument("--views", type=int, default=4)
    parser.add_argument("--planes", type=int, default=8,
                        help="planes counted beyond the base")
    args = parser.parse_args(argv)
    if min(args.height, args.width) < 16 or min(args.views,
                                                 args.planes) < 1:
        parser.error("--height and --width must be at least 16 (the "
                     "synthetic scene's least), --views and --planes at "
                     "least 1")
    for tool in ("valgrind", "callgrind_annotate"):
        if shutil.which(tool) is None:
            print(f"{tool} is not installed (Debian: apt install "
                  f"valgrind)", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        base = counted(args, base_planes(args), Path(tmp))
        more = counted(args, base_planes(args) + args.planes, Path(tmp))
    samples = args.planes * args.views * args.height * args.width
    per = {name: (more.get(name, 0) - base.get(name, 0)) / samples
           for name in more}
    total = sum(per.values())
    timed = [float(run(child(args, planes, 5)).splitlines()[-1])
             for planes in (base_planes(args),
                            base_planes(args) + args.planes)]
    ns = (timed[1] - timed[0]) / samples * 1e9
    ghz, model = clock_ghz()
    print(f"{args.cost} ({args.parity}), {args.height}x{args.width}, "
          f"{args.views} source views, one thread; {model}")
    print(f"{'function':<32} {'instr/sample':>12} {'share':>7}")
    for name, value in sorted(per.items(), key=lambda kv: -kv[1]):
        if value >= 0.01 * total:
            print(f"{name:<32} {value:>12.1f} {value / total:>7.1%}")
    print(f"{'all of the sweep':<32} {total:>12.1f}")
    print(f"time: {ns:.2f} ns a sample (setup left out), "
          f"{ns * ghz:.1f} cycles at {ghz:.2f} GHz: "
          f"{total / (ns * ghz):.2f} instructions a cycle")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""A small built-in pipeline, profiled: `python -m aquaprof.demo`.

A toy block-matching stereo pipeline in NumPy: images are made and loaded
by a thread pool, smoothed, matched over a range of disparities and turned
into a depth map. It shows nested stages, a decorated function, threads and
items/s, then saves the report. (The plane-sweep kit will replace it.)
"""
from __future__ import annotations

import argparse
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import List, Optional, Sequence, Tuple

import numpy as np

import aquaprof as ap

HEIGHT, WIDTH, DISPARITIES = 240, 320, 32


def make_pair(seed: int) -> Tuple[np.ndarray, np.ndarray]:
    with ap.stage("render", items=1):
        rng = np.random.default_rng(seed)
        right = rng.random((HEIGHT, WIDTH + DISPARITIES), dtype=np.float32)
        shift = 8 + seed % 16
        left = right[:, DISPARITIES - shift:DISPARITIES - shift + WIDTH]
        return left.copy(), right[:, DISPARITIES:].copy()


@ap.stage
def box_filter(image: np.ndarray, radius: int = 2) -> np.ndarray:
    summed = image.cumsum(0).cumsum(1)
    padded = np.pad(summed, ((radius + 1, radius), (radius + 1, radius)),
                    mode="edge")
    k = 2 * radius + 1
    return (padded[k:, k:] - padded[:-k, k:] - padded[k:, :-k]
            + padded[:-k, :-k]) / (k * k)


@ap.stage("match")
def cost_volume(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    costs = np.empty((DISPARITIES,) + left.shape, dtype=np.float32)
    for d in range(DISPARITIES):
        with ap.stage("disparity", items=left.size):
            shifted = np.roll(right, d, axis=1)
            costs[d] = box_filter(np.abs(left - shifted))
    return costs


def run(pairs: int) -> List[float]:
    errors = []
    with ThreadPoolExecutor(max_workers=2) as pool:
        with ap.stage("load", items=pairs):
            images = list(pool.map(make_pair, range(pairs)))
    for i, (left, right) in enumerate(images):
        with ap.stage("frame", items=1):
            with ap.stage("smooth"):
                left, right = box_filter(left, 1), box_filter(right, 1)
            costs = cost_volume(left, right)
            with ap.stage("estimate_depth"):
                disparity = costs.argmin(axis=0)
            truth = 8 + i % 16
            errors.append(float(np.mean(np.abs(
                disparity[:, DISPARITIES:] - truth))))
    return errors


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m aquaprof.demo",
        description="Profile a small stereo-matching pipeline and print "
                    "its report.")
    parser.add_argument("--pairs", type=int, default=6,
                        help="image pairs to process (default 6)")
    parser.add_argument("--out", type=Path, default=Path("demo-output"),
                        help="folder for report.json (default demo-output)")
    args = parser.parse_args(argv)
    if args.pairs < 1:
        parser.error("--pairs must be at least 1")

    with ap.Profiler() as prof:
        errors = run(args.pairs)
    report = prof.report()
    print(report)
    print()
    print(f"mean disparity error over {args.pairs} pairs: "
          f"{np.mean(errors):.3f} px")
    args.out.mkdir(parents=True, exist_ok=True)
    path = report.save(args.out / "report.json")
    print(f"report saved to {path} (load with aquaprof.Report.load)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""What recording next(DataLoader) adds to each next() on a torch
DataLoader iterator: epochs over a dataset of cheap items (batch_size=1,
num_workers=0, so that a next() is as short as torch makes it), each
epoch timed with the iterator's __next__ as torch has it and wrapped by
watch_dataloaders(), under a running Profiler, median of --runs.

Needs torch; says so and exits 2 without it.

    python benchmarks/bench_dataloader.py [--runs 7] [--items 20000]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402


def epoch_ns(loader, watch: bool) -> float:
    """ns per next() over one epoch, the profiler running."""
    from aquaprof.record.torch.dataloader import watch_dataloaders
    unwatch = watch_dataloaders() if watch else None
    try:
        with ap.Profiler(max_spans=0, compensate=False, dataloaders=False):
            start = time.perf_counter_ns()
            calls = 0
            for _ in loader:
                calls += 1
            elapsed = time.perf_counter_ns() - start
    finally:
        if unwatch:
            unwatch()
    return elapsed / (calls + 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--items", type=int, default=20_000)
    args = parser.parse_args()
    try:
        import torch
        from torch.utils.data import DataLoader, Dataset
    except ImportError:
        print("torch is not installed: nothing to measure")
        return 2

    class Cheap(Dataset):
        def __len__(self):
            return args.items

        def __getitem__(self, i):
            return i

    loader = DataLoader(Cheap(), batch_size=1, num_workers=0)
    epoch_ns(loader, True)                           # warm up
    plain, watched = [], []
    for _ in range(args.runs):
        plain.append(epoch_ns(loader, False))
        watched.append(epoch_ns(loader, True))
    p, w = statistics.median(plain), statistics.median(watched)
    print(f"torch {torch.__version__}, {args.items} items, batch_size=1, "
          f"num_workers=0, median of {args.runs} epochs")
    print(f"next() as torch has it:     {p / 1000:8.2f} us")
    print(f"next() recorded as a stage: {w / 1000:8.2f} us "
          f"(+{(w - p):.0f} ns, {(w - p) / p * 100:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

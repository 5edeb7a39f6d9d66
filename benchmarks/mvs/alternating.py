"""Timing several runs in turn, round after round: on a shared machine a
busy spell then slows them all, not one, and the least time of each is
one the same quiet moments could give (benchmarks/mvs/bench_aquamvs.py,
benchmarks/mvs/mvs_stage_split.py)."""
from __future__ import annotations

import time
from typing import Callable, Dict, Hashable, Mapping, TypeVar

K = TypeVar("K", bound=Hashable)


def interleaved(runs: Mapping[K, Callable[[int], object]],
                rounds: int) -> Dict[K, float]:
    """The least time of each run over `rounds` rounds, each round every
    run once in turn (run(i) for round i)."""
    best = {name: float("inf") for name in runs}
    for i in range(rounds):
        for name, run in runs.items():
            start = time.perf_counter()
            run(i)
            best[name] = min(best[name], time.perf_counter() - start)
    return best

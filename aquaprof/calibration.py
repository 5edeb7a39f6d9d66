"""The profiler's own cost, measured once per process and settings: what a
stage pair costs outside and inside its span, and what a CPU-clock reading
costs. aquaprof.analysis.overhead explains how a report's figures are
compensated with it."""
from __future__ import annotations

import time
from typing import Dict, Optional

from . import _core
from ._core import stage

_CACHE: Dict[tuple, Dict[str, float]] = {}
PAIRS = 20_000


class SessionBusy(RuntimeError):
    """A session runs: calibration needs the process to itself. Its own
    class, so that a RuntimeError a signal handler raises meanwhile is
    never taken for this."""


def _start_alone(prof: "_core.Profiler") -> None:
    try:
        prof.start(nest=False)
    except RuntimeError:
        # not started while another session runs; one that did start
        # raised a signal handler's error, which is the program's
        if not prof.running and _core.active():
            raise SessionBusy("a Profiler session runs: calibration needs "
                              "none") from None
        raise


def _pair_cost(cpu_resolution: float, memory: bool, rounds: int):
    """Median (ns a pair all told, ns inside the stage) over rounds of a
    private session timing PAIRS empty stages inside one stage, against
    the same loop without them."""
    outer, inner = stage("calibrate"), stage("pair")
    spans, insides = [], []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        for _ in range(PAIRS):
            pass
        bare = time.perf_counter_ns() - t
        prof = _core.Profiler(max_spans=4096, memory=memory,
                              cpu_resolution=cpu_resolution)
        try:
            # never nested: its figures must be its own alone
            _start_alone(prof)
            with outer:
                for _ in range(PAIRS):
                    with inner:
                        pass
        finally:
            # an exception (a KeyboardInterrupt) must not leave the private
            # session running, held by the traceback's frames
            if prof.running:
                prof.stop()
        stages = {s["name"]: s for s in prof.report_data()["stages"]}
        insides.append(stages["pair"]["total_ns"] / PAIRS)
        spans.append((stages["calibrate"]["total_ns"] - bare) / PAIRS)
    return sorted(spans)[rounds // 2], sorted(insides)[rounds // 2]


def calibrate(cpu_resolution: float = 20e-6, memory: bool = True,
              rounds: int = 5) -> Dict[str, float]:
    """{"span_ns", "inside_ns", "read_ns", "resolution_ns"}: a stage pair
    timed with the CPU clock never read, and with it read at every edge.
    Cached per process and settings (about 30 ms the first time). Needs
    no Profiler running: SessionBusy (a RuntimeError) otherwise."""
    key = (cpu_resolution, memory)
    if key not in _CACHE:
        span, inside = _pair_cost(1.0, memory, rounds)   # no clock reads
        every, _ = _pair_cost(0.0, memory, rounds)       # two a pair
        _CACHE[key] = {"span_ns": max(span, 0.0),
                       "inside_ns": max(inside, 0.0),
                       "read_ns": max((every - span) / 2, 0.0),
                       "resolution_ns": cpu_resolution * 1e9}
    return dict(_CACHE[key])


def cached(cpu_resolution_ns: int, memory: bool) -> Optional[Dict[str, float]]:
    """The calibration made for these settings (cpu_resolution in ns, as
    a report gives it), None when none was: what a Profiler nested in
    another's session uses, as it cannot calibrate while that one runs."""
    for (resolution, mem), figures in _CACHE.items():
        if mem == memory and round(resolution * 1e9) == cpu_resolution_ns:
            return dict(figures)
    return None

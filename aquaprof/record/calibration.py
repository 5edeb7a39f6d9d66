"""The profiler's own cost, measured once per process and settings: what a
stage pair costs outside and inside its span, and what a CPU-clock reading
costs. run_alone() is the private session the measures run in, for hooks
that measure their own cost the same way (the torch hooks:
aquaprof.record.torch.hooks.calibrate_hooks). What a run paid, from these
figures, is aquaprof.analysis.run_cost's; aquaprof.analysis.overhead
explains how a report's figures are compensated with it."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, Optional, Tuple

from .. import _core
from .._core import stage
# what a run paid is analysis's; these names stay where docs of earlier
# versions found them (aquaprof.calibration.run_cost, .torch_kinds)
from ..analysis.run_cost import run_cost, torch_kinds  # noqa: F401

_CACHE: Dict[tuple, Dict[str, float]] = {}
PAIRS = 20_000
# pairs with the CPU clock read at each edge cost ten times as much: a
# tenth as many time them as well, and keep the first start() short
READ_SHARE = 10
# the figures run_alone adds up over the paths of one stage name
_SUMMED = ("count", "total_ns", "self_ns", "cpu_ns")


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


def run_alone(work: Callable[[], Any], cpu_resolution: float,
              memory: bool) -> Tuple[Any, Dict[str, dict]]:
    """work()'s result and the stages it recorded ({name: the report's
    stage dict}, summed over the paths of a name), run in a private
    session with these settings. SessionBusy when another session runs:
    the figures must be its own alone."""
    prof = _core.Profiler(max_spans=4096, memory=memory,
                          cpu_resolution=cpu_resolution)
    try:
        _start_alone(prof)
        result = work()
    finally:
        # an exception (a KeyboardInterrupt) must not leave the private
        # session running, held by the traceback's frames
        if prof.running:
            prof.stop()
    stages: Dict[str, dict] = {}
    for s in prof.report_data()["stages"]:
        seen = stages.get(s["name"])
        stages[s["name"]] = s if seen is None else dict(
            seen, **{key: seen[key] + s[key] for key in _SUMMED})
    return result, stages


def median(values: list) -> float:
    """The middle of values (the upper one of an even count): the figure
    a calibration keeps of its rounds, robust to a round a busy machine
    slowed."""
    return sorted(values)[len(values) // 2]


def _pair_cost(cpu_resolution: float, memory: bool, rounds: int,
               count: int):
    """Median (ns a pair all told, ns inside the stage) over rounds of a
    private session timing `count` empty stages inside one stage, against
    the same loop without them."""
    outer, inner = stage("calibrate"), stage("pair")
    count = max(count, 1)

    def pairs() -> None:
        with outer:
            for _ in range(count):
                with inner:
                    pass
    spans, insides = [], []
    for _ in range(rounds):
        t = time.perf_counter_ns()
        for _ in range(count):
            pass
        bare = time.perf_counter_ns() - t
        _, stages = run_alone(pairs, cpu_resolution, memory)
        insides.append(stages["pair"]["total_ns"] / count)
        spans.append((stages["calibrate"]["total_ns"] - bare) / count)
    return median(spans), median(insides)


def calibrate(cpu_resolution: float = 20e-6, memory: bool = True,
              rounds: int = 5) -> Dict[str, float]:
    """{"span_ns", "inside_ns", "read_ns", "resolution_ns"}: a stage pair
    timed with the CPU clock never read, and with it read at every edge,
    each in `rounds` private sessions (the median kept) of PAIRS pairs,
    and of a READ_SHARE-th of them with the clock read: about 35 ms the
    first time on a 2-vCPU development VM. Cached per process and
    settings. Needs no Profiler running: SessionBusy (a RuntimeError)
    otherwise."""
    key = (cpu_resolution, memory)
    if key not in _CACHE:
        # no clock reads, then two a pair
        span, inside = _pair_cost(1.0, memory, rounds, PAIRS)
        every, _ = _pair_cost(0.0, memory, rounds, PAIRS // READ_SHARE)
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

"""What compare says beside its time verdicts: the stages whose host
memory moved, and those whose items/s moved where the items a call did.

A stage that now keeps a copy of its data takes twice the memory in the
same time, and one that processes half the items a call in the same time
halves its items/s: the time verdicts read "same" for both. A stage's
own memory is known of a run only as the most RSS rose within one of its
calls (mem_rise) and the RSS its calls kept, summed (mem_delta), not
call by call, so the move must clear the noise by size alone: past twice
the threshold and MEMORY_FLOOR. Its highest RSS while open (mem_peak) is
not used: it holds what every stage before kept, so one stage that now
keeps a copy would raise the peak of every stage after it. Items are exact counts: where the items a call are the
same on both sides, items/s moves with the time a call, which the time
verdict judges; where they differ, each call's time an item is judged
with the same rule as time (analysis.verdict).
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

from ..common.units import fmt_bytes, fmt_rate, printable
from ..model.report import Report
from .verdict import NOISY_AT, RunFigures, Verdict, judge

#: bytes a stage's memory must move by, beside twice the threshold, to
#: be said: the allocator's arenas and Python's free lists move a small
#: stage's RSS by a few hundred KiB from one unchanged run to the next
MEMORY_FLOOR = 4 << 20
#: the stages a note names
NAMED = 5


def _memory(report: Report) -> Dict[str, Tuple[int, int]]:
    """Each stage's (mem_rise, mem_delta) in a run that sampled RSS."""
    out = {}
    for stats in report.stages:
        if stats.mem_peak and stats.mem_rise is not None:
            out[stats.path] = (stats.mem_rise, stats.mem_delta)
    return out


def memory_change(base: Sequence[Report], new: Sequence[Report],
                  threshold: float) -> str:
    """A sentence naming the stages whose most RSS risen within a call,
    or RSS kept over their calls, moved past twice the threshold and
    MEMORY_FLOOR in every new run against every base run; "" where none
    did or a run did not sample memory."""
    before = [_memory(r) for r in base]
    after = [_memory(r) for r in new]
    said = []
    for path in after[0] if after else ():
        if not all(path in r for r in (*before, *after)):
            continue
        for index, what in ((0, "the most RSS rose within a call"),
                            (1, "RSS its calls kept")):
            low_b = min(r[path][index] for r in before)
            high_b = max(r[path][index] for r in before)
            low_n = min(r[path][index] for r in after)
            high_n = max(r[path][index] for r in after)
            grew = low_n - high_b
            shrank = low_b - high_n
            if grew > max(MEMORY_FLOOR, NOISY_AT * threshold * high_b):
                word = "grew"
            elif shrank > max(MEMORY_FLOOR, NOISY_AT * threshold * high_n):
                word = "shrank"
            else:
                continue
            mean_b = float(np.mean([r[path][index] for r in before]))
            mean_n = float(np.mean([r[path][index] for r in after]))
            signed = index == 1     # what calls kept may be given back
            share = (f" ({(mean_n / mean_b - 1) * 100:+.0f} %)"
                     if mean_b > 0 and mean_n >= 0 else "")
            said.append(f"{printable(path)} {word}: {what} "
                        f"{fmt_bytes(int(mean_b), signed)} -> "
                        f"{fmt_bytes(int(mean_n), signed)}{share}")
            break
    if not said:
        return ""
    more = f" and {len(said) - NAMED} more" if len(said) > NAMED else ""
    return (f"host memory moved: {'; '.join(said[:NAMED])}{more} (the "
            f"times above do not show it)")


def _per_item(report: Report) -> Dict[str, Tuple[np.ndarray, float]]:
    """Each stage every recorded call of which was given items, with its
    calls' wall time an item (in the order they began) and its items a
    call; none from a run that dropped spans or timed a benchmark's
    rounds (whose kept calls are not the run's)."""
    if report.spans_dropped or report.meta.get("measured"):
        return {}
    spans = report.spans()
    out = {}
    order = np.lexsort((spans["start_ns"], spans["stage"]))
    stage = spans["stage"][order]
    bounds = np.searchsorted(stage, np.arange(len(report.stage_names) + 1))
    for sid, path in enumerate(report.stage_names):
        mine = spans[order[bounds[sid]:bounds[sid + 1]]]
        if not len(mine) or (mine["items"] <= 0).any():
            continue
        wall = (mine["end_ns"] - mine["start_ns"]).clip(0) * 1e-9
        out[path] = (wall / mine["items"], float(mine["items"].mean()))
    return out


def items_changes(base: Sequence[Report], new: Sequence[Report],
                  threshold: float, alpha: float
                  ) -> List[Tuple[str, Verdict, Optional[float],
                                  Optional[float]]]:
    """(stage, verdict on its time an item, items/s before and after) for
    each stage whose items a call differ between the sides, every call
    of which was given items: its calls' time an item judged as a
    benchmark's rounds (each call one), so that its total is the mean
    time an item, whatever the calls a run."""
    before = [_per_item(r) for r in base]
    after = [_per_item(r) for r in new]
    found = []
    for path in after[0] if after else ():
        if not all(path in r for r in (*before, *after)):
            continue
        items_b = {r[path][1] for r in before}
        items_n = {r[path][1] for r in after}
        if items_b == items_n:
            continue

        def runs(side: List[Dict[str, Tuple[np.ndarray, float]]]
                 ) -> List[RunFigures]:
            return [RunFigures.of(r[path][0], len(r[path][0])) for r in side]

        verdict = judge(runs(before), runs(after), threshold, alpha)
        rate_b = _rate(before, path)
        rate_n = _rate(after, path)
        found.append((path, verdict, rate_b, rate_n))
    return found


def _rate(side: List[Dict[str, Tuple[np.ndarray, float]]], path: str
          ) -> Optional[float]:
    """Items/s over a side's calls: its items over their wall time."""
    seconds = sum(float(r[path][0].mean()) for r in side) / len(side)
    return 1 / seconds if seconds > 0 else None


def _items(runs: Sequence[Report], path: str) -> str:
    """The items a call of a side's runs, as counted: 32, or 16-32."""
    counts = [r[path].items / r[path].count for r in runs]
    low, high = f"{min(counts):.3g}", f"{max(counts):.3g}"
    return low if low == high else f"{low}-{high}"


def items_change(base: Sequence[Report], new: Sequence[Report],
                 threshold: float, alpha: float) -> str:
    """A sentence naming the stages whose items a call differ between
    the sides and whose time an item was judged slower or faster (hedged
    too); "" where none was."""
    said = []
    for path, v, rate_b, rate_n in items_changes(base, new, threshold,
                                                 alpha):
        if v.word == "same":
            continue
        words = {"slower": "slower per item", "slower?": "slower per item?",
                 "faster": "faster per item", "faster?": "faster per item?",
                 "noisy": "noisy per item"}
        p = "" if v.p_value is None else f", p={v.p_value:.2g}"
        said.append(f"{printable(path)}: {_items(base, path)} -> "
                    f"{_items(new, path)} items a call, items/s "
                    f"{fmt_rate(rate_b)} -> {fmt_rate(rate_n)} "
                    f"({words[v.word]}{p}, {v.evidence})")
    if not said:
        return ""
    more = f" and {len(said) - NAMED} more" if len(said) > NAMED else ""
    return (f"the items a call changed, and items/s with them: "
            f"{'; '.join(said[:NAMED])}{more}")

"""Stragglers: per stage that several processes ran (torch.distributed
ranks, data-loader workers), the slowest process and the fastest, from
each process's own figures in a merged report (``processes[i]["stages"]``,
exact even where raw spans were dropped).

What is compared: by default each process's total time in the stage.
Ranks of a synchronous job run a stage the same number of times between
two synchronisations, so the total is a call's mean times that count, and
it is what the other ranks wait for at the next collective: a rank given
more batches holds the others back as surely as a rank whose batches are
slower, and comparing means would hide the first. Where processes ran
different numbers of calls by design (workers that take whatever batch
comes next), ``by="mean"`` compares a call's mean instead, which tells a
slow process from a busy one. Each straggler carries both processes'
counts, totals and means, so a reader sees which it is.

Time lost: what the slowest spent past the fastest: the difference of
totals, or, by mean, the slowest's calls times the difference of means.
Stragglers are ranked by it, since a tenfold ratio on a microsecond stage
matters less than a tenth on the training step.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional

from ..common.checks import whole
from ..model.report import ProcessStats, rows_by_stage

if TYPE_CHECKING:
    from ..model.report import Report

BY = ("total", "mean")


@dataclass(frozen=True)
class Straggler:
    """The slowest and the fastest process of one stage."""

    path: str
    slowest: ProcessStats
    fastest: ProcessStats
    ratio: float        #: slowest over fastest, by the figure compared
    lost: float         #: seconds the slowest spent past the fastest
    processes: int      #: how many processes ran the stage
    by: str             #: the figure compared: "total" or "mean"


def _value(row: ProcessStats, by: str) -> float:
    return row.total if by == "total" else row.mean


def find_stragglers(report: "Report", top: Optional[int] = None,
                    by: str = "total") -> List[Straggler]:
    """Every stage run by two processes or more, most time lost first;
    the first `top` of them when top is given."""
    if top is not None and not whole(top, 0):
        raise ValueError(f"top must be None or an int >= 0, got {top!r}")
    if by not in BY:
        raise ValueError(f"by must be 'total' or 'mean', got {by!r}")
    names = report.stage_names
    processes = report.meta.get("processes") or []
    found = []
    for sid, rows in rows_by_stage(processes).items():
        if len(rows) < 2:
            continue
        ordered = sorted(rows, key=lambda r: (_value(r, by), r.process))
        fastest, slowest = ordered[0], ordered[-1]
        slow, fast = _value(slowest, by), _value(fastest, by)
        ratio = slow / fast if fast > 0 else (math.inf if slow > 0 else 1.0)
        lost = (slow - fast if by == "total"
                else (slow - fast) * slowest.count)
        found.append(Straggler(names[sid], slowest, fastest, ratio, lost,
                               len(rows), by))
    found.sort(key=lambda s: (-s.lost, s.path))
    return found if top is None else found[:top]


#: a stage's slowest process off the CPU for more than this share of its
#: time there only waited in it
WAIT_SHARE = 0.5
#: the wait and another stage's straggler's loss must be within this
#: ratio of each other for the wait to be taken as for it: ranks wait
#: about as long as the straggler took (a tiny stage a few ms apart is
#: not the wait for a loss of 300 ms)
WAIT_COVERED = 0.5
#: the least share of the slowest process's time in a stage that the
#: fastest must have spared for the stage to be a wait for it: ranks a
#: few percent apart are noise
WAIT_LOST = 0.25
#: how far apart the one process must be from the rest, where there are
#: three or more: the one that waits least (it came last) below half the
#: next, the cause above twice the next
APART = 2.0


@dataclass(frozen=True)
class RankWait:
    """A stage that the other processes spent waiting in for one of them
    (a collective: DDP's gradient all-reduce) that was slow elsewhere."""

    path: str
    stage: Straggler        #: the stage's own: its fastest is the cause
    cause: Straggler        #: the stage where that process was slowest


def rank_waits(report: "Report") -> Dict[str, RankWait]:
    """By path, the stages whose time on the other processes is a wait
    for the one that is fastest in them: its slowest process was mostly
    off the CPU there, and the fastest is the slowest of another stage,
    having lost there about what it spared here (within 1 / WAIT_COVERED
    either way).
    Ranks of a synchronous job meet at each collective, so the rank that
    arrives last (slow in its forward pass) waits least, and the others
    wait for it: their long stage is the symptom, not the cause."""
    found = find_stragglers(report)
    totals = {s.path: sorted(r.total for r in report.by_process(s.path))
              for s in found}
    slowest_in: Dict[int, Straggler] = {}
    for s in found:            # most time lost first
        high = totals[s.path]
        if len(high) < 3 or high[-1] >= APART * high[-2]:
            slowest_in.setdefault(s.slowest.process, s)
    waits: Dict[str, RankWait] = {}
    for s in found:
        slow, low = s.slowest, totals[s.path]
        cause = slowest_in.get(s.fastest.process)
        if cause is None or cause.path == s.path or \
                s.lost < WAIT_LOST * slow.total or \
                slow.cpu > WAIT_SHARE * slow.total or \
                not WAIT_COVERED * s.lost <= cause.lost <= \
                s.lost / WAIT_COVERED or \
                (len(low) >= 3 and low[0] * APART > low[1]):
            continue
        waits[s.path] = RankWait(s.path, s, cause)
    # two stages each a wait for the other's straggler (two processes,
    # both off the CPU) cannot be told apart: neither is said
    return {path: w for path, w in waits.items()
            if not (w.cause.path in waits and
                    waits[w.cause.path].cause.path == path)}

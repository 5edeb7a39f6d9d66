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

Waits for a straggler (rank_waits): a stage whose time on the other
processes is the wait at a collective for one rank slow elsewhere. The
totals name it where three ranks or more tell the late one from the rest.
Two ranks both off the CPU in two stages (one sleeps, or reads, where the
other waits in the all-reduce) give two mirror images: each stage looks
like the wait for the other's straggler. Their calls' times tell them
apart where the ranks ran on one host, whose CLOCK_MONOTONIC they share
(a merged report keeps their times): a collective releases every rank at
once, so its calls end together, within the transport's latency, and
start apart; the slow stage's calls start together (the ranks left the
last collective together) and end apart. On other hosts the clocks are
aligned only as well as NTP keeps them, no closer than the gap to tell,
so neither is said.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

import numpy as np

from ..common.checks import whole
from ..model.report import ProcessStats, rows_by_stage
from .clocks import shared_clock

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
#: a collective's calls end within this share of how far apart they
#: start, and a slow stage's start within this share of how far apart
#: they end (medians over the calls, paired in order)
TOGETHER = 0.25
#: the fewest calls paired across two processes to read their edges
EDGE_CALLS = 3


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
    # both off the CPU): the one whose calls end together, where the
    # times tell; neither otherwise
    return {path: w for path, w in waits.items()
            if not (w.cause.path in waits and
                    waits[w.cause.path].cause.path == path) or
            _met_there(report, w)}


def _met_there(report: "Report", wait: RankWait) -> bool:
    """Whether the processes' calls of the wait's stage end together and
    start apart while those of its cause start together and end apart:
    the stage is where they met, and the cause where one fell behind."""
    here = _edges_apart(report, wait.stage)
    there = _edges_apart(report, wait.cause)
    if here is None or there is None:
        return False
    return here[1] < TOGETHER * here[0] and there[0] < TOGETHER * there[1]


def _edges_apart(report: "Report", s: Straggler
                 ) -> Optional[Tuple[float, float]]:
    """Median ns between the starts and between the ends of the stage's
    calls on its slowest and its fastest process, the i-th call of one
    paired with the i-th of the other; None where the two processes'
    times are on no shared clock (clocks.shared_clock), they ran
    the stage a different number of times (not in step), or fewer than
    EDGE_CALLS calls were kept on either (spans past max_spans are
    dropped from the end, so those kept are the first)."""
    a, b = s.slowest, s.fastest
    processes = report.processes
    if not shared_clock([processes[p.process].get("host", {})
                         for p in (a, b)]) or a.count != b.count:
        return None
    spans = report.spans()
    owner = np.array([t.get("process", 0) for t in report.threads],
                     dtype=np.int64)
    mine = spans[spans["stage"] == report.stage_names.index(s.path)]
    calls = [np.sort(mine[owner[mine["thread"]] == p.process],
                     order="start_ns") for p in (a, b)]
    n = min(len(c) for c in calls)
    if n < EDGE_CALLS:
        return None
    first, second = calls[0][:n], calls[1][:n]

    def apart(edge: str) -> float:
        return float(np.median(np.abs(first[edge].astype(np.int64) -
                                      second[edge].astype(np.int64))))
    return apart("start_ns"), apart("end_ns")

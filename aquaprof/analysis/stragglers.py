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
from typing import TYPE_CHECKING, List, Optional

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

"""What a run paid the profiler: the calibrated costs (aquaprof.record.
calibration) charged to a report's calls. run_cost is the printed
report's cost line; hook_costs, the torch stages' own, which
aquaprof.analysis.overhead takes out of their figures."""
from __future__ import annotations

import math
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

# ------------------------------------------------------- what a run paid
# The calibrated cost of each call the profiler makes, charged to a
# report's calls (aquaprof.analysis.overhead takes it out of the
# figures, the printed report's cost line tells it).

#: the kinds of torch stages, as their calibrated figures are named
OP, MODULE, NOGRAD, BACKWARD = ("torch_op", "torch_module",
                                "torch_module_nograd", "torch_backward")
#: what the torch hooks did that no stage counts: the report's overhead
#: holds the calls ("torch_quiet_calls") beside the calibrated cost of one
QUIET, CARRY = "torch_quiet", "torch_carry"
_UNSTAGED = ((QUIET, "torch_quiet_calls"), (CARRY, "torch_carried_calls"))
_BACKWARD_SUFFIX = " (backward)"
_OP_NAME = re.compile(r"[A-Za-z_]\w*::\S+( \(.*\))?")
_SUB_MODULE = re.compile(r"[\w.]+ \([A-Z_]\w*\)( \(compiled\))?")
_CLASS_ONLY = re.compile(r"[A-Z_]\w*( \(compiled\))?")


def torch_kinds(report) -> Dict[str, str]:
    """{path: OP, MODULE or BACKWARD} of the stages the torch hooks
    recorded, told by their names (aquaprof.analysis.overhead says how);
    {} in a run that shows no sign of the hooks (no figure of theirs in
    its calibration, no aten:: op, no backward stage), whose stages named
    alike ("Loader::next") are the program's."""
    kinds = _named_like_torch(report)
    cost = report.meta.get("overhead") or {}
    ran = any(key.startswith("torch_") for key in cost) or any(
        kind == BACKWARD or (kind == OP and path.rsplit("/", 1)[-1]
                             .startswith("aten::"))
        for path, kind in kinds.items())
    return kinds if ran else {}


def _named_like_torch(report) -> Dict[str, str]:
    stages = report.stages
    kinds: Dict[str, str] = {}
    names = {s.name for s in stages}
    by_path = {s.path: s for s in stages}
    for s in stages:
        if s.name.endswith(_BACKWARD_SUFFIX):
            kinds[s.path] = BACKWARD
        elif _OP_NAME.fullmatch(s.name):
            kinds[s.path] = OP
        elif _SUB_MODULE.fullmatch(s.name):
            kinds[s.path] = MODULE
    for s in stages:
        # an outermost module call is named by its class alone
        if s.path in kinds or not _CLASS_ONLY.fullmatch(s.name):
            continue
        if s.name + _BACKWARD_SUFFIX in names:
            kinds[s.path] = MODULE
    for s in stages:
        if s.parent is not None and kinds.get(s.path) == MODULE and \
                _SUB_MODULE.fullmatch(s.name):
            parent = by_path[s.parent]
            if parent.path not in kinds and \
                    _CLASS_ONLY.fullmatch(parent.name):
                kinds[parent.path] = MODULE
    return kinds


def hook_costs(report) -> Dict[str, Tuple[float, float]]:
    """{path: (ns a call all told, ns of it inside the stage)} of the torch
    stages whose kind the report's overhead calibrated."""
    cost = report.meta.get("overhead") or {}
    kinds = torch_kinds(report)
    if not kinds:
        return {}
    grad = _grad_shares(report, kinds)
    out: Dict[str, Tuple[float, float]] = {}
    for path, kind in kinds.items():
        if kind == MODULE:
            share = grad.get(path.rsplit("/", 1)[-1], 0.0)
            figures = [_figures(cost, MODULE), _figures(cost, NOGRAD)]
            if figures[0] is None or figures[1] is None:
                found = figures[0] or figures[1]
            else:
                found = tuple(share * g + (1 - share) * n
                              for g, n in zip(*figures))
        elif kind == OP:
            found = _figures(cost, OP, inside=cost.get("inside_ns", 0.0))
        else:
            found = _figures(cost, BACKWARD)
        if found is not None:
            out[path] = found
    return out


def _figures(cost: Dict[str, Any], kind: str,
             inside: Optional[float] = None
             ) -> Optional[Tuple[float, float]]:
    all_told = number(cost, f"{kind}_ns")
    if all_told is None:
        return None
    if inside is None:
        inside = number(cost, f"{kind}_inside_ns") or 0.0
    return all_told, inside


def number(cost: Dict[str, Any], key: str) -> Optional[float]:
    """cost[key] as a float, None when it is absent or not a finite
    number >= 0 (a file's fields past those the schema checks are read
    with care)."""
    value = cost.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or \
            not math.isfinite(value) or value < 0:
        return None
    return float(value)


def _grad_shares(report, kinds: Dict[str, str]) -> Dict[str, float]:
    """{module stage name: the share of its calls that ran with grad},
    from the calls of its backward stage."""
    calls: Dict[str, int] = {}
    for s in report.stages:
        if s.path in kinds:
            calls[s.name] = calls.get(s.name, 0) + s.count
    return {name: min(calls.get(name + _BACKWARD_SUFFIX, 0) / n, 1.0)
            for name, n in calls.items() if n}


class HookCost(NamedTuple):
    """One kind of torch call's part of a run's cost."""

    kind: str          #: OP, MODULE, BACKWARD, QUIET or CARRY
    calls: int         #: stage calls of that kind
    seconds: float     #: what they cost, all told; 0 when not calibrated
    calibrated: bool   #: whether the report has the kind's figure


class RunCost(NamedTuple):
    """What the profiler cost a run, in seconds of the processes' time
    (summed over processes: it can pass the run's wall time)."""

    calibrated: bool          #: whether the report has a calibration
    stage_calls: int          #: calls of stages other than torch ones
    span_ns: float            #: what a stage pair costs, calibrated
    readings: int             #: CPU-clock readings at stage edges
    read_ns: float            #: what one costs, calibrated
    stages: float             #: all stage pairs' and readings' cost
    hooks: List[HookCost]     #: the torch calls, by kind, those made
    sampler: Optional[float]  #: the sampling rounds, None if not sampled
    processes: int            #: processes summed
    wall: float               #: the run's wall time

    @property
    def total(self) -> float:
        return (self.stages + sum(h.seconds for h in self.hooks)
                + (self.sampler or 0.0))

    def share(self, seconds: float) -> float:
        """seconds as a share of the run's wall time (0 for no run)."""
        return seconds / self.wall if self.wall > 0 else 0.0


def run_cost(report) -> Optional[RunCost]:
    """What the profiler's stages, torch hooks and sampler cost the run,
    from the report's calibration and counts; None when the run has
    neither a calibration nor a sampler's account."""
    cost = report.meta.get("overhead")
    samples = report.samples or {}
    held = samples.get("held_ns")
    if not cost and held is None:
        return None
    kinds = torch_kinds(report)
    charged = hook_costs(report) if cost else {}
    hooks: Dict[str, List[Any]] = {}
    stage_calls = 0
    for s in report.stages:
        kind = kinds.get(s.path)
        if kind is None:
            stage_calls += s.count
            continue
        entry = hooks.setdefault(kind, [0, 0.0, False])
        entry[0] += s.count
        if s.path in charged:
            entry[1] += s.count * charged[s.path][0] * 1e-9
            entry[2] = True
    span = cost["span_ns"] if cost else 0.0
    read = cost.get("read_ns", 0.0) if cost else 0.0
    readings = sum(t.get("cpu_reads", 0) for t in report.threads)
    stages = (stage_calls * span + readings * read) * 1e-9
    for kind, counted in _UNSTAGED:
        calls = int(number(cost or {}, counted) or 0)
        if calls:
            ns = number(cost, f"{kind}_ns")
            hooks[kind] = [calls, calls * (ns or 0.0) * 1e-9, ns is not None]
    return RunCost(bool(cost), stage_calls, span, readings, read, stages,
                   [HookCost(kind, *hooks[kind]) for kind in
                    (OP, QUIET, MODULE, CARRY, BACKWARD) if kind in hooks],
                   None if held is None else held * 1e-9,
                   max(len(report.processes), 1), report.wall)

"""The profiler's own cost, measured once per process and taken out of the
figures (the idea of cProfile's calibration): aquaprof.record.calibration
measures the cost, aquaprof.analysis.run_cost charges it to a report's
calls, this module takes it out of the report's figures.

A stage pair costs `span_ns` of wall time in all, without reading the
thread CPU clock. `inside_ns` of it falls between the two timestamps, so
it is inside the stage's own measured interval, and the rest falls outside
it, in the parent. Reading the CPU clock (a system call) costs `read_ns`
more, and the core reads it outside the span whose edge it serves, so a
stage holds the readings of the stages below it. The clock is read at an
edge only once `resolution_ns` has passed since the last reading on that
thread, so readings follow time, not calls: the report counts them per
thread, and a stage of T wall time holds about T times the run's rate of
readings (readings / time inside stages), never more than the edges
below it. So, per stage path P with c calls and D calls of stages nested
anywhere below it:

    reads(P) = min(2 D, rate * total(P))
    compensated total(P) = total(P) - c * inside_ns - D * span_ns
                           - reads(P) * read_ns

The torch hooks (Profiler(torch_ops=..., torch_modules=True)) cost more
than a stage pair a call: torch's dispatch to the mode, the module hooks,
the walk that hooks a forward's autograd nodes, the node hooks that
switch backward stages (aquaprof.integrations.torch_hooks.calibrate_hooks
measures them, the report keeps them in the same "overhead" object,
`torch_op_ns`, `torch_module_ns`, ...). Their stages are told by name: an
op is `ns::name` (`aten::conv2d`, shapes after it), a backward stage ends
in ` (backward)`, a module is `path (Class)` or, outermost, the class
alone where a sub-module or a backward stage says it is one. A module
call is charged as with grad in the share of its calls that have a
backward stage of the same name, as without grad in the rest. So a torch
stage's own calls take out its cost inside it (`..._inside_ns`, a plain
pair's for an op, whose hook runs nothing between its timestamps but the
op), and every stage takes out, for each torch call below it, what that
call costs beyond a plain pair. Its self time follows from the
compensated totals. The raw figures stay in the report; the compensated
ones sit beside them.
"""
from __future__ import annotations

from typing import Dict, Optional

from .run_cost import hook_costs

def compensate(report) -> Optional[Dict[str, tuple]]:
    """{path: (total_s, self_s)} with the overhead taken out, or None when
    the report carries no calibration."""
    cost = report.meta.get("overhead")
    if not cost:
        return None
    span, inside = cost["span_ns"] * 1e-9, cost["inside_ns"] * 1e-9
    read = cost.get("read_ns", 0.0) * 1e-9
    stages = report.stages
    inside_stages = sum(s.wall.total for s in stages if s.parent is None)
    readings = sum(t.get("cpu_reads", 0) for t in report.threads)
    rate = readings / inside_stages if inside_stages > 0 else 0.0
    extra = hook_costs(report)
    below: Dict[str, int] = {s.path: 0 for s in stages}
    # what the torch calls below a stage cost beyond a plain pair, in s
    beyond: Dict[str, float] = {s.path: 0.0 for s in stages}
    # children before parents (tree order reversed): each stage hands its
    # calls and those below it to its parent, once, whatever the depth
    for s in reversed(stages):
        if s.parent is not None:
            below[s.parent] += s.count + below[s.path]
            charged = extra.get(s.path)
            own = (charged[0] * 1e-9 - span) * s.count if charged else 0.0
            beyond[s.parent] += own + beyond[s.path]

    def reads(s) -> float:
        return min(2 * below[s.path], rate * s.wall.total)

    def inside_of(s) -> float:
        charged = extra.get(s.path)
        return charged[1] * 1e-9 if charged else inside

    total = {s.path: max(s.wall.total - s.count * inside_of(s)
                         - below[s.path] * span - reads(s) * read
                         - beyond[s.path], 0.0)
             for s in stages}
    children: Dict[str, float] = {s.path: 0.0 for s in stages}
    for s in stages:
        if s.parent is not None:
            children[s.parent] += total[s.path]
    return {s.path: (total[s.path], max(total[s.path] - children[s.path],
                                        0.0)) for s in stages}

"""When a threads-bound stage's evidence says its threads ran about one
at a time: the process near one CPU with CPUs free, not crowded. Reports
written by hand, so that the machine's load cannot decide the case."""
import numpy as np

from aquaprof import Report, _core
from aquaprof.model import schema

import crafted

CALL_NS = 200_000_000


def pool_report(used, cpus=2, machine=0.1):
    """One stage, 4 calls of 0.2 s on one thread that barely ran, its
    process using `used` CPUs meanwhile and next to nothing outside."""
    stage = crafted.stage("gather", count=4, ns=CALL_NS)
    stage.update(cpu_ns=4 * 2_000_000, proc_cpu_ns=int(4 * CALL_NS * used),
                 mem_peak=1 << 20)
    spans = np.zeros(4, _core.SPAN_DTYPE)
    spans["parent"] = -1
    spans["start_ns"] = crafted.START + np.arange(4) * 250_000_000
    spans["end_ns"] = spans["start_ns"] + CALL_NS
    data = crafted.report([stage], spans, memory=True, host={
        "cpus": cpus, "other_cpus": machine,
        "process_cpus": 4 * 0.2 * used + 0.01, "thread_id": 42,
        "thread_cpu": 0.009})
    return Report(schema.decode(data))


def found(rep):
    return {f.path: f for f in rep.diagnose(top=1).findings}["gather"]


def test_threads_near_one_cpu_with_cpus_free_ran_one_at_a_time():
    f = found(pool_report(1.0))
    assert f.kind == "threads-bound", f
    assert "its threads ran about one at a time" in f.evidence, f
    assert "GIL" in f.fix and "more threads" not in f.fix, f


def test_threads_well_under_one_cpu_are_not_said_to_run_one_at_a_time():
    """At 0.6 CPUs they also waited (I/O, a lock): more threads may
    overlap that, so the fix is not the GIL's."""
    f = found(pool_report(0.6))
    assert f.kind == "threads-bound", f
    assert "one at a time" not in f.evidence, f
    assert "GIL" not in f.fix, f


def test_a_crowded_machine_is_not_said_to_leave_cpus_free():
    """Its process and the machine's other processes kept 3.2 of 4 CPUs
    busy: the evidence says they took them, and nothing says CPUs were
    free or drops the fix's words on running fewer threads."""
    f = found(pool_report(1.0, cpus=4, machine=2.2))
    assert "they took them together" in f.evidence, f
    assert "one at a time" not in f.evidence, f
    assert f.fix.startswith("its process keeps the CPUs it may use busy"), f

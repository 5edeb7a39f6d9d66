"""aquaprof.distributed.gather: one report of a torch.distributed job.

A real 3-rank gloo job on 127.0.0.1 (tests/support/distributed_job.py, one spawn)
checks that every rank's calls arrive, labelled by rank and host, with
each rank's own figures and the slow rank found as the straggler; a
one-rank group in this process checks the argument errors and how the
reports travel."""
import json
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof import Report, ReportError

torch = pytest.importorskip("torch")   # installed by `make test`
dist = pytest.importorskip("torch.distributed")

import distributed_job as job  # noqa: E402  (needs torch, checked above)
from repo_paths import ROOT

WORLD = 3


@pytest.fixture(scope="module")
def job_out(tmp_path_factory):
    """The output folder of one 3-rank gloo run. The store listens in this
    process on a port the kernel picks (port 0), held for the whole run:
    no other process can take it between choosing and binding."""
    out = tmp_path_factory.mktemp("ranks")
    store = dist.TCPStore("127.0.0.1", 0, None, True, timedelta(seconds=60),
                          wait_for_workers=False)
    try:
        torch.multiprocessing.spawn(job.run_rank,
                                    args=(WORLD, store.port, str(out)),
                                    nprocs=WORLD, join=True)
    finally:
        failed = sorted(out.glob("failed-*.txt"))
        assert not failed, "\n".join(p.read_text() for p in failed)
    return out


def test_rank_0_gets_every_ranks_calls_and_the_others_none(job_out):
    merged = Report.load(job_out / "merged.json")
    own = [Report.load(job_out / f"rank{r}.json") for r in range(WORLD)]
    host = socket.gethostname()
    assert [p["label"] for p in merged.processes] == \
        [f"rank {r} ({host})" for r in range(WORLD)]
    assert [p["pid"] for p in merged.processes] == \
        [rep.meta["pid"] for rep in own]
    assert len({p["pid"] for p in merged.processes}) == WORLD
    for path in ("load", "step", "step/compute", "step/sync", "log"):
        assert merged[path].count == sum(
            rep[path].count for rep in own if path in rep), path
    assert merged["load"].count == 1 + 2 + 3
    assert merged["step/compute"].count == WORLD * job.STEPS
    assert merged["log"].count == 1
    # threads and spans keep their process
    assert sorted({t["process"] for t in merged.threads}) == [0, 1, 2]
    assert len(merged.spans()) == sum(len(rep.spans()) for rep in own)
    assert [(job_out / f"all-{r}.txt").read_text() for r in range(WORLD)] \
        == ["Report", "None", "None"]


def test_each_ranks_own_figures_survive_the_gather(job_out):
    merged = Report.load(job_out / "merged.json")
    own = [Report.load(job_out / f"rank{r}.json") for r in range(WORLD)]
    for path in ("load", "step/compute", "step/sync"):
        rows = merged.by_process(path)
        assert [r.process for r in rows] == [0, 1, 2]
        for row, rep in zip(rows, own):
            s = rep[path]
            assert (row.count, row.total, row.self_time, row.cpu) == \
                (s.count, s.wall.total, s.self_time, s.cpu)
            assert row.mean == pytest.approx(s.wall.total / s.count)
    assert [r.count for r in merged.by_process("load")] == [1, 2, 3]
    assert [r.label for r in merged.by_process("log")] == \
        [merged.processes[0]["label"]]


def test_the_slow_rank_is_the_straggler_and_the_others_wait_for_it(job_out):
    merged = Report.load(job_out / "merged.json")
    found = {s.path: s for s in merged.stragglers()}
    compute = found["step/compute"]
    assert compute.slowest.process == job.SLOW
    assert compute.slowest.label.startswith(f"rank {job.SLOW} (")
    assert compute.ratio > 2
    assert compute.lost == pytest.approx(
        compute.slowest.total - compute.fastest.total)
    assert compute.processes == WORLD
    # the fast ranks spend the difference waiting at the barrier
    assert found["step/sync"].fastest.process == job.SLOW
    assert "log" not in found           # one rank ran it: no comparison
    text = str(merged)
    assert "Stragglers" in text
    line = next(ln for ln in text.splitlines()
                if ln.split()[1:2] == ["step/compute"] and "slowest" in ln)
    assert f"slowest rank {job.SLOW} (" in line
    # the fast ranks' wait at the barrier is said to be for it
    sync = next(ln for ln in text.splitlines()
                if ln.split()[1:2] == ["step/sync"] and "slowest" in ln)
    assert (f"(the others wait here for rank {job.SLOW} (" in sync and
            sync.endswith("slowest in step/compute)")), sync
    found = {f.path: f for f in merged.diagnose(top=3)}
    assert found["step/sync"].kind == "straggler-bound", \
        found["step/sync"].evidence


def test_a_group_gathers_on_its_dst_with_global_ranks(job_out):
    pair = Report.load(job_out / "pair.json")
    host = socket.gethostname()
    assert [p["label"] for p in pair.processes] == \
        [f"rank 0 ({host})", f"rank 2 ({host})"]
    assert pair["load"].count == 1 + 3
    assert [(job_out / f"pair-{r}.txt").read_text() for r in range(WORLD)] \
        == ["None", "None", "Report"]


def test_a_rank_without_a_report_raises_and_no_rank_waits(job_out):
    said = [(job_out / f"bad-{r}.txt").read_text() for r in range(WORLD)]
    assert said[1] == ("TypeError: report must be an aquaprof Report, got "
                       "dict")
    assert said[0].startswith("RuntimeError: 1 rank(s) sent no report: "
                              "rank 1: report must be an aquaprof Report")
    assert said[2] == "None"


# ------------------------------------------------ one rank, in process
@pytest.fixture
def one_rank():
    """A process group of this process alone (an in-memory store)."""
    dist.init_process_group("gloo", store=dist.HashStore(), rank=0,
                            world_size=1)
    yield
    dist.destroy_process_group()


def small_report():
    with ap.Profiler() as prof:
        with ap.stage("step"):
            pass
    return prof.report()


def test_one_rank_gets_its_own_report_as_rank_0(one_rank):
    rep = small_report()
    merged = ap.distributed.gather(rep)
    assert [p["label"] for p in merged.processes] == \
        [f"rank 0 ({socket.gethostname()})"]
    assert merged["step"].count == 1
    assert merged.stragglers() == []


def test_gather_needs_an_initialised_process_group():
    assert not dist.is_initialized()
    with pytest.raises(RuntimeError, match="init_process_group first"):
        ap.distributed.gather(small_report())


def test_gather_needs_torch_distributed(monkeypatch):
    monkeypatch.setattr(dist, "is_available", lambda: False)
    with pytest.raises(RuntimeError, match="lacks"):
        ap.distributed.gather(small_report())


def test_gather_needs_torch(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch.distributed", None)
    with pytest.raises(ImportError, match="pip install torch"):
        ap.distributed.gather(small_report())


@pytest.mark.parametrize("dst, error, match", [
    (1, ValueError, r"dst must be a rank of the group \(0 to 0\), got 1"),
    (-1, ValueError, "got -1"),
    ("0", TypeError, "dst must be an int"),
    (True, TypeError, "dst must be an int"),
])
def test_gather_refuses_a_dst_outside_the_group(one_rank, dst, error,
                                                match):
    with pytest.raises(error, match=match):
        ap.distributed.gather(small_report(), dst=dst)


@pytest.mark.parametrize("report", [None, {"stages": []}, "run.json"])
def test_gather_refuses_what_is_not_a_report(one_rank, report):
    with pytest.raises(TypeError, match="report must be an aquaprof "
                                        "Report, got"):
        ap.distributed.gather(report)


def test_a_report_that_does_not_read_names_its_rank(one_rank, monkeypatch):
    from aquaprof.integrations import distributed
    monkeypatch.setattr(distributed, "_payload", lambda report: b"{}")
    with pytest.raises(ReportError, match="rank 0 sent a report that does "
                                          "not read"):
        ap.distributed.gather(small_report())


def test_reports_travel_as_json_bytes_not_pickled_objects(one_rank,
                                                          monkeypatch):
    sent = []
    real = dist.gather_object

    def spy(obj, *args, **kwargs):
        sent.append(obj)
        return real(obj, *args, **kwargs)

    monkeypatch.setattr(dist, "gather_object", spy)
    rep = small_report()
    assert ap.distributed.gather(rep)["step"].count == 1
    assert len(sent) == 1 and isinstance(sent[0], bytes)
    assert Report.from_dict(json.loads(sent[0])) == rep


def test_a_group_without_a_cpu_side_sends_through_gloo(monkeypatch):
    """A backend that serves only CUDA, as NCCL does: torch's object
    collectives would copy through the current GPU, so gather sends the
    reports through a gloo group made for the call, and destroys it."""
    def make(store, rank, size, timeout):
        return dist.ProcessGroupGloo(store, rank, size, timeout)

    if "cudaonly" not in dist.Backend.backend_list:
        dist.Backend.register_backend("cudaonly", make, devices=["cuda"])
    assert dist.Backend.backend_capability["cudaonly"] == ["cuda"]
    used = []
    real = dist.gather_object

    def spy(obj, out, dst, group):
        used.append((group, dist.get_backend(group)))
        if used[-1][1] == "gloo":
            return real(obj, out, dst=dst, group=group)
        out[0] = obj    # one rank: what a gather over CUDA would give
        return None

    monkeypatch.setattr(dist, "gather_object", spy)
    dist.init_process_group("cudaonly", store=dist.HashStore(), rank=0,
                            world_size=1)
    try:
        merged = ap.distributed.gather(small_report())
        assert merged["step"].count == 1
        (group, backend), = used
        assert group is not None and backend == "gloo"
        with pytest.raises(ValueError, match="not initialized"):
            dist.get_backend(group)         # destroyed after the call
        # a group passed in is used as it is
        used.clear()
        ap.distributed.gather(small_report(), group=dist.group.WORLD)
        assert used[0][1] == "cudaonly"
    finally:
        dist.destroy_process_group()


def test_which_backends_run_object_collectives_on_the_cpu():
    from aquaprof.integrations.distributed import _on_cpu
    assert _on_cpu(dist, "gloo")
    assert _on_cpu(dist, "cpu:gloo,cuda:nccl")
    assert not _on_cpu(dist, "nccl")
    assert not _on_cpu(dist, "cuda:nccl")
    assert not _on_cpu(dist, "no-such-backend")


def test_importing_aquaprof_distributed_imports_no_torch():
    code = ("import sys, aquaprof, aquaprof.distributed as d; "
            "assert callable(d.gather) and aquaprof.distributed is d; "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True,
                   cwd=ROOT)

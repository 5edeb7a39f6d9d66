"""GPU tracing without a GPU: every missing-piece path of cuda="auto" and
cuda=True with its status text, and the whole CUPTI path (activity
buffers, external correlation ids, attribution to stages and spans,
reports, views) driven by a fake libcuda and a fake libcupti built from
tests/fakes with the real cupti.h record layouts.

Each scenario runs in a fresh interpreter: the driver and CUPTI, once
opened, stay open for the life of a process, as in every CUDA program.
"""
import json
import textwrap

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import _core
from aquaprof.model import schema
from aquaprof.record.cupti import cupti_candidates
from fake_gpu import scenario

STATUS = """
    with ap.Profiler() as prof:
        with ap.stage("work"):
            pass
    rep = prof.report()
    print(json.dumps([rep.gpu_status, rep["work"].count, rep.gpu is None]))
"""

REQUIRED = """
    try:
        ap.Profiler(cuda=True).start()
        print(json.dumps("started"))
    except RuntimeError as e:
        print(json.dumps(str(e)))
"""


def test_without_a_driver_everything_else_works(tmp_path):
    env = {"AQUAPROF_LIBCUDA": str(tmp_path / "libcuda.so.1")}
    status, count, no_gpu = scenario(STATUS, env)
    assert status.startswith("no CUDA driver: cannot open ")
    assert str(tmp_path) in status and count == 1 and no_gpu
    assert scenario(REQUIRED, env).startswith("cuda=True: no CUDA driver")
    # the synchronizing style needs the driver too, and says it asked
    for options in ("cuda_sync=True", "cuda=False, cuda_sync=True"):
        code = REQUIRED.replace("cuda=True", options)
        assert scenario(code, env).startswith(
            "cuda_sync=True: no CUDA driver"), options


def test_without_a_device(fakes):
    env = {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so"),
           "FAKE_CUDA_DEVICES": "0"}
    status, count, _ = scenario(STATUS, env)
    assert status == "no CUDA device: the driver sees none" and count == 1
    env = dict(env, FAKE_CUDA_DEVICES="1", FAKE_CUDA_INIT_ERROR="100",
               FAKE_CUDA_UNINITIALIZED="1")
    assert scenario(REQUIRED, env) == \
        "cuda=True: no CUDA device: cuInit failed (CUDA_ERROR_NO_DEVICE)"


def test_a_driver_that_fails_is_not_taken_for_a_machine_without_gpu(fakes):
    """A failure other than CUDA_ERROR_NO_DEVICE is the driver's: said as
    such, and printed whole, where 'no CUDA device' is the short line of
    a CPU machine."""
    env = {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so"),
           "FAKE_CUDA_INIT_ERROR": "999", "FAKE_CUDA_UNINITIALIZED": "1"}
    assert scenario(REQUIRED, env) == (
        "cuda=True: the CUDA driver failed: cuInit failed "
        "(CUDA_ERROR_UNKNOWN)")
    printed = scenario("""
        from aquaprof.views.text import gpu_line
        with ap.Profiler() as prof:
            pass
        print(json.dumps(gpu_line(prof.report())))
    """, dict(env, FAKE_CUDA_UNINITIALIZED="0"))
    assert printed is None or "no CUDA device" not in printed, printed


@pytest.mark.skipif(not _core.HAVE_CUPTI, reason="built without cupti.h")
def test_a_program_whose_cuinit_failed_is_not_said_to_have_used_no_cuda(
        fakes):
    env = {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so"),
           "FAKE_CUDA_INIT_ERROR": "999", "FAKE_CUDA_UNINITIALIZED": "1"}
    status = scenario("""
        import os
        with ap.Profiler() as prof:
            with ap.stage("init"):
                driver = ctypes.CDLL(os.environ["AQUAPROF_LIBCUDA"])
                rc = driver.cuInit(0)
        print(json.dumps([rc, prof.report().gpu_status]))
    """, env, cupti=[fakes / "libcupti.so"])
    assert status[0] == 999
    assert "did not use CUDA" not in status[1], status
    assert "no GPU work: the CUDA driver failed: cuDeviceGetCount failed " \
        "(CUDA_ERROR_UNKNOWN)" in status[1], status


@pytest.mark.skipif(not _core.HAVE_CUPTI, reason="built without cupti.h")
def test_cupti_not_found_lists_every_path_tried(fakes, tmp_path):
    env = {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")}
    paths = [tmp_path / "a" / "libcupti.so", tmp_path / "libcupti.so.13"]
    status, count, no_gpu = scenario(STATUS, env, cupti=paths)
    assert status.startswith("CUPTI not found; tried: ")
    for p in paths:
        assert f"{p} (cannot open shared object file" in status \
            or f"{p} (No such file" in status, status
    assert status.endswith("Set AQUAPROF_CUPTI to the path of libcupti.so")
    assert count == 1 and no_gpu
    assert "CUPTI not found" in scenario(REQUIRED, env, cupti=paths)


@pytest.mark.skipif(not _core.HAVE_CUPTI, reason="built without cupti.h")
def test_cupti_of_another_major_version_is_refused(fakes):
    env = {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so"),
           "FAKE_CUPTI_VERSION": "24"}
    status, count, no_gpu = scenario(STATUS, env, [fakes / "libcupti.so"])
    assert "has API version 24" in status and "rebuild aquaprof" in status
    assert count == 1 and no_gpu


def test_cuda_false_never_opens_the_driver(fakes):
    code = """
        with ap.Profiler(cuda=False) as prof:
            with ap.stage("work"):
                pass
        maps = open("/proc/self/maps").read()
        print(json.dumps([prof.report().gpu_status, "libcuda" in maps]))
    """
    env = {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")}
    assert scenario(code, env) == ["off (cuda=False)", False]


def test_bad_cuda_arguments():
    with pytest.raises(ValueError, match="cuda must be 'auto', True or "
                                         "False, got 'yes'"):
        ap.Profiler(cuda="yes")
    with pytest.raises(ValueError, match="cuda must be"):
        ap.Profiler(cuda=1)
    with pytest.raises(ValueError, match="cuda_sync must be True or False"):
        ap.Profiler(cuda_sync=1)
    with pytest.raises(TypeError, match="libcuda must be str"):
        _core.Profiler(cuda=1, libcuda=3)
    with pytest.raises(TypeError, match="cupti_paths items must be str"):
        _core.Profiler(cuda=1, cupti_paths=[b"x"])
    with pytest.raises(ValueError, match="cuda must be 0, 1 or 2"):
        _core.Profiler(cuda=3)


def test_cupti_candidates_follow_the_documented_order(tmp_path, monkeypatch):
    home, given = tmp_path / "cuda", tmp_path / "mine"
    (home / "extras" / "CUPTI" / "lib64").mkdir(parents=True)
    (home / "extras" / "CUPTI" / "lib64" / "libcupti.so.13").touch()
    given.mkdir()
    (given / "libcupti.so").touch()
    monkeypatch.setenv("AQUAPROF_CUPTI", str(given))
    monkeypatch.setenv("CUDA_HOME", str(home))
    monkeypatch.delenv("CUDA_PATH", raising=False)
    found = cupti_candidates()
    assert found[:2] == [str(given / "libcupti.so"),
                         str(home / "extras/CUPTI/lib64/libcupti.so.13")]
    assert found[-2:] == ["libcupti.so.13", "libcupti.so"]
    monkeypatch.setenv("AQUAPROF_CUPTI", "/opt/x/libcupti.so.12")
    assert cupti_candidates()[0] == "/opt/x/libcupti.so.12"


PIPELINE = """
    import threading
    H2D, D2H, D2D = 1, 2, 8
    def worker():
        with ap.stage("worker"):
            fake.fake_kernel(b"reduce", 0, 7000, 3, 64, 128, 40, 4096)
    with ap.Profiler(max_spans=4) as prof:
        for i in range(3):
            with ap.stage("load", items=8):
                fake.fake_memcpy(H2D, 1 << 20, 100000, 0, 1)   # pageable
                fake.fake_memcpy(H2D, 1 << 16, 2000, 1, 2)     # pinned
                fake.fake_malloc(ctypes.c_int64(1 << 24))
            with ap.stage("compute"):
                for k in range(4):
                    fake.fake_kernel(b"gemm", 1000, 20000, 1 + k % 2,
                                     132, 256, 64, 0)
                with ap.stage("norm"):
                    fake.fake_kernel(b"layernorm", 500, 3000, 1, 32, 1024,
                                     32, 8192)
                    fake.fake_memset(4096, 1000)
            with ap.stage("save"):
                fake.fake_memcpy(D2H, 1 << 18, 30000, 1, 1)
                fake.fake_sync(50000)
                fake.fake_malloc(ctypes.c_int64(-(1 << 24)))
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        fake.fake_kernel(b"stray", 0, 1000, 0, 1, 32, 8, 0)
    rep = prof.report()
    rep.save(OUT + "/run.json")
    rep.to_chrome_trace(OUT + "/trace.json")
    print(json.dumps(rep.gpu_status))
"""


@pytest.fixture(scope="module")
def traced(fakes, tmp_path_factory):
    """A pipeline of known GPU work, traced through the fake CUPTI: the
    saved report and trace, and the status."""
    if not _core.HAVE_CUPTI:
        pytest.skip("built without cupti.h")
    out = tmp_path_factory.mktemp("traced")
    status = scenario(f"OUT = {str(out)!r}\n" + textwrap.dedent(PIPELINE),
                      {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")},
                      [fakes / "libcupti.so"])
    return ap.Report.load(out / "run.json"), out / "trace.json", status


def test_kernels_and_copies_are_attributed_to_their_stage(traced):
    rep, _, status = traced
    assert status == rep.gpu_status
    assert status.startswith("tracing 1 device with CUPTI (") and \
        status.endswith("libcupti.so)")
    load, compute, norm = rep["load"].cuda, rep["compute"].cuda, \
        rep["compute/norm"].cuda
    save, worker = rep["save"].cuda, rep["worker"].cuda
    # counts exact, sub-stages included in the parent's
    assert (compute.kernels, norm.kernels, worker.kernels) == (15, 3, 1)
    assert load.kernels == save.kernels == 0
    assert compute.kernel_time == pytest.approx(3 * (4 * 20e-6 + 3e-6))
    assert compute.self_kernel_time == pytest.approx(3 * 4 * 20e-6)
    # copies by direction, bytes exact, bandwidth from device time
    h2d = load.memcpy["H2D"]
    assert (h2d.count, h2d.bytes) == (6, 3 * ((1 << 20) + (1 << 16)))
    assert h2d.pageable_bytes == 3 << 20
    assert h2d.bandwidth == pytest.approx(h2d.bytes / (3 * 102e-6))
    assert save.memcpy["D2H"].bytes == 3 << 18 and "D2H" not in load.memcpy
    assert norm.memset_time == pytest.approx(3e-6)
    assert save.sync_time == pytest.approx(3 * 50e-6)
    assert load.mem_allocated == 3 << 24 and load.mem_peak == 1 << 24
    assert [k.name for k in compute.top_kernels] == ["gemm", "layernorm"]
    assert rep.gpu["unattributed"] == 1 and rep.gpu["dropped"] == 0


def test_spans_link_to_their_gpu_work_even_past_max_spans(traced):
    rep, _, _ = traced
    ev, spans = rep.gpu_events(), rep.spans()
    assert len(spans) == 4 and rep.spans_dropped > 0
    linked = ev[ev["span"] >= 0]
    assert (spans["stage"][linked["span"]] == linked["stage"]).all()
    # dropped spans lose the link, never the stage
    assert ((ev["span"] == -1) & (ev["stage"] >= 0)).any()
    per_span = rep.span_gpu_time()
    kernels = linked[linked["kind"] == schema.KERNEL]
    assert per_span.sum() == pytest.approx(
        float((kernels["end_ns"] - kernels["start_ns"]).sum()) * 1e-9)


def test_kernel_table_and_occupancy(traced):
    rep, _, _ = traced
    table = {k.name: k for k in rep.kernels()}
    assert list(table) == ["gemm", "layernorm", "reduce", "stray"]
    gemm = table["gemm"]
    assert (gemm.count, gemm.grid, gemm.block, gemm.registers) == \
        (12, (132, 1, 1), (256, 1, 1), 64)
    assert gemm.mean == pytest.approx(20e-6)
    # 256 threads x 64 registers: 4 blocks of 65536 registers, 1024 of
    # 2048 threads
    assert gemm.occupancy == pytest.approx(0.5)
    assert table["layernorm"].occupancy == pytest.approx(1.0)
    assert rep.gpu["devices"][0]["name"] == "Fake GPU"


def test_idle_share_counts_the_gaps(traced):
    rep, _, _ = traced
    assert 0 <= rep["compute"].cuda.idle_share < 1
    assert rep["save"].cuda.idle_share < 1
    from aquaprof.analysis.gpu_stats import _covered, _merged
    busy = _merged(np.array([0, 5, 20]), np.array([10, 8, 30]))
    assert busy[0].tolist() == [0, 20] and busy[1].tolist() == [10, 30]
    assert _covered(busy, np.array([5, 0, 12]), np.array([25, 40, 18])
                    ).tolist() == [10, 20, 0]


def test_the_gpu_report_round_trips_and_renders(traced, tmp_path):
    rep, trace_path, _ = traced
    again = ap.Report.from_dict(json.loads(json.dumps(rep.to_dict())))
    assert again == rep and again["compute"].cuda == rep["compute"].cuda
    text = str(rep)
    assert "GPU: tracing 1 device with CUPTI" in text
    assert "cuda" in text and "gpu idle" in text
    assert "1 GPU event was launched outside any stage" in text
    trace = json.loads(trace_path.read_text())["traceEvents"]
    kernels = [e for e in trace if e.get("cat") == "kernel"]
    assert len(kernels) == 17 and {e["args"]["stage"] for e in kernels} == \
        {"compute", "compute/norm", "worker", None}
    starts = {e["id"] for e in trace if e["ph"] == "s"}
    ends = {e["id"] for e in trace if e["ph"] == "f"}
    assert starts and starts == ends
    assert any(e["ph"] == "C" and e["name"] == "GPU memory" for e in trace)
    assert any(e.get("name") == "thread_name" and
               e["args"]["name"] == "stream 2" for e in trace)


def test_corrupt_gpu_sections_are_refused(traced):
    rep, _, _ = traced
    good = rep.to_dict()

    def with_events(change):
        events = rep.gpu_events().copy()
        change(events)
        return dict(good, gpu=dict(good["gpu"], events=schema.
                                   encode_array(events, _core.GPU_DTYPE)))

    def set_field(name, value):
        def change(events):
            events[name][0] = value
        return change

    cases = [
        (set_field("stage", 99), "a stage id the report lacks"),
        (set_field("span", 10**6), "a span the report lacks"),
        (set_field("kind", 42), "an unknown kind"),
        (set_field("end_ns", 0), "an end before its start"),
    ]
    for change, message in cases:
        with pytest.raises(ap.ReportError, match=message):
            ap.Report.from_dict(with_events(change))
    for bad, message in [
            (dict(good["gpu"], kernel_names=[1]), "kernel_names"),
            (dict(good["gpu"], devices=[{}]), "devices"),
            (dict(good["gpu"], dropped=-1), "dropped"),
            (dict(good["gpu"], events={"dtype": []}), "gpu events"),
            ("x", "report\\['gpu'\\] must be an object")]:
        with pytest.raises(ap.ReportError, match=message):
            ap.Report.from_dict(dict(good, gpu=bad))
    with pytest.raises(ap.ReportError, match="gpu_status"):
        ap.Report.from_dict(dict(good, gpu_status=3))


def test_cuda_sync_synchronizes_at_every_edge(fakes):
    code = """
        cuda = ctypes.CDLL(AQUAPROF_LIBCUDA)
        with ap.Profiler(cuda=False, cuda_sync=True) as prof:
            for _ in range(3):
                with ap.stage("step"):
                    pass
        print(json.dumps([prof.report().gpu_status, cuda.fake_cuda_syncs()]))
    """
    lib = str(fakes / "libcuda.so")
    status, syncs = scenario(f"AQUAPROF_LIBCUDA = {lib!r}\n" +
                             textwrap.dedent(code), {"AQUAPROF_LIBCUDA": lib})
    assert status == "synchronizing at every stage edge"
    assert syncs == 6


def test_merged_ranks_keep_their_gpu_work(traced):
    rep, _, _ = traced
    merged = ap.merge([rep, rep], ["rank 0", "rank 1"])
    assert merged["compute"].cuda.kernels == 2 * rep["compute"].cuda.kernels
    assert [d["name"] for d in merged.gpu["devices"]] == \
        ["Fake GPU (rank 0)", "Fake GPU (rank 1)"]
    ev = merged.gpu_events()
    linked = ev[ev["span"] >= 0]
    assert (merged.spans()["stage"][linked["span"]] == linked["stage"]).all()
    assert len(merged.kernels()) == len(rep.kernels())
    assert merged.gpu_status.startswith("rank 0: tracing")
    assert ap.Report.from_dict(merged.to_dict()) == merged

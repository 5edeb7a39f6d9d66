"""How CUPTI's activity records become GPU events, through the fake
libcupti (tests/fakes): records without timestamps, which synchronizations
block the host, pageable bytes of copies with no host side, the cap on
events, buffers delivered after a run was taken, correlation ids that
wrap past 2^32; and NVML's devices in CUDA_VISIBLE_DEVICES' numbering."""
import ctypes
import json
import textwrap

import numpy as np
import pytest

import aquaprof as ap
import aquaprof.live.nvml
from aquaprof import _core
from aquaprof.model import schema
from fake_gpu import scenario

needs_cupti = pytest.mark.skipif(not _core.HAVE_CUPTI,
                                 reason="built without cupti.h")


def traced(fakes, code, helpers=""):
    """Runs code (after helpers) against the fake driver and CUPTI; what
    it printed."""
    return scenario(textwrap.dedent(helpers) + textwrap.dedent(code),
                    {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")},
                    [fakes / "libcupti.so"])


GPU = """
    def gpu(rep):
        ev = rep.gpu_events()
        path = {s.id: s.path for s in rep.stages}
        return dict({k: v for k, v in rep.gpu.items()
                     if isinstance(v, int)},
                    status=rep.gpu_status,
                    kinds=ev["kind"].tolist(),
                    stages=[path.get(s) for s in ev["stage"].tolist()],
                    starts=ev["start_ns"].tolist(),
                    correlations=ev["correlation"].tolist())
"""


@needs_cupti
def test_records_without_timestamps_are_left_out_and_counted(fakes):
    got = traced(fakes, """
        with ap.Profiler() as prof:
            with ap.stage("work"):
                fake.fake_kernel(b"done", 0, 1000, 1, 1, 32, 8, 0)
                now = 10**9
                fake.fake_kernel_times(b"unstarted", ctypes.c_uint64(0),
                                       ctypes.c_uint64(now))
                fake.fake_kernel_times(b"unfinished", ctypes.c_uint64(now),
                                       ctypes.c_uint64(0))
        print(json.dumps(gpu(prof.report())))
    """, GPU)
    assert got["incomplete"] == 2
    assert got["kinds"] == [_core.GPU_KERNEL] and min(got["starts"]) > 0
    assert "2 records without timestamps" in got["status"]


@needs_cupti
def test_only_synchronizations_that_block_the_host_are_host_sync(fakes):
    got = traced(fakes, """
        WAIT_EVENT, EVENT, STREAM, CONTEXT = 2, 1, 3, 4
        with ap.Profiler() as prof:
            with ap.stage("work"):
                for kind in (WAIT_EVENT, EVENT, STREAM, CONTEXT):
                    fake.fake_sync_of(kind, ctypes.c_uint64(10000))
        rep = prof.report()
        ev = rep.gpu_events()
        print(json.dumps([int((ev["kind"] == ap.schema.SYNC).sum()),
                          rep["work"].cuda.sync_time]))
    """)
    syncs, sync_time = got
    assert syncs == 3
    assert sync_time == pytest.approx(3 * 10000e-9)


@needs_cupti
def test_copies_between_devices_are_not_pageable(fakes):
    got = traced(fakes, """
        H2D, D2D, PEER = 1, 8, 10
        with ap.Profiler() as prof:
            with ap.stage("copy"):
                fake.fake_memcpy(D2D, ctypes.c_uint64(1 << 20), 1000, 0, 1)
                fake.fake_memcpy(PEER, ctypes.c_uint64(1 << 22), 1000, 0, 1)
                fake.fake_memcpy(H2D, ctypes.c_uint64(1 << 10), 1000, 0, 1)
        copies = prof.report()["copy"].cuda.memcpy
        print(json.dumps({k: [c.bytes, c.pageable_bytes]
                          for k, c in copies.items()}))
    """)
    assert got == {"D2D": [1 << 20, 0], "other": [1 << 22, 0],
                   "H2D": [1 << 10, 1 << 10]}


@needs_cupti
def test_events_past_max_gpu_events_are_dropped_and_said(fakes):
    got = traced(fakes, """
        with ap.Profiler(max_gpu_events=3) as prof:
            with ap.stage("work"):
                for _ in range(5):
                    fake.fake_kernel(b"k", 0, 1000, 1, 1, 32, 8, 0)
        rep = prof.report()
        from aquaprof.views.trace import chrome_trace
        trace = json.loads(chrome_trace(rep, max_events=1))
        print(json.dumps(dict(gpu(rep), diagnosis=str(rep.diagnose()),
                              printed=str(rep), trace=trace)))
    """, GPU)
    assert len(got["kinds"]) == 3
    assert got["over_max"] == 2 and got["max_events"] == 3
    assert "2 GPU events past max_gpu_events=3 dropped" in got["status"]
    # the classes given without them say so, in full and in the report
    said = ("(2 GPU events dropped (2 past max_gpu_events=3): the stages "
            "that launched them lack those GPU figures")
    assert said in got["diagnosis"] and said in got["printed"]
    # the trace says what it left out (the longest 1 kept) and what was
    # never recorded, as it does for spans
    other = got["trace"]["otherData"]
    assert (other["gpu_events_left_out"],
            other["gpu_events_never_recorded"]) == (2, 2)
    assert any(e.get("ph") == "i" and "2 shortest GPU events left out" in
               e["name"] and "2 dropped while recording" in e["name"]
               for e in got["trace"]["traceEvents"])


@pytest.mark.parametrize("value, error, text", [
    (-1, ValueError, "max_gpu_events must be between 0"),
    (2**31, ValueError, "max_gpu_events must be between 0"),
    ("10", TypeError, "max_gpu_events must be an int"),
    (1.5, TypeError, "max_gpu_events must be an int"),
    (True, TypeError, "max_gpu_events must be an int"),
])
def test_a_bad_max_gpu_events_is_refused(value, error, text):
    with pytest.raises(error, match=text):
        ap.Profiler(max_gpu_events=value)


@needs_cupti
def test_records_delivered_after_a_run_was_taken_are_counted(fakes):
    got = traced(fakes, """
        with ap.Profiler() as first:
            with ap.stage("work"):
                fake.fake_kernel(b"k", 0, 1000, 1, 1, 32, 8, 0)
        first.report()
        fake.fake_late_kernel(b"straggler")
        with ap.Profiler() as second:
            with ap.stage("work"):
                fake.fake_kernel(b"k", 0, 1000, 1, 1, 32, 8, 0)
        print(json.dumps([gpu(first.report()), gpu(second.report())]))
    """, GPU)
    first, second = got
    assert first["late"] == 0 and len(first["kinds"]) == 1
    assert second["late"] == 1 and len(second["kinds"]) == 1
    assert "1 records of an earlier run arrived after" in second["status"]


@needs_cupti
def test_correlation_ids_that_wrap_join_within_their_epoch(fakes):
    """The same 32-bit id launched by two stages 2^32 calls apart, and a
    kernel whose record arrives after the wrap though its call came
    before it: each joins its own stage."""
    got = traced(fakes, """
        def call(id, name=None):
            fake.fake_link_at(ctypes.c_uint32(id))
            if name:
                fake.fake_kernel_at(ctypes.c_uint32(id), name)
        fake.fake_api_call()    # the fake makes its queue at a first call
        with ap.Profiler() as prof:
            with ap.stage("a"):
                call(7, b"a")
            with ap.stage("b"):
                for id in (0x40000000, 0x80000000, 0xC0000000):
                    call(id)
                call(0xFFFFFFF0)        # its kernel ends after the wrap
            with ap.stage("c"):
                call(7, b"c")
                fake.fake_kernel_at(ctypes.c_uint32(0xFFFFFFF0), b"b")
        print(json.dumps(gpu(prof.report())))
    """, GPU)
    assert got["stages"] == ["a", "c", "b"]
    assert got["correlations"] == [7, (1 << 32) + 7, 0xFFFFFFF0]
    assert got["unattributed"] == 0


def test_reports_of_the_88_byte_event_layout_still_load():
    """Files written with 32-bit correlation ids and without the new
    counters load, each event's fields kept."""
    old = np.zeros(2, schema.GPU_DTYPE_32)
    old["kind"] = schema.KERNEL
    old["start_ns"], old["end_ns"] = [1, 2], [3, 4]
    old["correlation"] = [5, 6]
    old["stage"] = old["span"] = -1
    gpu = {"events": schema.encode_array(old, schema.GPU_DTYPE_32),
           "kernel_names": [], "devices": [], "dropped": 1,
           "unattributed": 2}
    data = schema.decode({"format": schema.FORMAT, "version": 1,
                          "spans": schema.encode_array(
                              np.zeros(0, _core.SPAN_DTYPE),
                              _core.SPAN_DTYPE), "gpu": gpu})
    events = data["gpu"]["events"]
    assert events.dtype == _core.GPU_DTYPE
    assert events["correlation"].tolist() == [5, 6]
    assert events["end_ns"].tolist() == [3, 4]
    assert {k: data["gpu"][k] for k in schema.GPU_COUNTERS_ADDED} == \
        {"incomplete": 0, "over_max": 0, "max_events": 0, "late": 0}
    assert data["gpu"]["dropped"] == 1


# ----------------------------------------------------------------- NVML
@pytest.fixture
def nvml(fakes, monkeypatch):
    """The fake NVML with four devices, device i using i GiB."""
    monkeypatch.setenv("AQUAPROF_LIBNVML", str(fakes / "libnvidia-ml.so"))
    monkeypatch.setattr(aquaprof.live.nvml, "_lib", None)
    fake = ctypes.CDLL(str(fakes / "libnvidia-ml.so"))
    for i in range(4):
        fake.fake_nvml_set(4, i, ctypes.c_ulonglong(i << 30))
    return lambda: [b >> 30 for b in aquaprof.live.nvml.memory_used()]


@pytest.mark.parametrize("visible, devices", [
    (None, [0, 1, 2, 3]),
    ("2,0", [2, 0]),
    (" 3 , 1 ", [3, 1]),
    ("", []),
    ("1,7,0", [1]),                      # the list ends at a bad entry
    ("1,1", [1]),                        # and at a repeated one
    ("GPU-00000002", [2]),               # a unique UUID prefix
    ("GPU-00000002-fake-4a1e-9c3b-000000000002,0", [2, 0]),
    ("GPU-0000000", []),                 # a prefix of several: none
    ("MIG-fake-3,GPU-00000001", [3, 1]),
    ("MIG-unknown,0", []),
])
def test_nvml_devices_follow_cuda_visible_devices(nvml, monkeypatch,
                                                  visible, devices):
    if visible is None:
        monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    else:
        monkeypatch.setenv("CUDA_VISIBLE_DEVICES", visible)
    assert nvml() == devices


@needs_cupti
def test_records_cupti_dropped_are_counted(fakes):
    got = traced(fakes, """
        with ap.Profiler() as prof:
            with ap.stage("work"):
                fake.fake_set_dropped(ctypes.c_size_t(5))
                fake.fake_kernel(b"kept", 0, 1000, 1, 1, 32, 8, 0)
        print(json.dumps(gpu(prof.report())))
    """, GPU)
    assert got["dropped"] == 5 and got["kinds"] == [_core.GPU_KERNEL]


@needs_cupti
def test_kernels_made_twice_as_slow_are_judged_where_the_wall_cannot(fakes):
    """A stage that launches its kernels and goes on without waiting for
    the device keeps its wall time however slow they grow: a comparison
    on wall time names it from its kernels' time, and measure="cuda"
    judges it."""
    got = traced(fakes, """
        import time

        def busy(seconds):
            end = time.perf_counter() + seconds
            while time.perf_counter() < end:
                pass

        def one(scale):
            with ap.Profiler() as prof:
                for _ in range(20):
                    with ap.stage("launch"):
                        for _ in range(4):
                            fake.fake_kernel(b"k", 0, 1_000_000 * scale,
                                             1, 1, 32, 8, 0)
                        busy(0.005)
                    time.sleep(0.006 * scale)     # the device drains
            return prof.report()

        base = [one(1) for _ in range(3)]
        slow = one(2)
        on_wall = slow.compare(base)
        on_cuda = slow.compare(base, measure="cuda")
        same = one(1).compare(base)
        print(json.dumps({
            "wall": [c.verdict for c in on_wall.changes],
            "note": on_wall.gpu, "same_note": same.gpu,
            "cuda": [(c.path, c.verdict, c.change)
                     for c in on_cuda.changes]}))
    """)
    assert got["wall"] != ["slower"]                # the host hid it
    assert got["note"].startswith("the time of the kernels the stages "
                                  "launched moved: launch slower (+100 %)")
    assert got["same_note"] == ""
    (path, verdict, change), = got["cuda"]
    assert (path, verdict) == ("launch", "slower")
    assert change == pytest.approx(1.0, abs=0.01)

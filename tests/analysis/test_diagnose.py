"""diagnose(): planted workloads whose class is known are classified so."""
import time

import numpy as np
import pytest

import aquaprof as ap
from profiled import busy


def planted_run():
    """The planted workloads profiled once, and whether they held as
    planted, by the clocks alone: each computing stretch on the CPU all
    along and no other thread of the process at work (a busy machine, or
    the kernel reclaiming memory under a sanitizer, can take the CPU from
    a busy loop for milliseconds: the stage then truly waited)."""
    held = []

    def computed(seconds):
        wall, cpu = time.perf_counter(), time.thread_time()
        process = time.process_time()
        busy(seconds)
        cpu = time.thread_time() - cpu
        held.append(cpu >= 0.9 * (time.perf_counter() - wall) and
                    time.process_time() - process - cpu < 0.25 * seconds)

    # no GPU tracing, wherever it runs: the diagnosis then says which GPU
    # classes tracing would add
    with ap.Profiler(memory_interval=0.001, cpu_resolution=0,
                     cuda=False) as prof:
        with ap.stage("sleep"):              # I/O-like wait
            time.sleep(0.06)
        with ap.stage("compute"):            # a busy loop
            computed(0.05)
        with ap.stage("allocate"):           # 400 MiB touched, kept
            block = np.ones(400 << 20 >> 3)
            computed(0.03)
        with ap.stage("half"):               # computes 2/3, then waits
            computed(0.03)
            time.sleep(0.015)
    del block
    return prof.report(), all(held)


@pytest.fixture(scope="module")
def report():
    for _ in range(3):
        rep, held = planted_run()
        if held:
            return rep
    pytest.fail("the planted stages never ran as planted in 3 runs: the "
                "machine or the process's other threads took their CPU")


def test_planted_workloads_are_classified(report):
    found = {f.path: f for f in report.diagnose(top=4)}
    assert found["sleep"].kind == "waiting"
    assert found["compute"].kind == "cpu-bound"
    assert found["half"].kind == "mixed"
    assert "allocation-heavy" in found["allocate"].also
    assert "allocation-heavy" not in found["compute"].also
    for f in found.values():
        assert "wall" in f.evidence and f.fix and f.verify


def test_memory_other_stages_kept_between_calls_is_not_a_stages_allocation():
    # `light` allocates nothing; between its two calls another stage keeps
    # 300 MiB, so the process's peak in its second call is far above its
    # first entry; `churn` takes 300 MiB and gives it back within a call.
    # Each stage waits before its exit: RSS is known as of its last sample
    # (memory_interval), later on a busy machine
    kept = []
    with ap.Profiler(memory_interval=0.001, cuda=False) as prof:
        with ap.stage("light"):
            time.sleep(0.02)
        with ap.stage("keep"):
            kept.append(np.ones(300 << 20 >> 3))
            time.sleep(0.05)
        with ap.stage("light"):
            time.sleep(0.02)
        with ap.stage("churn"):
            block = np.ones(300 << 20 >> 3)
            del block
            time.sleep(0.05)
    del kept
    rep = prof.report()
    assert rep["light"].mem_peak - rep["light"].mem_rise > 250 << 20
    assert rep["light"].mem_rise < 100 << 20
    assert rep["churn"].mem_rise > 280 << 20
    found = {f.path: f for f in rep.diagnose(top=4)}
    assert found["light"].also == []
    assert found["keep"].also == ["allocation-heavy"]
    assert found["churn"].also == ["allocation-heavy"]
    assert "RSS rose up to" in found["churn"].evidence


def test_the_printed_report_ends_with_the_diagnosis(report):
    text = str(report)
    assert "Diagnosis (details: report.diagnose()):" in text
    assert "sleep: waiting; thread CPU time" in text
    assert text.index("Diagnosis") > text.index("bottleneck")
    full = str(report.diagnose())
    assert "GPU classes" in full and "verify:" in full


def test_bad_top_is_refused():
    # any report: not the planted one, which a busy machine can deny
    with ap.Profiler(cuda=False) as prof:
        with ap.stage("one"):
            pass
    with pytest.raises(ValueError, match="top"):
        prof.report().diagnose(top=0)


def test_nothing_to_diagnose():
    with ap.Profiler() as prof:
        pass
    assert "no stage" in str(prof.report().diagnose())


GPU_WORKLOADS = """
    import time
    H2D = 1
    def busy(seconds):
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            pass
    with ap.Profiler() as prof:
        with ap.stage("copy"):         # a pageable 256 MiB upload
            fake.fake_memcpy(H2D, 256 << 20, 60_000_000, 0, 1)
            time.sleep(0.03)
        with ap.stage("train"):        # one kernel longer than the stage
            fake.fake_kernel(b"gemm", 0, 60_000_000, 1, 132, 256, 64, 0)
            time.sleep(0.03)
        time.sleep(0.05)               # until the device is done
        with ap.stage("readback"):     # .item() after every small kernel
            for _ in range(5):
                fake.fake_kernel(b"sum", 0, 100_000, 1, 1, 256, 16, 0)
                fake.fake_sync(3_000_000)
                time.sleep(0.002)
        for _ in range(3):
            with ap.stage("tiny"):     # a Python loop of tiny ops
                for _ in range(50):
                    fake.fake_kernel(b"add", 0, 2000, 1, 1, 32, 8, 0)
                    busy(20e-6)
        with ap.stage("host"):         # host work while the GPU waits
            fake.fake_kernel(b"scale", 0, 1_000_000, 1, 8, 256, 16, 0)
            busy(0.03)
        for _ in range(12):
            with ap.stage("alloc"):    # cudaMalloc every call
                fake.fake_malloc(ctypes.c_int64(1 << 20))
                busy(0.001)
        with ap.stage("cpu"):          # no GPU work at all
            busy(0.02)
        time.sleep(0.01)
        with ap.stage("queue"):        # 40 ms of kernels, run after it
            for j in range(40):
                fake.fake_kernel(b"big", 200_000 + j * 1_000_000,
                                 1_000_000, 1, 8, 256, 16, 0)
        with ap.stage("overlap"):      # the host's, the GPU on queue's
            fake.fake_kernel(b"tiny", 0, 2000, 2, 1, 32, 8, 0)
            busy(0.03)
    found = {f.path: [f.kind, f.host, f.also, f.evidence, f.verify]
             for f in prof.report().diagnose(top=10)}
    print(json.dumps(found))
"""


@pytest.mark.skipif(not ap._core.HAVE_CUPTI, reason="built without cupti.h")
def test_gpu_classes_of_planted_workloads(fakes):
    """Each GPU class on a planted workload traced through the fake CUPTI:
    the device work's times are exact, the host's real."""
    from fake_gpu import scenario
    found = scenario(GPU_WORKLOADS,
                     {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")},
                     [fakes / "libcupti.so"])
    kinds = {path: f[0] for path, f in found.items()}
    # overlap: its own 2 us of kernels bind nothing, however busy the
    # GPU was with the kernels queue left running: its host class
    assert kinds == {"copy": "transfer-bound", "train": "gpu-bound",
                     "readback": "sync-bound", "tiny": "launch-bound",
                     "host": "gpu-starved", "alloc": found["alloc"][1],
                     "cpu": found["cpu"][1], "queue": found["queue"][0],
                     "overlap": found["overlap"][1]}
    assert found["overlap"][1] != "gpu-bound"
    # no GPU class: the host's (its CPU share depends on the machine's load)
    assert found["alloc"][1] in ("cpu-bound", "mixed", "waiting")
    assert found["copy"][1] == "waiting"
    assert f"host {found['host'][1]}: thread CPU time" in found["host"][3]
    assert "256.0 MiB of it from pageable host memory" in found["copy"][3]
    assert "1 kernel took 60.0 ms of" in found["train"][3]
    assert "top kernel gemm: 60.0 ms in 1 launch;" in found["train"][3]
    assert "host blocked on the device 15.0 ms" in found["readback"][3]
    assert "150 kernels (50 a call) of 2.0 us on average" in found["tiny"][3]
    assert found["alloc"][2] == ["device-allocation"]
    assert "12 device allocations in 12 calls" in found["alloc"][3]
    assert found["cpu"][2] == [] and "GPU" not in found["cpu"][3]
    assert "rep['copy'].cuda.memcpy" in found["copy"][4]


@pytest.mark.parametrize("after", [0.02, 1.0])
def test_an_rss_rise_while_other_threads_worked_says_it_may_be_theirs(
        after):
    """RSS is the process's: `light` allocates nothing while a worker
    thread fills 400 MiB during its call. It is still said to have seen
    the rise, but the evidence says the other threads worked meanwhile,
    also where the call then waits a second, so that they used a small
    share of a CPU on average over it (more than its own thread did);
    `own`, which allocates on its own thread alone, says nothing of
    them."""
    def worker():
        block = np.ones(400 << 20 >> 3)
        busy(0.05)
        del block

    import threading
    with ap.Profiler(memory_interval=0.001, sample=0.001, cuda=False) \
            as prof:
        with ap.stage("light"):
            thread = threading.Thread(target=worker)
            thread.start()
            thread.join()
            time.sleep(after)
        with ap.stage("own"):
            block = np.ones(400 << 20 >> 3)
            busy(0.05)
            del block
            time.sleep(0.02)
    rep = prof.report()
    found = {f.path: f for f in rep.diagnose(top=4)}
    assert found["light"].also == ["allocation-heavy"]
    assert "RSS is the process's, and its other threads used" in \
        found["light"].evidence
    assert found["own"].also == ["allocation-heavy"]
    assert "other threads" not in found["own"].evidence


def test_a_parent_is_classified_by_its_own_time_not_its_childrens():
    """Stages are picked by their self time; their class must be of that
    time too. A notebook cell that computes beside a sleeping sub-stage
    read "waiting" (its CPU over its whole wall), and a parent that only
    waits beside a computing one read "mixed"."""
    # sampled: on a busy machine the spin's run delay is then measured,
    # and it reads cpu-starved rather than cpu-bound
    with ap.Profiler(cpu_resolution=0, cuda=False, sample=0.001) as prof:
        with ap.stage("cell"):
            busy(0.06)
            with ap.stage("fetch"):
                time.sleep(0.12)
        with ap.stage("driver"):
            time.sleep(0.06)
            with ap.stage("crunch"):
                busy(0.08)
    found = {f.path: f for f in prof.report().diagnose(top=4)}
    assert found["cell"].kind in ("cpu-bound", "cpu-starved"), \
        found["cell"].evidence
    assert found["driver"].kind == "waiting", found["driver"].evidence
    assert found["cell"].evidence.startswith("thread CPU time ")
    assert " self time (" in found["cell"].evidence
    assert "with its sub-stages" in found["cell"].evidence
    # a stage without sub-stages reads as before: its wall is its own
    assert " wall (" in found["cell/fetch"].evidence

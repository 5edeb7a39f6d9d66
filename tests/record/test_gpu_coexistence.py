"""GPU tracing in the programs users run, through the fake libcuda and
libcupti (tests/fakes): torch.profiler tracing before, during and after a
Profiler (the fake's second client drives CUPTI as Kineto does), a forked
child, a stage left open at stop(), stop() on another thread, a program
that never initialized CUDA, and a CUPTI of another CUDA version.

Each scenario runs in a fresh interpreter: the driver and CUPTI, once
opened, stay open for the life of a process."""
import subprocess
from textwrap import dedent

import pytest

from aquaprof import _core
from fake_gpu import FAKES, cupti_flags, scenario

pytestmark = pytest.mark.skipif(not _core.HAVE_CUPTI,
                                reason="built without cupti.h")

KERNEL = 10          # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL
OURS = 5             # CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM2

PRELUDE = """
    import os, threading
    cu = ctypes.CDLL(os.environ["AQUAPROF_LIBCUDA"])
    def kernel(name):
        fake.fake_kernel(name.encode(), 0, 1000, 1, 1, 32, 8, 0)
    def run(*names):
        with ap.Profiler() as prof:
            for name in names:
                with ap.stage(name):
                    kernel(name)
        return prof.report()
"""


@pytest.fixture
def fake_env(fakes):
    return {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")}


def run(code, fake_env, fakes, **env):
    return scenario(dedent(PRELUDE) + dedent(code), dict(fake_env, **env),
                    [fakes / "libcupti.so"])


def test_profiler_traces_after_torch_profiler_ran(fake_env, fakes):
    """CUPTI keeps one pair of buffer callbacks per process: another
    client's registration replaces aquaprof's, which must take them back
    at its next start."""
    code = """
        first = run("a")
        assert fake.fake_other_start() == 0
        kernel("theirs")
        fake.fake_other_stop()
        second = run("b")
        print(json.dumps([first["a"].cuda.kernels, second["b"].cuda.kernels,
                          second.gpu_status, fake.fake_other_records(),
                          fake.fake_other_foreign()]))
    """
    first, second, status, theirs, foreign = run(code, fake_env, fakes)
    assert first == 1 and second == 1
    assert status.startswith("tracing 1 device with CUPTI")
    assert theirs >= 1 and foreign == 0


# torch.profiler as the fake's second client: Kineto's CUPTI side, and
# torch's own flag that it runs (a CPU-only profile sets it here)
KINETO = """
    import torch
    from torch.profiler import ProfilerActivity, profile
    class kineto:
        def __enter__(self):
            self.torch = profile(activities=[ProfilerActivity.CPU])
            self.torch.__enter__()
            assert fake.fake_other_start() == 0
        def __exit__(self, *exc):
            fake.fake_other_stop()
            self.torch.__exit__(*exc)
"""


def test_profiler_leaves_cupti_to_torch_profiler_tracing(fake_env, fakes):
    pytest.importorskip("torch")
    code = dedent(KINETO) + dedent(f"""
        with kineto():
            rep = run("mine")
            still_on = fake.fake_enabled({KERNEL})
        print(json.dumps([rep.gpu_status, rep.gpu is None, still_on,
                          fake.fake_other_records(),
                          fake.fake_other_foreign(), rep["mine"].count]))
    """)
    status, no_gpu, still_on, theirs, foreign, count = run(code, fake_env,
                                                           fakes)
    assert status.startswith("not traced: torch.profiler is tracing the "
                             "GPU with CUPTI")
    assert no_gpu and count == 1
    # the other client's trace is whole: its kinds on, its kernel its own
    assert still_on and theirs >= 1 and foreign == 0


def test_cuda_true_refuses_beside_torch_profiler(fake_env, fakes):
    pytest.importorskip("torch")
    code = dedent(KINETO) + dedent("""
        with kineto():
            try:
                ap.Profiler(cuda=True).start()
                print(json.dumps("started"))
            except RuntimeError as e:
                print(json.dumps(str(e)))
    """)
    assert run(code, fake_env, fakes).startswith(
        "cuda=True: not traced: torch.profiler is tracing the GPU")


def test_profiler_leaves_cupti_to_an_injected_tool(fake_env, fakes):
    code = """
        print(json.dumps(run("mine").gpu_status))
    """
    status = run(code, fake_env, fakes,
                 CUDA_INJECTION64_PATH="/opt/nsight/libToolsInjection64.so")
    assert status.startswith("not traced: a CUDA tool injected through "
                             "CUDA_INJECTION64_PATH "
                             "(libToolsInjection64.so, Nsight's as a rule)")


def test_torch_profiler_inside_a_run_is_said_and_left_whole(fake_env,
                                                            fakes):
    """Its buffers are its own (the fake's come from a static pool: a
    free() of one aborts), its kinds stay on after aquaprof's stop, and
    the report says its GPU work is incomplete."""
    pytest.importorskip("torch")
    code = dedent(KINETO) + dedent(f"""
        inner = kineto()
        with ap.Profiler() as prof:
            with ap.stage("before"):
                kernel("before")
            inner.__enter__()
            with ap.stage("during"):
                kernel("during")
        still_on = fake.fake_enabled({KERNEL})
        kernel("after")
        inner.__exit__(None, None, None)
        with ap.Profiler() as whole:       # after it: inside one run
            with ap.stage("a"):
                kernel("a")
            with kineto():
                kernel("theirs")
            with ap.stage("b"):
                kernel("b")
        rep = prof.report()
        before = [rep.stage_names[i] for i in rep.gpu["events"]["stage"]
                  if i >= 0].count("before")
        print(json.dumps([rep.gpu_status, still_on,
                          fake.fake_other_records(),
                          whole.report().gpu_status, before,
                          fake.fake_other_foreign()]))
    """)
    status, still_on, theirs, whole, before, foreign = run(code, fake_env,
                                                           fakes)
    # torch.profiler's start had aquaprof's buffer flushed to aquaprof
    # first: the work before it is aquaprof's, none of it reached torch
    assert before == 1 and foreign == 0
    assert status.endswith("; another CUPTI client (torch.profiler) took "
                           "CUPTI over during this run: GPU work from its "
                           "start on is missing")
    assert still_on and theirs >= 1
    # started and ended inside the run: its buffers tell
    assert whole.endswith("another CUPTI client (torch.profiler) took "
                          "CUPTI over during this run: GPU work from its "
                          "start on is missing")


def test_a_stage_left_open_at_stop_claims_no_later_work(fake_env, fakes):
    """A stage open at stop() keeps its tag pushed on its thread; work
    the next run launches outside any stage must not be filed under the
    stage that reuses the tag's number."""
    code = f"""
        ready, resume = threading.Event(), threading.Event()
        def worker():
            st = ap.stage("worker open")
            st.__enter__()
            ready.set()
            resume.wait()
            kernel("worker outside")        # the second run's
        first = ap.Profiler()
        first.start()
        t = threading.Thread(target=worker)
        t.start()
        ready.wait()
        opened = ap.stage("main open")
        opened.__enter__()
        kernel("in main open")
        first.stop()
        depth = fake.fake_correlation_depth({OURS})
        with ap.Profiler() as second:
            kernel("main outside")
            resume.set()
            t.join()
            with ap.stage("main open"):
                kernel("inside")
            with ap.stage("worker open"):
                pass
        rep = second.report()
        kernels = [rep[s].cuda.kernels if rep[s].cuda else 0
                   for s in ("main open", "worker open")]
        print(json.dumps([depth, *kernels, rep.gpu["unattributed"]]))
    """
    depth, main_open, worker_open, unattributed = run(code, fake_env, fakes)
    assert depth == 0            # the stopping thread popped its own
    assert main_open == 1 and worker_open == 0
    assert unattributed == 2     # "main outside" and "worker outside"


def test_a_forked_child_profiles_without_the_gpu(fake_env, fakes):
    code = """
        import os
        r, w = os.pipe()
        with ap.Profiler() as prof:
            with ap.stage("parent"):
                kernel("parent")
            pid = os.fork()
            if pid == 0:
                out = {}
                try:
                    with ap.Profiler() as child:
                        with ap.stage("child"):
                            pass
                    out["status"] = child.report().gpu_status
                    out["count"] = child.report()["child"].count
                except Exception as e:
                    out["error"] = repr(e)
                try:
                    ap.Profiler(cuda=True).start()
                except RuntimeError as e:
                    out["required"] = str(e)
                os.write(w, json.dumps(out).encode())
                os._exit(0)
            os.waitpid(pid, 0)
        child = json.loads(os.read(r, 65536))
        print(json.dumps([child, prof.report()["parent"].cuda.kernels]))
    """
    child, parent_kernels = run(code, fake_env, fakes)
    assert "error" not in child, child
    assert child["count"] == 1
    assert child["status"].startswith("not traced: this process was "
                                      "forked from one that opened CUDA")
    assert child["required"].startswith("cuda=True: not traced: this "
                                        "process was forked")
    assert parent_kernels == 1


def test_cuda_auto_never_initializes_cuda_itself(fake_env, fakes,
                                                 tmp_path):
    """A process that forks after cuInit leaves its children without
    CUDA: cuda="auto" traces from the program's own first CUDA call."""
    code = """
        with ap.Profiler() as idle:
            with ap.stage("cpu only"):
                pass
        idle = idle.report()
        trace = json.loads(idle.to_chrome_trace(os.environ["TRACE"])
                           .read_text())
        processes = [e["args"]["name"] for e in trace["traceEvents"]
                     if e.get("name") == "process_name"]
        inits_idle = cu.fake_cuda_inits()
        with ap.Profiler() as prof:
            cu.fake_cuda_program_starts()
            with ap.stage("gpu"):
                kernel("gpu")
        rep = prof.report()
        print(json.dumps([idle.gpu_status, inits_idle,
                          rep.gpu_status, rep["gpu"].cuda.kernels,
                          rep.gpu["devices"][0]["name"], processes]))
    """
    idle, inits, status, kernels, device, processes = run(
        code, fake_env, fakes, FAKE_CUDA_UNINITIALIZED="1",
        TRACE=str(tmp_path / "idle.json"))
    assert idle.startswith("tracing with CUPTI (")
    assert "from the program's first use of CUDA" in idle
    assert idle.endswith("; no GPU work: the program did not use CUDA")
    assert inits == 0
    # a traced run with no GPU work shows no device in its trace
    assert not any(p.startswith("GPU") for p in processes)
    assert kernels == 1 and device == "Fake GPU"
    assert "no GPU work" not in status


def test_cuda_true_initializes_cuda(fake_env, fakes):
    code = """
        p = ap.Profiler(cuda=True)
        p.start()
        p.stop()
        print(json.dumps([cu.fake_cuda_inits(), p.report().gpu_status]))
    """
    inits, status = run(code, fake_env, fakes, FAKE_CUDA_UNINITIALIZED="1")
    assert inits == 1 and status.startswith("tracing 1 device with CUPTI")


def test_stop_on_another_thread_waits_for_every_device(fake_env, fakes):
    """The stop waits for each device's work whatever thread launched it,
    with the GIL released: the program's other threads run meanwhile."""
    code = """
        import time
        ticks = [0]
        stop_ticking = threading.Event()
        def tick():
            while not stop_ticking.is_set():
                ticks[0] += 1
                time.sleep(0.001)
        prof = ap.Profiler()
        prof.start()
        with ap.stage("work"):
            kernel("work")
        ticker = threading.Thread(target=tick)
        ticker.start()
        stopper = threading.Thread(target=prof.stop)
        before = ticks[0]
        stopper.start()
        stopper.join()
        during = ticks[0] - before
        stop_ticking.set()
        ticker.join()
        print(json.dumps([cu.fake_cuda_device_syncs(0),
                          cu.fake_cuda_device_syncs(1), during,
                          prof.report()["work"].cuda.kernels]))
    """
    syncs0, syncs1, during, kernels = run(code, fake_env, fakes,
                                          FAKE_CUDA_DEVICES="2",
                                          FAKE_CUDA_SYNC_MS="150")
    assert syncs0 == 1 and syncs1 == 1 and kernels == 1
    assert during >= 20        # 300 ms of syncs, a tick a millisecond


def test_a_device_that_cannot_be_synchronized_is_said(fake_env, fakes):
    code = """
        rep = run("work")
        print(json.dumps(rep.gpu_status))
    """
    status = run(code, fake_env, fakes, FAKE_CUDA_SYNC_ERROR="700")
    assert status.endswith("; device 0 could not be synchronized at stop "
                           "(CUDA_ERROR_ILLEGAL_ADDRESS): its work still "
                           "in flight is missing")


@pytest.fixture(scope="module")
def cupti_12(tmp_path_factory):
    """A fake CUPTI that reports the API version of CUDA 12."""
    out = tmp_path_factory.mktemp("cupti12") / "libcupti.so.12"
    subprocess.run(["cc", "-shared", "-fPIC", "-std=c11", "-D_GNU_SOURCE",
                    "-DFAKE_CUPTI_BUILT_VERSION=120000", *cupti_flags(),
                    "-o", out, FAKES / "fake_cupti.c",
                    FAKES / "fake_cupti_records.c", "-pthread"], check=True)
    return out


# a run with no GPU work, for CUPTIs that are never traced with
NO_KERNELS = dedent(PRELUDE).replace("fake.fake_kernel", "(lambda *a: None)")
STATUS = """
rep = run("work")
print(json.dumps([rep.gpu_status, rep["work"].count]))
"""


def test_a_cupti_of_another_version_is_passed_over(fake_env, fakes,
                                                   cupti_12):
    status, count = scenario(NO_KERNELS + STATUS, fake_env,
                             [cupti_12, fakes / "libcupti.so"],
                             preload=False)
    assert status.startswith("tracing 1 device with CUPTI (")
    assert status.endswith(f"{fakes / 'libcupti.so'})") and count == 1


def test_no_second_cupti_beside_a_loaded_one_of_another_version(
        fake_env, fakes, cupti_12):
    code = NO_KERNELS + 'ctypes.CDLL(os.environ["CUPTI_12"])\n' + STATUS
    status, count = scenario(code, dict(fake_env, CUPTI_12=str(cupti_12)),
                             [fakes / "libcupti.so"], preload=False)
    assert status.startswith("not traced: the process already holds a "
                             "CUPTI that aquaprof cannot use")
    assert "has API version 120000" in status and count == 1

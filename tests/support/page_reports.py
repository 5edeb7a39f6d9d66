"""Reports for the tests of the HTML page (test_page.py, and in a browser
test_browser_page.py): one with every host section (threads, sampled
code, memory), one with traced GPU work through the fake CUPTI, and a
hand-written one with nothing but its stages."""
import textwrap
import threading

import crafted
import aquaprof as ap
from aquaprof import _core
from profiled import busy
from fake_gpu import scenario

STAGES = ["load", "load/parse", "train", "train/step", "decode"]
# the page's sections, in order, by their ids
SECTIONS = ["stages", "flamegraph", "timeline", "distributions", "memory",
            "gpu", "diagnosis"]


def full_report():
    """Stages on two threads, sampled code, host memory growing."""
    def worker():
        for _ in range(3):
            with ap.stage("decode"):
                busy(0.002)

    with ap.Profiler(sample=0.001) as prof:
        with ap.stage("load", items=8):
            busy(0.004)
            with ap.stage("parse"):
                kept = [bytearray(1 << 20) for _ in range(8)]
                busy(0.004)
        t = threading.Thread(target=worker)
        t.start()
        with ap.stage("train"):
            for i in range(12):
                with ap.stage("step"):
                    busy(0.0005 * (1 + i % 3))
        t.join()
    del kept
    return prof.report()


GPU_RUN = """
    H2D = 1
    with ap.Profiler() as prof:
        with ap.stage("load"):
            fake.fake_memcpy(H2D, 1 << 20, 100000, 0, 1)
            fake.fake_malloc(ctypes.c_int64(1 << 24))
        with ap.stage("compute"):
            for k in range(4):
                fake.fake_kernel(b"gemm", 1000, 20000, 1, 132, 256, 64, 0)
            fake.fake_memset(4096, 1000)
            fake.fake_sync(50000)
    rep = prof.report()
    rep.save(OUT + "/gpu.json")
    print(json.dumps(rep.gpu_status))
"""


def gpu_report(fakes, folder):
    """A run whose GPU work (a copy, kernels, a memset, a sync and an
    allocation) went through the fake CUPTI; None where aquaprof was
    built without cupti.h."""
    if not _core.HAVE_CUPTI:
        return None
    scenario(f"OUT = {str(folder)!r}\n" + textwrap.dedent(GPU_RUN),
             {"AQUAPROF_LIBCUDA": str(fakes / "libcuda.so")},
             [fakes / "libcupti.so"])
    return ap.Report.load(folder / "gpu.json")


def bare_report():
    """Two stages and nothing else: no spans, no memory samples, no
    GPU."""
    return ap.Report.from_dict(crafted.report([
        crafted.stage("a", count=3, ns=2000),
        crafted.stage("b", parent=0, depth=1, count=3, ns=1000)]))

"""The sampler keeps what a sampled frame was (its function, file and
first line), never the code object: a program that generates code (jobs
compiled from templates, exec'd notebooks cells) frees it while sampled,
and a code object freed and another allocated at its address are two
frames."""
import gc
import time
import weakref

import aquaprof as ap


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


JOB = """
DATA = {data!r}

def job_{n}(busy):
    busy(0.02)
    return len(DATA)
"""


def make_job(n):
    space = {}
    exec(compile(JOB.format(n=n, data=b"x" * 100_000), f"<job {n}>", "exec"),
         space)
    return space[f"job_{n}"]


def test_sampled_code_is_freed_while_the_profiler_runs():
    with ap.Profiler(sample=0.001, compensate=False) as prof:
        codes = []
        for n in range(20):
            job = make_job(n)
            with ap.stage("job"):
                assert job(busy) == 100_000
            codes.append(weakref.ref(job.__code__))
            del job
        gc.collect()
        # held before: every sampled job's code, its module's constants
        # with it
        alive = [c for c in codes if c() is not None]
        assert not alive, f"{len(alive)} of 20 sampled code objects kept"
    rep = prof.report()
    names = {f[0] for f in rep._data["samples"]["frames"]}
    assert {f"job_{n}" for n in range(20)} <= names
    assert rep["job"].hot()[0].function == "busy"

"""Real reports with planted samples: a Profiler run's report, its
to_dict() given a "samples" section written by hand (docs/sampling.md),
loaded back. The sampler's figures are known exactly, so every view and
share can be checked against numbers worked out by hand."""
import threading
import time

import numpy as np

import aquaprof as ap
from aquaprof.model import schema

MS = 1_000_000      # ns

#: code frames of the planted stacks: (function, file, line)
FRAMES = [
    ("<module>", "/app/main.py", 1),            # 0
    ("main", "/app/main.py", 10),               # 1
    ("run_decode", "/app/pipeline.py", 20),     # 2
    ("nms", "/app/postproc.py", 40),            # 3
    ("iou", "/app/postproc.py", 60),            # 4
    ("parse", "/app/pipeline.py", 80),          # 5
    ("idle", "/app/main.py", 90),               # 6
]


def profile_stages():
    """A real run: load, then decode (with a nested decode/nms), on the
    main thread, each part and the gaps between the stages long enough
    (4 ms) to plant samples in."""
    with ap.Profiler(compensate=False) as prof:
        with ap.stage("load"):
            time.sleep(0.004)
        time.sleep(0.004)
        with ap.stage("decode"):
            time.sleep(0.004)
            with ap.stage("nms"):
                time.sleep(0.004)
            time.sleep(0.004)
        time.sleep(0.004)
    return prof.report()


def section(report, stacks, frames=FRAMES, timeline=None,
            interval_ns=MS, **counts):
    """A samples section for `report`: stacks as (process, tid, stage path
    or None, frame indices, count, wall_ns, cpu_ns), or with (delay_ns,
    gil_ns, lock_ns) after them, timeline as
    (t_ns, stack index) pairs or (t_ns, stack index, cpu_us) triples,
    encoded as in a file (the CPU unknown where not given)."""
    paths = report.stage_names
    out = {"interval_ns": interval_ns,
           "rounds": counts.pop("rounds", sum(s[4] for s in stacks)),
           "late": counts.pop("late", 0), "lost": counts.pop("lost", 0),
           "frames": [list(f) for f in frames],
           "stacks": [[p, tid, -1 if stage is None else paths.index(stage),
                       list(chain), count, wall, cpu, *waits]
                      for p, tid, stage, chain, count, wall, cpu, *waits
                      in stacks]}
    out.update(counts)
    if timeline is not None:
        array = np.array([tuple(t) + (schema.CPU_UNKNOWN,) * (3 - len(t))
                          for t in timeline], dtype=schema.TIMELINE_DTYPE)
        out["timeline"] = schema.encode_array(array, schema.TIMELINE_DTYPE)
    return out


def with_samples(report, stacks, frames=FRAMES, timeline=None, **kw):
    """The report, loaded back with the planted samples section."""
    data = report.to_dict()
    data["samples"] = section(report, stacks, frames, timeline, **kw)
    return ap.Report.from_dict(data)


def main_tid(report):
    """The native id of this thread, which ran the report's profile."""
    tid = threading.get_native_id()
    assert tid in [t["native_id"] for t in report.threads]
    return tid


def span_of(report, path, nth=0):
    """(start_ns, end_ns) of the nth span of stage `path`."""
    spans = report.spans()
    mine = spans[spans["stage"] == report.stage_names.index(path)]
    return int(mine["start_ns"][nth]), int(mine["end_ns"][nth])


def other_thread_report():
    """A real run whose second thread records a stage: two threads."""
    def work():
        with ap.stage("worker"):
            time.sleep(0.004)

    with ap.Profiler(compensate=False) as prof:
        t = threading.Thread(target=work)
        t.start()
        t.join()
        with ap.stage("main"):
            time.sleep(0.002)
    return prof.report()

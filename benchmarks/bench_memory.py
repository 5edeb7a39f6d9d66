"""What a running profiler costs in memory and in idle CPU time, each case
in a fresh process:

    python benchmarks/bench_memory.py [--paths 100000] [--threads 4000]
                                      [--max-spans 1000000] [--sample S]
                                      [--request-ms MS]
                                      [--idle 5] [--limit-mib M]
                                      [--root DIR] [--only CASE ...]

- paths: one thread enters N distinct stage paths once each. Prints the
  RSS the recording added (bytes a path), the peak RSS of the whole run
  (report() included) and how the run ended (a report, or the error).
  The names are made before the first reading: Python's strings are not
  the profiler's. With --limit-mib the process runs under that
  address-space limit (RLIMIT_AS), to show what happens when memory runs
  out.
- threads: a new thread per "request", N of them one after the other,
  each entering two stages. Prints the RSS they added while recording
  (MiB, KiB a thread ever created; past the first 16,484 threads, where
  ended threads that kept no span fold, bytes a thread) and after
  report().
- idle: a running profiler (memory=True, the default) while the process
  sleeps, and with one stage held open, against no profiler at all:
  CPU time of the whole process over wall time, in % of one core.

--root runs the cases against the aquaprof tree at DIR (built in place),
so that two builds can be compared with one script. Targets: at most
about 1 KB a path; threads cost little once they exit; idle under 0.1 %
of a core.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, List

ROOT = Path(__file__).resolve().parent.parent

_COMMON = r"""
import json, os, resource, sys, time
import aquaprof as ap

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

def peak():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0

def quiet_profiler(**kw):
    return ap.Profiler(compensate=False, cuda=False, **kw)
"""

_PATHS = _COMMON + r"""
n, limit = int(sys.argv[1]), int(sys.argv[2])
names = [f"path-{i:07d}" for i in range(n)]
out = {"paths": n}
if limit:
    lim = limit << 20
    resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
prof = quiet_profiler()
prof.start()
with ap.stage(names[0]):    # warm-up: the thread's record, its first path
    pass
base = rss()
stage = ap.stage
where = "recording"
try:
    for name in names[1:]:
        with stage(name):
            pass
    out["recording_bytes"] = rss() - base
    where = "report()"
    prof.stop()
    rep = prof.report()
    out["stages"] = len(rep.stages)
    out["overflowed"] = rep.meta.get("stages_overflowed", 0)
    out["lost"] = rep.meta["lost"]
    out["spans_shed"] = rep.meta.get("spans_shed", 0)
    out["ended"] = "report"
except MemoryError:
    out["ended"] = f"MemoryError in {where}"
out["peak_bytes"] = peak()
print(json.dumps(out))
"""

_THREADS = _COMMON + r"""
import threading
n, max_spans, mark = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
sample = float(sys.argv[4]) or None
busy = float(sys.argv[5]) / 1000
def request():
    with ap.stage("request"):
        with ap.stage("parse"):
            end = time.perf_counter() + busy
            while time.perf_counter() < end:
                pass
prof = quiet_profiler(max_spans=max_spans, sample=sample)
prof.start()
for _ in range(8):          # warm-up: thread stacks, the span pool
    t = threading.Thread(target=request); t.start(); t.join()
base = rss()
at_mark = None
for i in range(n):
    if i == mark:
        at_mark = rss()
    t = threading.Thread(target=request)
    t.start()
    t.join()
end = rss()
prof.stop()
rep = prof.report()
print(json.dumps({
    "threads": n, "recording_bytes": end - base,
    "past_mark_bytes": None if at_mark is None else end - at_mark,
    "after_report_bytes": rss() - base,
    "requests": rep["request"].count, "report_threads": len(rep.threads),
    "folded": sum(t.get("folded", 0) for t in rep.threads),
}))
"""

_IDLE = _COMMON + r"""
seconds = float(sys.argv[1])

def cpu_share(seconds):
    c0, w0 = time.process_time(), time.monotonic()
    time.sleep(seconds)
    return (time.process_time() - c0) / (time.monotonic() - w0) * 100

time.sleep(1.0)             # numpy's thread pool may spin after import
out = {"seconds": seconds, "none": cpu_share(seconds)}
prof = quiet_profiler()
prof.start()
with ap.stage("warm-up"):
    pass
time.sleep(0.5)             # a sampler may settle after the last stage
out["idle"] = cpu_share(seconds)
with ap.stage("held open"):
    out["stage_open"] = cpu_share(seconds)
prof.stop()
print(json.dumps(out))
"""


#: ended threads kept whole before the core takes over their records
#: (csrc/core/session_internal.h, AP_KEPT_THREADS)
KEPT_THREADS = 16_384


def run_case(code: str, args: List[str], root: Path) -> Dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(root))
    proc = subprocess.run([sys.executable, "-c", code, *args], env=env,
                          cwd=str(root), capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"error": f"exit {proc.returncode}: {tail}"}
    return json.loads(lines[-1])


def mib(b: float) -> str:
    return f"{b / 2**20:,.1f} MiB"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--paths", type=int, default=100_000,
                   help="distinct paths (>= 2), the first one a warm-up")
    p.add_argument("--threads", type=int, default=4000)
    p.add_argument("--sample", type=float, default=0.0,
                   help="the threads case's sampling interval, s (0: off)")
    p.add_argument("--request-ms", type=float, default=0.0,
                   help="the threads case's computing a request, ms: long "
                        "enough for the sampler to see each thread")
    p.add_argument("--max-spans", type=int, default=1_000_000,
                   help="the threads case's max_spans: past it, and past "
                        "the first 16,384 threads, ended threads fold")
    p.add_argument("--idle", type=float, default=5.0,
                   help="seconds of each idle measurement")
    p.add_argument("--limit-mib", type=int, default=0,
                   help="address-space limit of the paths case, MiB")
    p.add_argument("--root", type=Path, default=ROOT)
    p.add_argument("--only", nargs="+", choices=["paths", "threads", "idle"],
                   default=["paths", "threads", "idle"])
    a = p.parse_args(argv)
    if a.paths < 2:
        p.error("--paths must be at least 2")
    print(f"aquaprof tree: {a.root.resolve()}; Python "
          f"{platform.python_version()}, {os.cpu_count()} CPUs")
    if "paths" in a.only:
        r = run_case(_PATHS, [str(a.paths), str(a.limit_mib)], a.root)
        limit = f", RLIMIT_AS {a.limit_mib:,} MiB" if a.limit_mib else ""
        print(f"paths: {a.paths:,} distinct stage paths{limit}")
        if "error" in r:
            print(f"  failed: {r['error']}")
        else:
            if "recording_bytes" in r:
                print(f"  recording: +{mib(r['recording_bytes'])}, "
                      f"{r['recording_bytes'] / (a.paths - 1):,.0f} bytes "
                      f"a path")
            print(f"  peak RSS of the run: {mib(r['peak_bytes'])}")
            print(f"  ended with: {r['ended']}")
            if r["ended"] == "report":
                print(f"  report: {r['stages']:,} stages, "
                      f"{r['overflowed']:,} entries over max_stages, "
                      f"{r['lost']:,} lost, {r['spans_shed']:,} spans "
                      f"shed")
    if "threads" in a.only:
        r = run_case(_THREADS, [str(a.threads), str(a.max_spans),
                                str(KEPT_THREADS + 100), str(a.sample),
                                str(a.request_ms)], a.root)
        sampled = f", sample={a.sample:g}" if a.sample else ""
        sampled += f", {a.request_ms:g} ms a request" if a.request_ms else ""
        print(f"threads: {a.threads:,} short-lived threads, one after "
              f"the other, max_spans={a.max_spans:,}{sampled}")
        if "error" in r:
            print(f"  failed: {r['error']}")
        else:
            print(f"  recording: +{mib(r['recording_bytes'])}, "
                  f"{r['recording_bytes'] / a.threads / 1024:,.1f} KiB "
                  f"a thread")
            past = a.threads - KEPT_THREADS - 100
            if r["past_mark_bytes"] is not None and past > 0:
                print(f"  past the first {KEPT_THREADS + 100:,}: "
                      f"+{mib(r['past_mark_bytes'])}, "
                      f"{r['past_mark_bytes'] / past:,.0f} bytes a thread")
            print(f"  after report(): +{mib(r['after_report_bytes'])}")
            print(f"  report: {r['requests']:,} requests on "
                  f"{r['report_threads']:,} rows, {r['folded']:,} ended "
                  f"threads folded into one")
    if "idle" in a.only:
        r = run_case(_IDLE, [str(a.idle)], a.root)
        print(f"idle: CPU of the process over {a.idle:g} s of sleep, % of "
              f"one core")
        if "error" in r:
            print(f"  failed: {r['error']}")
        else:
            print(f"  no profiler:                  {r['none']:.3f} %")
            print(f"  profiler running, no stage:   {r['idle']:.3f} %")
            print(f"  profiler running, stage open: {r['stage_open']:.3f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())

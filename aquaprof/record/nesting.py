"""The report of a Profiler nested in another.

The core records one session per process. A Profiler started while
another runs shares that one's session, which goes on recording
untouched: the inner one takes the session's figures when it starts
(``_core.Profiler.nest_base``) and when it stops (its ``report_data()``),
and its report is the difference, built here.

What an inner report holds:

- every call closed while it ran, on any thread, and the calls entered
  while it ran that are still open at its stop, closed there as stop()
  closes them (counted in ``unclosed``). A call entered before its start
  and still open at its stop is not in it; one entered before its start
  and closed while it ran is, whole (a standalone Profiler would ignore
  it);
- the paths it would record alone: the stages open, when it started, on
  the thread that started it come off the front of the paths below them
  (``run script.py/load`` is ``load``). Other threads' paths are kept
  whole, and so are the paths of those open stages themselves;
- the spans entered while it ran that the session kept.

The figures are those of the session, recorded under the outer's
settings (max_spans, memory, cpu_resolution, window, GPU tracing); the
run fields say so (``nested: true``, the outer's settings).

Per stage, against its figures at the inner's start:

- counts, totals, self and CPU time, items, raised, unclosed, memory
  deltas and the histogram subtract exactly;
- the mean is the total over the count; m2 is Chan's parallel merge run
  backwards, clamped to [0, n (max - min)^2 / 4], the most any n values
  within [min, max] allow;
- min and max are exact when the stage had no call before, when the run
  set a new extreme, or for a single call (its total); otherwise they
  are the bounds of the histogram bucket of the run's extreme call (at
  most 1/32 wide), within the stage's extremes so far, so they enclose
  the true ones;
- the memory peak is exact when the run set a new high, otherwise at
  most the highest RSS sampled while the inner ran.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import numpy as np

from .. import _core
from ..model.report import stage_paths

GPU_STATUS = ("not traced by this Profiler: it ran nested in another "
              "Profiler's session, whose report holds the GPU activity "
              "that one traced")
_SUMS = ("count", "raised", "unclosed", "total_ns", "self_ns", "cpu_ns",
         "items", "mem_delta")
_RUN_SETTINGS = ("clock", "pid", "max_spans", "memory",
                 "memory_interval_ns", "cpu_resolution_ns")


def subtract(end: Dict[str, Any], start: Optional[Dict[str, Any]],
             rss_peak: int = 0) -> Dict[str, Any]:
    """A stage's figures over the calls that closed between start and end
    (stage dicts of one session path), as the module docstring says;
    rss_peak bounds the memory peak (0: unknown)."""
    if start is None or start["count"] == 0:
        return dict(end)
    d = dict(end, **{k: end[k] - start[k] for k in _SUMS})
    if "proc_cpu_ns" in end:
        d["proc_cpu_ns"] = end["proc_cpu_ns"] - start.get("proc_cpu_ns", 0)
    before = dict(start["hist"])
    hist = [(b, n - before.get(b, 0)) for b, n in end["hist"]]
    d["hist"] = [(b, n) for b, n in hist if n > 0]
    n = d["count"]
    if n == 0:
        return dict(d, min_ns=0, max_ns=0, mean_ns=0.0, m2=0.0, mem_peak=0,
                    mem_rise=0)
    d["mean_ns"] = d["total_ns"] / n
    d["min_ns"], d["max_ns"] = _extremes(end, start, d)
    delta = d["mean_ns"] - start["mean_ns"]
    m2 = end["m2"] - start["m2"] - delta * delta * start["count"] * n / \
        end["count"]
    spread = d["max_ns"] - d["min_ns"]
    d["m2"] = min(max(m2, 0.0), n * spread * spread / 4) if n > 1 else 0.0
    if end["mem_peak"] <= start["mem_peak"] and rss_peak:
        d["mem_peak"] = min(end["mem_peak"], rss_peak)
    if end.get("mem_rise", 0) <= start.get("mem_rise", 0):
        # a rise no call between start and end is shown to have made
        d["mem_rise"] = 0
    return d


def _extremes(end: Dict[str, Any], start: Dict[str, Any],
              d: Dict[str, Any]) -> Tuple[int, int]:
    if d["count"] == 1:
        return d["total_ns"], d["total_ns"]
    lower = _core.HIST_LOWER_NS
    buckets = [b for b, _ in d["hist"]]
    low = end["min_ns"] if end["min_ns"] < start["min_ns"] else max(
        end["min_ns"], int(lower[min(buckets)]))
    high = end["max_ns"] if end["max_ns"] > start["max_ns"] else min(
        end["max_ns"], int(lower[max(buckets) + 1]) - 1)
    return low, max(low, high)


def _reroot(path: str, prefix: Optional[str]) -> str:
    if prefix and path.startswith(prefix + "/"):
        return path[len(prefix) + 1:]
    return path


def nested_data(base: Dict[str, Any], end: Dict[str, Any]) -> Dict[str, Any]:
    """An inner Profiler's report data from the session's figures at its
    start (base) and at its stop (end), as _core gives them."""
    paths = stage_paths(end["stages"])
    before = dict(zip(stage_paths(base["stages"]), base["stages"]))
    caller = base["caller_stage"]
    prefix = stage_paths(base["stages"])[caller] if caller >= 0 else None
    rss_peak = end["rss_peak"] if end["memory"] else 0
    # by path in the inner's terms, merging what re-rooting brings together
    table: Dict[str, Dict[str, Any]] = {}
    order: List[str] = []
    remap = []
    for path, stage in zip(paths, end["stages"]):
        d = subtract(stage, before.get(path), rss_peak)
        mine = _reroot(path, prefix)
        if mine in table:
            table[mine] = _core.merge_stage(table[mine], d)
        else:
            table[mine] = d
            order.append(mine)
        remap.append(mine)
    kept = _with_calls(order, table)
    index = {p: i for i, p in enumerate(kept)}
    stages = []
    for p in kept:
        parent = p.rpartition("/")[0]
        stages.append(dict(table[p], name=p.rpartition("/")[2],
                           parent=index[parent] if parent else -1,
                           depth=p.count("/")))
    spans, threads = _spans_and_threads(base, end, np.array(
        [index.get(p, -1) for p in remap], dtype=np.int64))
    data = {k: end[k] for k in _RUN_SETTINGS}
    data.update(
        start_ns=end["since_ns"], stop_ns=end["stop_ns"],
        spans_dropped=end["spans_dropped"] - base["spans_dropped"],
        unclosed=end["unclosed"], lost=end["lost"] - base["lost"],
        stages=stages, threads=threads, spans=spans, nested=True,
        gpu_status=GPU_STATUS)
    if end["memory"]:
        data["memory_samples"] = [[end["since_ns"],
                                   base["memory_samples"][-1][1]],
                                  list(end["memory_samples"][-1])]
    return data


def _with_calls(order: List[str], table: Dict[str, Dict[str, Any]]) \
        -> List[str]:
    """The paths with calls in the inner's run, and those above them,
    parents first."""
    alive = set()
    for p in reversed(order):
        if table[p]["count"] > 0 or p in alive:
            alive.add(p)
            parent = p.rpartition("/")[0]
            if parent:
                alive.add(parent)
    return [p for p in order if p in alive]


_NO_ROW = {"dropped": 0, "cpu_reads": 0, "folded": 0}


def _rows_before(base: Dict[str, Any], end: Dict[str, Any]
                 ) -> Dict[int, Dict[str, int]]:
    """Each row's figures at the mark, by index. A row whose index an
    ended thread gave to a new one since (the core takes such records
    over past the first 16,384 threads; their serials differ) starts
    from nothing, and the folded row that took the ended thread's
    figures starts from them too. It counts that thread where it was
    still running at the mark, not where it had ended before."""
    before = {t["index"]: {k: t.get(k, 0) for k in _NO_ROW}
              for t in base["threads"]}
    was_serial, was_ended = base["thread_serials"], base["thread_ended"]
    fold = next((t["index"] for t in end["threads"] if t.get("folded")),
                None)
    for t, serial in zip(end["threads"], end["thread_serials"]):
        i = t["index"]
        if i >= len(was_serial) or was_serial[i] == serial:
            continue
        was = before.pop(i)
        if fold is not None:
            into = before.setdefault(fold, dict(_NO_ROW))
            into["dropped"] += was["dropped"]
            into["cpu_reads"] += was["cpu_reads"]
            into["folded"] += was_ended[i]
    return before


def _spans_and_threads(base: Dict[str, Any], end: Dict[str, Any],
                       stage_of: np.ndarray) -> Tuple[np.ndarray, List[Any]]:
    """The spans entered in the inner's run, their stages and threads
    renumbered, and the threads that entered a stage in it."""
    before = _rows_before(base, end)
    threads: List[Dict[str, Any]] = []
    thread_of = np.zeros(max(len(end["threads"]), 1), dtype=np.int64)
    for t in end["threads"]:
        was = before.get(t["index"], _NO_ROW)
        dropped = t["dropped"] - was["dropped"]
        folded = t.get("folded", 0) - was["folded"]
        if t["spans"] or dropped or folded:
            thread_of[t["index"]] = len(threads)
            threads.append(dict(t, index=len(threads), dropped=dropped,
                                cpu_reads=t["cpu_reads"] - was["cpu_reads"]))
            threads[-1].pop("folded", None)
            if folded:
                threads[-1]["folded"] = folded
    spans = end["spans"].copy()
    if len(spans):
        spans["stage"] = stage_of[spans["stage"]]
        spans["thread"] = thread_of[spans["thread"]]
    spans.flags.writeable = False
    return spans, threads

"""Chrome Trace Event JSON of a Report, for Perfetto (ui.perfetto.dev) and
chrome://tracing: a process per profiled process (a rank, after merge), a
track per thread, stages as complete ("X") events with their arguments, and
where asyncio tasks interleaved on a thread a track per concurrent task
("lane") beside the thread's, so that every track nests properly; and
host memory as a counter track where the report has samples. GPU events,
where the run traced them, go on a process per device with a track per
stream (and one for host waits on the device), each tied to the span that
launched it by a flow arrow; device memory is a counter there. Where the
run was sampled with a timeline, code frames (``function (file.py:line)``,
category "code") nest in their stage's slices (views/code.py).

Large traces stay usable: past ``max_events`` spans the shortest are left
out (a kept span's parent is never shorter, so nesting holds), and the
trace says how many in its metadata and in an instant event at the start;
so are code slices past ``max_events``, and those of a span left out.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, Iterator, List, Tuple, Union

import numpy as np

from ..common.checks import whole
from .. import _core
from ..common.atomic import write_atomic
from ..common.progress import progress
from ..common.words import shorten_path
from ..model.schema import COPY_NAMES, KERNEL, MEMCPY, MEMSET, SYNC
from ..analysis.gpu_stats import events_dropped
from ..analysis.sampled_code import CodeSlice, labels, longest, slices
from .lanes import longest_spans, task_lanes, untimed_samples
from .threads import idle_threads, sampled_label, sampled_names, \
    thread_label

if TYPE_CHECKING:
    from ..model.report import Report

MAX_EVENTS = 1_000_000
_US = 1e-3      # trace timestamps are microseconds


def chrome_trace(report: "Report", max_events: int = MAX_EVENTS) -> str:
    """The trace as JSON text."""
    return "".join(chrome_trace_parts(report, max_events))


def chrome_trace_parts(report: "Report", max_events: int = MAX_EVENTS
                       ) -> Iterator[str]:
    """The trace as JSON text, in parts: the spans a block at a time, so
    that a trace of a million spans is written without holding all its
    text, and a Python object for every span, at once (700 MB for 1 M
    spans before)."""
    if not whole(max_events, 0):
        raise ValueError(f"max_events must be an int >= 0, got "
                         f"{max_events!r}")
    spans = report.spans()
    origin = report.meta["start_ns"]
    processes = report.processes
    pids = [p["pid"] for p in processes]
    if len(set(pids)) < len(pids):      # e.g. the same pid on two hosts
        pids = list(range(1, len(processes) + 1))
    threads = report.threads
    tids = [t["native_id"] for t in threads]
    tpids = [pids[t.get("process", 0)] for t in threads]
    events = _track_names(processes, threads, pids)
    kept, left_out = longest_spans(spans, max_events)
    span_tids = _lane_tids(spans, kept, tids)
    events += _lane_names(spans, kept, span_tids, tids, tpids,
                          [thread_label(t) for t in threads])
    gpu_text, gpu_left_out = _gpu_events(report, origin, kept, tpids,
                                         span_tids, max_events)
    code_text, code_left_out = _code_events(report, kept, pids, span_tids,
                                            origin, max_events)
    for p, proc in enumerate(processes):
        for t_ns, rss in proc.get("memory_samples", []):
            events.append({"ph": "C", "name": "host memory", "pid": pids[p],
                           "ts": (t_ns - origin) * _US,
                           "args": {"RSS MiB": round(rss / 2**20, 3)}})
    dropped = report.spans_dropped
    untimed, untimed_said = untimed_samples(report)
    if left_out or dropped:
        events.append(_said(
            pids, f"{left_out} shortest spans left out of this trace "
            f"(max_events={max_events}), {dropped} beyond max_spans never "
            f"recorded; the report's aggregates count them all"))
    gpu = report.gpu
    gpu_lost = 0 if gpu is None else sum(events_dropped(gpu))
    if gpu_left_out or gpu_lost:
        events.append(_said(
            pids, f"{gpu_left_out} shortest GPU events left out of this "
            f"trace (max_events={max_events}), {gpu_lost} dropped while "
            f"recording (max_gpu_events, or lost by CUPTI)"))
    if untimed:
        # later code is in the flamegraph (its samples' stacks), not in
        # time here
        events.append(_said(pids, f"{untimed_said}; the flamegraph counts "
                                  f"them"))
    other = {"producer": "aquaprof", "spans_in_report": int(len(spans)),
             "spans_left_out": int(left_out),
             "spans_never_recorded": int(dropped), "max_events": max_events}
    if gpu is not None:
        other["gpu_events_left_out"] = gpu_left_out
        other["gpu_events_never_recorded"] = gpu_lost
    if report.samples is not None:
        other["code_slices_left_out"] = code_left_out
        other["code_samples_untimed"] = untimed
    yield '{"traceEvents":['
    yield ",".join([json.dumps(e, separators=(",", ":")) for e in events])
    del events
    for block in _span_events(report, kept, tpids, span_tids, origin):
        yield ","
        yield block
    for text in (code_text, gpu_text):
        if text:
            yield ","
            yield ",".join(text)
    yield '],"displayTimeUnit":"ms","otherData":'
    yield json.dumps(other, separators=(",", ":"))
    yield "}"


def _said(pids: List[int], text: str) -> Dict[str, Any]:
    """An instant event at the trace's start that says what it lacks."""
    return {"ph": "i", "s": "g", "name": f"aquaprof: {text}",
            "pid": pids[0], "tid": 0, "ts": 0.0}


def _track_names(processes: List[Dict[str, Any]],
                 threads: List[Dict[str, Any]],
                 pids: List[int]) -> List[Dict[str, Any]]:
    """Metadata events naming and ordering each process and thread."""
    events: List[Dict[str, Any]] = []
    for p, proc in enumerate(processes):
        events.append({"ph": "M", "name": "process_name", "pid": pids[p],
                       "args": {"name": proc["label"]}})
        events.append({"ph": "M", "name": "process_sort_index",
                       "pid": pids[p], "args": {"sort_index": p}})
    for t in threads:
        if t.get("folded"):
            continue        # no thread, and no span: no track
        pid = pids[t.get("process", 0)]
        events.append({"ph": "M", "name": "thread_name", "pid": pid,
                       "tid": t["native_id"],
                       "args": {"name": thread_label(t)}})
    return events


_LANE_TID = 1 << 40     # + thread tid * 4096 + lane: clear of real tids


def _lane_tids(spans: np.ndarray, kept: np.ndarray,
               tids: List[int]) -> np.ndarray:
    """The track (tid) of each kept span, by span (-1 for the others): its
    thread's, or for a span on another lane of its thread (lanes.py) a
    tid of that lane's. An array: a dict of a million spans is 100 MB."""
    thread_tids = np.asarray(tids, np.int64)[spans["thread"][kept]]
    lanes = task_lanes(spans, kept)
    track = np.full(len(spans), -1, np.int64)
    track[kept] = np.where(lanes > 0,
                           _LANE_TID + thread_tids * 4096 + lanes,
                           thread_tids)
    return track


def _lane_names(spans: np.ndarray, kept: np.ndarray,
                span_tids: np.ndarray, tids: List[int],
                tpids: List[int], titles: List[str]) -> List[Dict[str, Any]]:
    """Metadata naming each extra lane after its thread."""
    events = []
    lanes = kept[span_tids[kept] >= _LANE_TID]
    for k, tid in sorted(set(zip(spans["thread"][lanes].tolist(),
                                 span_tids[lanes].tolist()))):
        lane = (tid - _LANE_TID) % 4096
        events.append({"ph": "M", "name": "thread_name", "pid": tpids[k],
                       "tid": tid,
                       "args": {"name": f"{titles[k]}, task lane {lane}"}})
        events.append({"ph": "M", "name": "thread_sort_index",
                       "pid": tpids[k], "tid": tid,
                       "args": {"sort_index": tids[k] + lane}})
    return events


#: spans written a block at a time
_BLOCK = 16384
#: the most characters of a span's path in its args: a path grows with
#: its depth, and each of a recursive stage's spans repeating it made the
#: trace its depth squared
PATH_CHARS = 160


def _arg_path(path: str) -> str:
    """A span's path for its args: whole, or past PATH_CHARS cut in the
    middle (its last stage kept) with its depth."""
    if len(path) <= PATH_CHARS:
        return path
    return f"{shorten_path(path, PATH_CHARS)} (depth {path.count('/')})"


def _span_events(report: "Report", kept: np.ndarray, tpids: List[int],
                 span_tids: np.ndarray, origin: int) -> Iterator[str]:
    """The kept spans as complete events, written as JSON text directly
    (a dict per span costs 10x), a block of _BLOCK of them a text."""
    names = report.stage_names
    leaf = [json.dumps(n.rsplit("/", 1)[-1]) for n in names]
    paths = [json.dumps(_arg_path(n)) for n in names]
    spans = report.spans()
    raised, unclosed = _core.SPAN_RAISED, _core.SPAN_UNCLOSED
    suspended = _core.SPAN_SUSPENDED
    blocks = range(0, len(kept), _BLOCK)
    for lo in progress(blocks, "trace", every=max(1, 100_000 // _BLOCK)):
        part = kept[lo:lo + _BLOCK]
        rows = zip(span_tids[part].tolist(), *[
            spans[k][part].tolist() for k in (
                "stage", "thread", "start_ns", "end_ns", "cpu_ns", "items",
                "flags")])
        text = []
        for tid, stage, thread, begin, end, cpu, items, flags in rows:
            extra = (f',"items":{items}' if items else "") + \
                (',"raised":true' if flags & raised else "") + \
                (',"unclosed":true' if flags & unclosed else "") + \
                (',"suspended":true' if flags & suspended else "")
            text.append(
                f'{{"ph":"X","cat":"stage","name":{leaf[stage]},'
                f'"pid":{tpids[thread]},"tid":{tid},'
                f'"ts":{(begin - origin) / 1000:.3f},'
                f'"dur":{(end - begin) / 1000:.3f},'
                f'"args":{{"path":{paths[stage]},"cpu_ms":{cpu / 1e6:.6f}'
                f'{extra}}}}}')
        yield ",".join(text)


def _code_events(report: "Report", kept: np.ndarray, pids: List[int],
                 span_tids: np.ndarray, origin: int, max_events: int
                 ) -> Tuple[List[str], int]:
    """The timeline's code slices as complete events (JSON texts) on
    their span's track, or outside any stage their thread's, named where
    that thread recorded no span; and how many were left out: past
    max_events the shortest, and those of a span left out."""
    cuts = slices(report)
    samples = report.samples
    if not cuts or samples is None:
        return [], 0
    spans = report.spans()
    shown = np.zeros(len(spans), bool)
    shown[kept] = True
    shown_cuts = [c for c in longest(cuts, max_events)
                  if c.span < 0 or shown[c.span]]
    names = [json.dumps(n) for n in labels(samples)]
    files = [json.dumps(f[1]) for f in samples["frames"]]
    out = [json.dumps(e, separators=(",", ":"))
           for e in _sampled_threads(report, shown_cuts, pids)]
    # the stage is the slice around: repeating its path in every code
    # slice would make a long run's trace many times its report
    for c in shown_cuts:
        tid = int(span_tids[c.span]) if c.span >= 0 else c.tid
        out.append(
            f'{{"ph":"X","cat":"code","name":{names[c.frame]},'
            f'"pid":{pids[c.process]},"tid":{tid},'
            f'"ts":{(c.start_ns - origin) / 1000:.3f},'
            f'"dur":{(c.end_ns - c.start_ns) / 1000:.3f},'
            f'"args":{{"file":{files[c.frame]},'
            f'"line":{samples["frames"][c.frame][2]}}}}}')
    return out, len(cuts) - len(shown_cuts)


def _sampled_threads(report: "Report", cuts: List[CodeSlice],
                     pids: List[int]) -> List[Dict[str, Any]]:
    """Track names for the threads sampled that recorded no span, ending
    in ", idle" for those the flamegraph folds with the idle threads."""
    known = {(t.get("process", 0), t["native_id"]) for t in report.threads}
    names = sampled_names(report)
    idle = idle_threads(report)
    return [{"ph": "M", "name": "thread_name", "pid": pids[process],
             "tid": tid, "args": {
                 "name": f"{sampled_label(names, (process, tid))}, "
                         f"sampled code"
                         + (", idle" if (process, tid) in idle else "")}}
            for process, tid in sorted({(c.process, c.tid) for c in cuts}
                                       - known)]


GPU_PID = 0x7FFF0000        # + device: clear of real process ids
_GPU_CATEGORY = {KERNEL: "kernel", MEMCPY: "memcpy", MEMSET: "memset",
                 SYNC: "sync"}


def _gpu_events(report: "Report", origin: int, kept: np.ndarray,
                tpids: List[int], span_tids: np.ndarray, max_events: int
                ) -> Tuple[List[str], int]:
    """The GPU section's events as JSON texts (the longest max_events),
    and how many were left out."""
    gpu = report.gpu
    # traced, but the program launched nothing: no device to show
    if gpu is None or not len(gpu["events"]):
        return [], 0
    ev = gpu["events"]
    names, paths = gpu["kernel_names"], report.stage_names
    spans = report.spans()
    out: List[Dict[str, Any]] = []
    for d, device in enumerate(gpu["devices"] or [{"name": "GPU"}]):
        out.append({"ph": "M", "name": "process_name", "pid": GPU_PID + d,
                    "args": {"name": f"GPU {d}: {device['name']}"}})
    for d, stream in sorted({(int(e["device"]), int(e["stream"]))
                             for e in ev[ev["kind"] != SYNC]}):
        out.append({"ph": "M", "name": "thread_name", "pid": GPU_PID + d,
                    "tid": stream, "args": {"name": f"stream {stream}"}})
    timed = np.flatnonzero(np.isin(ev["kind"], list(_GPU_CATEGORY)))
    left_out = max(0, len(timed) - max_events)
    if left_out:
        duration = ev["end_ns"][timed] - ev["start_ns"][timed]
        timed = np.sort(timed[np.argsort(-duration, kind="stable")
                              [:max_events]])
    shown = np.zeros(len(spans), bool)
    shown[kept] = True
    for i in timed.tolist():
        e = ev[i]
        kind, stage, span = int(e["kind"]), int(e["stage"]), int(e["span"])
        args: Dict[str, Any] = {"stage": paths[stage] if stage >= 0
                                else None}
        if kind == KERNEL:
            name = names[int(e["name"])]
            args.update(grid=e["grid"].tolist(), block=e["block"].tolist(),
                        registers=int(e["registers"]),
                        shared=int(e["shared"]))
        elif kind == MEMCPY:
            name = f"memcpy {COPY_NAMES[int(e['copy'])]}"
            args.update(bytes=int(e["bytes"]), pinned=bool(e["pinned"]))
        else:
            name = _GPU_CATEGORY[kind]
            args["bytes"] = int(e["bytes"])
        pid = GPU_PID + int(e["device"])
        tid = -1 if kind == SYNC else int(e["stream"])
        ts = (int(e["start_ns"]) - origin) * _US
        out.append({"ph": "X", "cat": _GPU_CATEGORY[kind], "name": name,
                    "pid": pid, "tid": tid, "ts": ts,
                    "dur": (int(e["end_ns"]) - int(e["start_ns"])) * _US,
                    "args": args})
        if span >= 0 and shown[span] and kind != SYNC:
            host = spans[span]
            out.append({"ph": "s", "cat": "launch", "name": "launch",
                        "id": i, "pid": tpids[int(host["thread"])],
                        "tid": int(span_tids[span]),
                        "ts": (int(host["start_ns"]) - origin) * _US})
            out.append({"ph": "f", "bp": "e", "cat": "launch",
                        "name": "launch", "id": i, "pid": pid, "tid": tid,
                        "ts": ts})
    if (ev["kind"] == SYNC).any():
        for d in range(max(len(gpu["devices"]), 1)):
            out.append({"ph": "M", "name": "thread_name",
                        "pid": GPU_PID + d, "tid": -1,
                        "args": {"name": "host waits on the device"}})
    memory, in_use = report.gpu_memory()
    for e, total in zip(memory, in_use.tolist()):
        out.append({"ph": "C", "name": "GPU memory",
                    "pid": GPU_PID + int(e["device"]),
                    "ts": (int(e["start_ns"]) - origin) * _US,
                    "args": {"allocated MiB": round(total / 2**20, 3)}})
    return [json.dumps(e, separators=(",", ":")) for e in out], left_out


def write_chrome_trace(report: "Report", path: Union[str, os.PathLike],
                       max_events: int = MAX_EVENTS) -> Path:
    return write_atomic(path, (part.encode("utf-8") for part in
                               chrome_trace_parts(report, max_events)))

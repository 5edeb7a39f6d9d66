"""Reports of several processes (torch.distributed ranks, data-loader
workers, a fleet of jobs) as one: stages merged by path with exact
aggregates, raw spans and threads kept per process, so that the trace has
a process track per report.

Timelines: processes on one host share CLOCK_MONOTONIC and keep their
times. Reports from different hosts are aligned on the wall-clock time at
which each profiler started (``host.started_at``), as good as the hosts'
clock synchronisation.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

import numpy as np

from ..schema import KERNEL
from ..report import Report


def _merge_stage(into: Dict[str, Any], s: Dict[str, Any]) -> None:
    """Adds the aggregates of s into `into` (Chan's parallel variance)."""
    if s["count"] == 0:
        return
    n_a, n_b = into["count"], s["count"]
    if n_a == 0:
        into.update({k: v for k, v in s.items() if k not in ("name",
                                                             "parent")})
        into["hist"] = list(s["hist"])
        return
    n = n_a + n_b
    delta = s["mean_ns"] - into["mean_ns"]
    into["mean_ns"] += delta * n_b / n
    into["m2"] += s["m2"] + delta * delta * n_a * n_b / n
    into["count"] = n
    for key in ("raised", "unclosed", "total_ns", "self_ns", "cpu_ns",
                "items", "mem_delta"):
        into[key] += s[key]
    into["min_ns"] = min(into["min_ns"], s["min_ns"])
    into["max_ns"] = max(into["max_ns"], s["max_ns"])
    into["mem_peak"] = max(into["mem_peak"], s["mem_peak"])
    buckets: Dict[int, int] = dict(into["hist"])
    for index, count in s["hist"]:
        buckets[index] = buckets.get(index, 0) + count
    into["hist"] = sorted(buckets.items())


def _offsets(datas: Sequence[Dict[str, Any]]) -> List[int]:
    """ns to add to each report's times to put it on the first's clock."""
    hosts = {d.get("host", {}).get("hostname") for d in datas}
    if len(hosts) == 1 and None not in hosts:
        return [0] * len(datas)
    first = datas[0]
    offsets = []
    for d in datas:
        started = d.get("host", {}).get("started_at")
        base = first.get("host", {}).get("started_at")
        if started is None or base is None:
            offsets.append(first["start_ns"] - d["start_ns"])
        else:
            offsets.append(round((started - base) * 1e9)
                           + first["start_ns"] - d["start_ns"])
    return offsets


def merge_reports(reports: Sequence[Report],
                  labels: Optional[Sequence[str]] = None) -> Report:
    """One Report holding every process of `reports`; `labels` name the
    process tracks (default "rank 0", "rank 1", ...)."""
    reports = list(reports)
    if not reports or not all(isinstance(r, Report) for r in reports):
        raise ValueError("merge needs one or more aquaprof Reports")
    if labels is None:
        labels = [f"rank {i}" for i in range(len(reports))]
    if len(labels) != len(reports):
        raise ValueError(f"{len(labels)} labels for {len(reports)} reports")
    datas = [r.to_dict() for r in reports]     # plain copies, spans aside
    offsets = _offsets(datas)
    stages: List[Dict[str, Any]] = []
    index: Dict[str, int] = {}
    processes: List[Dict[str, Any]] = []
    threads: List[Dict[str, Any]] = []
    span_parts: List[np.ndarray] = []
    gpu_parts: List[np.ndarray] = []
    kernel_index: Dict[str, int] = {}
    devices: List[Dict[str, Any]] = []
    spans_before = 0
    for p, (report, data, offset) in enumerate(zip(reports, datas, offsets)):
        remap = []
        for path, s in zip(report.stage_names, data["stages"]):
            if path not in index:
                parent = path.rsplit("/", 1)[0] if "/" in path else None
                index[path] = len(stages)
                stages.append(dict(
                    s, parent=index[parent] if parent else -1, count=0,
                    hist=[]))
            _merge_stage(stages[index[path]], s)
            remap.append(index[path])
        processes.append({
            "pid": data["pid"], "label": str(labels[p]),
            "host": data.get("host", {}),
            "memory_samples": [[t + offset, rss] for t, rss in
                               report.processes[0].get("memory_samples",
                                                       [])]})
        thread_base = len(threads)
        threads += [dict(t, index=thread_base + t["index"], process=p)
                    for t in data["threads"]]
        spans = report.spans().copy()
        if len(spans):
            spans["stage"] = np.asarray(remap, np.int32)[spans["stage"]]
            spans["thread"] += thread_base
            spans["parent"] = np.where(spans["parent"] >= 0,
                                       spans["parent"] + spans_before, -1)
            spans["start_ns"] += offset
            spans["end_ns"] += offset
        span_parts.append(spans)
        events = report.gpu_events()
        names = [kernel_index.setdefault(n, len(kernel_index))
                 for n in (report.gpu or {}).get("kernel_names", [])]
        if events is not None and len(events):
            # each process's devices and kernel names follow the others'
            events = events.copy()
            remap_stage = np.asarray(remap + [-1], np.int32)
            events["stage"] = remap_stage[events["stage"]]
            events["span"] = np.where(events["span"] >= 0,
                                      events["span"] + spans_before, -1)
            events["start_ns"] += offset
            events["end_ns"] += offset
            kernel = events["kind"] == KERNEL
            events["name"][kernel] = np.asarray(names, np.uint32)[
                events["name"][kernel]]
            events["device"] += len(devices)
            gpu_parts.append(events)
        if report.gpu is not None:
            devices += [dict(d, name=f"{d['name']} ({labels[p]})")
                        for d in report.gpu["devices"]]
        spans_before += len(spans)
    first = datas[0]
    merged = {
        "start_ns": min(d["start_ns"] + o for d, o in zip(datas, offsets)),
        "stop_ns": max(d["stop_ns"] + o for d, o in zip(datas, offsets)),
        "clock": first["clock"] if len({d["clock"] for d in datas}) == 1
        else "mixed",
        "pid": first["pid"],
        "max_spans": sum(d["max_spans"] for d in datas),
        "memory": all(d["memory"] for d in datas),
        "memory_interval_ns": first["memory_interval_ns"],
        "cpu_resolution_ns": max(d["cpu_resolution_ns"] for d in datas),
        "spans_dropped": sum(d["spans_dropped"] for d in datas),
        "unclosed": sum(d["unclosed"] for d in datas),
        "lost": sum(d["lost"] for d in datas),
        "stages": stages,
        "threads": threads,
        "spans": np.concatenate(span_parts),
        "host": dict(first.get("host", {}), merged=len(reports)),
        "processes": processes,
        "gpu_status": "; ".join(f"{label}: {r.gpu_status}"
                                for label, r in zip(labels, reports)),
    }
    gpus = [r.gpu for r in reports if r.gpu is not None]
    if gpus:
        merged["gpu"] = {
            "events": np.concatenate(gpu_parts) if gpu_parts
            else gpus[0]["events"][:0],
            "kernel_names": list(kernel_index), "devices": devices,
            "dropped": sum(g["dropped"] for g in gpus),
            "unattributed": sum(g["unattributed"] for g in gpus)}
    return Report(merged)

"""Reports of several processes (torch.distributed ranks, data-loader
workers, a fleet of jobs) as one: stages merged by path with exact
aggregates, raw spans and threads kept per process, so that the trace has
a process track per report, and each process's own count, total, self and
CPU time per stage kept in its entry (``processes[i]["stages"]``), so
that per-process figures survive dropped spans. Sampled call stacks are
kept too: their code frames deduplicated, each stack's process and stage
moved like its thread's and spans', its timeline on the merged clock.

Calibration (the profiler's cost of a stage pair, aquaprof.analysis.
overhead): the merged report keeps the one its inputs share, so that its
compensated times and cost line are theirs. Processes calibrated apart
(other machines, other runs) measured slightly different figures: the
merged report holds each figure's mean weighted by each process's stage
calls, so that the cost line adds up what each process paid; the calls
of the torch hooks that no stage counts are added up. An input without a
calibration is compensated with the others', as a DataLoader worker's
report is with its parent's.

Timelines: processes on one host share CLOCK_MONOTONIC and keep their
times. Reports from different hosts are aligned on the wall-clock time at
which each profiler started (``host.started_at``), as good as the hosts'
clock synchronisation.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import _core
from ..model.report import Report, process_cpu_ns
from ..model.schema import KERNEL, OVERHEAD_OPTIONAL, TIMELINE_DTYPE
from .clocks import shared_clock


def _offsets(datas: Sequence[Dict[str, Any]]) -> List[int]:
    """ns to add to each report's times to put it on the first's clock."""
    if shared_clock([d.get("host", {}) for d in datas]):
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


def merged_data(reports: Sequence[Report],
                labels: Optional[Sequence[str]] = None) -> Dict[str, Any]:
    """The data of one report of several processes (aquaprof.merge):
    stages merged by path, spans and threads kept per process."""
    reports = list(reports)
    if not reports or not all(isinstance(r, Report) for r in reports):
        raise ValueError("merge needs one or more aquaprof Reports")
    if labels is None:
        labels = [f"rank {i}" for i in range(len(reports))]
    if len(labels) != len(reports):
        raise ValueError(f"{len(labels)} labels for {len(reports)} reports")
    datas = [r.to_dict() for r in reports]     # plain copies, spans aside
    offsets = _offsets(datas)
    merger = _Merger()
    for report, data, offset, label in zip(reports, datas, offsets, labels):
        merger.add(report, data, offset, str(label))
    merged = _run_fields(datas, offsets)
    merged.update(
        stages=merger.stages, threads=merger.threads,
        spans=np.concatenate(merger.span_parts),
        # the runs in it: those of reports that were merges themselves too
        host=dict(datas[0].get("host", {}), merged=sum(
            d.get("host", {}).get("merged", 1) for d in datas)),
        processes=merger.processes,
        gpu_status="; ".join(f"{label}: {r.gpu_status}"
                             for label, r in zip(labels, reports)))
    if merger.children is not None:
        merged["children"] = merger.children
    overhead = _calibration(reports)
    if overhead is not None:
        merged["overhead"] = overhead
    samples = merger.samples.section()
    if samples is not None:
        merged["samples"] = samples
    gpus = [r.gpu for r in reports if r.gpu is not None]
    if gpus:
        merged["gpu"] = {
            "events": np.concatenate(merger.gpu_parts) if merger.gpu_parts
            else gpus[0]["events"][:0],
            "kernel_names": list(merger.kernel_index),
            "devices": merger.devices,
            "max_events": max(g["max_events"] for g in gpus),
            **{k: sum(g[k] for g in gpus)
               for k in ("dropped", "unattributed", "incomplete",
                         "over_max", "late")}}
    return merged


def _calibration(reports: Sequence[Report]) -> Optional[Dict[str, Any]]:
    """The merged report's calibration (see the module's docstring); None
    when no input carries one."""
    found = [(r.meta["overhead"], sum(s.count for s in r.stages))
             for r in reports if r.meta.get("overhead")]
    if not found:
        return None
    merged: Dict[str, Any] = {}
    for key in dict.fromkeys(k for cost, _ in found for k in cost):
        pairs = [(cost[key], calls) for cost, calls in found if key in cost]
        if OVERHEAD_OPTIONAL.get(key) is int:       # calls: they add up
            merged[key] = sum(value for value, _ in pairs)
        elif len({value for value, _ in pairs}) == 1:
            merged[key] = pairs[0][0]
        else:
            merged[key] = _weighted_mean(pairs)
    return merged


def _weighted_mean(pairs: List[Tuple[float, int]]) -> float:
    """The mean of (value, weight) pairs; the plain mean when no weight
    counts (processes that made no stage call)."""
    weight = sum(w for _, w in pairs)
    if not weight:
        return sum(v for v, _ in pairs) / len(pairs)
    return sum(v * w for v, w in pairs) / weight


def _run_fields(datas: Sequence[Dict[str, Any]],
                offsets: Sequence[int]) -> Dict[str, Any]:
    """The merged run's clock range, settings and counts."""
    first = datas[0]
    return {
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
        "max_stages": sum(d.get("max_stages", 0) for d in datas),
        "stages_too_deep": sum(d.get("stages_too_deep", 0)
                               for d in datas),
        "stages_overflowed": sum(d.get("stages_overflowed", 0)
                                 for d in datas),
        "spans_shed": sum(d.get("spans_shed", 0) for d in datas),
    }


class _Merger:
    """The merged report's stages, processes, threads, spans and GPU
    events, one process added at a time: each process's ids (stages,
    threads, spans, kernel names, devices) follow the others'."""

    def __init__(self) -> None:
        self.stages: List[Dict[str, Any]] = []
        self.index: Dict[str, int] = {}
        self.processes: List[Dict[str, Any]] = []
        self.threads: List[Dict[str, Any]] = []
        self.span_parts: List[np.ndarray] = []
        self.gpu_parts: List[np.ndarray] = []
        self.kernel_index: Dict[str, int] = {}
        self.devices: List[Dict[str, Any]] = []
        self.spans_before = 0
        self.children: Optional[Dict[str, Any]] = None
        self.samples = _Samples()

    def _children(self, account: Optional[Dict[str, Any]],
                  label: str) -> None:
        """The child processes' accounts, added up; each lost one named
        under its report's label."""
        if account is None:
            return
        if self.children is None:
            self.children = {"started": 0, "reported": 0, "lost": []}
        self.children["started"] += account["started"]
        self.children["reported"] += account["reported"]
        self.children["lost"] += [dict(c, label=f"{label} / {c['label']}")
                                  for c in account["lost"]]
        if "error" in account:
            self.children.setdefault("error", f"{label}: {account['error']}")

    def add(self, report: Report, data: Dict[str, Any], offset: int,
            label: str) -> None:
        """Adds a report's processes: one, or those a merged report holds
        (a rank's DataLoader workers), each still a process of its own,
        named under `label`."""
        remap = self._stages(report, data)
        process_base = len(self.processes)
        for i, sub in enumerate(report.processes):
            if "processes" in data:
                rows = sub.get("stages", [])
            else:
                rows = [[sid, s["count"], s["total_ns"], s["self_ns"],
                         s["cpu_ns"]]
                        for sid, s in enumerate(data["stages"])
                        if s["count"]]
            self.processes.append({
                "pid": sub["pid"],
                "label": label if i == 0 else f"{label} / {sub['label']}",
                "host": sub.get("host", data.get("host", {})),
                "stages": [[remap[r[0]], *r[1:]] for r in rows],
                "memory_samples": [[t + offset, rss] for t, rss in
                                   sub.get("memory_samples", [])]})
            if "worker" in sub:
                self.processes[-1]["worker"] = sub["worker"]
        self._children(data.get("children"), label)
        thread_base = len(self.threads)
        self.threads += [dict(t, index=thread_base + t["index"],
                              process=process_base + t.get("process", 0))
                         for t in data["threads"]]
        spans = report.spans().copy()
        if len(spans):
            spans["stage"] = np.asarray(remap, np.int32)[spans["stage"]]
            spans["thread"] += thread_base
            spans["parent"] = np.where(spans["parent"] >= 0,
                                       spans["parent"] + self.spans_before,
                                       -1)
            spans["start_ns"] += offset
            spans["end_ns"] += offset
        self.span_parts.append(spans)
        if report.samples is not None:
            self.samples.add(report.samples, remap, process_base, offset)
        self._gpu(report, remap, offset, label)
        self.spans_before += len(spans)

    def _stages(self, report: Report, data: Dict[str, Any]) -> List[int]:
        """Merges the report's stages by path; each one's merged id."""
        remap = []
        for path, s in zip(report.stage_names, data["stages"]):
            if s["count"] and process_cpu_ns(s) is None:
                # unmeasured: the merge keeps no sum of some calls' only
                s = {k: v for k, v in s.items() if k != "proc_cpu_ns"}
            if path not in self.index:
                parent = path.rsplit("/", 1)[0] if "/" in path else None
                self.index[path] = len(self.stages)
                self.stages.append(dict(
                    s, parent=self.index[parent] if parent else -1, count=0,
                    hist=[]))
            at = self.index[path]
            # the core's merge: Chan's formula for mean and m2, histograms
            # added, extremes kept
            self.stages[at] = _core.merge_stage(self.stages[at], s)
            remap.append(at)
        return remap

    def _gpu(self, report: Report, remap: List[int], offset: int,
             label: str) -> None:
        events = report.gpu_events()
        names = [self.kernel_index.setdefault(n, len(self.kernel_index))
                 for n in (report.gpu or {}).get("kernel_names", [])]
        if events is not None and len(events):
            events = events.copy()
            remap_stage = np.asarray(remap + [-1], np.int32)
            events["stage"] = remap_stage[events["stage"]]
            events["span"] = np.where(events["span"] >= 0,
                                      events["span"] + self.spans_before, -1)
            events["start_ns"] += offset
            events["end_ns"] += offset
            kernel = events["kind"] == KERNEL
            events["name"][kernel] = np.asarray(names, np.uint32)[
                events["name"][kernel]]
            events["device"] += len(self.devices)
            self.gpu_parts.append(events)
        if report.gpu is not None:
            self.devices += [dict(d, name=f"{d['name']} ({label})")
                             for d in report.gpu["devices"]]


class _Samples:
    """The merged samples section, one report's section added at a time:
    frames deduplicated, equal stacks (after their moves) one, timelines
    on the merged clock and in time order. The counts add up; the
    interval is the first's."""

    def __init__(self) -> None:
        self.frames: Dict[Tuple[Any, ...], int] = {}
        self.index: Dict[Tuple[Any, ...], int] = {}
        self.stacks: List[List[Any]] = []
        self.timelines: List[np.ndarray] = []
        self.counts = {"rounds": 0, "late": 0, "lost": 0,
                       "timeline_dropped": 0, "unseen_ns": 0, "held_ns": 0,
                       "own_ns": 0, "unanswered": 0}
        #: the waits, kept where some section measured them
        self.waits: Dict[str, int] = {}
        #: (process, tid) -> name, of the threads named when sampled
        self.names: Dict[Tuple[int, int], str] = {}
        self.untimed = 0            # samples of sections with no timeline
        self.interval: Optional[int] = None

    def add(self, samples: Dict[str, Any], remap: List[int],
            process_base: int, offset: int) -> None:
        if self.interval is None:
            self.interval = samples["interval_ns"]
        for key in self.counts:
            self.counts[key] += samples.get(key, 0)
        for key in ("delay_ns", "gil_ns", "lock_ns"):
            if key in samples:
                self.waits[key] = self.waits.get(key, 0) + samples[key]
        for p, tid, name in samples.get("threads", ()):
            self.names[(process_base + p, tid)] = name
        frames = [self.frames.setdefault(tuple(f), len(self.frames))
                  for f in samples["frames"]]
        moved = [self._stack((process_base + p, tid,
                              remap[stage] if stage >= 0 else -1,
                              tuple(frames[f] for f in chain)), figures)
                 for p, tid, stage, chain, *figures in samples["stacks"]]
        timeline = samples.get("timeline")
        if timeline is None:
            self.untimed += sum(s[4] for s in samples["stacks"])
            return
        timeline = timeline.copy()
        timeline["t_ns"] += offset
        timeline["stack"] = np.asarray(moved, np.uint32)[timeline["stack"]]
        self.timelines.append(timeline)

    def _stack(self, key: Tuple[Any, ...], figures: List[int]) -> int:
        """The merged index of the stack `key` (process, tid, stage,
        frames), its figures (count, wall, cpu, and the waits where
        measured: 0 for a section without) added."""
        at = self.index.setdefault(key, len(self.stacks))
        if at == len(self.stacks):
            self.stacks.append([*key[:3], list(key[3]), 0, 0, 0, 0, 0, 0])
        row = self.stacks[at]
        for k, figure in enumerate(figures, 4):
            row[k] += figure
        return at

    def section(self) -> Optional[Dict[str, Any]]:
        """The merged section; None when no report was sampled. Samples
        of a section that kept no timeline count as left out of the
        merged one."""
        if self.interval is None:
            return None
        section: Dict[str, Any] = dict(
            self.counts, **self.waits, interval_ns=self.interval,
            frames=[list(f) for f in self.frames], stacks=self.stacks)
        if self.names:
            section["threads"] = [[*key, name] for key, name
                                  in sorted(self.names.items())]
        if self.timelines:
            timeline = np.concatenate(self.timelines).astype(TIMELINE_DTYPE)
            section["timeline"] = timeline[np.argsort(timeline["t_ns"],
                                                      kind="stable")]
            section["timeline_dropped"] += self.untimed
        return section

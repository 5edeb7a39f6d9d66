"""Sampled code under the stages, for the views that draw it
(docs/sampling.md): the flamegraph and folded stacks from the aggregate
stacks, the trace and speedscope from the timeline.

Under a stage go the stacks sampled at exactly that stage (its sub-stages
have frames of their own), the frames that all of them share (<module>,
main, ... down to the code that opened the stage) trimmed, but for the
deepest. Stacks sampled outside any stage (stage -1) go under their
thread's root. The import system's frames (importlib's bootstrap, several
a module) are left out of every stack: their time goes to the line
that imported, and the imported module's code sits right on it.
"""
from __future__ import annotations

import re
from collections import Counter

from typing import TYPE_CHECKING, AbstractSet, Any, Dict, Hashable, List, \
    NamedTuple, Optional, Sequence, Tuple

import numpy as np

from ..common.units import printable
from ..model.report import CodeFrame
from .concurrency import suspended_spans, union

if TYPE_CHECKING:
    from ..model.report import Report

Chain = Tuple[int, ...]         # frame indices, outermost first
#: the code slices a timeline view draws, at most: the longest
MAX_SLICES = 1_000_000
#: the code frames drawn under a stage, at most: deeper ones add to the
#: deepest drawn, so that a view's size stays within a constant of the
#: samples' however deep a (recursive, or crafted) stack goes
MAX_DEPTH = 512


def labels(samples: Dict[str, Any]) -> List[str]:
    """Each frame's label, safe to show (_units.printable)."""
    return [printable(CodeFrame(*f).label) for f in samples["frames"]]


def shared(chains: Sequence[Chain]) -> int:
    """How many leading frames all of chains hold (time linear in the
    frames)."""
    first = chains[0]
    size = min(len(c) for c in chains)
    for chain in chains[1:]:
        i = 0
        while i < size and chain[i] == first[i]:
            i += 1
        size = i
    return size


def is_import_machinery(file: str) -> bool:
    """Whether a frame's file is the import system's own (importlib's
    bootstrap, frozen or not)."""
    return file.startswith("<frozen importlib") or \
        file.replace("\\", "/").endswith(("importlib/_bootstrap.py",
                                           "importlib/_bootstrap_external.py"))


def _unimported(samples: Dict[str, Any]) -> List[Chain]:
    """Each stack's frames without the import system's."""
    machinery = {i for i, f in enumerate(samples["frames"])
                 if is_import_machinery(f[1])}
    if not machinery:
        return [tuple(s[3]) for s in samples["stacks"]]
    return [tuple(f for f in s[3] if f not in machinery)
            for s in samples["stacks"]]


def trimmed(samples: Dict[str, Any],
            groups: Optional[Sequence[Hashable]] = None) -> List[Chain]:
    """Each stack's frames, the import system's left out, without the
    leading frames that every stack of its group (by default its stage;
    else groups[i] for stack i) holds, the deepest of them kept; at most
    MAX_DEPTH of them, the outermost (deeper ones count as the last
    one's own)."""
    chains = _unimported(samples)
    keys: Sequence[Hashable] = groups if groups is not None else \
        [s[2] for s in samples["stacks"]]
    by_group: Dict[Hashable, List[Chain]] = {}
    for key, chain in zip(keys, chains):
        if chain:
            by_group.setdefault(key, []).append(chain)
    cut = {key: max(shared(mine) - 1, 0) for key, mine in by_group.items()}
    return [chain[cut.get(key, 0):][:MAX_DEPTH]
            for key, chain in zip(keys, chains)]


def _split(total: int, parts: Sequence[int]) -> List[int]:
    """total ns split in proportion to parts, as ints that add up to
    total's share of them (cumulative rounding)."""
    whole = sum(parts)
    out, done, before = [], 0, 0
    for part in parts:
        done += part
        upto = total * done // whole if whole else 0
        out.append(upto - before)
        before = upto
    return out


# ------------------------------------------------- stages on their clocks

class StageClock(NamedTuple):
    """Per stage id, ns: width, the stage's time on the clocks of the
    threads that ran it, its sub-stages' included; own, the part of it
    in none of its sub-stages (width less the sub-stages' widths); and
    whether some thread's calls overlapped (asyncio tasks, greenlets),
    where width and own differ from the stage's summed wall.total and
    self_time."""

    width: Dict[int, int]
    own: Dict[int, int]
    overlapped: bool


def stage_clock(report: "Report") -> StageClock:
    """Each stage's width and own time, counting every instant of a
    thread once: an instant in which several calls of one thread were
    open and in none of their sub-stages (tasks suspended at awaits) is
    shared equally among them; one in which a single call was innermost
    goes to it whole, so that on threads whose calls never overlapped
    the figures are the stage's wall.total and self_time. A stage's
    width is its own time and its sub-stages' widths: never less than
    they add up to. Where spans were dropped (max_spans), the dropped
    calls count as they are summed."""
    stages = report.stages
    width = {s.id: round(s.wall.total * 1e9) for s in stages}
    own = {s.id: round(s.self_time * 1e9) for s in stages}
    spans = report.spans()
    swept = _overlapping(report)
    if not swept.any():
        return StageClock(width, own, False)
    rows = np.flatnonzero(swept[spans["thread"]])
    share = _leaf_shares(spans, rows)
    ids = spans["stage"][rows].astype(np.int64)
    length = np.maximum(spans["end_ns"][rows].astype(np.int64) -
                        spans["start_ns"][rows].astype(np.int64), 0)
    count = len(report)
    swept_own = np.bincount(ids, weights=share, minlength=count)
    swept_sum = np.bincount(ids, weights=length, minlength=count)
    ids_of = {s.path: s.id for s in stages}
    swept_width = swept_own.copy()
    for s in reversed(stages):              # children before parents
        if s.parent is not None:
            swept_width[ids_of[s.parent]] += swept_width[s.id]
    kids = dict.fromkeys(width, 0)
    for s in reversed(stages):
        sid = s.id
        mine = max(width[sid] - int(round(swept_sum[sid] -
                                          swept_width[sid])), 0)
        width[sid] = max(mine, kids[sid])
        own[sid] = width[sid] - kids[sid]
        if s.parent is not None:
            kids[ids_of[s.parent]] += width[sid]
    return StageClock(width, own, True)


def _overlapping(report: "Report") -> np.ndarray:
    """Per thread index, whether its time is shared among its calls on
    the clock: overlapping_threads(), and the threads with a call
    suspended at an await, whose sub-stages may have run in other tasks
    (create_task), which the core's self time, kept a task at
    a time, does not take from it. None where no call was suspended, as
    one thread's calls overlap only across a switch of task (an await, a
    greenlet's switch)."""
    if not any(s.suspended for s in report.stages):
        return np.zeros(0, bool)
    spans = report.spans()
    out = overlapping_threads(spans)
    out[spans["thread"][suspended_spans(spans)]] = True
    return out


def overlapping_threads(spans: np.ndarray) -> np.ndarray:
    """Per thread index, whether two of its calls under the same call (or
    both outside any) were open at once: asyncio tasks, greenlets. Sorted
    by start, a group of intervals holds an overlap only where two
    neighbours overlap."""
    threads = int(spans["thread"].max()) + 1 if len(spans) else 0
    out = np.zeros(threads, bool)
    if len(spans) < 2:
        return out
    thread = spans["thread"].astype(np.int64)
    parent = spans["parent"].astype(np.int64)
    start = spans["start_ns"].astype(np.int64)
    end = np.maximum(spans["end_ns"].astype(np.int64), start)
    order = np.lexsort((start, parent, thread))
    thread, parent = thread[order], parent[order]
    start, end = start[order], end[order]
    same = (thread[1:] == thread[:-1]) & (parent[1:] == parent[:-1])
    out[thread[1:][same & (start[1:] < end[:-1])]] = True
    return out


def _leaf_shares(spans: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Per span of rows (ns, float): its share of its thread's time,
    each instant given to the calls then open and in none of their
    sub-stages (the innermost): to the one that ran without being
    suspended where one is open, else equally among them."""
    share = np.zeros(len(spans))
    parent = spans["parent"].tolist()
    ran = (~suspended_spans(spans)).tolist()
    thread = spans["thread"][rows]
    for t in np.unique(thread).tolist():
        _sweep(spans, rows[thread == t], parent, ran, share)
    return share[rows]


def _sweep(spans: np.ndarray, mine: np.ndarray, parent: List[int],
           ran: List[bool], share: np.ndarray) -> None:
    """One thread's calls (indices `mine`) in time order: `share` gets
    each call's part of the time it was innermost. A call never
    suspended (ran[call]) held its thread from its start to its end: no
    other task's call ran then, however many were open, suspended at
    their awaits, so its time is its own; the instants no such call
    holds are shared equally among the innermost suspended calls. phi[c]
    is the time each innermost call of kind c has been given so far: a
    call's part is phi at its end as innermost less phi at its start."""
    # a call of no length owns no time, and would be opened after its
    # own close at one time
    mine = mine[spans["end_ns"][mine] > spans["start_ns"][mine]]
    start = spans["start_ns"][mine].astype(np.int64)
    end = spans["end_ns"][mine].astype(np.int64)
    times = np.concatenate([end, start])
    opens = np.r_[np.zeros(len(mine), bool), np.ones(len(mine), bool)]
    who = np.concatenate([mine, mine]).astype(np.int64)
    # at one time, ends before starts; a parent (a lower index) starts
    # before its children and ends after them
    order = np.lexsort((np.where(opens, who, -who), opens, times))
    inner: Dict[int, float] = {}        # innermost call: phi when it began
    count = [0, 0]                      # innermost calls: suspended, ran
    phi = [0.0, 0.0]
    kids: Dict[int, int] = {}           # open call: its open sub-calls
    last = 0

    def begin(x: int) -> None:
        inner[x] = phi[ran[x]]
        count[ran[x]] += 1

    def finish(x: int) -> None:
        share[x] += phi[ran[x]] - inner.pop(x)
        count[ran[x]] -= 1

    for t, is_open, x in zip(times[order].tolist(), opens[order].tolist(),
                             who[order].tolist()):
        if t > last:
            kind = 1 if count[1] else 0
            if count[kind]:
                phi[kind] += (t - last) / count[kind]
        last = t
        p = parent[x]
        if is_open:
            if p in kids:
                kids[p] += 1
                if p in inner:
                    finish(p)
            kids[x] = 0
            begin(x)
        elif x in kids:
            del kids[x]
            if x in inner:
                finish(x)
            if p in kids:
                kids[p] -= 1
                if not kids[p]:
                    begin(p)


# ---------------------------------------------------- code on the stages

#: the frame of a stage's own time during which the samples show none of
#: its code running: its calls were suspended at an await
AWAITING = "(awaiting)"
#: the group of code sampled outside any stage on threads that only
#: waited (views/threads.py idle_threads): the flamegraph folds it
IDLE_GROUP = -2


class CodeNames(NamedTuple):
    """The names code chains hold: the samples' frame labels, then the
    awaiting frame, then one frame per process (index processes + p), which
    a report of several processes puts under each of its chains outside
    any stage."""

    names: List[str]
    awaiting: int
    processes: int


#: the pid a child's label ends with (record/processes/child.py)
_PID = re.compile(r" \(pid \d+\)$")


def process_names(report: "Report") -> List[str]:
    """Each process's frame name: its label, or where several processes
    bear one name but their pids (a DataLoader's `worker 0` started anew
    each epoch), that name for all of them, so that they are one frame
    and not a comb of hundreds too narrow to read; the same name in runs
    of more or fewer epochs, for a flamegraph of their difference."""
    labels_ = [printable(str(p.get("label", f"pid {p.get('pid')}")))
               for p in report.processes]
    names = [_PID.sub("", label) for label in labels_]
    count = Counter(names)
    return [f"{name} (all pids)" if count[name] > 1
            else label for name, label in zip(names, labels_)]


def code_names(report: "Report") -> CodeNames:
    frames = labels(report.samples) if report.samples else []
    processes = process_names(report)
    return CodeNames(frames + [AWAITING] + processes, len(frames),
                     len(frames) + 1)


def code_times(report: "Report",
               idle: AbstractSet[Tuple[int, int]] = frozenset(),
               clock: Optional[StageClock] = None
               ) -> Dict[int, Dict[Chain, Tuple[int, int]]]:
    """{group: {trimmed chain: (wall ns, cpu ns)}}, the groups: a stage
    id, -1 for code sampled outside any stage on a thread not in `idle`
    ((process, native id) pairs), IDLE_GROUP for those in it; chains
    index code_names(). A stage's own time on the clock (stage_clock) is
    split over its chains in proportion to their sampled wall time; a
    stage whose calls were suspended at awaits gives its chains their
    sampled wall time alone (what ran), and the rest of its own time to
    the awaiting frame. Its self CPU time (its CPU time less its
    sub-stages') is split in proportion to their sampled CPU time (where
    calls were suspended, whose CPU time is not known, each chain has
    its sampled CPU time). Code
    outside any stage: its sampled times, less what a thread whose calls
    overlapped spent in them (their stages' widths hold it); in a report
    of several processes, under its process's frame. Chains with
    neither time are left out."""
    samples = report.samples
    if not samples:
        return {}
    clock = clock or stage_clock(report)
    stacks = samples["stacks"]
    groups = [s[2] if s[2] >= 0 else
              IDLE_GROUP if (s[0], s[1]) in idle else -1 for s in stacks]
    several = len(report.processes) > 1
    # with several processes, each thread's code outside stages is
    # trimmed on its own: a forked child's stacks hold its parent's
    # frames down to the fork
    keys = [(g, s[0], s[1]) if g < 0 and several else g
            for g, s in zip(groups, stacks)]
    names = code_names(report)
    inside = in_stages(report) if clock.overlapped else {}
    sampled: Dict[int, Dict[Chain, List[int]]] = {}
    for i, (s, group, chain) in enumerate(
            zip(stacks, groups, trimmed(samples, keys))):
        kept = 1.0 - inside.get(i, 0.0) if group < 0 else 1.0
        if group < 0 and several:
            chain = (names.processes + s[0],) + chain
        slot = sampled.setdefault(group, {}).setdefault(chain, [0, 0])
        slot[0] += round(s[5] * kept)
        slot[1] += round(s[6] * kept)
    suspended = {s.id for s in report.stages if s.suspended}
    self_cpu = _self_cpu(report.stages)
    out: Dict[int, Dict[Chain, Tuple[int, int]]] = {}
    for group, chains in sampled.items():
        order = sorted(chains, key=lambda c: [names.names[f] for f in c])
        wall = [chains[c][0] for c in order]
        cpu = [chains[c][1] for c in order]
        if group >= 0:
            # a suspended call's CPU time is not known: its samples' is
            if group not in suspended:
                cpu = _split(self_cpu[group], cpu)
            wall = _stage_wall(clock.own[group], wall,
                               group in suspended)
            if len(wall) > len(order):
                order.append((names.awaiting,))
                cpu.append(0)
        out[group] = {c: (w, u) for c, w, u in zip(order, wall, cpu)
                      if c and (w > 0 or u > 0)}
    # a suspended stage no sample caught running: its own time awaited
    for sid in suspended - set(sampled):
        if clock.own[sid] > 0:
            out[sid] = {(names.awaiting,): (clock.own[sid], 0)}
    return out


def _stage_wall(own: int, sampled: List[int], suspended: bool
                ) -> List[int]:
    """A stage's own wall time over its chains' sampled wall times: in
    proportion; where its calls were suspended and the samples hold less
    than its own time, each its sampled time and the rest last (the
    awaiting frame's)."""
    ran = sum(sampled)
    if not suspended or ran >= own:
        return _split(own, sampled)
    return sampled + [own - ran]


def in_stages(report: "Report") -> Dict[int, float]:
    """{stack index: the share of its timeline samples taken while a
    call of its thread was open}, for the stacks outside any stage of
    the threads whose calls overlapped: the event loop between task
    steps, which those calls' widths already hold."""
    samples = report.samples or {}
    timeline = samples.get("timeline")
    if timeline is None or not len(timeline):
        return {}
    spans = report.spans()
    swept = _overlapping(report)
    if not swept.any():
        return {}
    index = {(int(t.get("process", 0)), int(t["native_id"])): t["index"]
             for t in report.threads}
    stacks = samples["stacks"]
    thread = np.asarray([index.get((s[0], s[1]), -1) if s[2] < 0 else -1
                         for s in stacks], np.int64)
    thread[thread >= len(swept)] = -1
    thread[thread >= 0] = np.where(swept[thread[thread >= 0]],
                                   thread[thread >= 0], -1)
    stack = timeline["stack"].astype(np.int64)
    t = timeline["t_ns"].astype(np.int64)
    of_sample = thread[stack]
    open_then = np.zeros(len(t), bool)
    for th in np.unique(of_sample[of_sample >= 0]).tolist():
        rows = np.flatnonzero(of_sample == th)
        mine = spans[spans["thread"] == th]
        lo, hi = union(mine["start_ns"], mine["end_ns"])
        at = np.searchsorted(lo, t[rows], "right") - 1
        open_then[rows] = (at >= 0) & (t[rows] <= hi[np.maximum(at, 0)])
    seen = np.bincount(stack, minlength=len(stacks))
    inside = np.bincount(stack, weights=open_then, minlength=len(stacks))
    return {i: float(inside[i] / seen[i])
            for i in np.flatnonzero((thread >= 0) & (seen > 0)).tolist()}


def _self_cpu(stages: Sequence[Any]) -> Dict[int, int]:
    """{stage id: its CPU time less its sub-stages', ns, at least 0}."""
    cpu = {s.path: round(s.cpu * 1e9) for s in stages}
    own = dict(cpu)
    for s in stages:
        if s.parent is not None:
            own[s.parent] -= cpu[s.path]
    return {s.id: max(own[s.path], 0) for s in stages}


# ------------------------------------------------------------ timeline

class CodeSlice(NamedTuple):
    """A code frame open over [start_ns, end_ns] on a thread, within span
    `span` (-1: outside any stage) and clear of every other span of its
    thread, so that it nests in the span's track."""

    span: int
    process: int
    tid: int
    frame: int          #: index into samples["frames"]
    depth: int          #: 0 for the outermost code frame of its span
    start_ns: int
    end_ns: int


def slices(report: "Report") -> List[CodeSlice]:
    """The timeline's samples as code slices: consecutive samples of a
    thread that touch in time and lie in the same span keep the frames
    they share open. [] without a timeline."""
    samples = report.samples
    if samples is None or not len(samples.get("timeline", ())):
        return []
    timeline = samples["timeline"]
    stacks = samples["stacks"]
    keys = sorted({(s[0], s[1]) for s in stacks})
    number = {key: i for i, key in enumerate(keys)}
    stack_key = np.asarray([number[(s[0], s[1])] for s in stacks], np.int64)
    stack_stage = np.asarray([s[2] for s in stacks], np.int64)
    # the samples grouped by thread, each group still in time order
    sample_key = stack_key[timeline["stack"]]
    order = np.argsort(sample_key, kind="stable")
    cuts = np.searchsorted(sample_key[order], np.arange(len(keys) + 1))
    spans_of = _spans_by_thread(report)
    chains = trimmed(samples)
    out: List[CodeSlice] = []
    for i, key in enumerate(keys):
        mine = timeline[order[cuts[i]:cuts[i + 1]]]
        own = spans_of.get(key, np.zeros(0, np.int64))
        places = _places(report, own, mine["t_ns"],
                         stack_stage[mine["stack"]])
        out += _walk(key, mine, places, chains, samples["interval_ns"])
    return out


def _spans_by_thread(report: "Report") -> Dict[Tuple[int, int],
                                                np.ndarray]:
    """{(process, native id): indices of its threads' spans}."""
    thread = report.spans()["thread"]
    order = np.argsort(thread, kind="stable")
    threads = report.threads
    cuts = np.searchsorted(thread[order], np.arange(len(threads) + 1))
    parts: Dict[Tuple[int, int], List[np.ndarray]] = {}
    for t in threads:
        key = (t.get("process", 0), t["native_id"])
        parts.setdefault(key, []).append(
            order[cuts[t["index"]]:cuts[t["index"] + 1]])
    return {key: np.concatenate(p) for key, p in parts.items()}


def longest(cuts: List[CodeSlice], limit: int) -> List[CodeSlice]:
    """At most `limit` slices, the longest, in their order; outer before
    inner at equal lengths, so that a kept slice's parent is kept."""
    if len(cuts) <= limit:
        return cuts
    length = np.fromiter((c.end_ns - c.start_ns for c in cuts), np.int64,
                         len(cuts))
    depth = np.fromiter((c.depth for c in cuts), np.int64, len(cuts))
    ranked = np.sort(np.lexsort((depth, -length))[:limit])
    return [cuts[i] for i in ranked.tolist()]


class _Places(NamedTuple):
    """Per sample of one thread: its span (-1: none, -2: not found) and
    the interval around it free of any span boundary of the thread."""

    span: np.ndarray
    lo: np.ndarray
    hi: np.ndarray


def _places(report: "Report", own: np.ndarray, t: np.ndarray,
            stage: np.ndarray) -> _Places:
    """Where one thread's samples (times t, stages) lie among its spans
    (`own`, indices into the report's spans)."""
    spans = report.spans()
    meta = report.meta
    bounds = np.sort(np.concatenate([
        spans["start_ns"][own], spans["end_ns"][own],
        [meta["start_ns"], meta["stop_ns"]]]))
    lo = bounds[np.maximum(np.searchsorted(bounds, t, "right") - 1, 0)]
    hi = bounds[np.minimum(np.searchsorted(bounds, t, "left"),
                           len(bounds) - 1)]
    span = np.where(stage < 0, -1, -2)
    for s in np.unique(stage[stage >= 0]).tolist():
        cand = own[spans["stage"][own] == s]
        if not len(cand):
            continue
        cand = cand[np.argsort(spans["start_ns"][cand], kind="stable")]
        rows = np.flatnonzero(stage == s)
        i = np.searchsorted(spans["start_ns"][cand], t[rows], "right") - 1
        inside = (i >= 0) & (spans["end_ns"][cand[np.maximum(i, 0)]]
                             >= t[rows])
        # calls of the stage open at once on the thread (asyncio tasks):
        # a sample does not say whose it is, so it is placed in none,
        # never all in the one that started last
        ends = np.maximum.accumulate(spans["end_ns"][cand])
        earlier = np.where(i >= 1, ends[np.maximum(i - 1, 0)], -1)
        inside &= earlier < t[rows]
        span[rows[inside]] = cand[i[inside]]
    return _Places(span, lo, hi)


class _Open:
    """The code frames open on one thread, closed into CodeSlices."""

    def __init__(self, key: Tuple[int, int], out: List[CodeSlice]):
        self.key, self.out = key, out
        self.frames: List[Tuple[int, int]] = []     # (frame, start)
        self.span = -1
        self.stack = -1             # the stack whose frames are open
        self.end = 0

    def close(self, keep: int = 0) -> None:
        """Close the frames past the first `keep`, at the end so far."""
        self.stack = -1
        while len(self.frames) > keep:
            f, start = self.frames.pop()
            self.out.append(CodeSlice(self.span, self.key[0], self.key[1],
                                      f, len(self.frames), start, self.end))

    def add(self, stack: int, chain: Chain, span: int, start: int,
            end: int) -> None:
        """A sample of `stack` (frames `chain`) over [start, end] in
        `span`: the frames open stay open where it goes on from them."""
        if span != self.span or start != self.end:
            self.close()
        elif stack == self.stack:
            self.end = end
            return
        shared = 0
        while shared < min(len(self.frames), len(chain)) and \
                self.frames[shared][0] == chain[shared]:
            shared += 1
        self.close(shared)
        self.frames += [(f, start) for f in chain[shared:]]
        self.span, self.stack, self.end = span, stack, end


def _walk(key: Tuple[int, int], mine: np.ndarray, places: _Places,
          chains: List[Chain], interval: int) -> List[CodeSlice]:
    """One thread's samples, in time order, as CodeSlices: a sample
    stands for the time since the thread's previous one (an interval for
    its first), within its free interval."""
    out: List[CodeSlice] = []
    state = _Open(key, out)
    previous: Optional[int] = None
    for t, k, span, lo, hi in zip(
            mine["t_ns"].tolist(), mine["stack"].tolist(),
            places.span.tolist(), places.lo.tolist(), places.hi.tolist()):
        start = max(lo, t - interval if previous is None else previous)
        end = min(t, hi)
        previous = t
        if span < -1 or end <= start:
            state.close()
        else:
            state.add(k, chains[k], span, start, end)
    state.close()
    return out

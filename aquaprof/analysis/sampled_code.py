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

from typing import TYPE_CHECKING, AbstractSet, Any, Dict, List, NamedTuple, \
    Optional, Sequence, Tuple

import numpy as np

from ..common.units import printable
from ..model.report import CodeFrame

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
            groups: Optional[Sequence[int]] = None) -> List[Chain]:
    """Each stack's frames, the import system's left out, without the
    leading frames that every stack of its group (by default its stage;
    else groups[i] for stack i) holds, the deepest of them kept; at most
    MAX_DEPTH of them, the outermost (deeper ones count as the last
    one's own)."""
    chains = _unimported(samples)
    keys = groups if groups is not None else \
        [s[2] for s in samples["stacks"]]
    by_group: Dict[int, List[Chain]] = {}
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


def weights(report: "Report") -> Dict[int, Dict[Chain, int]]:
    """{stage id (-1: none): {trimmed chain: ns}}: a stage's self time
    split over its stacks in proportion to their sampled wall time (a
    stack of no frame keeps its part in the stage), so that the stage's
    figures stay the spans'; outside any stage, the sampled wall time.
    Chains of equal frames are one; the split rounds down cumulatively,
    chains in the order of their labels (the empty chain first)."""
    samples = report.samples
    if not samples:
        return {}
    walls: Dict[int, Dict[Chain, int]] = {}
    for s, chain in zip(samples["stacks"], trimmed(samples)):
        mine = walls.setdefault(s[2], {})
        mine[chain] = mine.get(chain, 0) + s[5]
    names = labels(samples)
    self_ns = {s.id: round(s.self_time * 1e9) for s in report.stages}
    out: Dict[int, Dict[Chain, int]] = {}
    for stage, chains in walls.items():
        order = sorted(chains, key=lambda c: [names[f] for f in c])
        ns = ([chains[c] for c in order] if stage < 0 else
              _split(self_ns[stage], [chains[c] for c in order]))
        out[stage] = {c: w for c, w in zip(order, ns) if c and w > 0}
    return out


#: the group of code sampled outside any stage on threads that only
#: waited (views/threads.py idle_threads): the flamegraph folds it
IDLE_GROUP = -2


def code_times(report: "Report",
               idle: AbstractSet[Tuple[int, int]] = frozenset()
               ) -> Dict[int, Dict[Chain, Tuple[int, int]]]:
    """{group: {trimmed chain: (wall ns, cpu ns)}}, the groups: a stage
    id, -1 for code sampled outside any stage on a thread not in `idle`
    ((process, native id) pairs), IDLE_GROUP for those in it. A stage's
    self wall time is split over its chains as weights() splits it, its
    self CPU time (its CPU time less its sub-stages') in proportion to
    their sampled CPU time; outside any stage, the sampled times. Chains
    with neither time are left out."""
    samples = report.samples
    if not samples:
        return {}
    stacks = samples["stacks"]
    groups = [s[2] if s[2] >= 0 else
              IDLE_GROUP if (s[0], s[1]) in idle else -1 for s in stacks]
    sampled: Dict[int, Dict[Chain, List[int]]] = {}
    for s, group, chain in zip(stacks, groups, trimmed(samples, groups)):
        slot = sampled.setdefault(group, {}).setdefault(chain, [0, 0])
        slot[0] += s[5]
        slot[1] += s[6]
    names = labels(samples)
    stages = report.stages
    self_wall = {s.id: round(s.self_time * 1e9) for s in stages}
    self_cpu = _self_cpu(stages)
    out: Dict[int, Dict[Chain, Tuple[int, int]]] = {}
    for group, chains in sampled.items():
        order = sorted(chains, key=lambda c: [names[f] for f in c])
        wall = [chains[c][0] for c in order]
        cpu = [chains[c][1] for c in order]
        if group >= 0:
            wall = _split(self_wall[group], wall)
            cpu = _split(self_cpu[group], cpu)
        out[group] = {c: (w, u) for c, w, u in zip(order, wall, cpu)
                      if c and (w > 0 or u > 0)}
    return out


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

"""Two profiles compared stage by stage, with the verdicts of
analysis.verdict: each stage's total and tail (p95 call) per run,
judged by runs where either side has several (reports of repeated runs
of the same program), by a block bootstrap over one run's calls where
each side has one.

A stage's calls hold its sub-stages' calls, so a parent of a slower stage
is slower too; Comparison.own_changes gives the same verdicts on each
call's self time instead (the differential flamegraph colours by them).
Times are wall time, or with measure="cpu" the thread CPU time of each
call, which a machine busy with other processes moves far less, or with
measure="cuda" the time of the kernels each call launched (where GPU
work was traced): a stage that launches without waiting for the device
shows its kernels' time in no wall time, so a wall comparison names the
stages whose kernels' time moved.

Where the runs say how busy their machine was (meta["host"]: the CPUs
other processes kept busy, a hypervisor's steal), a comparison whose new
runs met a busier or quieter machine than every base run says so: a
stage slower only because the machine was busier reads, by its figures,
like slower code.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import (Any, Dict, List, Optional, Sequence, Tuple,
                    Union)

import numpy as np

from ..common.units import printable, text_html
from ..model.report import Report
from ..model.schema import BUSY_SECONDS
from .compare_notes import items_change, memory_change
from .verdict import (
    MEASURES, NOISY, SLOWER, RunFigures, Verdict, describe, judge,
    own_spread)


def parse_threshold(text: str) -> float:
    """'5%' or '0.05' as the fraction 0.05; ValueError saying how to write
    it otherwise (a bare 5 would be 500 %)."""
    try:
        value = float(text[:-1]) / 100 if text.endswith("%") else float(text)
    except ValueError:
        raise ValueError(f"threshold must be like 5% or 0.05, got "
                         f"{text!r}") from None
    if not 0 <= value < math.inf:      # NaN too
        raise ValueError(f"threshold must be a finite value >= 0, got "
                         f"{text!r}")
    if value > 1 and not text.endswith("%"):
        raise ValueError(f"threshold {text} would be {value * 100:g} %: "
                         f"write {text}% or {value / 100:g}")
    return value


#: the verdict of a stage whose wall time was found slower while the new
#: runs met a busier machine, and whose CPU time does not confirm it: a
#: machine kept busy by other processes stretches every call's wall time
#: (the CPU shared), far less its CPU time
BUSY_SLOWER = "slower? the machine was busy"
#: the share of its wall time a stage spends on the CPU, in every run,
#: for thread CPU time to stand for it (diagnose's "waiting" is under
#: half): a waiting stage's longer wait shows in no CPU time
CPU_BOUND = 0.5
#: the least share of its wall time a stage CPU-bound in the base runs
#: may spend on the CPU in the new runs for a busier machine to stand
#: for its longer wall time: other processes that keep the CPUs busy
#: share them, and one of 2 CPUs with a hog and 2 pytest workers on them
#: still runs 2/3 of the time; a stage that now waits most of it
#: (a lock, I/O, a sleep added) keeps its verdict
BUSY_CPU_SHARE = 0.25


def _signed(change: float) -> str:
    return f"{change * 100:+.1f} %" if math.isfinite(change) else "from 0"


@dataclass
class StageChange:
    """One stage of a comparison: its verdict, and the judgement behind it
    (None for a stage only one side has)."""
    path: str
    verdict: str             # slower, faster, same, slower?, faster?, noisy,
    #                          new, gone
    judgement: Optional[Verdict]
    base_calls: float        # calls a run, on average
    new_calls: float
    #: for BUSY_SLOWER, the CPU-time verdict that did not confirm it
    cpu: Optional[Verdict] = None

    @property
    def change(self) -> Optional[float]:
        """Relative change of the stage's total a run."""
        return None if self.judgement is None else self.judgement.change

    @property
    def p_value(self) -> Optional[float]:
        return None if self.judgement is None else self.judgement.p_value

    def summary(self) -> str:
        """What compare prints after the path: the figures, the evidence,
        the verdict and what moved."""
        if self.judgement is None:        # "new" or "gone"
            return self.verdict
        if self.verdict == BUSY_SLOWER and self.cpu is not None:
            return (f"{describe(self.judgement)}; its CPU time a run "
                    f"{_signed(self.cpu.change)} ({self.cpu.word}) on a "
                    f"busier machine: {BUSY_SLOWER}")
        return describe(self.judgement)


def _measured(report: "Report", spans: np.ndarray) -> np.ndarray:
    """Which spans began inside the run's measured windows (a benchmark's
    timed rounds, without its calibration and warm-up): all of them when
    the report has none."""
    windows = report.meta.get("measured")
    if not windows:
        return np.ones(len(spans), bool)
    keep = np.zeros(len(spans), bool)
    for start, end in windows:
        keep |= (spans["start_ns"] >= start) & (spans["start_ns"] < end)
    return keep


def run_figures(report: "Report", own: bool = False, measure: str = "wall"
                ) -> Dict[str, RunFigures]:
    """Each stage's figures in this run, from its raw spans in the order
    they started: wall time (measure "cpu": the thread's CPU time) of each
    call, or own: of each call less the calls recorded inside it (its self
    time, what the differential flamegraph judges). A stage some of
    whose spans were dropped (max_spans) is judged on its exact total
    and count of calls, its wall times' p50 and p95 from its histogram
    (the kept calls are the run's first: a tail that grew later would
    not show in them) and its spread from the calls kept, without the
    calls themselves (whose resamples would stand for a run of fewer
    calls)."""
    if measure not in MEASURES:
        raise ValueError(f"measure must be one of {MEASURES}, got "
                         f"{measure!r}")
    spans = report.spans()
    names = report.stage_names
    if measure == "cuda":
        # the kernels a call launched itself, none of its sub-stages'
        from .gpu_stats import span_gpu_time
        field_ns = np.rint(span_gpu_time(report) * 1e9).astype(np.int64)
    else:
        field_ns = ((spans["end_ns"] - spans["start_ns"])
                    if measure == "wall"
                    else spans["cpu_ns"].astype(np.int64))
    if own and len(spans) and measure != "cuda":
        # a parent index past the spans (a parent left out) takes nothing
        inner = (spans["parent"] >= 0) & (spans["parent"] < len(spans))
        field_ns = field_ns - np.bincount(
            spans["parent"][inner], field_ns[inner],
            len(spans)).astype(np.int64)
    keep = _measured(report, spans)
    # grouped by stage once, each stage's calls in the order they began
    order = np.lexsort((spans["start_ns"], spans["stage"]))
    order = order[keep[order]]
    seconds = np.maximum(field_ns[order], 0) * 1e-9
    bounds = np.searchsorted(spans["stage"][order],
                             np.arange(len(names) + 1)).tolist()
    # with none dropped, every call has its span; the measured windows
    # keep only some of them, by design, and the stage's exact figures
    # count its calls outside them too: there the kept calls stand
    recorded = (np.bincount(spans["stage"], minlength=len(names))
                if report.spans_dropped and not report.meta.get("measured")
                else None)
    # a benchmark's figures are a timed round's: it fills about max_time
    # with rounds, so a run's total stays whatever a round costs
    rounds = max(len(report.meta.get("measured") or ()), 1)
    out: Dict[str, RunFigures] = {}
    for sid, path in enumerate(names):
        mine = seconds[bounds[sid]:bounds[sid + 1]]
        stats = report[path]
        if len(mine) and (recorded is None or
                          recorded[sid] >= stats.count):
            out[path] = RunFigures.of(mine, rounds)
            continue
        if measure == "cpu":
            total = stats.cpu if not own else 0.0
        elif measure == "cuda":
            total = stats.cuda.kernel_time if stats.cuda else 0.0
        else:
            total = stats.self_time if own else stats.wall.total
        # the kept calls are the run's first: its wall times' median and
        # tail are the histogram's, which every call went into
        whole = ((stats.wall.p50, stats.wall.p95)
                 if measure == "wall" and not own and stats.count else None)
        out[path] = _partial(total, stats.count, mine, whole)
    return out


def _partial(total: float, count: int, kept: np.ndarray,
             whole: Optional[Tuple[float, float]] = None) -> RunFigures:
    """A stage's figures from its exact total and count, and the calls
    of it that were kept: their spread, the total's narrowed to as many
    calls as it had (a sum of N calls spreads sqrt(N / n) times less,
    relatively, than one of n), and their percentiles where `whole`, the
    p50 and p95 of every call (the histogram's), is not given. Its tail
    is judged only where MIN_TAIL_CALLS calls or more were kept: fewer
    cannot say how far the p95 of all of them moves by chance."""
    mean = total / count if count else 0.0
    p50, p95 = whole if whole is not None else (mean, mean)
    if not len(kept):
        return RunFigures(total, count, p50, p95, kept=0)
    if whole is None:
        figures = RunFigures.of(kept)
        p50, p95 = figures.p50, figures.p95
    spread_total = own_spread("total", kept)
    if spread_total is not None:
        spread_total *= len(kept) / count
    return RunFigures(total, count, p50, p95,
                      spread=(spread_total, own_spread("tail", kept)),
                      kept=len(kept))


def dropped_spans(base: Sequence["Report"], new: Sequence["Report"]
                  ) -> str:
    """A sentence when some runs dropped spans past max_spans; "" else."""
    said = []
    for side, runs in (("base", base), ("new", new)):
        dropped = [r for r in runs if r.spans_dropped]
        if dropped:
            lost = sum(r.spans_dropped for r in dropped)
            kept = sum(r.spans_recorded for r in dropped)
            which = ("run" if len(runs) == 1 else
                     f"{len(dropped)} of {len(runs)} runs")
            said.append(f"the {side} {which} dropped {lost} of "
                        f"{lost + kept} spans (max_spans)")
    if not said:
        return ""
    if any(r.spans_dropped and r.meta.get("measured")
           for r in (*base, *new)):
        # the exact figures count the rounds outside the timed ones too
        return (f"{' and '.join(said)}: the calls kept in the timed "
                f"rounds stand for their stages, and fewer calls a run "
                f"there may be spans dropped, not a change")
    return (f"{' and '.join(said)}: their stages are judged on their "
            f"exact totals and calls, their wall times' percentiles from "
            f"every call (the histogram's), their spread (and self and "
            f"CPU times' percentiles) from the calls kept, the run's first")


Runs = Union["Report", Sequence["Report"]]

#: other processes' CPUs, and a hypervisor's share of the CPU time, by
#: which the new runs' mean must differ from every base run's for the
#: machine to be said to differ
BUSIER_CPUS = 0.5
BUSIER_STEAL = 0.05
#: or, where the machine was busy already, the share of the CPUs that
#: other processes left to the runs that the new runs lost: on 2 CPUs
#: with 1.4 kept busy, another 0.15 takes a quarter of what the code ran
#: on, and stretches its wall time as much
BUSIER_LEFT = 0.25
#: and never less than this many CPUs: the kernel counts in 10 ms ticks
BUSIER_LEAST = 0.1


#: what meta["host"] holds of the machine and the interpreter that ran a
#: run, as a note names them: a change of either moves timings with no
#: change to the code. Not the host's name: a CI job's container has a
#: new one every time, on the same kind of machine.
ALIKE_FIELDS = (("cpu", "CPU"), ("cpus", "CPUs to run on"),
                ("python", "Python"))


def machine_differs(base: Sequence["Report"], new: Sequence["Report"]
                    ) -> str:
    """A sentence when every new run ran on another kind of machine or
    Python than every base run; "" otherwise, or where a run does not
    say."""
    said = []
    for field, name in ALIKE_FIELDS:
        before = {r.meta.get("host", {}).get(field) for r in base}
        after = {r.meta.get("host", {}).get(field) for r in new}
        if None in before or None in after or before & after:
            continue
        said.append(f"{name} {_values(before)} -> {_values(after)}")
    if not said:
        return ""
    runs = "run" if len(new) == 1 else "runs"
    return (f"the new {runs} ran on another kind of machine or Python: "
            f"{'; '.join(said)}. That moves timings with no change to "
            f"the code: compare runs made on one kind of machine")


#: how busy the machine was over a window holding a run (a pytest
#: session, whose tests are too short to tell), one per run of a side,
#: None where not known: what stands in for runs that do not say
Sessions = Tuple[Sequence[Optional[Dict[str, float]]],
                 Sequence[Optional[Dict[str, float]]]]


def machine_notes(base: Sequence["Report"], new: Sequence["Report"],
                  sessions: Optional[Sessions] = None) -> str:
    """What compare says of the machines beside its verdicts: another kind
    of machine or Python, then a busier or quieter one; "" for neither."""
    return "; ".join(note for note in (
        machine_differs(base, new),
        machine_load(base, new, sessions)[0]) if note)


def _values(values: set) -> str:
    return " or ".join(printable(str(v)) for v in sorted(values, key=str))


def _gap(field: str, gap: float, cpus: List[Any], busier: float) -> float:
    """By how much the new runs' reading must differ from the base's for
    the machine to be said to differ; other processes' CPUs: BUSIER_CPUS,
    or less where they left the quieter side few CPUs (BUSIER_LEFT of
    those left, BUSIER_LEAST at least), the CPUs known for every run."""
    if field != "other_cpus" or not cpus or \
            not all(isinstance(c, (int, float)) and c > 0 for c in cpus):
        return gap
    left = min(cpus) - busier
    return min(gap, max(BUSIER_LEAST, BUSIER_LEFT * left))


def _readings(runs: Sequence["Report"],
              sessions: Optional[Sequence[Optional[Dict[str, float]]]],
              field: str) -> Tuple[List[Any], List[Any]]:
    """A side's runs' own readings of a field, and its sessions' (all
    None where no sessions are given)."""
    own = [r.meta.get("host", {}).get(field) for r in runs]
    over = [(s or {}).get(field) for s in sessions] if sessions is not None \
        else [None]
    return own, over


def machine_load(base: Sequence["Report"], new: Sequence["Report"],
                 sessions: Optional[Sessions] = None
                 ) -> Tuple[str, str]:
    """A sentence when the new runs met a busier (or quieter) machine
    than every base run did, and its word ("busier", "quieter", or
    "busier by one measure and quieter by another"); ("", "") otherwise,
    or where a run does not say. The runs' own readings are weighed
    where every run has one; else, the sessions' (readings over windows
    that held the runs), where every run has one: one kind of reading
    on both sides, never the one against the other."""
    said, words = [], set()
    # a child's CPU (a DataLoader worker's) is no other process to the
    # user, but to the kernel's ticks it is
    children = any(r.meta.get("children", {}).get("started")
                   for r in (*base, *new))
    others = ("other processes (the runs' own child processes among them)"
              if children else "other processes")
    over_session = False
    for field, gap, what, scale, unit in (
            ("other_cpus", BUSIER_CPUS, others + " kept {} busy on average",
             1, " CPUs"),
            ("steal", BUSIER_STEAL, "a hypervisor took {} of the CPU time",
             100, " %")):
        def shown(value: float) -> str:
            return f"{value * scale:.{1 if scale == 1 else 0}f}"

        before, session_before = _readings(
            base, sessions[0] if sessions else None, field)
        after, session_after = _readings(
            new, sessions[1] if sessions else None, field)
        cpus = [r.meta.get("host", {}).get("cpus") for r in (*base, *new)]
        if None in before or None in after:
            if None in session_before or None in session_after:
                continue
            before, after, over_session = \
                session_before, session_after, True
            cpus = [(s or {}).get("cpus") for side in sessions or ()
                    for s in side]
        now = float(np.mean(after))
        if now - max(before) >= _gap(field, gap, cpus, max(before)):
            words.add("busier")
        elif min(before) - now >= _gap(field, gap, cpus, now):
            words.add("quieter")
        else:
            continue
        low, high = shown(min(before)), shown(max(before))
        was = low if low == high else f"{low}-{high}"
        runs = "run" if len(base) == 1 else "runs"
        if over_session:
            runs = "run's session" if len(base) == 1 else "runs' sessions"
        said.append(what.format(shown(now) + unit) +
                    f" ({was}{unit} in the base {runs})")
    if not said:
        return "", ""
    word = words.pop() if len(words) == 1 else \
        "busier by one measure and quieter by another"
    runs = "run" if len(new) == 1 else "runs"
    during = (f"over the session of the new {runs} (a run itself too "
              f"short to tell)" if over_session else f"during the new {runs}")
    return (f"the machine was {word} {during}: "
            f"{'; '.join(said)}. A busier machine slows unchanged code "
            f"and a quieter one speeds it: compare runs made under the "
            f"same load"), word


def _runs(reports: Runs, side: str) -> List["Report"]:
    many = [reports] if isinstance(reports, Report) else list(reports) \
        if isinstance(reports, (list, tuple)) else None
    if not many or not all(isinstance(r, Report) for r in many):
        raise TypeError(f"{side} must be a Report or a non-empty list of "
                        f"Reports (runs of one program), got "
                        f"{type(reports).__name__}")
    # one run given twice would pass for two that agree exactly
    for i, run in enumerate(many):
        for j in range(i):
            if many[j] == run:
                raise ValueError(f"{side} runs {j + 1} and {i + 1} are the "
                                 f"same run: give each run once")
    return many


def _resolution_ns(meta: Dict[str, Any], key: str,
                   field: Optional[str]) -> float:
    value = meta.get(key)
    if field is not None:
        value = value.get(field) if isinstance(value, dict) else None
    return float(value) if isinstance(value, (int, float)) else 0.0


def stage_changes(base: Sequence["Report"], new: Sequence["Report"],
                  threshold: float = 0.05, alpha: float = 0.01,
                  own: bool = False, measure: str = "wall"
                  ) -> List[StageChange]:
    """The verdict of every stage of the new runs against the base runs,
    then the stages gone from new; own: judged on self time. A stage
    missing from some runs of a side counts as a run that never called
    it."""
    before = [run_figures(r, own, measure) for r in base]
    after = [run_figures(r, own, measure) for r in new]
    # thread CPU time is read at most every cpu_resolution_ns (a call's is
    # known to within that at each edge); wall time to within what timing
    # a call costs (the calibrated stage pair): an empty stage's few
    # hundred ns a run doubling is the clock's jitter, which failed a gate
    # on unchanged code
    key, field = (("cpu_resolution_ns", None) if measure == "cpu" else
                  ("overhead", "span_ns"))
    resolution = max(_resolution_ns(r.meta, key, field)
                     for r in (*base, *new)) * 1e-9
    none = RunFigures(0.0, 0, 0.0, 0.0, np.zeros(0))

    def side(runs: List[Dict[str, RunFigures]], path: str
             ) -> List[RunFigures]:
        return [r.get(path, none) for r in runs]

    paths_new = list(dict.fromkeys(p for r in after for p in r))
    paths_base = list(dict.fromkeys(p for r in before for p in r))
    changes: List[StageChange] = []
    for path in paths_new:
        n = side(after, path)
        calls_n = float(np.mean([r.count for r in n]))
        if path not in paths_base:
            changes.append(StageChange(path, "new", None, 0, calls_n))
            continue
        b = side(before, path)
        v = judge(b, n, threshold, alpha, resolution)
        changes.append(StageChange(path, v.word, v, v.base_calls,
                                   v.new_calls))
    for path in paths_base:
        if path not in paths_new:
            calls_b = float(np.mean([r.count for r in side(before, path)]))
            changes.append(StageChange(path, "gone", None, calls_b, 0))
    return changes


def cpu_bound(runs: Sequence["Report"], path: str,
              share: float = CPU_BOUND) -> bool:
    """Whether a stage spent at least `share` of its wall time on the CPU
    in every run that called it: then its CPU time stands for it."""
    for run in runs:
        if path in run.stage_names:
            stats = run[path]
            if stats.cpu < share * stats.wall.total:
                return False
    return True


def _cpu_grew(cpu: StageChange, threshold: float) -> bool:
    """Whether a stage's CPU time confirms a slower wall time: found
    slower, or its total grown past the threshold without the evidence
    to prove it (noisy): slower code on a busy machine, as likely as
    the machine."""
    return cpu.verdict in SLOWER or (
        cpu.verdict == NOISY and cpu.judgement is not None and
        cpu.judgement.change > threshold)


def _unconfirmed_on_busy(changes: List[StageChange],
                         base: Sequence["Report"], new: Sequence["Report"],
                         threshold: float, alpha: float) -> None:
    """Where the new runs met a busier machine: each stage found slower
    on wall time whose CPU time stands for it and was not found slower
    becomes BUSY_SLOWER, its CPU verdict kept beside it. A stage that
    waits in the base runs, or most of its time in the new ones, keeps
    its verdict (its CPU time cannot tell), and so does one whose CPU
    time grew too (_cpu_grew): slower code is caught on a busy machine
    as on a quiet one."""
    slower = [c for c in changes if c.verdict in SLOWER]
    if not slower:
        return
    cpu = {c.path: c for c in stage_changes(base, new, threshold, alpha,
                                            measure="cpu")}
    for change in slower:
        other = cpu.get(change.path)
        if other is None or other.judgement is None or \
                _cpu_grew(other, threshold) or \
                not cpu_bound(base, change.path) or \
                not cpu_bound(new, change.path, BUSY_CPU_SHARE):
            continue
        change.verdict = BUSY_SLOWER
        change.cpu = other.judgement


def gpu_change(base: Sequence["Report"], new: Sequence["Report"],
               threshold: float, alpha: float) -> str:
    """Where both sides traced GPU work: the stages whose kernels' time
    was judged slower or faster (measure "cuda"), which a stage that
    launches without waiting for the device does not show in its wall
    time; "" where none was, or GPU work was not traced on both."""
    if not all(r.gpu is not None and len(r.gpu["events"])
               for r in (*base, *new)):
        return ""
    moved = [c for c in stage_changes(base, new, threshold, alpha,
                                      measure="cuda")
             if c.verdict in (*SLOWER, "faster", "faster?")]
    if not moved:
        return ""
    said = ", ".join(f"{printable(c.path)} {c.verdict} "
                     f"({(c.change or 0.0) * 100:+.0f} %)"
                     for c in moved[:MOVED_SHOWN])
    more = f" and {len(moved) - MOVED_SHOWN} more" \
        if len(moved) > MOVED_SHOWN else ""
    return (f"the time of the kernels the stages launched moved: {said}"
            f"{more}; a stage that does not wait for the device shows it in "
            f"no wall time (compare(measure=\"cuda\"), aquaprof compare "
            f"--measure cuda)")


#: the stages a note on GPU time names
MOVED_SHOWN = 5


class Comparison:
    """Every stage of the new runs against the base runs, with its
    verdict. base and new: a Report, or a list of Reports of repeated
    runs of one program (the noise between runs is then learned from
    them); measure: "wall", "cpu" (each call's thread CPU time) or "cuda"
    (the time of the kernels each call launched, traced)."""

    def __init__(self, base: Runs, new: Runs, threshold: float = 0.05,
                 alpha: float = 0.01, measure: str = "wall",
                 sessions: Optional[Sessions] = None):
        if not (isinstance(threshold, (int, float, np.integer, np.floating))
                and 0 <= threshold < math.inf):
            raise ValueError(f"threshold must be a finite value >= 0, "
                             f"got {threshold!r}")
        if isinstance(threshold, (int, np.integer)) and threshold >= 1:
            raise ValueError(f"threshold={threshold} would be "
                             f"{int(threshold) * 100} %: it is a fraction, "
                             f"{int(threshold) / 100:g} for {threshold} %")
        if not (isinstance(alpha, (int, float)) and 0 < alpha < 1):
            raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
        if measure not in MEASURES:
            raise ValueError(f"measure must be one of {MEASURES}, got "
                             f"{measure!r}")
        self.threshold, self.alpha, self.measure = threshold, alpha, measure
        self._reports = (_runs(base, "base"), _runs(new, "new"))
        if sessions is not None and (
                len(sessions) != 2 or
                len(sessions[0]) != len(self._reports[0]) or
                len(sessions[1]) != len(self._reports[1])):
            raise ValueError("sessions must hold one reading (or None) "
                             "for each base run and each new run")
        self._sessions = sessions
        self.changes = stage_changes(*self._reports, threshold, alpha,
                                     measure=measure)
        #: a sentence when the new runs ran on another kind of machine or
        #: Python, or met a busier or quieter machine, than every base
        #: run; else ""
        self.machine = machine_notes(*self._reports, sessions)
        #: "busier" where the new runs met a busier machine than every
        #: base run (their own readings, else their sessions'), "quieter",
        #: "busier by one measure and quieter by another"; else ""
        self.load = machine_load(*self._reports, sessions)[1]
        if self.load == "busier" and measure == "wall":
            _unconfirmed_on_busy(self.changes, *self._reports, threshold,
                                 alpha)
        #: a sentence when some runs dropped spans (max_spans), else ""
        self.dropped = dropped_spans(*self._reports)
        #: judged on wall or CPU time, a sentence naming the stages whose
        #: CUDA time moved past the threshold, else ""
        self.gpu = "" if measure == "cuda" else gpu_change(
            *self._reports, threshold, alpha)
        #: a sentence naming the stages whose host memory moved (peak
        #: RSS, or the most it rose within a call), which no time
        #: verdict shows; else ""
        self.memory = memory_change(*self._reports, threshold)
        #: a sentence naming the stages whose items a call changed and
        #: whose time an item (items/s) moved with them; else ""
        self.items = items_change(*self._reports, threshold, alpha)
        self._own: Optional[List[StageChange]] = None

    def _load_unknown(self) -> str:
        """Where stages were called slower and how busy the machine was
        is not known of some runs (too short to tell): that it is not."""
        if self.machine or not self.regressions:
            return ""
        sessions = self._sessions or ([None] * len(self._reports[0]),
                                      [None] * len(self._reports[1]))
        silent = sum(1 for side in (0, 1)
                     for r, s in zip(self._reports[side], sessions[side])
                     if "other_cpus" not in r.meta.get("host", {}) and
                     "other_cpus" not in (s or {}))
        if not silent:
            return ""
        total = sum(self.runs)
        which = "the runs" if silent == total else \
            f"{silent} of the {total} runs"
        return (f"how busy the machine was is not known for {which} (a "
                f"run too short to tell, under {BUSY_SECONDS:g} s on 2 "
                f"CPUs, or a system or version that does not say): a "
                f"busier machine slows unchanged code, and only runs made "
                f"under the same load can tell")

    @property
    def runs(self) -> Tuple[int, int]:
        """How many runs each side holds: (base, new)."""
        return len(self._reports[0]), len(self._reports[1])

    @property
    def own_changes(self) -> List[StageChange]:
        """The same verdicts on each stage's self time (a call less the
        sub-stage calls inside it), so that a stage is not called slower
        for what its sub-stages did: the differential flamegraph colours
        by these."""
        if self._own is None:       # on demand: a second pass
            self._own = stage_changes(*self._reports, self.threshold,
                                      self.alpha, own=True,
                                      measure=self.measure)
        return self._own

    @property
    def regressions(self) -> List[StageChange]:
        """Stages found slower ("slower"; "slower?" too, where too few
        calls in one run a side allowed no resampling)."""
        return [c for c in self.changes if c.verdict in SLOWER]

    @property
    def busy_suspects(self) -> List[StageChange]:
        """Stages whose wall time grew past the threshold while the new
        runs met a busier machine, which their CPU time does not confirm
        (BUSY_SLOWER): no regression shown, nor cleared."""
        return [c for c in self.changes if c.verdict == BUSY_SLOWER]

    @property
    def noisy(self) -> List[StageChange]:
        """Stages whose total or tail moved past the threshold no further
        than chance would move it: neither slower nor the same."""
        return [c for c in self.changes if c.verdict == NOISY]

    @property
    def suspects(self) -> List[StageChange]:
        """Stages slower, or whose total or tail grew past the threshold
        without the evidence for a verdict: more runs would
        tell (the pytest gate's --aquaprof-rounds runs them)."""
        return [c for c in self.changes
                if c.judgement is not None and c.judgement.suspect]

    def __repr__(self) -> str:
        return str(self)       # what a REPL should show: the verdicts

    def _repr_html_(self) -> str:
        return text_html(str(self))

    def __str__(self) -> str:
        b, n = self.runs
        evidence = ("1 run a side: noise between runs unknown, only the "
                    "calls' own spread is" if b == n == 1 else
                    f"{b} base and {n} new runs: the noise between runs "
                    f"learned from them")
        lines = [f"{self.measure} time per stage and run, base -> new "
                 f"(slower: the total or tail grew by more "
                 f"than {self.threshold * 100:g} % at p < {self.alpha:g}; "
                 f"{evidence})"]
        for note in (self.machine, self.dropped, self.gpu, self.memory,
                     self.items, self._load_unknown()):
            if note:
                lines.append(f"note: {note}")
        for c in self.changes:
            mark = ("!" if c.verdict in SLOWER else
                    "?" if c.verdict == BUSY_SLOWER else " ")
            lines.append(f"{mark} {printable(c.path)}: {c.summary()}")
        return "\n".join(lines)

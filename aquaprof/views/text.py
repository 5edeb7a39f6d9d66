"""Plain-ASCII rendering of a Report: the stage tree table, then the top
bottlenecks and, for several processes, the stragglers. No optional
dependency.

str(report) is format_report(report): every column, no colour, the same
text wherever it goes (logs, notebooks, files). terminal_text() is the
text to print on a stream: fit to the terminal's width and coloured when
the stream is a terminal (docs/views.md)."""
from __future__ import annotations

import math
import os
import shutil
import sys
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Sequence, \
    Tuple, Union

from ..analysis.diagnose import Diagnosis
from ..analysis.stragglers import find_stragglers, rank_waits
from ..common.words import first_of, plural, shorten, shorten_name, \
    shorten_path, wrap_line
from ..common.units import (
    align_columns, display_width, fmt_bytes, fmt_rate, fmt_time, ljust,
    printable)
from ..analysis.run_cost import run_cost
from .threads import staged_threads, thread_count, threads_summary

if TYPE_CHECKING:
    from ..model.report import Report, StageStats

_NAME_MAX = 40
#: the longest a stage path is shown on a line of its own, where no
#: terminal width is known
PATH_MAX = 120
#: the fewest characters a shortened stage label keeps
_NAME_MIN = 12


def _were(n: int) -> str:
    return "was" if n == 1 else "were"


def _them(n: int) -> str:
    return "it" if n == 1 else "them"


def _label(s: "StageStats", width: int = _NAME_MAX) -> str:
    indent = "  " * min(s.depth, width // 4)    # a deep tree keeps names
    return indent + shorten_name(printable(s.name),
                                 max(width - len(indent), _NAME_MIN // 2))


def header_lines(rep: "Report") -> List[str]:
    meta = rep.meta
    lines = [
        f"aquaprof report: {fmt_time(rep.wall)} wall, {_threads_said(rep)}, "
        f"{plural(rep.spans_recorded, 'span')} recorded, "
        f"{rep.spans_dropped:,} dropped",
    ]
    memory = (f"host RSS sampled every "
              f"{fmt_time(meta['memory_interval_ns'] * 1e-9)}"
              if meta["memory"] else "host memory not sampled")
    every = fmt_time(meta["cpu_resolution_ns"] * 1e-9)
    lines.append(f"clock {printable(meta['clock'])}; {memory}; thread CPU "
                 f"clock read at most every {every}")
    sampling = rep.sampling
    if sampling is not None:
        lines.append(sampling_line(sampling))
        # explained where they are many enough to ask about: a few in a
        # thousand, on every busy run, would make the lines boilerplate
        if sampling.late * 100 >= sampling.rounds > 0:
            lines.append(LATE_ROUNDS)
        if sampling.missed * 100 >= sampling.rounds + sampling.missed > 0:
            lines.append(missed_line(sampling))
    if meta.get("nested"):
        lines.append("nested in another Profiler: what ran while this one "
                     "did, recorded by that one under its settings")
    gpu = gpu_line(rep)
    if gpu and not _no_cuda_here(rep):
        lines.append(gpu)
    cost = cost_line(rep)
    if cost:
        lines.append(cost)
    children = _children_account(meta.get("children"))
    if children:
        lines.append(children)
    return lines


def _threads_said(rep: "Report") -> str:
    """``2 threads (MainThread, loader)``; where the sampler saw threads
    that recorded no stage, how many threads the run saw in all (those
    with stages among them), as the flamegraph's root counts them:
    ``1 thread with stages (MainThread), 7 in all``."""
    staged = staged_threads(rep.threads)
    names = threads_summary(rep.threads)
    named = f" ({names})" if names else ""
    seen, processes = thread_count(rep)
    if seen <= staged:
        return f"{plural(staged, 'thread')}{named}"
    where = f" in {processes} processes" if processes > 1 else ""
    return (f"{plural(staged, 'thread')} with stages{named}, {seen:,} in "
            f"all{where}")


#: what a late round is, said under the sampling line when there were some
LATE_ROUNDS = ("  late rounds: rounds taken more than 2 intervals after "
               "the one before (the GIL or every core was busy); each "
               "sample weighs the time since the last, so none is lost")
def missed_line(sampling: Any) -> str:
    """How many rounds the GIL cost the sampler, and why."""
    asked = sampling.rounds + sampling.missed
    return (f"  missed rounds: {sampling.missed:,} of {asked:,} asked (the "
            f"sampler needs the GIL, which a thread running Python keeps "
            f"up to its switch interval, {sys.getswitchinterval() * 1e3:g} "
            f"ms, or every core was busy); the samples taken weigh the "
            f"time since the last")


#: how a torch stage kind is said in the cost line
_HOOK_CALLS = {"torch_op": ("op call", "op calls"),
               "torch_quiet": ("other torch call", "other torch calls"),
               "torch_module": ("module call", "module calls"),
               "torch_carry": ("module call carrying the op hook",
                               "module calls carrying the op hook"),
               "torch_backward": ("backward stage call",
                                  "backward stage calls")}


def _pct(share: float) -> str:
    """A share of the run as a percentage, two decimals below 1 %."""
    return f"{share * 100:.2f}%" if share < 0.01 else f"{share * 100:.1f}%"


def cost_line(rep: "Report") -> Optional[str]:
    """What the profiler cost the run, in one line: its stage calls, the
    torch hooks, the sampler, and the total as a share of the run; None
    when the report has neither a calibration nor a sampler's account."""
    cost = run_cost(rep)
    if cost is None:
        return None
    parts = []
    if cost.calibrated:
        reads = (f", {plural(cost.readings, 'CPU-clock reading')} at "
                 f"{cost.read_ns:.0f} ns" if cost.readings else "")
        parts.append(f"stages {_pct(cost.share(cost.stages))} "
                     f"({plural(cost.stage_calls, 'call')} at "
                     f"{cost.span_ns:.0f} ns{reads})")
    calibrated = [h for h in cost.hooks if h.calibrated]
    if calibrated:
        each = ", ".join(
            f"{plural(h.calls, *_HOOK_CALLS[h.kind])} at "
            f"{fmt_time(h.seconds / h.calls)}" for h in calibrated)
        parts.append(f"torch hooks "
                     f"{_pct(cost.share(sum(h.seconds for h in calibrated)))}"
                     f" ({each})")
    unknown = [h for h in cost.hooks if not h.calibrated]
    if unknown:
        calls = ", ".join(plural(h.calls, *_HOOK_CALLS[h.kind])
                          for h in unknown)
        parts.append(f"torch hooks not calibrated in this run ({calls}; "
                     f"docs/torch.md gives their cost)")
    if cost.sampler is not None:
        parts.append(f"sampler {_pct(cost.share(cost.sampler))} (GIL held "
                     f"{fmt_time(cost.sampler)})")
    head = f"profiler cost: about {_pct(cost.share(cost.total))} of the run"
    if cost.processes > 1:
        head += f", summed over {cost.processes:,} processes"
    tail = ("compensated times: StageStats.compensated_total/_self"
            if cost.calibrated else
            "stage calls not calibrated (compensate=False)")
    return f"{head}: {', '.join(parts)}; {tail}"


#: why a run on a machine without CUDA traced no GPU: nothing was expected
_NO_CUDA = ("no CUDA driver", "no CUDA device")


def _no_cuda_here(rep: "Report") -> bool:
    """Whether the GPU went untraced only because this machine (each run
    merged into the report) has no CUDA driver or no device: the ordinary
    CPU run. Child processes a run captured never look for a GPU: the
    status is their parent's."""
    status = rep.gpu_status
    found = sum(status.count(reason) for reason in _NO_CUDA)
    runs = rep.meta.get("host", {}).get("merged", 1)
    return rep.gpu is None and found >= max(runs, 1)


def gpu_line(rep: "Report") -> Optional[str]:
    """The GPU in one line: what was traced; why not, when a GPU was
    there or asked for; just the short reason on a machine with no CUDA;
    None when cuda=False or a nesting Profiler recorded the run."""
    status = rep.gpu_status
    if status.startswith("off (cuda=False)") or rep.meta.get("nested"):
        return None
    if rep.gpu is not None:
        return f"GPU: {printable(status)}"
    if _no_cuda_here(rep):
        reasons = [r for r in _NO_CUDA if r in status]
        return f"GPU: not traced ({' / '.join(reasons)})"
    why = status[len("not traced: "):] if status.startswith(
        "not traced: ") else status
    return f"GPU: not traced ({printable(why)})"


def sampling_line(sampling: Any) -> str:
    """How the code was sampled, in one line (a Sampling)."""
    extra = [f"{what}: {n:,}" for what, n in (
        ("late rounds", sampling.late), ("samples lost", sampling.lost),
        ("left out of the timeline past max_samples",
         sampling.timeline_dropped)) if n]
    return (f"code sampled every {fmt_time(sampling.interval)}: "
            f"{plural(sampling.samples, 'sample')} in "
            f"{plural(sampling.rounds, 'round')}"
            + (f" ({', '.join(extra)})" if extra else "")
            + "; report[STAGE].hot() names the hot functions")


def _children_account(children: Optional[Dict[str, Any]]) -> Optional[str]:
    """The child processes' account when none was lost: a fact of the
    run, said in the header (a warning only for a loss)."""
    if not children or not children["started"] or "error" in children \
            or children["lost"]:
        return None
    return (f"child processes: {children['started']:,} started, "
            f"{children['reported']:,} reported")


def _children_lines(children: Optional[Dict[str, Any]]) -> List[str]:
    """The child processes lost, and why, or why none was profiled, so
    that no total is read as complete when it is not."""
    if not children or not (children["started"] or "error" in children):
        return []
    if "error" in children:
        return [f"! child processes were not profiled: "
                f"{printable(children['error'])}"]
    lost = children["lost"]
    if not lost:
        return []
    out = [f"! child processes: {children['started']:,} started, "
           f"{children['reported']:,} reported, {len(lost):,} lost: "
           f"their stages are missing from every figure"]
    for child in lost[:5]:
        out.append(f"!   {printable(child['label'])}: {child['reason']}")
    if len(lost) > 5:
        out.append(f"!   and {len(lost) - 5:,} more")
    return out


#: RSS moved by the stages, summed, from which their mem delta is read as
#: kept memory (a leak) and where it lands matters
_MEMORY_MOVED = 64 << 20


def _memory_sampled_through(rep: "Report") -> Optional[str]:
    """Where stages whose calls are shorter than the RSS interval moved
    memory: RSS read between their samples is charged to whichever stage
    was open at the next sample, so the memory one keeps may show under
    another; None where it cannot mislead."""
    interval = rep.meta.get("memory_interval_ns")
    if not rep.meta.get("memory") or not interval:
        return None
    short = [s for s in rep.stages
             if s.count > 1 and s.wall.mean * 1e9 < interval]
    moved = sum(abs(s.mem_delta) for s in rep.stages if s.depth == 0)
    if len(short) < 2 or moved < _MEMORY_MOVED:
        return None
    listed = first_of([f"{printable(s.path)} ({fmt_time(s.wall.mean)} a "
                       f"call, {fmt_bytes(s.mem_delta, True)})"
                       for s in short], 5)
    return (f"! mem delta comes from RSS sampled every "
            f"{fmt_time(interval * 1e-9)}: stages whose calls are shorter "
            f"are charged what the samples saw while each happened to be "
            f"open, so memory one keeps may show under another: {listed}; "
            f"tracemalloc, or a smaller memory_interval, tells "
            f"which keeps it")


def warning_lines(rep: "Report") -> List[str]:
    meta = rep.meta
    out = []
    if meta.get("ended_by"):
        out.append(f"! the run was cut short: {printable(meta['ended_by'])} "
                   f"ended the profiled block; the profile covers it up "
                   f"to there")
    if rep.spans_dropped:
        n = rep.spans_dropped
        out.append(f"! {plural(n, 'span')} beyond max_spans="
                   f"{meta['max_spans']:,} {_were(n)} not kept as raw "
                   f"spans; the table still counts {_them(n)}")
        if len(rep.threads) > 1 or any(s.suspended for s in rep.stages):
            # calls of several threads or tasks may overlap, and only
            # the kept spans tell by how much
            out.append("!   the time on the run's clock of calls that "
                       "overlapped (the bottlenecks' ranking, items/s) is "
                       "judged from the kept spans alone")
    if rep.unclosed:
        open_ones = ", ".join(printable(s.path) for s in rep.stages
                              if s.unclosed)
        n = rep.unclosed
        out.append(f"! {plural(n, 'stage call')} {_were(n)} not closed by "
                   f"{'its' if n == 1 else 'their'} own exit (still open "
                   f"at stop(), or left open inside a stage that exited): "
                   f"{open_ones}")
    suspended = [s for s in rep.stages if s.suspended]
    if suspended:
        listed = first_of([f"{printable(s.path)} ({s.suspended:,} of "
                           f"{s.count:,})" for s in suspended], 5)
        out.append(f"  calls suspended at an await have no CPU time of "
                   f"their own (their thread ran other tasks meanwhile); "
                   f"cpu counts the others: {listed}")
    out += _children_lines(meta.get("children"))
    sampled_through = _memory_sampled_through(rep)
    if sampled_through:
        out.append(sampled_through)
    if meta["lost"]:
        n = meta["lost"]
        out.append(f"! {plural(n, 'stage call')} {_were(n)} not recorded "
                   f"in full: out of memory")
    if meta.get("stages_overflowed"):
        n = meta["stages_overflowed"]
        out.append(f"! {plural(n, 'entry', 'entries')} of stage paths "
                   f"past max_stages={meta.get('max_stages', 0):,} "
                   f"{_were(n)} counted under '(over max_stages)'")
    if meta.get("stages_too_deep"):
        n = meta["stages_too_deep"]
        out.append(f"! {plural(n, 'entry', 'entries')} of stages nested "
                   f"past the deepest a report holds {_were(n)} counted "
                   f"under '(over max depth)'")
    if meta.get("spans_shed"):
        n = meta["spans_shed"]
        out.append(f"! {plural(n, 'raw span')} {_were(n)} left out of "
                   f"the report: out of memory at report(); the table "
                   f"still counts {_them(n)}")
    for s in rep.stages:
        if s.raised:
            out.append(f"! {printable(s.path)}: {s.raised:,} of "
                       f"{plural(s.count, 'call')} raised")
    gpu = rep.gpu
    if gpu and gpu["dropped"]:
        n = gpu["dropped"]
        out.append(f"! {plural(n, 'GPU activity record')} {_were(n)} "
                   f"lost (CUPTI's buffers or memory ran out)")
    if gpu and gpu["unattributed"]:
        n = gpu["unattributed"]
        out.append(f"  {plural(n, 'GPU event')} {_were(n)} launched "
                   f"outside any stage (report.gpu_events(), stage -1)")
    return out


def _cuda_cells(cuda: Any) -> List[str]:
    """Kernel time, kernel count, copy time and GPU idle share."""
    if cuda is None:
        return ["-", "-", "-", "-"]
    idle = "-" if cuda.idle_share is None else f"{cuda.idle_share * 100:.0f}%"
    return [fmt_time(cuda.kernel_time), f"{cuda.kernels:,}",
            fmt_time(cuda.memcpy_time) if cuda.memcpy else "-", idle]


def _process_label(label: str) -> str:
    return shorten(printable(label), _NAME_MAX)


def _call_ratio(slow: float, fast: float) -> str:
    if fast > 0:
        return f"{slow / fast:.2f}x"
    return "inf" if slow > 0 else "1.00x"


def straggler_lines(rep: "Report", top: int = 3) -> List[str]:
    """The stages whose slowest process lost the most time to their
    fastest, when the report holds several processes; none otherwise."""
    if len(rep.processes) < 2:
        return []
    found = [s for s in find_stragglers(rep, top) if s.lost > 0]
    if not found:
        return []
    lines = ["Stragglers (per stage, the slowest and the fastest process "
             "by total time):"]
    paths = [printable(s.path) for s in found]
    width = max(display_width(p) for p in paths)
    waits = rank_waits(rep)
    for i, (s, path) in enumerate(zip(found, paths), 1):
        slow, fast = s.slowest, s.fastest
        ratio = "inf" if math.isinf(s.ratio) else f"{s.ratio:.2f}x"
        # a process given more calls (a pool's worker taking whatever
        # comes next) is busier, not slower: its call against the other's
        # tells which
        calls = (f"; {slow.count:,} vs {fast.count:,} calls of "
                 f"{fmt_time(slow.mean)} vs {fmt_time(fast.mean)} "
                 f"({_call_ratio(slow.mean, fast.mean)} a call)"
                 if slow.count != fast.count else "")
        if s.path in waits:   # its slowest only waited for its fastest
            cause = waits[s.path].cause
            calls += (f" (the others wait here for "
                      f"{_process_label(fast.label)}, slowest in "
                      f"{printable(cause.path)})")
        lines.append(f"  {i}. {ljust(path, width)}  slowest "
                     f"{_process_label(slow.label)} {fmt_time(slow.total)}, "
                     f"fastest {_process_label(fast.label)} "
                     f"{fmt_time(fast.total)}: {ratio}, "
                     f"{fmt_time(s.lost)} lost{calls}")
    return lines


#: columns left out first when the table is wider than the terminal, and
#: where long stage labels are shortened (an int: the widest label kept);
#: stage, total and self always stay
_FIT_ORDER: Tuple[Union[str, int], ...] = (
    "p50", "max", "mean", "mem delta", "copies", "gpu idle", "kernels", 28,
    "share", 20, "items/s", "cpu", "p95", "cuda", "count", _NAME_MIN)

# ANSI SGR codes of the few colours the table uses
_BOLD, _RED, _YELLOW, _RESET = "\x1b[1m", "\x1b[31m", "\x1b[33m", "\x1b[0m"


def _paint(line: str, code: str, color: bool) -> str:
    return f"{code}{line}{_RESET}" if color and line else line


def _stage_columns(rep: "Report") -> List[Tuple[str, List[str]]]:
    """The table's columns after the stage labels: (heading, cells)."""
    gpu = rep.gpu is not None
    cells: List[List[str]] = []
    for s in rep.stages:
        w = s.wall
        cells.append([
            f"{s.count:,}", fmt_time(w.total), fmt_time(s.self_time),
            fmt_time(w.mean), fmt_time(w.p50), fmt_time(w.p95),
            fmt_time(w.max), fmt_time(s.cpu),
        ] + (_cuda_cells(s.cuda) if gpu else []) + [
            f"{s.share * 100:.1f}%",
            # RSS is the process's: a peak would show the whole process
            # on every row, so only each call's own change is summed
            fmt_bytes(s.mem_delta, signed=True) if s.mem_peak else "-",
            fmt_rate(s.throughput),
        ])
    headings = (["count", "total", "self", "mean", "p50", "p95", "max",
                 "cpu"] + (["cuda", "kernels", "copies", "gpu idle"]
                           if gpu else []) + ["share", "mem delta",
                                              "items/s"])
    return [(h, [row[i] for row in cells]) for i, h in enumerate(headings)]


def _table_width(table: Sequence[Tuple[str, List[str]]],
                 labels: List[str]) -> int:
    widths = [max(display_width(x) for x in ["stage"] + labels)]
    widths += [max(display_width(x) for x in [h] + c) for h, c in table]
    return sum(widths) + 2 * (len(widths) - 1)


def _fit(rep: "Report", width: Optional[int]
         ) -> Tuple[List[Tuple[str, List[str]]], List[str], List[str]]:
    """The columns and stage labels of the table at most width characters
    wide where it can be, and the headings left out; width None keeps
    every column. Columns with nothing to show ("-" only) go first."""
    columns = _stage_columns(rep)
    name_max = _NAME_MAX
    labels = [_label(s, name_max) for s in rep.stages]
    if width is None:
        return columns, labels, []
    dropped: List[str] = []
    steps: List[Union[str, int]] = [h for h, c in columns
                                    if all(x == "-" for x in c)]
    steps += [step for step in _FIT_ORDER if step not in steps]
    for step in steps:
        if _table_width(columns, labels) <= width:
            break
        if isinstance(step, int):
            name_max = min(name_max, max(step, width - (
                _table_width(columns, labels) -
                max(map(display_width, labels)))))
            labels = [_label(s, name_max) for s in rep.stages]
        elif any(h == step for h, _ in columns):
            columns = [(h, c) for h, c in columns if h != step]
            dropped.append(step)
    return columns, labels, dropped


def terminal_width() -> int:
    """The terminal's width in columns: COLUMNS when set, else the
    terminal's own, else 80."""
    return shutil.get_terminal_size().columns


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, OSError, ValueError):   # closed, detached
        return False


def wants_color(stream: Any) -> bool:
    """Whether text for stream should be coloured: a terminal that is not
    TERM=dumb, and NO_COLOR unset or empty (no-color.org)."""
    if os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
        return False
    return _isatty(stream)


def terminal_text(rep: "Report", stream: Any = None,
                  color: Optional[bool] = None,
                  width: Optional[int] = None) -> str:
    """The report as text to print on stream (sys.stdout by default): on
    a terminal, coloured (color=None: unless NO_COLOR or TERM=dumb) and
    fit to its width (width=None: COLUMNS or the terminal's); piped or in
    a file, the plain full text of str(report), unless color or width
    (or COLUMNS) say otherwise."""
    stream = sys.stdout if stream is None else stream
    if color is None:
        color = wants_color(stream)
    if width is None and (_isatty(stream) or os.environ.get("COLUMNS")):
        width = terminal_width()
    return format_report(rep, width=width, color=color)


def format_report(rep: "Report", width: Optional[int] = None,
                  color: bool = False) -> str:
    """The report as text: str(report) with the defaults. width: fit the
    stage table to that many columns (least important columns left out
    first, then long stage labels shortened in the middle; rows never
    wrap), and wrap the lines of prose around it under their own indent;
    color: ANSI colours for a terminal."""
    def fit(prose: List[str]) -> List[str]:
        # the table fits by its columns; the lines of prose, by wrapping
        return [part for line in prose for part in wrap_line(line, width)]

    lines = fit(header_lines(rep))
    stages = rep.stages
    if not stages:
        lines.append("")
        lines.append("no stages were recorded (mark them with "
                     "aquaprof.stage)")
        return "\n".join(lines + fit(warning_lines(rep) + _gpu_footer(rep)))
    columns, labels, dropped = _fit(rep, width)
    rows = [["stage"] + [h for h, _ in columns]]
    rows += [[label] + [c[i] for _, c in columns]
             for i, label in enumerate(labels)]
    top = rep.bottlenecks(3)
    hottest = top[0][0].id if top else None
    table = align_columns(rows)
    lines.append("")
    lines.append(_paint(table[0], _BOLD, color))
    lines += [_paint(line, _RED, color and s.id == hottest)
              for line, s in zip(table[1:], stages)]
    if dropped:
        note = f"(left out to fit: {', '.join(dropped)})"
        lines.append(note if len(note) <= (width or 0) else
                     f"({plural(len(dropped), 'column')} left out to fit)")
    summed = summed_note(rep)
    if summed:
        lines += fit([summed])
    if top:
        lines.append("")
        lines.append(_paint(f"Top {plural(len(top), 'bottleneck')} by self "
                            f"time:", _BOLD, color))
        # a path keeps what the rank, time and share leave of the line
        paths = [shorten_path(printable(s.path),
                              PATH_MAX if width is None else
                              max(width - 35, _NAME_MIN)) for s, _ in top]
        path_width = max(display_width(p) for p in paths)
        for i, ((s, ranked), path) in enumerate(zip(top, paths), 1):
            share = ranked / rep.wall * 100 if rep.wall else 0.0
            lines.append(f"  {i}. {ljust(path, path_width)}  "
                         f"{fmt_time(ranked):>9}  {share:5.1f}% of run"
                         f"{overlap_note(s)}{recursion_note(rep, s)}")
    stragglers = straggler_lines(rep)
    if stragglers:
        lines.append("")
        lines += fit(stragglers)
    warnings = warning_lines(rep)
    if warnings:
        lines.append("")
        lines += [_paint(part, _YELLOW, color and w.startswith("!"))
                  for w in warnings for part in wrap_line(w, width)]
    if top:
        lines.append("")
        lines += fit(Diagnosis(rep).summary(width).split("\n"))
    return "\n".join(lines + fit(_gpu_footer(rep)))


def overlap_note(s: "StageStats") -> str:
    """What a stage's calls summed where they overlapped: its time on the
    run's clock counts that once."""
    if s.self_wall >= s.self_time * 0.99:
        return ""
    if s.awaited_sub_stages:
        return (f"  (self time {fmt_time(s.self_time)}: its sub-stages ran "
                f"in tasks it awaited)")
    if s.at_once <= 1 and s.clock.measured(s.id):
        # every call kept and none at once: the instants it lost went to
        # sub-stages open meanwhile in tasks of its thread's event loop
        return (f"  (self time {fmt_time(s.self_time)}: its sub-stages ran "
                f"in other tasks on its thread meanwhile)")
    if s.at_once <= 1:
        return (f"  ({fmt_time(s.self_time)} summed over its calls, more "
                f"than the run: their spans were dropped (max_spans), so "
                f"how many ran at once is unknown)")
    return (f"  ({fmt_time(s.self_time)} summed over its calls, up to "
            f"{s.at_once:,} at once)")


def recursion_note(rep: "Report", s: "StageStats") -> str:
    """How many levels of a recursive stage its ranked time sums: each
    level is a path of its own in the table."""
    levels = rep.recursion(s)
    if len(levels) == 1:
        return ""
    name = printable(s.name)
    # a call of itself through other stages (expr/term/expr) has them
    # between its levels: one of them is enough to say so
    paths = {level.path for level in levels}
    direct = all(level.parent in paths for level in levels[1:])
    shape = f"{name}/{name}/..." if direct else f"{name}/.../{name}"
    return f"  (with its recursion: {len(levels):,} paths {shape})"


def summed_note(rep: "Report") -> Optional[str]:
    """Why a share passes 100 %, when one does: a report of several
    processes sums each stage's time over them."""
    processes = len(rep.processes)
    if processes < 2 or not any(s.share > 1 for s in rep.stages):
        return None
    return (f"(share: each stage's time summed over the {processes:,} "
            f"processes, against the run's wall time; past 100% where "
            f"processes ran it at once)")


def _gpu_footer(rep: "Report") -> List[str]:
    """On a machine with no CUDA, the short reason why no GPU was traced,
    once, at the end: nothing was missed there."""
    line = gpu_line(rep)
    return ["", line] if line and _no_cuda_here(rep) else []

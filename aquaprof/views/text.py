"""Plain-ASCII rendering of a Report: the stage tree table, then the top
bottlenecks and, for several processes, the stragglers. No optional
dependency."""
from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any, Dict, List, Optional

from .._units import align_columns, fmt_bytes, fmt_rate, fmt_time, \
    printable

if TYPE_CHECKING:
    from ..report import Report, StageStats

_NAME_MAX = 40


def _label(s: "StageStats") -> str:
    indent = "  " * min(s.depth, _NAME_MAX)    # the rest is cut anyway
    text = indent + printable(s.name[:_NAME_MAX])
    return text if len(text) <= _NAME_MAX else text[:_NAME_MAX - 1] + "~"


def header_lines(rep: "Report") -> List[str]:
    meta = rep.meta
    threads = len(rep.threads)
    lines = [
        f"aquaprof report: {fmt_time(rep.wall)} wall, {threads} "
        f"thread{'s' if threads != 1 else ''}, {rep.spans_recorded:,} spans "
        f"recorded, {rep.spans_dropped:,} dropped",
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
    if meta.get("nested"):
        lines.append("nested in another Profiler: what ran while this one "
                     "did, recorded by that one under its settings")
    lines.append(f"GPU: {printable(rep.gpu_status)}")
    cost = meta.get("overhead")
    if cost:
        calls = sum(s.count for s in rep.stages)
        share = calls * cost["span_ns"] * 1e-9 / rep.wall if rep.wall else 0
        lines.append(f"profiler cost: {cost['span_ns']:.0f} ns a stage "
                     f"call (calibrated), {calls:,} calls, about "
                     f"{share * 100:.2f}% of the run; compensated times: "
                     f"StageStats.compensated_total/_self")
    return lines


def sampling_line(sampling: Any) -> str:
    """How the code was sampled, in one line (a Sampling)."""
    extra = [f"{what}: {n:,}" for what, n in (
        ("late rounds", sampling.late), ("samples lost", sampling.lost),
        ("left out of the timeline past max_samples",
         sampling.timeline_dropped)) if n]
    return (f"code sampled every {fmt_time(sampling.interval)}: "
            f"{sampling.samples:,} samples in {sampling.rounds:,} rounds"
            + (f" ({', '.join(extra)})" if extra else "")
            + "; report[STAGE].hot() names the hot functions")


def _children_lines(children: Optional[Dict[str, Any]]) -> List[str]:
    """The child processes' account: those whose stages are missing, and
    why, so that no total is read as complete when it is not."""
    if not children:
        return []
    if "error" in children:
        return [f"! child processes were not profiled: "
                f"{printable(children['error'])}"]
    lost = children["lost"]
    line = (f"  child processes: {children['started']:,} started, "
            f"{children['reported']:,} reported")
    if not lost:
        return [line]
    out = [f"! {line.strip()}, {len(lost):,} lost: their stages are "
           f"missing from every figure"]
    for child in lost[:5]:
        out.append(f"!   {printable(child['label'])}: {child['reason']}")
    if len(lost) > 5:
        out.append(f"!   and {len(lost) - 5:,} more")
    return out


def warning_lines(rep: "Report") -> List[str]:
    meta = rep.meta
    out = []
    if rep.spans_dropped:
        out.append(f"! {rep.spans_dropped:,} spans beyond max_spans="
                   f"{meta['max_spans']:,} were not kept as raw spans; the "
                   f"table still counts them")
    if rep.unclosed:
        open_ones = ", ".join(printable(s.path) for s in rep.stages
                              if s.unclosed)
        out.append(f"! {rep.unclosed} stage call(s) were not closed by their "
                   f"own exit (still open at stop(), or left open inside a "
                   f"stage that exited): {open_ones}")
    suspended = [s for s in rep.stages if s.suspended]
    if suspended:
        listed = ", ".join(f"{printable(s.path)} ({s.suspended} of {s.count})"
                           for s in suspended[:5])
        more = f" and {len(suspended) - 5} more" if len(suspended) > 5 else ""
        out.append(f"  calls suspended at an await have no CPU time of "
                   f"their own (their thread ran other tasks meanwhile); "
                   f"cpu counts the others: {listed}{more}")
    out += _children_lines(meta.get("children"))
    if meta["lost"]:
        out.append(f"! {meta['lost']:,} stage calls were not recorded in "
                   f"full: out of memory")
    if meta.get("stages_overflowed"):
        out.append(f"! {meta['stages_overflowed']:,} entries of stage paths "
                   f"past max_stages={meta.get('max_stages', 0):,} were "
                   f"counted under '(over max_stages)'")
    if meta.get("spans_shed"):
        out.append(f"! {meta['spans_shed']:,} raw spans were left out of "
                   f"the report: out of memory at report(); the table "
                   f"still counts them")
    for s in rep.stages:
        if s.raised:
            out.append(f"! {printable(s.path)}: {s.raised} of {s.count} "
                       f"calls raised")
    gpu = rep.gpu
    if gpu and gpu["dropped"]:
        out.append(f"! {gpu['dropped']:,} GPU activity records were lost "
                   f"(CUPTI's buffers or memory ran out)")
    if gpu and gpu["unattributed"]:
        out.append(f"  {gpu['unattributed']:,} GPU events were launched "
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
    text = printable(label)
    return text if len(text) <= _NAME_MAX else text[:_NAME_MAX - 1] + "~"


def straggler_lines(rep: "Report", top: int = 3) -> List[str]:
    """The stages whose slowest process lost the most time to their
    fastest, when the report holds several processes; none otherwise."""
    if len(rep.processes) < 2:
        return []
    found = [s for s in rep.stragglers(top=top) if s.lost > 0]
    if not found:
        return []
    lines = ["Stragglers (per stage, the slowest and the fastest process "
             "by total time):"]
    paths = [printable(s.path) for s in found]
    width = max(len(p) for p in paths)
    for i, (s, path) in enumerate(zip(found, paths), 1):
        slow, fast = s.slowest, s.fastest
        ratio = "inf" if math.isinf(s.ratio) else f"{s.ratio:.2f}x"
        calls = (f"; {slow.count:,} vs {fast.count:,} calls"
                 if slow.count != fast.count else "")
        lines.append(f"  {i}. {path.ljust(width)}  slowest "
                     f"{_process_label(slow.label)} {fmt_time(slow.total)}, "
                     f"fastest {_process_label(fast.label)} "
                     f"{fmt_time(fast.total)}: {ratio}, "
                     f"{fmt_time(s.lost)} lost{calls}")
    return lines


def format_report(rep: "Report") -> str:
    lines = header_lines(rep)
    stages = rep.stages
    if not stages:
        lines.append("")
        lines.append("no stages were recorded (mark them with "
                     "aquaprof.stage)")
        return "\n".join(lines + warning_lines(rep))
    gpu = rep.gpu is not None
    rows = [["stage", "count", "total", "self", "mean", "p50", "p95", "max",
             "cpu"] + (["cuda", "kernels", "copies", "gpu idle"] if gpu
                       else []) +
            ["share", "mem peak", "mem delta", "items/s"]]
    for s in stages:
        w = s.wall
        rows.append([
            _label(s), f"{s.count:,}", fmt_time(w.total),
            fmt_time(s.self_time), fmt_time(w.mean), fmt_time(w.p50),
            fmt_time(w.p95), fmt_time(w.max), fmt_time(s.cpu),
        ] + (_cuda_cells(s.cuda) if gpu else []) + [
            f"{s.share * 100:.1f}%", fmt_bytes(s.mem_peak),
            fmt_bytes(s.mem_delta, signed=True) if s.mem_peak else "-",
            fmt_rate(s.throughput),
        ])
    lines.append("")
    lines += align_columns(rows)
    top = [s for s in rep.top(3) if s.self_time > 0]
    if top:
        lines.append("")
        lines.append(f"Top {len(top)} bottleneck{'s' if len(top) > 1 else ''}"
                     f" by self time:")
        paths = [printable(s.path) for s in top]
        width = max(len(p) for p in paths)
        for i, (s, path) in enumerate(zip(top, paths), 1):
            share = s.self_time / rep.wall * 100 if rep.wall else 0.0
            lines.append(f"  {i}. {path.ljust(width)}  "
                         f"{fmt_time(s.self_time):>9}  {share:5.1f}% of run")
    stragglers = straggler_lines(rep)
    if stragglers:
        lines.append("")
        lines += stragglers
    warnings = warning_lines(rep)
    if warnings:
        lines.append("")
        lines += warnings
    if top:
        lines.append("")
        lines.append(rep.diagnose().summary())
    return "\n".join(lines)

"""Plain-ASCII rendering of a Report: the stage tree table, then the top
bottlenecks. No optional dependency."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, List, Optional, Sequence

if TYPE_CHECKING:
    from .report import Report, StageStats

_NAME_MAX = 40


def fmt_time(seconds: float) -> str:
    if seconds == 0:
        return "0"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: Optional[int], signed: bool = False) -> str:
    if n is None:
        return "-"
    sign = ("+" if n > 0 else "-" if n < 0 else "") if signed else ""
    v = float(abs(n))
    if v < 1024:
        return f"{sign}{v:.0f} B"
    for unit in ("KiB", "MiB"):
        v /= 1024
        if v < 1024:
            return f"{sign}{v:.1f} {unit}"
    return f"{sign}{v / 1024:.1f} GiB"


def fmt_rate(per_second: Optional[float]) -> str:
    if per_second is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.2f}{suffix}/s"
    return f"{per_second:.1f}/s"


def _label(s: "StageStats") -> str:
    text = "  " * s.depth + s.name
    return text if len(text) <= _NAME_MAX else text[:_NAME_MAX - 1] + "~"


def _table(rows: Sequence[Sequence[str]]) -> List[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [r[0].ljust(widths[0])]
        cells += [c.rjust(w) for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    return lines


def _header(rep: "Report") -> List[str]:
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
    lines.append(f"clock {meta['clock']}; {memory}; thread CPU clock read "
                 f"at most every {fmt_time(meta['cpu_resolution_ns'] * 1e-9)}")
    lines.append(f"GPU: {rep.gpu_status}")
    cost = meta.get("overhead")
    if cost:
        calls = sum(s.count for s in rep.stages)
        share = calls * cost["span_ns"] * 1e-9 / rep.wall if rep.wall else 0
        lines.append(f"profiler cost: {cost['span_ns']:.0f} ns a stage "
                     f"call (calibrated), {calls:,} calls, about "
                     f"{share * 100:.2f}% of the run; compensated times: "
                     f"StageStats.compensated_total/_self")
    return lines


def _warnings(rep: "Report") -> List[str]:
    meta = rep.meta
    out = []
    if rep.spans_dropped:
        out.append(f"! {rep.spans_dropped:,} spans beyond max_spans="
                   f"{meta['max_spans']:,} were not kept as raw spans; the "
                   f"table still counts them")
    if rep.unclosed:
        open_ones = ", ".join(s.path for s in rep.stages if s.unclosed)
        out.append(f"! {rep.unclosed} stage(s) still open at stop() were "
                   f"closed there: {open_ones}")
    if meta["lost"]:
        out.append(f"! {meta['lost']:,} stage entries were not recorded: "
                   f"out of memory")
    for s in rep.stages:
        if s.raised:
            out.append(f"! {s.path}: {s.raised} of {s.count} calls raised")
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


def format_report(rep: "Report") -> str:
    lines = _header(rep)
    stages = rep.stages
    if not stages:
        lines.append("")
        lines.append("no stages were recorded (mark them with "
                     "aquaprof.stage)")
        return "\n".join(lines + _warnings(rep))
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
    lines += _table(rows)
    top = [s for s in rep.top(3) if s.self_time > 0]
    if top:
        lines.append("")
        lines.append(f"Top {len(top)} bottleneck{'s' if len(top) > 1 else ''}"
                     f" by self time:")
        width = max(len(s.path) for s in top)
        for i, s in enumerate(top, 1):
            share = s.self_time / rep.wall * 100 if rep.wall else 0.0
            lines.append(f"  {i}. {s.path.ljust(width)}  "
                         f"{fmt_time(s.self_time):>9}  {share:5.1f}% of run")
    warnings = _warnings(rep)
    if warnings:
        lines.append("")
        lines += warnings
    if top:
        lines.append("")
        lines.append(rep.diagnose().summary())
    return "\n".join(lines)

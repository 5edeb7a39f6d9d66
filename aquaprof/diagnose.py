"""What to do next: each top stage classified from its measured figures,
with the evidence, a fix to try and the command that checks it.

Host-side classes, decided on the stage's wall and thread CPU time and the
host memory it drove up:
- cpu-bound: the thread computes for most of the stage's wall time;
- waiting: it mostly does not (I/O, sleep, locks, other processes, or the
  GPU when the stage blocks on it);
- mixed: in between;
- allocation-heavy (added to the others): while the stage was open the
  process's RSS rose ALLOC_BYTES or more above what it was when the stage
  was first entered (from the report's memory samples).
GPU classes (GPU-bound, starved, synchronisation-, transfer- and
launch-bound) need per-stage GPU activity, which reports carry once CUDA
activity is traced (issue 4); until then diagnose() says so.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, List, Optional

from ._format import fmt_bytes, fmt_time

if TYPE_CHECKING:
    from .report import Report, StageStats

CPU_BOUND = 0.8          # CPU time / wall time above this: computing
WAITING = 0.5            # below this: mostly not running
ALLOC_BYTES = 256 << 20  # RSS raised this far above the stage's entry

_FIXES = {
    "cpu-bound": (
        "the stage's own Python or C code: vectorise it (NumPy, torch), "
        "move it to the GPU, or spread it over processes",
        "python -m aquaprof run SCRIPT, then aquaprof compare BEFORE.json "
        "AFTER.json; py-spy top --pid PID shows the hot functions"),
    "waiting": (
        "overlap the wait: prefetch and read ahead (DataLoader "
        "num_workers, pin_memory), batch small I/O, and look for locks or "
        "a device synchronisation inside the stage",
        "compare the stage's CPU and wall time again after the change "
        "(aquaprof compare); strace -c -p PID shows which system calls "
        "wait"),
    "mixed": (
        "split the stage into finer stages to separate computing from "
        "waiting, then treat each part",
        "profile again with the finer stages and read diagnose() for "
        "each"),
    "allocation-heavy": (
        "reuse buffers instead of allocating per call (preallocate, "
        "out= arguments, torch.empty once), or process in smaller batches",
        "watch mem peak and the trace's host memory counter "
        "(aquaprof trace run.json -o trace.json)"),
}


@dataclass
class Finding:
    """One stage's diagnosis."""
    path: str
    kind: str                          # cpu-bound, waiting, mixed
    evidence: str
    fix: str
    verify: str
    also: List[str] = field(default_factory=list)   # allocation-heavy

    def __str__(self) -> str:
        extra = f" (also {', '.join(self.also)})" if self.also else ""
        return (f"{self.path}: {self.kind}{extra}\n"
                f"    evidence: {self.evidence}\n"
                f"    try:      {self.fix}\n"
                f"    verify:   {self.verify}")


def _entry_rss(stage: "StageStats", report: "Report") -> Optional[int]:
    """RSS when the stage was first entered: the last memory sample at or
    before its first span."""
    samples = report.memory_samples
    spans = report.spans()
    mine = spans[spans["stage"] == stage.id]
    if not samples or not len(mine):
        return None
    first = int(mine["start_ns"].min())
    before = [rss for t, rss in samples if t <= first]
    return before[-1] if before else samples[0][1]


def diagnose_stage(stage: "StageStats", report: "Report") -> Finding:
    wall = stage.wall.total
    busy = stage.cpu / wall if wall > 0 else 0.0
    kind = ("cpu-bound" if busy >= CPU_BOUND else
            "waiting" if busy < WAITING else "mixed")
    evidence = (f"thread CPU time {fmt_time(stage.cpu)} of "
                f"{fmt_time(wall)} wall ({busy * 100:.0f} %), "
                f"{stage.count} call{'s' if stage.count != 1 else ''}, "
                f"self time {fmt_time(stage.self_time)}")
    fix, verify = _FIXES[kind]
    finding = Finding(stage.path, kind, evidence, fix, verify)
    entry = _entry_rss(stage, report)
    if stage.mem_peak and entry:
        raised = stage.mem_peak - entry
        if raised >= ALLOC_BYTES:
            finding.also.append("allocation-heavy")
            fix, verify = _FIXES["allocation-heavy"]
            finding.evidence += (f"; RSS peaked {fmt_bytes(raised)} above "
                                 f"its value at entry "
                                 f"({fmt_bytes(stage.mem_delta, True)} "
                                 f"kept)")
            finding.fix += f"; and {fix}"
            finding.verify += f"; {verify}"
    return finding


class Diagnosis:
    """Findings for the top stages by self time."""

    def __init__(self, report: "Report", top: int = 3):
        if not isinstance(top, int) or isinstance(top, bool) or top < 1:
            raise ValueError(f"top must be an int >= 1, got {top!r}")
        self.findings = [diagnose_stage(s, report)
                         for s in report.top(top) if s.self_time > 0]
        self.gpu = ("GPU classes (GPU-bound, starved, sync-, transfer-, "
                    "launch-bound) need GPU activity in the report, which "
                    "this one has none of")

    def __iter__(self):
        return iter(self.findings)

    def __len__(self) -> int:
        return len(self.findings)

    def __str__(self) -> str:
        if not self.findings:
            return "Diagnosis: no stage with self time to diagnose"
        lines = ["Diagnosis of the top stages by self time:"]
        for i, f in enumerate(self.findings, 1):
            lines.append(f"  {i}. " + str(f).replace("\n", "\n   "))
        lines.append(f"  ({self.gpu})")
        return "\n".join(lines)

    def summary(self) -> str:
        """One line a stage, for the printed report."""
        if not self.findings:
            return "Diagnosis: no stage with self time to diagnose"
        lines = ["Diagnosis (details: report.diagnose()):"]
        for i, f in enumerate(self.findings, 1):
            extra = f" + {', '.join(f.also)}" if f.also else ""
            lines.append(f"  {i}. {f.path}: {f.kind}{extra}; "
                         f"{f.evidence.split(',')[0]}")
        return "\n".join(lines)

"""What a run's GPU trace left out, said in words for its report's
gpu_status line: nothing dropped goes unsaid."""
from __future__ import annotations

from typing import Any, Dict


def losses(gpu: Dict[str, Any]) -> str:
    """What the GPU trace (a report's "gpu" section) left out and why, as
    `; ...` clauses to follow the status line; "" when nothing was."""
    said = []
    if gpu["over_max"]:
        said.append(f"{gpu['over_max']:,} GPU events past max_gpu_events="
                    f"{gpu['max_events']:,} dropped")
    if gpu["incomplete"]:
        said.append(f"{gpu['incomplete']:,} records without timestamps "
                    f"(work unfinished at stop) left out")
    if gpu["late"]:
        said.append(f"{gpu['late']:,} records of an earlier run arrived "
                    f"after its report and were dropped")
    return "".join(f"; {s}" for s in said)

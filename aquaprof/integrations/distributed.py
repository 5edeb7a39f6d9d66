"""One report of a torch.distributed job: every rank's report gathered on
one rank and merged there, a process per rank.

Each rank sends the bytes of its report's JSON (what Report.save writes)
through ``torch.distributed.gather_object``, so what travels is plain
bytes, never a pickled aquaprof object, and the receiving rank reads it
with the same bounded decoder as a file. The receiving rank merges them
(aquaprof.analysis.merging: exact aggregates, clocks of other hosts
aligned on each profiler's start) and labels each process
``rank R (host)``.

Object collectives copy through the group's device. With a group whose
backend has no CPU side (NCCL alone) that is the current CUDA device,
which must then be each rank's own (torch.cuda.set_device); scripts that
only pass ``device_ids`` to DDP never set it, and every rank would copy
through GPU 0. So with the default group on such a backend the reports go
through a gloo group over the same ranks, made for the call and destroyed
after it: a few KiB to MiB of JSON need no GPU. A group the caller passes
is used as it is, under torch's rule for its device.

A rank that passes something other than a Report still takes part in the
collective, sending why in place of a report, so that the others never
wait on it; it raises TypeError and the receiving rank RuntimeError
naming it.
"""
from __future__ import annotations

import json
from typing import Any, List, Optional, Union

from ..common.checks import whole
from ..model import schema
from ..report import Report, ReportError, merge_reports

Payload = Union[bytes, str]


def gather(report: Report, dst: int = 0, group: Any = None
           ) -> Optional[Report]:
    """Gathers every rank's report on rank `dst` (a global rank, as in
    torch.distributed) and merges them: `dst` gets one Report, a process
    per rank of `group` labelled ``rank R (host)``, in rank order; the
    other ranks get None. A collective: every rank of `group` (default:
    all ranks) calls it with the same `dst`. A process outside `group`
    gets None at once, as with torch's collectives."""
    dist = _torch_distributed()
    if group is not None and dist.get_rank(group) < 0:
        return None
    ranks = dist.get_process_group_ranks(
        group if group is not None else dist.group.WORLD)
    if not whole(dst):
        raise TypeError(f"dst must be an int (a global rank), got "
                        f"{type(dst).__name__}")
    if dst not in ranks:
        raise ValueError(f"dst must be a rank of the group "
                         f"({_rank_range(ranks)}), got {dst}")
    mine = _payload(report)
    received = _gather_payloads(dist, mine, dst, group, len(ranks))
    if isinstance(mine, str):
        raise TypeError(mine)
    if received is None:
        return None
    failed = [f"rank {r}: {p}" for r, p in zip(ranks, received)
              if isinstance(p, str)]
    if failed:
        raise RuntimeError(f"{len(failed)} rank(s) sent no report: "
                           + "; ".join(failed))
    reports = [_decode(r, p) for r, p in zip(ranks, received)]
    labels = [_label(r, rep) for r, rep in zip(ranks, reports)]
    return merge_reports(reports, labels)


def _torch_distributed() -> Any:
    """torch.distributed, initialised; ImportError or RuntimeError saying
    what is missing."""
    try:
        import torch.distributed as dist
    except ImportError:
        raise ImportError("aquaprof.distributed.gather needs PyTorch: "
                          "pip install torch") from None
    if not dist.is_available():
        raise RuntimeError("aquaprof.distributed.gather needs "
                           "torch.distributed, which this PyTorch build "
                           "lacks")
    if not dist.is_initialized():
        raise RuntimeError("aquaprof.distributed.gather needs an "
                           "initialised process group: call "
                           "torch.distributed.init_process_group first")
    return dist


def _payload(report: Any) -> Payload:
    """The report's JSON as bytes, or why there is none."""
    if not isinstance(report, Report):
        return (f"report must be an aquaprof Report, got "
                f"{type(report).__name__}")
    text = json.dumps(report.to_dict(), separators=(",", ":"))
    return text.encode("utf-8")


def _gather_payloads(dist: Any, mine: Payload, dst: int, group: Any,
                     size: int) -> Optional[List[Payload]]:
    """Every rank's payload on dst, in group rank order; None elsewhere."""
    gloo = None
    if group is None and not _on_cpu(dist, dist.get_backend()):
        gloo = dist.new_group(backend="gloo")
    try:
        out: Optional[List[Any]] = [None] * size \
            if dist.get_rank() == dst else None
        dist.gather_object(mine, out, dst=dst,
                           group=gloo if gloo is not None else group)
    finally:
        if gloo is not None:
            dist.destroy_process_group(gloo)
    return out


def _on_cpu(dist: Any, backend: str) -> bool:
    """Whether a group of this backend runs object collectives on the
    CPU: a backend that serves the CPU, or a ``device:backend`` list with
    a CPU entry (torch picks that one for objects)."""
    backend = str(backend).lower()
    if ":" in backend:
        return any(pair.split(":", 1)[0].strip() == "cpu"
                   for pair in backend.split(","))
    return "cpu" in dist.Backend.backend_capability.get(backend, [])


def _decode(rank: int, payload: Payload) -> Report:
    if not isinstance(payload, bytes):
        raise ReportError(f"rank {rank} sent {type(payload).__name__}, "
                          f"not a report")
    try:
        return Report.from_dict(schema.parse_json(payload))
    except ReportError as e:
        raise ReportError(f"rank {rank} sent a report that does not "
                          f"read: {e}") from None


def _label(rank: int, report: Report) -> str:
    host = report.meta.get("host", {}).get("hostname")
    return f"rank {rank} ({host})" if host else f"rank {rank}"


def _rank_range(ranks: List[int]) -> str:
    if ranks == list(range(len(ranks))):
        return f"0 to {len(ranks) - 1}"
    shown = ", ".join(str(r) for r in ranks[:8])
    return f"ranks {shown}" + (", ..." if len(ranks) > 8 else "")


__all__ = ["gather"]

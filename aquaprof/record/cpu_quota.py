"""The CPU quota of the process's control group, which a container's CPU
limit (docker --cpus, a Kubernetes CPU limit) sets: the CPUs the process
may use on average, fewer than its affinity says, and in how many of
its quota periods the kernel held it back for running past them
(throttled). torch and OpenMP
size their thread pools by the cores they see, not by the quota, so a
process limited to 2 CPUs on a 64-core machine runs 32 threads that the
kernel stops for most of each period.

Read from Linux's cgroup files, v2 (cpu.max) or v1 (cpu.cfs_quota_us
over cpu.cfs_period_us), along the process's cgroup path and its
ancestors: the tightest limit binds; and the periods from the cpu.stat
of the cgroup that sets it (nr_periods, nr_throttled: the cgroup's, all
its processes'; its throttled time is summed over CPUs, so a count of
periods is what can be said). Never raises: unknown is None."""
from __future__ import annotations

from pathlib import Path
from typing import Iterator, List, NamedTuple, Optional, Tuple

__all__ = ["CpuLimit", "cpu_limit"]


class CpuLimit(NamedTuple):
    """The CPUs the tightest quota lets the process use (None: no quota,
    or unknown), and the quota periods of the cgroup that sets it so far
    and those in which it was throttled (None: unknown)."""
    cpus: Optional[float] = None
    periods: Optional[Tuple[int, int]] = None


def cpu_limit(root: Path = Path("/")) -> CpuLimit:
    """The process's CPU limit as its cgroup files say under root (a test
    gives a tree of its own)."""
    try:
        groups = _groups((root / "proc/self/cgroup").read_text())
    except (OSError, ValueError):
        return CpuLimit()
    fs = root / "sys/fs/cgroup"
    for hierarchy, controllers, path in groups:
        if hierarchy != "0" and "cpu" in controllers.split(","):
            for name in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
                if (fs / name).is_dir():
                    return _tightest(_dirs(fs / name, path), _v1_quota)
    for hierarchy, _controllers, path in groups:
        if hierarchy == "0" and (fs / "cgroup.controllers").exists():
            return _tightest(_dirs(fs, path), _v2_quota)
    return CpuLimit()


def _groups(text: str) -> List[Tuple[str, str, str]]:
    found = []
    for line in text.splitlines():
        hierarchy, controllers, path = line.split(":", 2)
        found.append((hierarchy, controllers, path))
    return found


def _dirs(mount: Path, path: str) -> Iterator[Path]:
    """The cgroup's folder and its ancestors' under mount, innermost
    first. A container's mount may be its own cgroup already, its path
    the host's: the walk ends at the mount either way."""
    parts = [p for p in path.split("/") if p and p != ".."]
    for depth in range(len(parts), -1, -1):
        folder = mount.joinpath(*parts[:depth])
        if folder.is_dir():
            yield folder


def _v2_quota(folder: Path) -> Optional[float]:
    quota, period = (folder / "cpu.max").read_text().split()[:2]
    return None if quota == "max" else int(quota) / int(period)


def _v1_quota(folder: Path) -> Optional[float]:
    quota = int((folder / "cpu.cfs_quota_us").read_text())
    period = int((folder / "cpu.cfs_period_us").read_text())
    return None if quota < 0 else quota / period


def _tightest(folders: Iterator[Path], quota_of) -> CpuLimit:
    """The tightest quota along the folders and the periods of the folder
    that sets it (of the innermost where none does)."""
    best: Optional[float] = None
    binding: Optional[Path] = None
    first: Optional[Path] = None
    for folder in folders:
        first = first or folder
        try:
            quota = quota_of(folder)
        except (OSError, ValueError, ZeroDivisionError):
            continue
        if quota is not None and quota > 0 and (best is None or
                                                quota < best):
            best, binding = quota, folder
    where = binding or first
    return CpuLimit(best, None if where is None else _periods(where))


def _periods(folder: Path) -> Optional[Tuple[int, int]]:
    """(nr_periods, nr_throttled) of the folder's cpu.stat."""
    try:
        stat = dict(line.split(" ", 1) for line in
                    (folder / "cpu.stat").read_text().splitlines()
                    if " " in line)
        return int(stat["nr_periods"]), int(stat["nr_throttled"])
    except (OSError, ValueError, KeyError):
        return None

"""The host a run recorded on, for its report's meta["host"]: the
machine, the Python and aquaprof, the command, the CPUs and load that
diagnose() weighs CPU starvation against, and how busy the machine was
during the run apart from it (which compare weighs: a busier machine
slows unchanged code)."""
from __future__ import annotations

import functools
import math
import os
import platform
import socket
import sys
import threading
import time
from typing import Any, Dict, FrozenSet, NamedTuple, Optional, Tuple

from .._version import __version__
from ..model.schema import BUSY_SECONDS
from .cpu_quota import CpuLimit, cpu_limit

__all__ = ["BUSY_SECONDS", "busy_between", "cpu_ticks", "host_info",
           "process_cpus", "static_host"]



@functools.lru_cache(maxsize=None)
def static_host() -> Tuple[str, str]:
    """(hostname, platform), found once per process: the platform string
    reads files, a few ms. A process that forks workers calls it first,
    so that each child does not pay it as it delivers."""
    return socket.gethostname(), _platform()


def _platform() -> str:
    """platform.platform(), on Linux without its processor: that runs
    `uname -p` in a subprocess, whose pipe a child forked meanwhile (by
    another thread) would hold open, and the start with it, for as long
    as the child lives; Linux's platform string leaves it out anyway
    (the machine's, or unknown)."""
    if sys.platform.startswith("linux"):
        uname = os.uname()
        libc, version = platform.libc_ver()
        return "-".join(part for part in (
            "Linux", uname.release, uname.machine, "with",
            libc + version) if part)
    return platform.platform()


@functools.lru_cache(maxsize=None)
def boot_id() -> Optional[str]:
    """The kernel's boot (Linux), once per process: processes that share
    it read one CLOCK_MONOTONIC, which a hostname cannot say (containers
    of one machine are named apart, two machines may share a name);
    None where the system does not say."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii",
                  errors="replace") as f:
            return f.read().strip() or None
    except OSError:
        return None


@functools.lru_cache(maxsize=None)
def cpu_model() -> Optional[str]:
    """The CPU's model name (Linux's /proc/cpuinfo), once per process;
    None where the system does not say: a comparison names a change of
    it, which moves timings with no change to the code."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model") and value.strip():
                    return " ".join(value.split())
    except OSError:
        pass
    return None


def host_info(started_at: Optional[float],
              busy: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """meta["host"] of a run started at `started_at` (time.time()); busy:
    what busy_between() found of the run."""
    hostname, system = static_host()
    cpu, boot = cpu_model(), boot_id()
    return {
        "hostname": hostname,
        "platform": system,
        "python": sys.version.split()[0],
        "aquaprof": __version__,
        **({"cpu": cpu} if cpu else {}),
        **({"boot_id": boot} if boot else {}),
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "started_at": started_at,
        **_cpus_and_load(),
        **(busy or {}),
    }


class Ticks(NamedTuple):
    """What cpu_ticks() read: when, this process's CPU seconds, each CPU's
    busy, stolen and all ticks so far (/proc/stat), the CPUs the process
    may run on then, the reading thread's native id and CPU seconds, the
    process's cgroup CPU quota, the CPU seconds of its child processes
    that have exited and been waited for, and the reading thread's run
    delay."""
    at: float
    process: float
    cpus: Dict[int, Tuple[int, int, int]]
    affinity: FrozenSet[int]
    thread: Tuple[int, float] = (0, 0.0)
    #: the process's cgroup CPU quota and its periods (cpu_quota)
    limit: CpuLimit = CpuLimit()
    children: float = 0.0
    #: the reading thread's run delay so far (thread_run_delay)
    thread_delay: Optional[float] = None


def cpu_ticks() -> Optional[Ticks]:
    """The ticks now; None where the system has no /proc/stat or it
    cannot be read. Raises nothing of its own: it runs as a session
    starts and stops (an exception from a signal handler that runs
    meanwhile is the program's, and goes on)."""
    try:
        with open("/proc/stat", "rb") as f:
            lines = [line.split() for line in f
                     if line.startswith(b"cpu") and line[3:4].isdigit()]
        cpus = {}
        for line in lines:
            # user nice system idle iowait irq softirq steal (guests are
            # in user and nice already)
            user, nice, system, idle, iowait, irq, softirq, steal = map(
                int, line[1:9])
            busy = user + nice + system + irq + softirq
            cpus[int(line[0][3:])] = (busy, steal,
                                      busy + idle + iowait + steal)
    except (OSError, ValueError):
        return None
    times = os.times()
    return Ticks(time.monotonic(), time.process_time(), cpus, _affinity(),
                 (threading.get_native_id(), time.thread_time()),
                 cpu_limit(), times.children_user + times.children_system,
                 thread_run_delay())


def thread_run_delay() -> Optional[float]:
    """The seconds this thread has been runnable but not running so far
    (Linux's run delay, the second figure of its schedstat, the file the
    sampler reads too); None where unknown."""
    try:
        with open(f"/proc/self/task/{threading.get_native_id()}/schedstat",
                  "rb") as f:
            _on_cpu, delay, slices = map(int, f.read().split()[:3])
    except (OSError, ValueError):
        return None
    # a kernel that does not count (no schedstats, delay accounting off)
    # writes zeros, no time slice even for the thread reading it
    return delay * 1e-9 if slices > 0 else None


def _affinity() -> FrozenSet[int]:
    """The CPUs this process may run on; empty where the system cannot
    say."""
    try:
        return frozenset(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return frozenset()


def busy_between(start: Optional[Ticks], stop: Optional[Ticks]
                 ) -> Dict[str, float]:
    """How busy the machine was between two cpu_ticks(), over the CPUs the
    process may run on at the second (every CPU where it cannot say):
    "other_cpus", how many of them other processes (this one's child
    processes among them) kept busy on average, and "steal", the share of
    their time a hypervisor took from this virtual machine; {} where
    unknown or too short to tell."""
    if start is None or stop is None:
        return {}
    wall = stop.at - start.at
    mine = [c for c in (stop.affinity or stop.cpus)
            if c in stop.cpus and c in start.cpus]
    busy, stolen, ticks = (
        sum(stop.cpus[c][i] - start.cpus[c][i] for c in mine)
        for i in range(3))
    if wall < BUSY_SECONDS * math.sqrt(max(1.0, len(mine) / 2)) or \
            ticks <= 0:
        return {}
    try:
        hz = os.sysconf("SC_CLK_TCK")
    except (ValueError, OSError, AttributeError):
        return {}
    if hz <= 0:
        return {}
    others = (busy / hz - (stop.process - start.process)) / wall
    return {"other_cpus": round(max(0.0, others), 3),
            "steal": round(stolen / ticks, 4)}


def process_cpus(start: Optional[Ticks], stop: Optional[Ticks]
                 ) -> Dict[str, Any]:
    """How many CPUs this process used on average between two
    cpu_ticks(), all its threads (native ones too); its child processes
    that exited and were waited for meanwhile (a subprocess it ran, a
    pool it closed: all their CPU, counted as each was reaped); where one
    thread read both, its native id, CPU seconds and run delay meanwhile
    (the seconds it waited for a CPU); and where
    its cgroup
    sets a CPU quota, the CPUs it allows, and its quota periods meanwhile
    and those in which the kernel throttled it: what diagnose()
    weighs a stage's process CPU against; {} where unknown."""
    if start is None or stop is None or stop.at <= start.at:
        return {}
    wall = stop.at - start.at
    found: Dict[str, Any] = {
        "process_cpus": round(max(0.0, stop.process - start.process) / wall,
                              3),
        "children_cpus": round(max(0.0, stop.children - start.children) /
                               wall, 3)}
    if start.thread[0] == stop.thread[0] != 0:
        found["thread_id"] = start.thread[0]
        found["thread_cpu"] = round(
            max(0.0, stop.thread[1] - start.thread[1]), 6)
        if start.thread_delay is not None and stop.thread_delay is not None:
            found["thread_delay"] = round(
                max(0.0, stop.thread_delay - start.thread_delay), 6)
    if stop.limit.cpus is not None:
        found["cpu_quota"] = round(stop.limit.cpus, 3)
        if start.limit.periods is not None and \
                stop.limit.periods is not None:
            found["quota_periods"] = max(
                0, stop.limit.periods[0] - start.limit.periods[0])
            found["throttled_periods"] = max(
                0, stop.limit.periods[1] - start.limit.periods[1])
    return found


def _cpus_and_load() -> Dict[str, Any]:
    """The CPUs this process may use and the 1-minute load average; {}
    where the system cannot say."""
    found: Dict[str, Any] = {}
    try:
        found["cpus"] = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        count = os.cpu_count()
        if count:
            found["cpus"] = count
    try:
        found["load"] = float(os.getloadavg()[0])
    except (AttributeError, OSError):
        pass
    return found

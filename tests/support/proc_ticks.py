"""The kernel's CPU tick counts (/proc/stat) for a set of CPUs, read by
tests apart from the code under test, to check that a planted busy or
idle machine was as planted."""
from typing import Iterable, NamedTuple


class CpuTicks(NamedTuple):
    busy: int       # user, nice, system, irq, softirq
    idle: int       # idle, iowait
    total: int      # those and steal


def cpu_ticks_of(cpus: Iterable[int]) -> CpuTicks:
    """The ticks so far of `cpus` (their per-CPU lines) summed."""
    wanted = set(cpus)
    busy = idle = total = 0
    with open("/proc/stat") as f:
        for line in f:
            name, *fields = line.split()
            if name.startswith("cpu") and name[3:].isdigit() and \
                    int(name[3:]) in wanted:
                user, nice, system, idle_, iowait, irq, softirq, steal = \
                    (int(t) for t in fields[:8])
                busy += user + nice + system + irq + softirq
                idle += idle_ + iowait
                total += user + nice + system + idle_ + iowait + irq + \
                    softirq + steal
    return CpuTicks(busy, idle, total)

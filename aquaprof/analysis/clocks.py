"""Whether processes' reports read one clock: span times are
CLOCK_MONOTONIC ns, which one kernel keeps for every process it runs."""
from __future__ import annotations

from typing import Any, Mapping, Sequence


def shared_clock(hosts: Sequence[Mapping[str, Any]]) -> bool:
    """Whether reports made on these meta["host"]s read one monotonic
    clock: one kernel boot where each names its boot (Linux's boot_id,
    the same in every container of a machine, apart on two machines of
    one hostname), else one hostname that each names (files written
    before boots were recorded, other systems)."""
    boots = {h.get("boot_id") for h in hosts}
    if None not in boots:
        return len(boots) == 1
    names = {h.get("hostname") for h in hosts}
    return len(names) == 1 and None not in names

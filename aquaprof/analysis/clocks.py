"""Whether processes' reports read one clock: span times are
CLOCK_MONOTONIC ns, which one kernel keeps for every process it runs."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence


def shared_clock(hosts: Sequence[Mapping[str, Any]]) -> bool:
    """Whether reports made on these meta["host"]s read one monotonic
    clock: one kernel boot where each names its boot (Linux's boot_id,
    the same in every container of a machine, apart on two machines of
    one hostname), else one hostname that each names (files written
    before boots were recorded, other systems). Two boots named are two
    clocks whatever the hostnames."""
    boots = {_text(h, "boot_id") for h in hosts}
    if len(boots - {None}) > 1:
        return False
    if None not in boots:
        return bool(boots)
    names = {_text(h, "hostname") for h in hosts}
    return len(names) == 1 and None not in names


def _text(host: Mapping[str, Any], field: str) -> Optional[str]:
    """A host's field where it is a string (a merged report's processes'
    hosts are not checked on load): anything else names nothing."""
    value = host.get(field)
    return value if isinstance(value, str) else None

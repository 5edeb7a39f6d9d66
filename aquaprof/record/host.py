"""The host a run recorded on, for its report's meta["host"]: the
machine, the Python and aquaprof, the command, and the CPUs and load
that diagnose() weighs CPU starvation against."""
from __future__ import annotations

import functools
import os
import platform
import socket
import sys
from typing import Any, Dict, Optional, Tuple

from .._version import __version__


@functools.lru_cache(maxsize=None)
def static_host() -> Tuple[str, str]:
    """(hostname, platform), found once per process: platform.platform()
    reads files and runs uname, a few ms. A process that forks workers
    calls it first, so that each child does not pay it at its exit."""
    return socket.gethostname(), platform.platform()


def host_info(started_at: Optional[float]) -> Dict[str, Any]:
    """meta["host"] of a run started at `started_at` (time.time())."""
    hostname, system = static_host()
    return {
        "hostname": hostname,
        "platform": system,
        "python": sys.version.split()[0],
        "aquaprof": __version__,
        "argv": list(sys.argv),
        "cwd": os.getcwd(),
        "started_at": started_at,
        **_cpus_and_load(),
    }


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

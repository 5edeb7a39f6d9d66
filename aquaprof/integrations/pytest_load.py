"""How busy the machine was over a whole pytest session, for the gate.

A test's run is too short (tens of ms) for the kernel's 10 ms CPU ticks
to say how busy the machine was during it, so its report does not say.
A session is long enough: the process that leads it (a serial run, or
pytest-xdist's controller) reads the machine's CPU ticks as the session
starts and as it ends, and what the machine's CPUs were kept busy with
meanwhile, less the CPU that pytest used there, is what other processes
kept busy while the suite ran: a hog beside the suite, another job on a
shared runner. pytest's CPU is the leader's own and its child
processes' (os.times(): xdist's workers, every one of their seconds from
start to exit, and the processes the tests ran and waited for), which
the kernel adds to the leader's once each has exited and been waited
for: a worker still there at the end would pass for another process, so
then the reading is not known. It is written beside the reports
(SESSION_FILE), so that a later session gated against them knows how
busy the machine was when the base ran.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..record.host import Ticks, busy_between

__all__ = ["SESSION_FILE", "read_session", "running", "session_busy",
           "write_session"]

#: the file in a --aquaprof folder that holds how busy the machine was
#: over the session that wrote it ({} where that is not known); hidden,
#: so that a shell's DIR/*.json (aquaprof merge, history --add) lists
#: the reports alone
SESSION_FILE = ".aquaprof-session.json"


def session_busy(start: Optional[Ticks], stop: Optional[Ticks],
                 workers_left: Sequence[int] = ()) -> Dict[str, float]:
    """How busy other processes than pytest kept the machine between two
    readings of the session's leader (record.host.cpu_ticks, which holds
    its exited children's CPU too): "other_cpus", "steal" (as in a
    report's meta["host"]), "seconds" and "cpus" (those the leader may
    run on); {} where not known (no
    reading, a session too short to tell, or workers_left: the ids of
    pytest-xdist workers that had not exited, whose CPU would pass for
    another process's)."""
    if workers_left:
        return {}
    found = busy_between(start, stop)
    if not found or start is None or stop is None:
        return {}
    seconds = stop.at - start.at
    children = max(0.0, stop.children - start.children) / seconds
    cpus = len(stop.affinity or stop.cpus)
    return {"other_cpus": round(max(0.0, found["other_cpus"] - children), 3),
            "steal": found["steal"], "seconds": round(seconds, 3),
            "cpus": cpus}


def running(pids: Sequence[int]) -> List[int]:
    """Those of the processes that are still there (running, or exited
    and not yet waited for)."""
    left = []
    for pid in pids:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            continue
        except (PermissionError, OSError):
            pass
        left.append(pid)
    return left


def write_session(folder: Path, busy: Dict[str, float]) -> None:
    """Writes the session's reading into a --aquaprof folder (atomically:
    a gate may read it next); {} too, so that an earlier session's
    reading is never taken for this one's. Raises OSError."""
    folder.mkdir(parents=True, exist_ok=True)
    temp = folder / (SESSION_FILE + ".tmp")
    temp.write_text(json.dumps(busy), encoding="utf-8")
    temp.replace(folder / SESSION_FILE)


def read_session(folder: Path) -> Optional[Dict[str, float]]:
    """A folder's session reading: None where it has none, cannot be read
    or holds something else (a reading is never guessed)."""
    try:
        with open(folder / SESSION_FILE, encoding="utf-8") as f:
            data: Any = json.loads(f.read(10_000))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(data, dict) or not data:
        return None
    figures: List[Any] = [data.get("other_cpus"), data.get("steal")]
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool)
               and 0 <= v < 1e6 for v in figures):
        return None
    found = {"other_cpus": float(figures[0]), "steal": float(figures[1])}
    cpus = data.get("cpus")
    if isinstance(cpus, int) and not isinstance(cpus, bool) and \
            0 < cpus < 1e6:
        found["cpus"] = cpus
    return found

"""How views name a report's threads: by the Python thread's name where
the report holds one (``threading.Thread.name``), else by index and OS
thread id, as reports always did (threads not started by ``threading``,
files written before names were recorded). Names are the program's text:
non-printable characters come escaped (_units.printable); each view
escapes them further for its format (XML, HTML, JSON)."""
from __future__ import annotations

from typing import Any, Dict, List, Mapping, Optional, Sequence

from .._units import printable

#: the most thread names a one-line summary lists, and the most
#: characters it keeps of each
SUMMARY_NAMES = 4
SUMMARY_CHARS = 40


def _name(thread: Mapping[str, Any]) -> Optional[str]:
    name = thread.get("name")
    return printable(name) if isinstance(name, str) and name else None


def thread_label(thread: Mapping[str, Any]) -> str:
    """``MainThread (tid 4242)``, or ``thread 0 (tid 4242)`` for a thread
    without a name: a track's title in the trace and speedscope."""
    who = _name(thread) or f"thread {thread['index']}"
    return f"{who} (tid {thread['native_id']})"


def threads_summary(threads: Sequence[Mapping[str, Any]],
                    most: int = SUMMARY_NAMES) -> str:
    """The threads' names in one short phrase, in order: ``MainThread,
    loader, tid 4243``; a name several threads share once with its count
    (``MainThread x4``, the main threads of a merged report); each cut to
    SUMMARY_CHARS; past `most` names, ``and N more``. Empty when no
    thread has a name (a report written before names were recorded)."""
    if not any(_name(t) for t in threads):
        return ""       # tids alone: the old header, as it always read
    counts: Dict[str, int] = {}
    for t in threads:
        short = _name(t) or f"tid {t['native_id']}"
        if len(short) > SUMMARY_CHARS:
            short = short[:SUMMARY_CHARS - 3] + "..."
        counts[short] = counts.get(short, 0) + 1
    parts: List[str] = [name if n == 1 else f"{name} x{n}"
                        for name, n in counts.items()]
    if len(parts) > most:
        parts = parts[:most] + [f"and {len(parts) - most} more"]
    return ", ".join(parts)

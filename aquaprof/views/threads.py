"""How views name a report's threads: by the Python thread's name where
the report holds one (``threading.Thread.name``), else by index and OS
thread id, as reports always did (threads not started by ``threading``,
files written before names were recorded). Names are the program's text:
non-printable characters come escaped (_units.printable); each view
escapes them further for its format (XML, HTML, JSON).

Which threads only waited (sampled all run, no stage, hardly on a CPU:
queue feeders, a DataLoader worker's resource sharer), so that the
flamegraph folds them, and how many threads and processes a report saw
in all, for its root."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, Optional, \
    Sequence, Set, Tuple

from ..common.words import first_of
from ..common.units import printable

if TYPE_CHECKING:
    from ..model.report import Report

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
    return first_of([name if n == 1 else f"{name} x{n}"
                      for name, n in counts.items()], most)


# ------------------------------------------------- who worked, who waited

#: a sampled thread that opened no stage and was on a CPU for less than
#: this share of its sampled wall time only waited (queue feeders, a
#: DataLoader worker's resource sharer, pools' idle workers): the
#: flamegraph folds such threads into one frame
IDLE_CPU_SHARE = 0.1

ThreadKey = Tuple[int, int]         # (process, native thread id)


def _key(thread: Mapping[str, Any]) -> ThreadKey:
    return (int(thread.get("process", 0)), int(thread["native_id"]))


def sampled_time(report: "Report") -> Dict[ThreadKey, List[int]]:
    """{(process, native id): [wall ns, cpu ns, opened a stage (0/1)]}
    of every thread the sampler saw."""
    out: Dict[ThreadKey, List[int]] = {}
    # by position: files of later formats add figures at the end
    for s in (report.samples or {"stacks": []})["stacks"]:
        slot = out.setdefault((s[0], s[1]), [0, 0, 0])
        slot[0] += s[5]
        slot[1] += s[6]
        if s[2] >= 0:
            slot[2] = 1
    return out


def idle_threads(report: "Report") -> Set[ThreadKey]:
    """The sampled threads that only waited: no stage opened (neither
    sampled in one nor recording spans) and on a CPU under
    IDLE_CPU_SHARE of their sampled wall time."""
    staged = {_key(t) for t in report.threads if t.get("spans", 1)}
    return {key for key, (wall, cpu, in_stage) in
            sampled_time(report).items()
            if not in_stage and key not in staged
            and cpu < IDLE_CPU_SHARE * wall}


def thread_count(report: "Report") -> Tuple[int, int]:
    """How many threads, and in how many processes, the report saw:
    those that recorded stages and those the sampler saw."""
    keys = {_key(t) for t in report.threads} | set(sampled_time(report))
    return len(keys), max(len({p for p, _ in keys}), 1)


def count_phrase(threads: int, processes: int) -> str:
    """``11 threads in 3 processes``, ``1 thread``."""
    phrase = f"{threads} thread{'s' if threads != 1 else ''}"
    return phrase + (f" in {processes} processes" if processes > 1 else "")

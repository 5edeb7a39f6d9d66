"""How views name a report's threads: by the Python thread's name where
the report holds one (``threading.Thread.name``), else by index and OS
thread id, as reports always did (threads not started by ``threading``,
files written before names were recorded). Names are the program's text:
non-printable characters come escaped (_units.printable); each view
escapes them further for its format (XML, HTML, JSON).

Which threads only waited outside their stages (most of their sampled
time outside any stage, hardly on a CPU there: queue feeders, a
DataLoader worker's resource sharer, a DataLoader worker blocked on its
queue between the items it loads), so that the flamegraph folds that
time, and how many threads and processes a report saw in all, for its
root."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, List, Mapping, NamedTuple, \
    Optional, Sequence, Set, Tuple

from ..analysis.sampled_code import in_stages
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


def _folded(n: int) -> str:
    """``16,000 ended threads, folded``: the row that sums the ended
    threads whose index a new thread took; empty for none."""
    return f"{n:,} ended threads, folded" if n else ""


def thread_label(thread: Mapping[str, Any]) -> str:
    """``MainThread (tid 4242)``, or ``thread 0 (tid 4242)`` for a thread
    without a name: a track's title in the trace and speedscope."""
    folded = _folded(int(thread.get("folded", 0)))
    if folded:
        return folded
    who = _name(thread) or f"thread {thread['index']}"
    return f"{who} (tid {thread['native_id']})"


def sampled_names(report: "Report") -> Dict["ThreadKey", str]:
    """The Python names of the sampled threads, by (process, tid), as they
    were when the sampler stopped (as when it first saw each, for one that
    had ended and was freed by then): the only name a thread
    that recorded no stage has (a pool's workers)."""
    samples = report.samples or {}
    return {(int(p), int(tid)): printable(name)
            for p, tid, name in samples.get("threads", ()) if name}


def sampled_label(names: Mapping["ThreadKey", str],
                  key: "ThreadKey") -> str:
    """``crunch_0 (tid 4243)``, or ``tid 4243`` for a thread the sampler
    found no name for: a track's title for a thread that recorded no
    stage."""
    name = names.get(key)
    return f"{name} (tid {key[1]})" if name else f"tid {key[1]}"


def staged_threads(threads: Sequence[Mapping[str, Any]]) -> int:
    """How many threads recorded stages: a folded row counts the ended
    threads it sums."""
    return sum(int(t.get("folded", 1)) for t in threads)


def threads_summary(threads: Sequence[Mapping[str, Any]],
                    most: int = SUMMARY_NAMES) -> str:
    """The threads' names in one short phrase, in order: ``MainThread,
    loader, tid 4243``; a name several threads share once with its count
    (``MainThread x4``, the main threads of a merged report); each cut to
    SUMMARY_CHARS; past `most` names, ``and N more``; then the threads
    of a folded row (``; 3,614 ended threads, folded``). Empty when no
    thread has a name (a report written before names were recorded)."""
    if not any(_name(t) for t in threads):
        return ""       # tids alone: the old header, as it always read
    counts: Dict[str, int] = {}
    # a merged report has one folded row a process
    folded = _folded(sum(int(t.get("folded", 0)) for t in threads))
    for t in threads:
        if t.get("folded"):
            continue
        short = _name(t) or f"tid {t['native_id']}"
        if len(short) > SUMMARY_CHARS:
            short = short[:SUMMARY_CHARS - 3] + "..."
        counts[short] = counts.get(short, 0) + 1
    names = first_of([name if n == 1 else f"{name} x{n}"
                      for name, n in counts.items()], most)
    return f"{names}; {folded}" if folded else names


# ------------------------------------------------- who worked, who waited

#: a sampled thread that was on a CPU, or waiting for one or for the GIL,
#: for less than this share of its sampled wall time outside any stage,
#: and spent most of its time there, only waited there (queue feeders, a
#: DataLoader worker's resource sharer, pools' idle workers, a DataLoader
#: worker between the items it loads in a stage): the flamegraph folds
#: that time into one frame. A pool's threads computing Python on one
#: GIL wait for it most of their time, and are not idle
IDLE_CPU_SHARE = 0.1

ThreadKey = Tuple[int, int]         # (process, native thread id)


class Sampled(NamedTuple):
    """What the sampler saw of one thread, ns: its wall and CPU time in
    all, and outside any stage, with the time it waited there to run (for
    a CPU or the GIL: 0 in files from before the waits were measured)."""

    wall: int
    cpu: int
    outside_wall: int
    outside_cpu: int
    outside_wants: int = 0


def _key(thread: Mapping[str, Any]) -> ThreadKey:
    return (int(thread.get("process", 0)), int(thread["native_id"]))


def sampled_time(report: "Report") -> Dict[ThreadKey, Sampled]:
    """{(process, native id): Sampled} of every thread the sampler saw.
    An event loop's time outside any stage while its tasks' stages were
    open (between task steps) is their time, not outside."""
    sums: Dict[ThreadKey, List[int]] = {}
    inside = in_stages(report)
    # by position: files of later formats add figures at the end
    for i, s in enumerate((report.samples or {"stacks": []})["stacks"]):
        slot = sums.setdefault((s[0], s[1]), [0, 0, 0, 0, 0])
        slot[0] += s[5]
        slot[1] += s[6]
        if s[2] < 0:
            kept = 1.0 - inside.get(i, 0.0)
            slot[2] += round(s[5] * kept)
            slot[3] += round(s[6] * kept)
            slot[4] += round(sum(s[7:9]) * kept)    # run delay, the GIL
    return {key: Sampled(*slot) for key, slot in sums.items()}


def idle_threads(report: "Report") -> Set[ThreadKey]:
    """The sampled threads whose time outside any stage was waiting: most
    of their sampled wall time outside any stage (all of it for a thread
    that opened none), and on a CPU, or waiting for one or for the GIL,
    under IDLE_CPU_SHARE of that time.
    A thread that opened a stage keeps its stages; only its code outside
    them folds (a DataLoader worker blocked on its queue between items).
    The program's own main thread never folds: its waits outside any
    stage (a download, a sleep between batches) are the program's."""
    program = program_main(report)
    return {key for key, t in sampled_time(report).items()
            if key not in program and 2 * t.outside_wall > t.wall
            and t.outside_cpu + t.outside_wants <
            IDLE_CPU_SHARE * t.outside_wall}


def program_main(report: "Report") -> Set[ThreadKey]:
    """The key of the program's main thread: on Linux its id is the pid;
    elsewhere it is known by name where it recorded a stage."""
    keys = {_key(t) for t in report.threads
            if t.get("process", 0) == 0 and t.get("name") == "MainThread"}
    processes = report.processes
    if processes:
        keys.add((0, int(processes[0]["pid"])))
    return keys


def thread_count(report: "Report") -> Tuple[int, int]:
    """How many threads, and in how many processes, the report saw:
    those that recorded stages and those the sampler saw. A folded row
    counts the threads it sums; those of them the sampler caught in a
    stage have no row, and count once (one it caught only outside its
    stages cannot be told from a thread that staged nothing)."""
    sampled = (report.samples or {"stacks": []})["stacks"]
    threads = report.threads
    rows = {_key(t) for t in threads if not t.get("folded")}
    keys = rows | {(s[0], s[1]) for s in sampled}
    folded = sum(int(t.get("folded", 0)) for t in threads)
    caught = {(s[0], s[1]) for s in sampled if s[2] >= 0} - rows
    processes = {p for p, _ in keys} | {int(t.get("process", 0))
                                        for t in threads}
    return (len(keys) + folded - min(len(caught), folded),
            max(len(processes), 1))


def count_phrase(threads: int, processes: int) -> str:
    """``11 threads in 3 processes``, ``1 thread``."""
    phrase = f"{threads} thread{'s' if threads != 1 else ''}"
    return phrase + (f" in {processes} processes" if processes > 1 else "")

"""Which pool a wait was for, from the pools' threads in its process.

multiprocessing's pools: a Pool's parent and a ThreadPool both wait
in multiprocessing/pool.py, but only a ThreadPool's workers are threads
of the process (theirs begin, past threading's bootstrap, in pool.py's
worker): in a process that ran one, a wait in pool.py may be for
threads as much as for processes, and is not read as one for processes.

concurrent.futures, from the sampled timeline: a thread waiting on a
future (its result(), as_completed(), wait()) blocks in
concurrent/futures/_base.py and threading.py alone, whoever completes
the future: its own stacks cannot tell a process
pool's workers from a thread pool's. The pools' threads in its process
can. A ProcessPoolExecutor runs a manager thread there, which takes
the workers' results and completes the futures (its stacks begin, past
threading's bootstrap, in concurrent/futures/process.py); a
ThreadPoolExecutor's workers are threads there (theirs begin in
concurrent/futures/thread.py), and one running a task has frames past
its own loop's.

A round of samples in which a process pool's manager thread was seen,
and no thread pool's worker ran a task, holds no thread pool's future
in the making: a wait on futures then was for the process pool. A round
in which both were seen cannot tell which pool the wait was for (a
stage waiting on a thread pool's futures beside a process pool, or on a
process pool's beside a busy thread pool), and counts for neither.
Futures completed by other code (a thread that sets them itself) are
not told apart from a process pool's where one runs."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, List, NamedTuple, Optional, \
    Set

import numpy as np

from .own_frames import is_stdlib

if TYPE_CHECKING:
    from ..model.report import Report

_FUTURES = "/concurrent/futures/_base.py"
_PROCESS_POOL = "/concurrent/futures/process.py"
_THREAD_POOL = "/concurrent/futures/thread.py"
_THREADING = "/threading.py"
#: where a multiprocessing pool, of processes or threads, waits
MP_POOL = "/multiprocessing/pool.py"


class Frames(NamedTuple):
    """The sampled frames' files ("/"-separated) and whether each is the
    standard library's, by frame index: read once for a report's
    samples."""

    files: List[str]
    stdlib: List[bool]


def frames_of(samples: Any) -> Frames:
    """Frames of a report's samples (report.samples)."""
    raw = [str(f[1]) for f in samples["frames"]]
    return Frames([f.replace("\\", "/") for f in raw],
                  [is_stdlib(f) for f in raw])


def thread_pool_processes(report: "Report", frames: Frames) -> Set[int]:
    """The processes (indices) in which a multiprocessing ThreadPool's
    worker thread was sampled: a thread started by threading whose first
    frame past its bootstrap is pool.py's worker."""
    samples = report.samples
    if samples is None:
        return set()
    names, files = samples["frames"], frames.files
    found = set()
    for p, _tid, _sid, chain, *_figures in samples["stacks"]:
        first = _past_bootstrap(chain, files)
        if first is not None and files[chain[first]].endswith(MP_POOL) \
                and str(names[chain[first]][0]) == "worker":
            found.add(p)
    return found


def innermost_wait(chain: List[int], waits: Callable[[int], bool],
                   stdlib: List[bool]) -> Optional[int]:
    """In a stack (its frames' indices, outermost first), where its
    innermost frame that `waits` (of a frame's index) says is a wait's
    lies, if past it the standard library alone runs (the wait itself,
    not the program's code it calls, as a pool worker's does); None
    otherwise."""
    last = max((i for i, f in enumerate(chain) if waits(f)), default=None)
    if last is None or not all(stdlib[f] for f in chain[last + 1:]):
        return None
    return last


def waits_on_futures(chain: List[int], frames: Frames) -> bool:
    """Whether a stack waits on a future: past its innermost frame in
    concurrent/futures/_base.py, the standard library alone (threading's
    waits)."""
    files = frames.files
    return innermost_wait(chain, lambda f: files[f].endswith(_FUTURES),
                          frames.stdlib) is not None


def process_pool_shares(report: "Report", frames: Frames
                        ) -> Optional[np.ndarray]:
    """For each sampled stack, the share of its samples on the timeline
    taken in rounds when its process had a process pool's manager thread
    and no thread pool's worker running a task (0 for a stack with none
    on the timeline); None for a run without a timeline."""
    samples = report.samples
    if samples is None or samples.get("timeline") is None:
        return None
    stacks = samples["stacks"]
    role = np.array([_role(s[3], frames) for s in stacks], np.int8)
    process = np.array([s[0] for s in stacks], np.int64)
    timeline = samples["timeline"]
    stack = timeline["stack"].astype(np.int64)
    t = timeline["t_ns"].astype(np.int64)
    at_process = process[stack]
    in_rounds = np.zeros(len(t), bool)
    for p in np.unique(at_process).tolist():
        here = at_process == p
        managed = t[here & (role[stack] == _MANAGER)]
        busy = t[here & (role[stack] == _AT_WORK)]
        rounds = np.setdiff1d(managed, busy)
        in_rounds[here] = np.isin(t[here], rounds)
    seen = np.bincount(stack, minlength=len(stacks))
    kept = np.bincount(stack, weights=in_rounds, minlength=len(stacks))
    return np.divide(kept, seen, out=np.zeros(len(stacks)), where=seen > 0)


_OTHER, _MANAGER, _AT_WORK = 0, 1, 2


def _role(chain: List[int], frames: Frames) -> int:
    """A thread started by threading whose first frame past its bootstrap
    is a process pool's (its manager thread), or a thread pool's worker
    running a task (frames past its loop's, other than threading's, and
    not itself waiting on a future: a task may wait on another pool)."""
    files = frames.files
    first = _past_bootstrap(chain, files)
    if first is None:
        return _OTHER
    if files[chain[first]].endswith(_PROCESS_POOL):
        return _MANAGER
    if files[chain[first]].endswith(_THREAD_POOL) and \
            any(not files[f].endswith(_THREADING)
                for f in chain[first + 1:]) and \
            not waits_on_futures(chain, frames):
        return _AT_WORK
    return _OTHER


def _past_bootstrap(chain: List[int], files: List[str]) -> Optional[int]:
    """In the stack of a thread started by threading, where its first
    frame past threading's own lies; None for another stack."""
    if not chain or not files[chain[0]].endswith(_THREADING):
        return None
    return next((i for i, f in enumerate(chain)
                 if not files[f].endswith(_THREADING)), None)

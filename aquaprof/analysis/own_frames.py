"""The profiler's own frames taken out of what the sampler saw: its
threads (the watcher each child process runs, the DataLoader watch, the
Monitor's, the Prometheus server's) and its code inside a program's
calls (the torch hooks' stand-in for the autograd engine, stop()'s) are
no part of the program. A stack loses those frames, its time going to
the program's frame that called them; a stack with no frame of the
program (threading's start of a thread aside), one of a thread named
OWN_THREAD..., and one whose frames past the live monitoring's are the
standard library's alone (stop() joining the Monitor's thread, its
server's shutdown) are left out and their time counted in the
section's "own_ns". runpy's frames next to the profiler's go with them
(`python -m aquaprof run script.py`: how aquaprof started the program,
not the program); those of a program's own `python -m` stay. The
plane-sweep kit (aquaprof.mvs) and the demo's workload are a program's
code, kept."""
from __future__ import annotations

import os
import runpy
import sysconfig
import threading
from typing import Any, Dict, List, Tuple

import numpy as np

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: how the threads the profiler starts are named: whatever they run (the
#: Monitor's numpy, a server's sockets) is the profiler's
OWN_THREAD = "aquaprof-"
#: the profiler's live monitoring, whose waits on its threads are its own
_LIVE = os.path.join(_PACKAGE, "live") + os.sep
#: the names runpy's frames carry: its file, or "<frozen runpy>" where
#: Python freezes it (3.11 on)
_RUNPY = {runpy.__file__, runpy.run_path.__code__.co_filename}
#: the standard library's folder (the packages installed in it are not)
_STDLIB = sysconfig.get_paths()["stdlib"] + os.sep
#: what under the package is a program's own code, not the profiler's
_PROGRAM = (os.path.join(_PACKAGE, "mvs") + os.sep,
            os.path.join(_PACKAGE, "integrations", "demo.py"))


def _bootstrap_only(frames: List[int], files: List[str]) -> bool:
    """Whether the frames are only threading's start of a thread (a
    thread whose target was the profiler's own)."""
    return all(files[f] == threading.__file__ for f in frames)


def is_stdlib(file: str) -> bool:
    """Whether a frame's file is the standard library's, not a package
    installed in it."""
    return file.startswith(_STDLIB) and \
        f"-packages{os.sep}" not in file[len(_STDLIB):]


def _waits_in_stdlib(frames: List[int], own: List[bool],
                     stdlib: List[bool], files: List[str]) -> bool:
    """Whether the profiler's innermost frame is its live monitoring's
    (a Monitor, its server) and the frames past it the standard
    library's alone: the profiler waiting on its own thread or server
    (stop() joining the Monitor's thread). Elsewhere the standard
    library that the profiler's code calls may do the program's work (a
    process the program starts through a wrapper of the profiler's)."""
    last = max(i for i, f in enumerate(frames) if own[f])
    inner = frames[last + 1:]
    return bool(inner) and files[frames[last]].startswith(_LIVE) and \
        all(stdlib[f] for f in inner)


def _program_frames(frames: List[int], own: List[bool],
                    runpy_: List[bool]) -> List[int]:
    """The frames less the profiler's, and less runpy's next to one of
    them: how `python -m aquaprof run` reached the script."""
    drop = [own[f] for f in frames]
    i = 0
    while i < len(frames):
        j = i
        while j < len(frames) and runpy_[frames[j]]:
            j += 1
        if j > i and ((i > 0 and own[frames[i - 1]]) or
                      (j < len(frames) and own[frames[j]])):
            drop[i:j] = [True] * (j - i)
        i = j + 1
    return [f for f, gone in zip(frames, drop) if not gone]


def is_own(file: str) -> bool:
    """Whether a frame's file is the profiler's own code."""
    return file.startswith(_PACKAGE + os.sep) and \
        not file.startswith(_PROGRAM)


def without_own_frames(samples: Dict[str, Any]) -> Dict[str, Any]:
    """The sampler's section with the profiler's frames taken out: stacks
    that end up alike merged, those left empty dropped (their wall time
    summed in "own_ns"), frames no stack names left out, the timeline
    renumbered and its samples of dropped stacks left out."""
    files = [f[1] for f in samples["frames"]]
    own = [is_own(file) for file in files]
    runpy_ = [file in _RUNPY for file in files]
    ours = {(p, tid) for p, tid, name in samples.get("threads", ())
            if name.startswith(OWN_THREAD)}
    if not any(own) and not ours:
        return samples
    stdlib = [is_stdlib(file) for file in files]
    merged: Dict[Tuple[Any, ...], int] = {}
    stacks: List[list] = []
    renumber = np.full(len(samples["stacks"]) + 1, -1, dtype=np.int64)
    own_ns = 0
    for i, (process, tid, stage, frames, *figures) in enumerate(
            samples["stacks"]):
        kept = _program_frames(frames, own, runpy_)
        if not kept or (process, tid) in ours or (
                len(kept) < len(frames) and (
                    _bootstrap_only(kept, files) or
                    _waits_in_stdlib(frames, own, stdlib, files))):
            own_ns += figures[1]
            continue
        key = (process, tid, stage, tuple(kept))
        j = merged.get(key)
        if j is None:
            j = merged[key] = len(stacks)
            stacks.append([process, tid, stage, kept, *[0] * len(figures)])
        for k, figure in enumerate(figures, 4):
            stacks[j][k] += figure
        renumber[i] = j
    # the frames no stack names any more go too: a view's frame table
    # (speedscope's) lists what it is given
    used = sorted({f for stack in stacks for f in stack[3]})
    index = {f: i for i, f in enumerate(used)}
    for stack in stacks:
        stack[3] = [index[f] for f in stack[3]]
    out = dict(samples, stacks=stacks,
               frames=[samples["frames"][f] for f in used],
               own_ns=samples.get("own_ns", 0) + own_ns)
    timeline = samples.get("timeline")
    if timeline is not None and len(timeline):
        new = renumber[timeline["stack"].astype(np.int64)]
        timeline = timeline[new >= 0].copy()
        timeline["stack"] = new[new >= 0]
        out["timeline"] = timeline
    return out

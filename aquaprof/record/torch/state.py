"""What the torch hooks share (ops.py, modules.py, backward.py, and the
switch that puts them in): torch once a watch has loaded it, what the
hooks do now (one Settings, replaced whole), each thread's open calls
and backward stages, the stages by name, and what the hooks count in
this process: the errors they swallowed (errors()) and the calls no
stage counts (tally()). Nothing here imports torch."""
from __future__ import annotations

import threading
import warnings
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Optional, Tuple

from ... import _core

if TYPE_CHECKING:
    from .modules import Frame

# caches of names and stages, cleared when this large
CACHE_MAX = 1 << 16

torch: Any = None                  # the module, from the first watch on


def _never() -> bool:
    return False


# torch.compiler.is_dynamo_compiling once torch is here: True while
# dynamo traces (a constant there, so that the branch it guards is all
# the compiled code holds of a hook), False when that code runs
compiling: Callable[[], bool] = _never


def load_torch() -> Any:
    """torch, imported here, and what the hooks need of it."""
    global torch, compiling
    import torch as _torch
    torch = _torch
    compiler = getattr(torch, "compiler", None)
    # is_dynamo_compiling is the cheaper of the two to call
    compiling = getattr(compiler, "is_dynamo_compiling", None) or \
        getattr(compiler, "is_compiling", None) or _never
    return torch


class Settings:
    """What the hooks do now; replaced whole, read without the lock."""

    __slots__ = ("ops", "shapes", "modules", "gen")

    def __init__(self, ops: bool = False, shapes: bool = False,
                 modules: bool = False, gen: int = 0):
        self.ops, self.shapes, self.modules, self.gen = (ops, shapes,
                                                         modules, gen)


on = Settings()


def turn(settings: Settings) -> None:
    """What the hooks do from now on (the switch's, with its lock held)."""
    global on
    on = settings


# ------------------------------------------------------------- counts

_errors = 0
_warned_gen = -1
# what the hooks did that no stage counts, in this process: the report
# charges their cost all the same (switch.Unwatch.counts); the hooks add
# to it in place
TALLIED = ("torch_quiet_calls", "torch_carried_calls")
tallied = [0, 0]


def errors() -> int:
    """Errors swallowed inside the hooks in this process so far."""
    return _errors


def tally() -> Dict[str, int]:
    """What the hooks did in this process so far that no stage counts
    (switch.Unwatch.counts says which, for one watch)."""
    return dict(zip(TALLIED, tallied))


def swallowed(error: BaseException) -> None:
    """An error inside a hook: counted, said once per run, never
    raised."""
    global _errors, _warned_gen
    _errors += 1
    if _warned_gen == on.gen:
        return
    _warned_gen = on.gen
    try:
        warnings.warn(f"aquaprof: an error inside its torch hooks was "
                      f"ignored ({type(error).__name__}: {error}); the "
                      f"program runs on, the torch stages may miss calls. "
                      f"Said once per run.", RuntimeWarning, stacklevel=2)
    except Exception:
        pass   # warnings as errors must not fail the program


# ------------------------------------------------------------- threads

class ThreadState:
    """One thread's: the module calls open (innermost last), the backward
    stages open and the autograd graph task they belong to, and our mode
    on its stack."""

    __slots__ = ("gen", "frames", "chain", "task", "mode_here",
                 "mode_users", "__weakref__")

    def __init__(self) -> None:
        self.gen = -1
        self.frames: List[Frame] = []
        self.chain: Tuple[Any, ...] = ()
        self.task: Optional[int] = None
        self.mode_here = False
        self.mode_users = 0


_tls = threading.local()


def thread_state(current: bool = True) -> ThreadState:
    """This thread's state; with current, reset if an earlier run left
    it (its open stages ended with that run)."""
    st = getattr(_tls, "state", None)
    if st is None:
        st = _tls.state = ThreadState()
    if current and st.gen != on.gen:
        st.gen = on.gen
        st.frames = []
        st.chain = ()
        st.task = None
    return st


def forget_thread() -> None:
    """This thread's state dropped (a forked child's, the parent's)."""
    _tls.state = None


# -------------------------------------------------------------- stages

_stages: Dict[str, Any] = {}


def stage(name: str) -> Any:
    """The stage of this name, made once (while the cache holds)."""
    found = _stages.get(name)
    if found is None:
        if len(_stages) >= CACHE_MAX:
            _stages.clear()
        found = _stages[name] = _core.stage(name)
    return found

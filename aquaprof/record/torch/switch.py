"""The torch hooks put in and taken out as one switch: each Profiler that
asks for them holds a watch (watch_torch); the op mode (ops.py), the
global module hooks (modules.py) and the autograd engine's stand-in
(backward.py) go in with the first watch and come out with the last,
recording what any of them asks (shapes if one does). Profilers start
and stop on any thread, several at once (nested ones). torch is imported
at the first watch, by the Profiler that asks (not by aquaprof
otherwise); check_options refuses what cannot be recorded."""
from __future__ import annotations

import importlib.util
import itertools
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple

from . import state
from .backward import engine_watch
from .modules import not_roots, post_hook, pre_hook
from .ops import ensure_mode, mode, remove_mode
from .state import TALLIED, Settings, ThreadState, swallowed, thread_state

SHAPES = "shapes"

# Guards the watches and the hooks' handles: profilers start and stop on
# any thread. Reentrant: the collector may run a dropped Profiler's
# unwatch (a weakref finalizer) on a thread that holds it.
_LOCK = threading.RLock()
# token -> (still wanted?, ops, shapes, modules, the state of the thread
# whose stack it put the mode on, if it has ops)
_watches: Dict[int, Tuple[Callable[[], bool], bool, bool, bool,
                          Optional[ThreadState]]] = {}
_tokens = itertools.count(1)
_gens = itertools.count(1)
_handles: List[Any] = []           # torch's RemovableHandles of our hooks


def check_options(torch_ops: Any, torch_modules: Any
                  ) -> Optional[Tuple[bool, bool, bool]]:
    """(ops, shapes, modules) from Profiler's torch_ops and torch_modules,
    None when both are off. TypeError or ValueError for a value that is
    none of those documented, RuntimeError when one is on and torch
    cannot be found."""
    if not isinstance(torch_modules, bool):
        raise TypeError(f"torch_modules must be True or False, got "
                        f"{torch_modules!r}")
    if isinstance(torch_ops, str):
        if torch_ops != SHAPES:
            raise ValueError(f"torch_ops must be False, True or "
                             f"{SHAPES!r}, got {torch_ops!r}")
    elif not isinstance(torch_ops, bool):
        raise TypeError(f"torch_ops must be False, True or {SHAPES!r}, "
                        f"got {torch_ops!r}")
    if not torch_ops and not torch_modules:
        return None
    if not torch_available():
        which = "torch_ops" if torch_ops else "torch_modules"
        raise RuntimeError(f"{which} records torch calls, but torch cannot "
                           f"be imported here")
    return bool(torch_ops), torch_ops == SHAPES, torch_modules


def torch_available() -> bool:
    """Whether torch is imported or can be (without importing it)."""
    if "torch" in sys.modules:
        return sys.modules["torch"] is not None
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def watch_torch(ops: bool, shapes: bool, modules: bool,
                live: Optional[Callable[[], bool]] = None
                ) -> Unwatch:
    """Records torch ops (shapes in their names if asked) and module calls
    as stages until the returned function is called (once, on any
    thread), or until live() (when given) says False. Imports torch."""
    load_torch()
    with _LOCK:
        token = next(_tokens)
        here = thread_state(False) if ops else None
        _watches[token] = (live or _always, ops, shapes, modules, here)
        if here is not None:
            here.mode_users += 1
            mode()        # made here, before a hook on another thread can
        _sync()
        if here is not None:
            ensure_mode(here)
    return Unwatch(token)


def load_torch() -> Any:
    """torch, imported here, and what the hooks need of it."""
    torch = state.load_torch()
    not_roots()
    return torch


def _always() -> bool:
    return True


class Unwatch:
    """Ends one watch; acts once, however often called (a watch whose
    owner stopped may have been dropped already by another's _sync).
    counts() says what the hooks did while it watched that no stage
    counts."""

    def __init__(self, token: int):
        self._token = token
        self._tally_from = tuple(state.tallied)
        self._tally_to: Optional[Tuple[int, ...]] = None

    def counts(self) -> Dict[str, int]:
        """{"torch_quiet_calls": torch calls the mode passed through
        without a stage (x.grad, x.shape, torch.no_grad's switch, a
        record_function range's ops), "torch_carried_calls": module calls
        whose hooks only carried the mode (torch_modules off)}, while this
        watch lasted (so far, if it still does)."""
        now = self._tally_to or tuple(state.tallied)
        return {key: now[i] - self._tally_from[i]
                for i, key in enumerate(TALLIED)}

    def __call__(self) -> None:
        if self._tally_to is None:
            self._tally_to = tuple(state.tallied)
        with _LOCK:
            _drop(self._token)
            _sync()
            # only the thread itself can take the mode off its stack
            st = thread_state(False)
            if st.mode_here and st.mode_users <= 0:
                remove_mode(st)


def _drop(token: int) -> None:
    """With _LOCK held: the watch ends; its thread's mode loses a user."""
    watch = _watches.pop(token, None)
    if watch is not None and watch[4] is not None:
        watch[4].mode_users -= 1


def _sync() -> None:
    """With _LOCK held: drops the watches no longer wanted, then sets what
    the hooks do and puts them in or takes them out."""
    for token, watch in list(_watches.items()):
        if not watch[0]():
            _drop(token)
    wanted = list(_watches.values())
    ops = any(w[1] for w in wanted)
    shapes = any(w[2] for w in wanted)
    modules = any(w[3] for w in wanted)
    fresh = not _handles
    gen = next(_gens) if fresh else state.on.gen
    # first what the hooks do, so that hooks an interrupt leaves in do
    # nothing; a later watch or unwatch takes them out
    state.turn(Settings(ops, shapes, modules, gen))
    if (ops or modules) and fresh:
        from torch.nn.modules import module as nn_module
        _handles.append(nn_module.register_module_forward_pre_hook(
            pre_hook))
        _handles.append(nn_module.register_module_forward_hook(
            post_hook, always_call=True))
    elif not (ops or modules):
        while _handles:
            _handles.pop().remove()
    engine_watch(modules)


def _forked() -> None:
    """In a forked child: nothing of ours left. The child is not the
    parent's run (a child records its own stages, without these: a
    DataLoader worker forked inside a forward must not record ops), and
    the lock may have been held by another thread at the fork."""
    global _LOCK
    _LOCK = threading.RLock()
    if state.torch is None or not (_watches or _handles):
        return
    try:
        _watches.clear()
        _sync()
        st = thread_state(False)
        st.mode_users = 0
        if st.mode_here:
            remove_mode(st)
        state.forget_thread()
    except Exception as error:
        swallowed(error)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)

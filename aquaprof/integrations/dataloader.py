"""The time a training loop waits for its data: every ``next()`` on a
torch DataLoader iterator recorded as the stage ``next(DataLoader)``,
under whatever stage is open (``train/next(DataLoader)``).

With worker processes the stage is the time the loop sat waiting for a
batch they had not finished; with ``num_workers=0`` it is the loading
itself, and the dataset's own stages nest under it. diagnose() reads it
(analysis/diagnose.py: data-loading-bound).

How: ``_BaseDataLoaderIter.__next__``, which every DataLoader iterator
inherits, is replaced by a wrapper while some profiler watches, and put
back when the last one stops. torch is never imported here: a process
that has not imported ``torch.utils.data`` has no DataLoader to watch.

The last ``next()`` of an epoch raises StopIteration; it is recorded as
a normal call, not as raised (it is how iteration ends, not a failure):
an exhausted epoch of N batches counts N + 1 calls, the last one holding
the end of the epoch (with workers, their shutdown). Any other exception
is counted as raised, as for any stage.

An iterator class that overrides ``__next__`` without calling the
inherited one is not seen. Another library's patch of ``__next__`` made
while we watch is left in place when we stop; ours, still called by it,
then passes straight through.
"""
from __future__ import annotations

import functools
import os
import sys
import threading
from typing import Any, Callable, Optional

from .. import _core
from ..analysis.diagnose import LOADER_STAGE

_MODULE = "torch.utils.data.dataloader"

# Guards _watchers and _patch: profilers start and stop on any thread.
_LOCK = threading.Lock()
_watchers = 0
_patch: Optional["_Patch"] = None


def _unlock_in_child() -> None:
    # a fork (a DataLoader worker) while another thread held the lock
    # would leave it held forever in the child, whose profiler watches too
    global _LOCK
    _LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_unlock_in_child)


class _Patch:
    """Our wrapper of one ``__next__``; ``on`` False makes it call the
    wrapped one and nothing else."""

    def __init__(self, owner: type, original: Callable[[Any], Any]):
        self.owner = owner
        self.original = original
        self.on = True
        stage = _core.stage(LOADER_STAGE)
        patch = self

        @functools.wraps(original)
        def __next__(iterator: Any) -> Any:
            if not patch.on:
                return original(iterator)
            stage.__enter__()
            try:
                batch = original(iterator)
            except StopIteration:
                stage.__exit__(None, None, None)
                raise
            except BaseException as error:
                stage.__exit__(type(error), error, error.__traceback__)
                raise
            stage.__exit__(None, None, None)
            return batch

        __next__.__aquaprof_patch__ = self  # type: ignore[attr-defined]
        self.wrapper = __next__


def _iterator_class() -> Optional[type]:
    module = sys.modules.get(_MODULE)
    owner = getattr(module, "_BaseDataLoaderIter", None)
    if isinstance(owner, type) and callable(vars(owner).get("__next__")):
        return owner
    return None


def watch_dataloaders() -> Callable[[], None]:
    """Records every ``next()`` on a torch DataLoader iterator as the
    stage ``next(DataLoader)`` until the returned function is called.

    Calls nest: the wrapper goes in at the first and comes out when the
    last one's function is called (each such function acts once). When
    torch's DataLoader is not imported the function returned does
    nothing."""
    global _watchers, _patch
    owner = _iterator_class()
    if owner is None:
        return _nothing
    with _LOCK:
        if _watchers == 0 or _patch is None:
            current = vars(owner)["__next__"]
            # our own wrapper put back by someone else's restore: reuse it
            # rather than record each call twice
            mine = getattr(current, "__aquaprof_patch__", None)
            _patch = mine if isinstance(mine, _Patch) else \
                _Patch(owner, current)
            _patch.on = True
            if current is not _patch.wrapper:
                setattr(owner, "__next__", _patch.wrapper)
        _watchers += 1
        return _Unwatch(_patch)


def _nothing() -> None:
    """What watch_dataloaders() returns when there is nothing to watch."""


class _Unwatch:
    """Ends one watch_dataloaders() call; acts once, however often
    called."""

    def __init__(self, patch: "_Patch"):
        self._patch: Optional[_Patch] = patch

    def __call__(self) -> None:
        global _watchers
        with _LOCK:
            patch, self._patch = self._patch, None
            if patch is None:
                return
            _watchers -= 1
            if _watchers:
                return
            patch.on = False
            if vars(patch.owner).get("__next__") is patch.wrapper:
                setattr(patch.owner, "__next__", patch.original)

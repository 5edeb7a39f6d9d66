"""The time a training loop waits for its data: every ``next()`` on a
torch DataLoader iterator recorded as the stage ``next(DataLoader)``,
under whatever stage is open (``train/next(DataLoader)``).

With worker processes the stage is the time the loop sat waiting for a
batch they had not finished; with ``num_workers=0`` it is the loading
itself, and the dataset's own stages nest under it. diagnose() reads it
(analysis/diagnose.py: data-loading-bound).

How: ``_BaseDataLoaderIter.__next__``, which every DataLoader iterator
inherits, is replaced by a wrapper while some profiler watches, and put
back when the last one stops. torch is never imported here: while it is
not, a finder on ``sys.meta_path`` waits for its DataLoader module and
puts the wrapper in once the module has run (a profiler started before
the program imports torch, as ``aquaprof run`` does).

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
import importlib.abc
import itertools
import os
import sys
import threading
from typing import Any, Callable, Dict, List, Optional

from ... import _core
from ...analysis.diagnose import LOADER_STAGE

_MODULE = "torch.utils.data.dataloader"

# Guards the watches and _patch: profilers start and stop on any thread.
# Reentrant: the collector may run a dropped Profiler's unwatch (a
# weakref finalizer) on a thread that holds it.
_LOCK = threading.RLock()
# each watch: token -> still wanted? A watch whose owner stopped without
# ending it (a Ctrl-C between two of its steps) is dropped at the next
# watch or unwatch, so none is left on for good.
_watches: Dict[int, Callable[[], bool]] = {}
_tokens = itertools.count(1)
_watchers = 0                   # the watches kept at the last change
_patch: Optional["_Patch"] = None


def _unlock_in_child() -> None:
    # a fork (a DataLoader worker) while another thread held the lock
    # would leave it held forever in the child, whose profiler watches too
    global _LOCK
    _LOCK = threading.RLock()


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


def watch_dataloaders(live: Optional[Callable[[], bool]] = None
                      ) -> Callable[[], None]:
    """Records every ``next()`` on a torch DataLoader iterator as the
    stage ``next(DataLoader)`` until the returned function is called, or
    until live() (when given) says False.

    Calls nest: the wrapper goes in at the first and comes out when the
    last one ends (each returned function acts once). When torch's
    DataLoader is not imported yet, the watch begins when it is (and the
    function returned ends it either way)."""
    owner = _iterator_class()
    if owner is None:
        return _watch_on_import(live)
    with _LOCK:
        return _watch_locked(owner, live)


def _watch_locked(owner: type, live: Optional[Callable[[], bool]]
                  ) -> Callable[[], None]:
    """watch_dataloaders() with _LOCK held."""
    token = next(_tokens)
    _watches[token] = live or _always
    _sync(owner)
    return _Unwatch(token)


def _always() -> bool:
    return True


def _sync(owner: Optional[type] = None) -> None:
    """With _LOCK held: drops the watches no longer wanted, then puts the
    wrapper in (on `owner`) or takes it out as watches remain or not."""
    global _watchers, _patch
    for token, live in list(_watches.items()):
        if not live():
            _watches.pop(token, None)
    _watchers = len(_watches)
    if _watchers and owner is not None and (_patch is None
                                            or not _patch.on):
        current = vars(owner)["__next__"]
        # our own wrapper put back by someone else's restore: reuse it
        # rather than record each call twice
        mine = getattr(current, "__aquaprof_patch__", None)
        _patch = mine if isinstance(mine, _Patch) else _Patch(owner, current)
        _patch.on = True
        if current is not _patch.wrapper:
            setattr(owner, "__next__", _patch.wrapper)
    elif not _watchers and _patch is not None and _patch.on:
        _patch.on = False
        if vars(_patch.owner).get("__next__") is _patch.wrapper:
            setattr(_patch.owner, "__next__", _patch.original)


class _Unwatch:
    """Ends one watch; acts once, however often called."""

    def __init__(self, token: int):
        self._token = token

    def __call__(self) -> None:
        with _LOCK:
            _watches.pop(self._token, None)
            _sync()


# ------------------------------------------------- torch imported later

class _Deferred:
    """One watch_dataloaders() made before torch's DataLoader was
    imported: it begins when the module is (aquaprof run starts its
    profiler before the script imports torch)."""

    def __init__(self, live: Optional[Callable[[], bool]]) -> None:
        self.live = live or _always
        self.unwatch: Optional[Callable[[], None]] = None
        self.done = False

    def __call__(self) -> None:
        with _LOCK:
            if self.done:
                return
            self.done = True
            if self in _pending:
                _pending.remove(self)
            unwatch, self.unwatch = self.unwatch, None
            if not _pending and _FINDER in sys.meta_path:
                sys.meta_path.remove(_FINDER)
        if unwatch is not None:
            unwatch()


_pending: List[_Deferred] = []


def _watch_on_import(live: Optional[Callable[[], bool]]
                     ) -> Callable[[], None]:
    deferred = _Deferred(live)
    with _LOCK:
        _pending[:] = [d for d in _pending if d.live()]
        _pending.append(deferred)
        if _FINDER not in sys.meta_path:
            sys.meta_path.insert(0, _FINDER)
    return deferred


def _imported() -> None:
    """torch's DataLoader module has just run: the deferred watches
    begin."""
    with _LOCK:
        # under the lock: a deferred watch ended meanwhile by another
        # thread must not begin
        owner = _iterator_class()
        for deferred in _pending:
            if owner is not None and deferred.unwatch is None \
                    and not deferred.done and deferred.live():
                deferred.unwatch = _watch_locked(owner, deferred.live)


class _ImportFinder:
    """On sys.meta_path while a watch waits: finds nothing itself, but
    hands the import system torch's own spec for the DataLoader module
    with a loader that calls _imported() once the module has run. One
    string comparison for any other import."""

    def __init__(self) -> None:
        self._finding = threading.local()

    def find_spec(self, name: str, path: Any = None,
                  target: Any = None) -> Any:
        if name != _MODULE or getattr(self._finding, "on", False):
            return None
        import importlib.util
        self._finding.on = True
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self._finding.on = False
        if spec is None or spec.loader is None:
            return None
        spec.loader = _ThenWatch(spec.loader)
        return spec


class _ThenWatch(importlib.abc.Loader):
    """A module loader, and then _imported()."""

    def __init__(self, loader: Any):
        self._loader = loader

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _imported()

    def __getattr__(self, name: str) -> Any:
        # get_source, is_package, ...: the wrapped loader's
        return getattr(self._loader, name)


_FINDER = _ImportFinder()

"""A run's report kept on disk however the run ends: Profiler(save=PATH).

A script that saves its report after the `with` block loses it whole when
the block ends by Ctrl-C or an error (the save never runs), when a job
scheduler, a container's stop or torchrun's agent (another rank died)
sends SIGTERM, or when it started a Profiler and never stopped it. With
save=PATH the report is written at stop(), however stop() came; at
SIGTERM that nobody handles, before the process ends by it; and at the
interpreter's exit for a run still going. A save that fails is said as a
warning, never raised over the program's own exception.
"""
from __future__ import annotations

import atexit
import os
import signal
import sys
import threading
import warnings
from pathlib import Path
from typing import Any, Callable, NoReturn, Optional

from .. import _core
from ..analysis.own_frames import OWN_THREAD
from ..common.units import printable


def save_path(save: Any) -> Optional[Path]:
    """save= checked where the Profiler is made, not after an hour's run:
    None, or a str or path whose folder exists."""
    if save is None:
        return None
    if not isinstance(save, (str, os.PathLike)) or isinstance(save, bytes):
        raise TypeError(f"save must be a file path (str or os.PathLike), "
                        f"got {type(save).__name__}")
    path = Path(save)
    if not str(save) or path.is_dir():
        raise ValueError(f"save must name a file, got {str(save)!r}")
    if not path.parent.is_dir():
        raise ValueError(f"save: folder {str(path.parent)!r} does not "
                         f"exist")
    return path


def die_by(signum: int) -> NoReturn:
    """The end the signal's default action gives, streams flushed; from
    any thread (only the main one may set a Python handler: another
    gives SIGTERM its default through the watch's release)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    if threading.current_thread() is threading.main_thread():
        signal.signal(signum, signal.SIG_DFL)
    elif signum == signal.SIGTERM:
        _core._sigterm_release()
    os.kill(os.getpid(), signum)
    os._exit(128 + signum)      # blocked on this thread: the same code


class SigtermSave:
    """While armed, a SIGTERM nobody handles calls `save` (which stops
    the run and writes its report), then ends the process by SIGTERM, as
    it would have ended unprofiled: the program's `finally` blocks run no
    more than without the profiler. A main thread held in one long C
    call past aquaprof.children.SIGTERM_DEADLINE_S (whose Python handler
    cannot run) dies by the signal then, unsaved, as captured children
    do, unless the GIL is free: a main thread waiting in a collective
    that a dead rank never joins, or in a lock, lets it go, and a thread
    of ours saves in its place (the C watch wakes it at the deadline).
    A handler the program sets replaces this one; a child it forks gets
    SIGTERM's default back. Armed only from the main thread, over
    SIGTERM's default or a handler that only notes the signal
    (`notes_sigterm`)."""

    #: the instance armed, for the fork hook
    armed: Optional["SigtermSave"] = None
    _fork_hook = False

    def __init__(self, save: Callable[[], None]):
        self._save = save
        self._previous: Any = None
        self._process = 0
        # the main thread's handler or the rescue: one saves, the other
        # waits for the end
        self._once = threading.Lock()

    def arm(self) -> bool:
        """Installs the handler where it may; whether it did."""
        previous = signal.getsignal(signal.SIGTERM)
        if SigtermSave.armed is not None or not (
                threading.current_thread() is threading.main_thread() and
                (previous is signal.SIG_DFL or
                 getattr(previous, "notes_sigterm", False))):
            return False
        from .processes import parent
        try:
            signal.signal(signal.SIGTERM, self._on_sigterm)
        except (OSError, ValueError):
            return False
        try:
            _core._sigterm_deadline(float(parent.SIGTERM_DEADLINE_S), [])
        except (OSError, MemoryError, ValueError, TypeError):
            # no watch: a long C call could keep the handler from running
            # and hold the end off; the handler before, then
            signal.signal(signal.SIGTERM, previous)
            return False
        self._previous, self._process = previous, os.getpid()
        SigtermSave.armed = self
        try:
            # the watch it saves for, named now: the thread may reach its
            # wait only after this run's watch ended and another began
            threading.Thread(target=self._rescue,
                             args=(_core._sigterm_watch(),), daemon=True,
                             name=f"{OWN_THREAD}sigterm").start()
        except RuntimeError:        # no thread to spare: no rescue
            pass
        if not SigtermSave._fork_hook and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_default_in_child)
            SigtermSave._fork_hook = True
        return True

    def disarm(self) -> None:
        if SigtermSave.armed is not self:
            return
        SigtermSave.armed = None
        try:
            # off the main thread only as a rescue saves: the end follows
            if threading.current_thread() is threading.main_thread() and \
                    signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._previous)
        finally:
            _core._sigterm_release()     # ends the watch

    def _on_sigterm(self, signum: int, _frame: Any) -> None:
        if os.getpid() != self._process:   # a forked copy: as unprofiled
            die_by(signum)
        _core._sigterm_hold(True)       # for good: the process ends here
        self._save_and_die()

    def _rescue(self, watch: int) -> None:
        if _core._sigterm_rescue(watch):    # False: the watch ended
            _core._sigterm_hold(True)
            self._save_and_die()

    def _save_and_die(self) -> NoReturn:
        with self._once:     # the other one's save done: the end is near
            try:
                self._save()
            finally:
                die_by(signal.SIGTERM)


def _default_in_child() -> None:
    armed = SigtermSave.armed
    if armed is not None and \
            signal.getsignal(signal.SIGTERM) == armed._on_sigterm:
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)
        except (OSError, ValueError):
            pass


class RunSave:
    """Profiler(save=PATH)'s keeper: armed at start(), written once at
    stop(), at SIGTERM or at the interpreter's exit."""

    def __init__(self, prof: Any, path: Path):
        self._prof = prof
        self.path = path
        self._sigterm = SigtermSave(self._terminated)
        self._process = 0
        self.saved: Optional[Path] = None

    def arm(self) -> None:
        self._process = os.getpid()
        atexit.register(self._at_exit)
        self._sigterm.arm()

    def stopped(self) -> None:
        """The run stopped: disarmed, then the report written (once)."""
        atexit.unregister(self._at_exit)
        self._sigterm.disarm()
        if self.saved is None and os.getpid() == self._process:
            self.saved = self._write()

    def _write(self) -> Optional[Path]:
        try:
            return self._prof.report().save(self.path)
        except Exception as e:    # noqa: BLE001 -- said, never raised
            warnings.warn(f"aquaprof: the report could not be saved to "
                          f"{printable(str(self.path))} ({type(e).__name__}:"
                          f" {e}); prof.report() still has it",
                          RuntimeWarning, stacklevel=3)
            return None

    def _at_exit(self) -> None:
        if os.getpid() == self._process and self._prof.running:
            self._prof.stop()

    def _terminated(self) -> None:
        self._prof._ended_by = "SIGTERM"
        try:
            self._prof.stop()
        except BaseException as e:     # noqa: BLE001 -- we end anyway
            _say(f"terminated by SIGTERM; the report could not be saved "
                 f"({type(e).__name__}: {e})")
            return
        if self.saved is not None:
            _say(f"terminated by SIGTERM: the report of the run up to "
                 f"there is saved ({printable(str(self.saved))})")


def _say(line: str) -> None:
    print(f"aquaprof: {line}", file=sys.stderr)


__all__ = ["RunSave", "SigtermSave", "die_by", "save_path"]

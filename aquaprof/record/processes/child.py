"""The child's side: a process started by a capturing Profiler records
from its start and delivers its report to the parent's folder.

A Profiler of the child's own starts before the target runs, with the
options and calibration the parent published (processes.folder): from
multiprocessing's after-fork hooks in a forked child, and as the config
arrives (unpickled with the process object) in a spawned or forkserver
one, which runs no such hook on Python 3.11 and later.
multiprocessing's exit finalizers (run before its ``os._exit``) and a
SIGTERM handler (``Pool.terminate``) stop it and write its report into
the folder. A marker written at the start lets the parent count the
children that never report (killed, crashed, still running).

A SIGTERM's Python handler runs only once the main thread is back in the
interpreter: a child busy in one long C call would outlive the SIGTERM
that ends it unprofiled. The extension's SIGTERM handler wakes a native
watcher (term_deadline.c), which ends the child by SIGTERM's default
action when the Python handler has not started within the deadline the
parent gave (processes.parent.SIGTERM_DEADLINE_S), and leaves a mark
that tells the parent why no report came.

Nothing here raises into the child's program: a child that cannot record
or deliver runs on unprofiled and is counted lost by the parent.
"""
from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

from ... import _core
from ..profiler import Profiler
from . import folder as files
from . import parent

# how often a child looks for its parent's request for the report (which
# bounds the parent's stop() and the child's recording past it): a stat,
# with the GIL released (_core._wait_for_file), so the child's own Python
# is not held up by it
REQUEST_CHECK_S = 0.02
# how often a child looks whether its parents' folders are gone
FOLDER_CHECK_S = 1.0

_child: Optional[Dict[str, Any]] = None    # this process's capture, if any
# marks the multiprocessing.util whose registry holds the after-fork hook
_HOOKED = "_aquaprof_after_fork"
_delivering = False
_pending_signal = 0     # a SIGTERM that came while delivering
# the threads that asked to deliver, the first the one that does (the
# main thread at exit or on a SIGTERM, the child's own thread when the
# parent asks), and whether that delivery is done: a list's append is
# atomic, and no lock is taken (an Event's is) that a signal handler on
# the same thread could then wait on for ever
_claims: List[int] = []
_delivered = False


def register_hook() -> None:
    """Has multiprocessing start a child's capture before its target runs
    (and starts it now, when this process is such a child already
    running: aquaprof imported from inside the target). Called as
    aquaprof is imported, and again by the parent side once a Profiler
    publishes (multiprocessing is loaded by then)."""
    parent.attach_child_side(_Entries, register_hook)
    if "multiprocessing" not in sys.modules:
        return
    import multiprocessing.util as util
    # the module marked, not a flag here: a multiprocessing.util imported
    # anew (pytest's in-process runs drop the modules a run imported)
    # holds an empty registry, and the old one must not get the hook twice
    if getattr(util, _HOOKED, False):
        return
    setattr(util, _HOOKED, True)
    util.register_after_fork(_HOOK_OWNER, _after_fork)
    process = sys.modules["multiprocessing.process"]
    if process.parent_process() is not None:
        _start_capture()


class _Entries(tuple):
    """The config's value. Unpickled in a child that spawn or forkserver
    starts, it starts the child's capture: a spawned child runs no
    after-fork hooks, and the entries come with the process object, before
    the target runs."""

    def __reduce__(self) -> Tuple[Any, ...]:
        return (_arrive, (tuple(self),))


def _arrive(entries: Tuple[Dict[str, Any], ...]) -> "_Entries":
    found = _Entries(entries)
    process = sys.modules.get("multiprocessing.process")
    if process is not None and \
            getattr(process.current_process(), "_inheriting", False):
        register_hook()
        _start_capture(found)
        _named_as_it_bootstraps()
    return found


def _named_as_it_bootstraps() -> None:
    """A spawned child's process object, and so its name, becomes the
    current one as it bootstraps, where spawn runs no after-fork hooks
    (SpawnProcess._after_fork does nothing): this child's is made to name
    its capture then, so that one dying in its first moments is not
    counted lost as `child`. The class is this process's own copy."""
    context = sys.modules.get("multiprocessing.context")
    spawn = getattr(context, "SpawnProcess", None)
    if spawn is None or _child is None:
        return
    before = vars(spawn).get("_after_fork")
    if not isinstance(before, staticmethod) or \
            getattr(before.__func__, "names_the_capture", False):
        return

    def after_fork() -> None:
        before.__func__()
        child = _child
        if child is not None:
            try:
                _relabel(child, [e["dir"] for e in child["entries"]])
            except Exception:   # noqa: BLE001 - never break the child
                pass

    after_fork.names_the_capture = True     # type: ignore[attr-defined]
    spawn._after_fork = staticmethod(after_fork)


class _HookOwner:
    """register_after_fork keeps its callbacks by a weak reference to an
    owner: this one lives as long as the module."""


_HOOK_OWNER = _HookOwner()


def _after_fork(_owner: Any) -> None:
    global _child, _claims, _delivered, _delivering, _pending_signal
    if _child is not None and _child["pid"] == os.getpid():
        # started as the process object arrived (forkserver, and spawn
        # before Python 3.11): the exit finalizers were cleared since,
        # and the process object, with its name, is the current one now
        _finalize_at_exit()
        _relabel(_child, [entry["dir"] for entry in _child["entries"]])
        return
    # a fork of a capturing child is a child of its own: nothing of its
    # parent's delivery
    _child = None
    _claims, _delivered, _delivering, _pending_signal = [], False, False, 0
    _start_capture()


def _start_capture(entries: Optional[Tuple[Dict[str, Any], ...]] = None
                   ) -> None:
    global _child
    if entries is None:
        entries = files.config().get(files.CONFIG_KEY)
    if not entries or _child is not None:
        return
    try:
        prof = Profiler.from_options(entries[0]["options"],
                                     calibration=entries[0].get("overhead"))
        prof.start()
    except Exception:    # noqa: BLE001 - never break the child
        return
    token = f"{os.getpid()}-{os.urandom(4).hex()}"
    _child = {"profiler": prof, "token": token, "entries": entries,
              "pid": os.getpid()}
    _finalize_at_exit()
    _catch_sigterm([files.path(entry["dir"], token, files.KILLED)
                    for entry in entries],
                   files.seconds(entries[0].get("sigterm_deadline_s"),
                                 files.SIGTERM_DEADLINE_DEFAULT_S))
    # last: a child counted as started can deliver from here on
    _child["label"] = _label()
    marker = files.marker_text(os.getpid(), _child["label"])
    for entry in entries:
        if not files.write(files.path(entry["dir"], token, files.STARTED),
                           marker):
            _child = None     # the parent is gone: run on unprofiled
            prof.stop()
            _core._sigterm_release()
            return
    _start_quiet(threading.Thread(target=_answer_the_parent,
                                  args=(_child,), name="aquaprof-child",
                                  daemon=True))


def _answer_the_parent(child: Dict[str, Any]) -> None:
    try:
        _end_with_the_parent(child)
    except Exception:    # noqa: BLE001 - never break the child: the
        pass             # parent counts a child that did not deliver


def _start_quiet(thread: threading.Thread) -> None:
    """Starts a helper thread with every signal blocked (it inherits the
    starting thread's mask, which is then restored): a SIGTERM or a
    Ctrl-C then reaches the main thread, which, waiting on a lock (a pool
    worker waiting for work), wakes only for a signal delivered to
    itself."""
    if not hasattr(signal, "pthread_sigmask"):
        thread.start()
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        thread.start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def _end_with_the_parent(child: Dict[str, Any]) -> None:
    """A child still running when its parent's Profiler stops (a pool or
    persistent DataLoader worker, a loader's iterator not yet dropped)
    delivers what it recorded: the parent asks by a file in its folder,
    and waits for the report (EXIT_WAIT_S). Then, or once the folders
    are gone, nobody will read any more: recording on would only hold
    memory and a sampler thread. The outermost Profiler still there
    decides: an inner one's stop leaves the child recording for the
    outer (and tells the inner so at once), while an outer one's stop
    ended the inner ones' runs too. A Profiler of the child's own, nested
    in its capture, is never cut short: the capture ends after it."""
    folders = [entry["dir"] for entry in child["entries"]]  # outer first
    asked: List[str] = []
    while _child is child:
        _relabel(child, folders)
        waiting = [files.request(f) for f in folders if f not in asked]
        if waiting:
            _core._wait_for_file(waiting, REQUEST_CHECK_S, FOLDER_CHECK_S)
        else:       # every parent asked: a Profiler of its own to end
            time.sleep(FOLDER_CHECK_S)
        now = [f for f in folders
               if f not in asked and os.path.exists(files.request(f))]
        asked += now
        first = next((f for f in folders if os.path.isdir(f)), None)
        if first is not None and first not in asked:
            _mark(now, child, files.LATER)
            continue
        if child["profiler"]._core.nests_running:
            # a Profiler of the child's own runs, and stopping the capture
            # would end it: the parents are told, and the capture waits
            _mark(now, child, files.OWN)
            continue
        # delivered, or stopped where no parent is left to read it
        if deliver():
            # nothing left to deliver: SIGTERM ends the process as it
            # would have, at once (one that came and was not handled yet
            # too)
            _core._sigterm_release()
        return


def _relabel(child: Dict[str, Any], folders: List[str]) -> None:
    """A spawned child's start marker names it `child` until its process
    object arrives: named again then, for a parent that counts it lost."""
    label = _label()
    if label != child["label"]:
        child["label"] = label
        _mark(folders, child, files.STARTED,
              files.marker_text(os.getpid(), label))


def _mark(folders: List[str], child: Dict[str, Any], suffix: str,
          text: str = "") -> None:
    """Leaves the parents whose folders these are a file: why no report
    comes, or who the child is."""
    for folder in folders:
        files.write(files.path(folder, child["token"], suffix), text)


def _finalize_at_exit() -> None:
    """multiprocessing runs its finalizers as the child's target returns
    or raises, before its os._exit: after everything the child did, and
    after it joined its own children. Registered with every
    multiprocessing.util that may run them: from Python 3.13 a forked
    child's exit runs the one popen_fork imported, which is not the one in
    sys.modules once that was imported anew (pytest's in-process runs);
    deliver runs once whichever comes first."""
    import multiprocessing.util
    fork = sys.modules.get("multiprocessing.popen_fork")
    utils = {id(util): util for util in (
        multiprocessing.util, sys.modules.get("multiprocessing.util"),
        getattr(fork, "util", None)) if util is not None}
    for util in utils.values():
        util.Finalize(None, deliver, exitpriority=-100)


def _current_process() -> Any:
    import multiprocessing
    return multiprocessing.current_process()


def _label() -> str:
    """`worker N` for a torch DataLoader worker, else the process's name
    (ForkPoolWorker-1, SpawnProcess-2, ...); then the pid."""
    process = _current_process()
    worker = _dataloader_worker_id(process)
    name = process.name if worker is None else f"worker {worker}"
    if getattr(process, "_inheriting", False):
        name = "child"    # its process object has not arrived yet
    return f"{name} (pid {os.getpid()})"


def _dataloader_worker_id(process: Any) -> Optional[int]:
    """The worker id torch's DataLoader gave this process: its target's
    argument `worker_id`, known before the worker loop starts. Read from
    the code object (no inspect: this runs as the child starts, where
    every moment is one a Ctrl-C can land in)."""
    target = getattr(process, "_target", None)
    code = getattr(target, "__code__", None)
    if code is None or getattr(target, "__name__", "") != "_worker_loop" \
            or not getattr(target, "__module__", "").startswith(
                "torch.utils.data"):
        return None
    names = code.co_varnames[:code.co_argcount]
    args = getattr(process, "_args", ())
    if "worker_id" in getattr(process, "_kwargs", {}):
        worker = process._kwargs["worker_id"]
    elif "worker_id" in names and names.index("worker_id") < len(args):
        worker = args[names.index("worker_id")]
    else:
        return None
    return worker if isinstance(worker, int) else None


def deliver() -> bool:
    """Stops this child's capture and writes its report for each parent
    Profiler; once, and only in the process that started it. True when
    this call delivered. A delivery under way in another thread (the
    child's own, for a parent that asked) is waited for, as long as the
    parent waits, not repeated: the process must not exit halfway
    through it."""
    global _child, _delivering, _delivered
    child = _child
    if child is None or child["pid"] != os.getpid():
        return False
    me = threading.get_ident()
    _claims.append(me)
    if _claims[0] != me:
        _wait_delivered(child)
        return False
    main = threading.current_thread() is threading.main_thread()
    _delivering = True
    try:
        # on the main thread, a SIGTERM meanwhile waits for the delivery,
        # even one in C; another thread's delivery holds nothing, or a
        # main thread stuck in C holding the GIL would stall it and with
        # it the deadline
        if main:
            _core._sigterm_hold(True)
        _deliver(child)
    finally:
        _child = None
        _delivering = False
        _delivered = True
        if main:
            _core._sigterm_hold(False)
            # a signal's handler runs in the main thread, and ends the
            # process itself once another thread's delivery is done
            if _pending_signal:
                _die_by(_pending_signal)
    return True


def _wait_delivered(child: Dict[str, Any]) -> None:
    """Polled, not an Event: a signal's handler may come here on a
    thread already inside the wait."""
    end = time.monotonic() + files.seconds(child["entries"][0].get(
        "exit_wait_s"), files.EXIT_WAIT_DEFAULT_S)
    while not _delivered and time.monotonic() < end:
        time.sleep(0.005)


def _deliver(child: Dict[str, Any]) -> None:
    token = child["token"]
    # the parents still there (one gone is nobody to read it)
    folders = [entry["dir"] for entry in child["entries"]
               if files.write(files.path(entry["dir"], token,
                                         files.EXITING), "")]
    if not folders:
        child["profiler"].stop()     # nobody to read it: recording ends
        return
    text = _report_text(child["profiler"])
    if text is None:
        for folder in folders:    # the parent counts it lost, and says why
            files.write(files.path(folder, token, files.FAILED), "")
        return
    for folder in folders:
        files.write(files.path(folder, token, files.REPORT), text)


def _report_text(prof: Profiler) -> Optional[str]:
    """The child's report as JSON; None when it could not be made."""
    try:
        prof.stop()
        data = prof.report().to_dict()
    except Exception:    # noqa: BLE001 - never break the child
        return None
    data["label"] = _label()
    worker = _dataloader_worker_id(_current_process())
    if worker is not None:
        data["worker"] = worker
    try:
        return json.dumps(data, separators=(",", ":"))
    except (TypeError, ValueError):
        return None


def _catch_sigterm(marks: List[str], deadline_s: float) -> None:
    """Pool.terminate() and DataLoader shutdowns end workers with SIGTERM:
    deliver, then die by it as the program expected; a child whose main
    thread stays in C past deadline_s dies by it at once, the files
    `marks` telling the parent so. Only where nobody handles SIGTERM
    already, and only from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    handler = signal.getsignal(signal.SIGTERM)
    if handler is signal.SIG_DFL:
        try:
            signal.signal(signal.SIGTERM, _on_sigterm)
        except (ValueError, OSError):
            return
    elif handler is not _on_sigterm:    # the program's own
        return
    try:
        _core._sigterm_deadline(deadline_s, marks)
    except (OSError, MemoryError):
        # no watch: a handler of ours that a C call could keep from
        # running would break the program's SIGTERM; its default, then
        files.os_ok(signal.signal, signal.SIGTERM, signal.SIG_DFL)


def _on_sigterm(signum: int, _frame: Any) -> None:
    global _pending_signal
    # for good: the process ends by the signal once delivered
    _core._sigterm_hold(True)
    _pending_signal = signum
    if _delivering and _claims[:1] == [threading.get_ident()]:
        # this thread's delivery, interrupted (the exit's, a Pool worker
        # ending on its sentinel as terminate() signals it): it dies by
        # the signal once done
        return
    try:
        deliver()     # or waits for the child's own thread's
    finally:
        _die_by(signum)     # whatever happened: the signal's own end


def _die_by(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)

"""Child processes' stages, delivered to the Profiler that started them.

A Profiler running with ``children=True`` makes a folder and names it in
its process's multiprocessing config (``current_process()._config``),
which every ``multiprocessing.Process`` created from then on copies and
carries into its child, whatever the start method: the fork copies it,
spawn and forkserver pickle it with the process object. That covers
``multiprocessing`` Processes and Pools, ``ProcessPoolExecutor`` and torch
DataLoader workers, which are all built on it.

In the child, a Profiler of its own starts before the target runs, with
the parent's settings and calibration: from multiprocessing's after-fork
hooks in a forked child, and as the config arrives (unpickled with the
process object) in a spawned or forkserver one, which runs no such hook
on Python 3.11 and later. multiprocessing's exit finalizers
(run before its ``os._exit``) and a SIGTERM handler (``Pool.terminate``)
stop it and write its report into the folder: a rename, so the parent
reads whole files only. A marker written at the start lets the parent
count the children that never report (killed, crashed, still running).

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
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from . import _core
from .report import Report, ReportError

# the multiprocessing config key: a tuple of capturing Profilers' entries,
# outermost first, each {"dir": str, "settings": dict, "overhead": dict}
CONFIG_KEY = "aquaprof_children"
# how long a parent's stop() waits for a child caught writing its report
EXIT_WAIT_S = 2.0
# how often a child looks whether its parent's Profiler still runs
FOLDER_CHECK_S = 1.0

_child: Optional[Dict[str, Any]] = None    # this process's capture, if any
_hooked = False
_delivering = False
# this process's capturing Profilers: folder -> (entry, still capturing?)
_published: Dict[str, Tuple[Dict[str, Any], Callable[[], bool]]] = {}
_ended: Set[str] = set()    # their folders, until the config drops them
_pending_signal = 0     # a SIGTERM that came while delivering
_sigterm_handled = False    # _on_sigterm ran
_sigterm_waiting = False    # the watcher saw a SIGTERM not yet handled


# ------------------------------------------------------------ parent side

class Capture:
    """One Profiler's capture of its children: a folder named to the
    processes created while `running()` holds, read once by end(). After
    end(), `result` is (the reports, the account), or None when there was
    nothing to read."""

    def __init__(self, settings: Dict[str, Any],
                 overhead: Optional[Dict[str, Any]],
                 running: Callable[[], bool]):
        import tempfile
        import weakref
        self.pid = os.getpid()
        self.result: Optional[Tuple[List[Report], Dict[str, Any]]] = None
        self.folder: Optional[str] = None
        try:
            folder = self.folder = os.path.join(
                tempfile.gettempdir(),
                f"aquaprof-children-{os.getpid()}-{os.urandom(6).hex()}")
            # before the folder exists: a Ctrl-C anywhere after still
            # leaves it to be removed when this object goes
            weakref.finalize(self, remove_folder, folder, self.pid)
            os.mkdir(folder, 0o700)
        except OSError as e:
            # no temporary folder (read-only disk, a bad TMPDIR): the
            # process is profiled alone, and the report says why
            self.folder = None
            self.result = ([], {"started": 0, "reported": 0, "lost": [],
                                "error": f"no folder for child processes' "
                                         f"reports: {e}"})
            return
        me = weakref.ref(self)

        def live() -> bool:
            # a nested Profiler its outer's stop() ended captures no more
            capture = me()
            return capture is not None and capture.folder == folder \
                and running()

        publish({"dir": folder, "settings": settings, "overhead": overhead},
                live)

    def end(self, max_children: int) -> None:
        """Reads what the children delivered and removes the folder;
        children that report later find it gone. Nothing in a forked
        child's copy: the folder is the parent's."""
        folder, self.folder = self.folder, None
        if folder is None or os.getpid() != self.pid:
            return
        try:
            withdraw()
            self.result = collect(folder, max_children)
        finally:
            remove_folder(folder, self.pid)


def remove_folder(folder: str, pid: int) -> None:
    """Removes a children folder (files only), by its owner alone: a
    forked child that exits normally runs the parent's exit handlers
    too. Not shutil.rmtree: a Ctrl-C between its close() and its
    cleanup's turns into an OSError."""
    if os.getpid() != pid:
        return
    # twice: a child still running may write a marker meanwhile
    for _ in range(2):
        try:
            names = os.listdir(folder)
        except OSError:
            return
        for name in names:
            try:
                os.unlink(os.path.join(folder, name))
            except OSError:
                pass
        try:
            os.rmdir(folder)
            return
        except OSError:
            pass


def publish(entry: Dict[str, Any], live: Callable[[], bool]) -> None:
    """Names a capturing Profiler's folder to the processes created from
    now on, for as long as live() says."""
    import multiprocessing.util  # noqa: F401 - the hook needs it loaded
    register_hook()
    _published[entry["dir"]] = (entry, live)
    _refresh()


def withdraw() -> None:
    """Processes created from now on no longer report to the folders of
    Profilers that stopped."""
    if "multiprocessing" in sys.modules:
        _refresh()


def _refresh() -> None:
    """The config's value: the entries this process inherited, then those
    of its Profilers still capturing. Recomputed whole and replaced, never
    changed in place (each Process copies the config shallowly). An ended
    Profiler's folder is kept in _ended until the config no longer holds
    it, and each is dropped as soon as found: a Ctrl-C anywhere in here
    leaves nothing stale for good, and the next call goes on from there."""
    for folder, (_, live) in list(_published.items()):
        if not live():
            _ended.add(folder)
            _published.pop(folder, None)
    config = _config()
    ours = set(_published) | _ended
    kept = [e for e in config.get(CONFIG_KEY, ()) if e["dir"] not in ours]
    kept += [entry for entry, _ in list(_published.values())]
    if kept:
        config[CONFIG_KEY] = _Entries(kept)
    else:
        config.pop(CONFIG_KEY, None)
    _ended.clear()


def _config() -> Dict[str, Any]:
    """What each Process copies from the process creating it (the
    authkey lives there too); private to multiprocessing but the same
    since Python 3.4."""
    import multiprocessing
    config: Dict[str, Any] = getattr(multiprocessing.current_process(),
                                     "_config")
    return config


def collect(folder: str, max_children: int
            ) -> Tuple[List[Report], Dict[str, Any]]:
    """The reports delivered to `folder`, oldest start first (at most
    max_children), and the account of the children: how many started,
    reported, and which were lost or left out and why."""
    # plain strings: pathlib interns every part of a path, and on
    # Python 3.12 an interned string is never freed, so a Path of each
    # run's unique folder would leak a string a run
    path = folder
    deadline = time.monotonic() + EXIT_WAIT_S
    started = _markers(path)
    while time.monotonic() < deadline and any(
            _state(path, token) == "exiting" and _alive(marker["pid"])
            for token, marker in started.items()):
        time.sleep(0.01)
    reports: List[Report] = []
    lost: List[Dict[str, Any]] = []
    for token, marker in started.items():
        state = _state(path, token)
        if state == "reported":
            try:
                reports.append(Report.load(
                    os.path.join(path, f"{token}.json")))
                continue
            except ReportError as e:
                reason = f"its report could not be read: {e}"
        elif state == "exiting" and _alive(marker["pid"]):
            reason = f"still writing its report {EXIT_WAIT_S:g} s after " \
                     f"the profiler stopped"
        elif state == "exiting":
            reason = "ended while writing its report"
        elif _alive(marker["pid"]):
            reason = "still running when the profiler stopped"
        else:
            reason = "ended without reporting (killed, or exited " \
                     "outside multiprocessing)"
        lost.append({"pid": marker["pid"], "label": marker["label"],
                     "reason": reason})
    reports.sort(key=lambda r: r.meta["start_ns"])
    over = reports[max_children:]
    lost += [{"pid": r.meta["pid"], "label": r.processes[0]["label"],
              "reason": f"over max_children ({max_children})"} for r in over]
    account = {"started": len(started), "reported": len(reports) - len(over),
               "lost": lost}
    return reports[:max_children], account


def _markers(path: str) -> Dict[str, Dict[str, Any]]:
    found: Dict[str, Dict[str, Any]] = {}
    try:
        names = os.listdir(path)    # a list, not an iterator to leave open
    except OSError:
        return found
    for name in names:
        if not name.endswith(".started"):
            continue
        try:
            with open(os.path.join(path, name)) as f:
                marker = json.loads(f.read())
            found[name[:-len(".started")]] = {
                "pid": int(marker["pid"]), "label": str(marker["label"])}
        except (OSError, ValueError, KeyError, TypeError):
            continue      # written by no child of ours: not counted
    return found


def _state(path: str, token: str) -> str:
    if os.path.exists(os.path.join(path, f"{token}.json")):
        return "reported"
    if os.path.exists(os.path.join(path, f"{token}.exiting")):
        return "exiting"
    return "silent"


def _alive(pid: int) -> bool:
    """Running (a zombie, ended but not yet waited for, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return True


# ------------------------------------------------------------- child side

def register_hook() -> None:
    """Has multiprocessing start a child's capture before its target runs
    (and starts it now, when this process is such a child already
    running: aquaprof imported from inside the target)."""
    global _hooked
    if "multiprocessing" not in sys.modules or _hooked:
        return     # the parent's publish() registers it
    import multiprocessing.util as util
    _hooked = True
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
    return found


class _HookOwner:
    """register_after_fork keeps its callbacks by a weak reference to an
    owner: this one lives as long as the module."""


_HOOK_OWNER = _HookOwner()


def _after_fork(_owner: Any) -> None:
    global _child
    if _child is not None and _child["pid"] == os.getpid():
        # started as the process object arrived (forkserver, and spawn
        # before Python 3.11): the exit finalizers were cleared since
        _finalize_at_exit()
        return
    _child = None     # a fork of a capturing child is a child of its own
    _start_capture()


def _start_capture(entries: Optional[Tuple[Dict[str, Any], ...]] = None
                   ) -> None:
    global _child
    if entries is None:
        entries = _config().get(CONFIG_KEY)
    if not entries or _child is not None:
        return
    try:
        from .profiler import Profiler
        prof = Profiler._for_child(entries[0]["settings"],
                                   entries[0].get("overhead"))
        prof.start()
    except Exception:    # noqa: BLE001 - never break the child
        return
    token = f"{os.getpid()}-{os.urandom(4).hex()}"
    _child = {"profiler": prof, "token": token, "entries": entries,
              "pid": os.getpid()}
    _finalize_at_exit()
    _catch_sigterm()
    # last: a child counted as started can deliver from here on
    marker = json.dumps({"pid": os.getpid(), "label": _label()})
    try:
        for entry in entries:
            _write(os.path.join(entry["dir"], f"{token}.started"), marker)
    except OSError:
        _child = None     # the parent is gone: run on unprofiled
        prof.stop()
        return
    _start_quiet(threading.Thread(target=_end_with_the_parent,
                                  args=(_child,), name="aquaprof-child",
                                  daemon=True))


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
    """Stops the capture of a child that outlives its parent's Profiler
    (a pool or persistent DataLoader worker still running at stop()):
    once every parent's folder is gone, nobody will read its report, and
    recording on would only hold memory and a sampler thread."""
    global _child
    folders = [entry["dir"] for entry in child["entries"]]
    while _child is child:
        time.sleep(FOLDER_CHECK_S)
        _wake_main_for_sigterm()
        if any(os.path.isdir(folder) for folder in folders):
            continue
        if _child is child and not _delivering:
            _child = None
            child["profiler"].stop()
            # nothing left to deliver, and nobody left to wake the main
            # thread: SIGTERM ends the process as it would have
            _core._sigterm_default()
        return


def _wake_main_for_sigterm() -> None:
    """A SIGTERM that lands as the main thread goes to wait on a lock (a
    pool worker waiting for work) is taken by Python's C handler before
    the wait begins, and the wait, which looks for signals only when one
    interrupts it, never wakes to run _on_sigterm: Pool.terminate() would
    wait for this worker for ever. A SIGTERM seen at one look and still
    not handled at the next is sent again, to the main thread."""
    global _sigterm_waiting
    if _sigterm_handled or not _core._sigterm_noted():
        _sigterm_waiting = False
        return
    main = threading.main_thread().ident
    if _sigterm_waiting and main is not None:
        signal.pthread_kill(main, signal.SIGTERM)
    _sigterm_waiting = True


def _finalize_at_exit() -> None:
    """multiprocessing runs its finalizers as the child's target returns
    or raises, before its os._exit: after everything the child did, and
    after it joined its own children."""
    import multiprocessing.util
    multiprocessing.util.Finalize(None, deliver, exitpriority=-100)


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


def deliver() -> None:
    """Stops this child's capture and writes its report for each parent
    Profiler; once, and only in the process that started it."""
    global _child, _delivering
    child = _child
    if child is None or _delivering or child["pid"] != os.getpid():
        return
    _delivering = True
    try:
        _deliver(child)
    finally:
        _child = None
        _delivering = False
        if _pending_signal:
            _die_by(_pending_signal)


def _deliver(child: Dict[str, Any]) -> None:
    token, entries = child["token"], child["entries"]
    try:
        for entry in entries:
            _write(os.path.join(entry["dir"], f"{token}.exiting"), "")
        prof = child["profiler"]
        prof.stop()
        data = prof.report().to_dict()
        data["label"] = _label()
        worker = _dataloader_worker_id(_current_process())
        if worker is not None:
            data["worker"] = worker
        text = json.dumps(data, separators=(",", ":"))
        for entry in entries:
            _write(os.path.join(entry["dir"], f"{token}.json"), text)
    except Exception:    # noqa: BLE001 - the parent counts it lost
        return


def _write(path: str, text: str) -> None:
    """Whole or not at all: a temporary name, then a rename. No fsync:
    the files live as long as the parent's run."""
    folder, name = os.path.split(path)
    part = os.path.join(folder, f".{name}.{os.getpid()}.part")
    try:
        with open(part, "w") as f:
            f.write(text)
        os.replace(part, path)
    except BaseException:
        try:
            os.unlink(part)
        except FileNotFoundError:
            pass
        raise


def _catch_sigterm() -> None:
    """Pool.terminate() and DataLoader shutdowns end workers with SIGTERM:
    deliver, then die by it as the program expected. Only where nobody
    handles SIGTERM already, and only from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return
    try:
        handler = signal.getsignal(signal.SIGTERM)
        if handler is signal.SIG_DFL:
            signal.signal(signal.SIGTERM, _on_sigterm)
        elif handler is not _on_sigterm:    # the program's own
            return
        _core._note_sigterm()    # for _wake_main_for_sigterm
    except (ValueError, OSError):
        return


def _on_sigterm(signum: int, _frame: Any) -> None:
    global _pending_signal, _sigterm_handled
    _sigterm_handled = True
    if _delivering:
        # the exit's own delivery, interrupted (a Pool worker ending on
        # its sentinel as terminate() signals it): die once it is done
        _pending_signal = signum
        return
    try:
        deliver()
    finally:
        _die_by(signum)     # whatever happened: the signal's own end


def _die_by(signum: int) -> None:
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)

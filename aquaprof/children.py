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

A SIGTERM's Python handler runs only once the main thread is back in the
interpreter: a child busy in one long C call would outlive the SIGTERM
that ends it unprofiled. The extension's SIGTERM handler wakes a native
watcher (term_deadline.c), which ends the child by SIGTERM's default
action when the Python handler has not started within
SIGTERM_DEADLINE_S, and leaves a mark that tells the parent why no
report came.

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
# how long a child's SIGTERM waits for its Python handler to start (the
# main thread busy in C) before it ends the child as it would unprofiled;
# read by each Profiler as it starts, and carried to its children
_SIGTERM_DEADLINE_DEFAULT_S = 1.0
SIGTERM_DEADLINE_S = _SIGTERM_DEADLINE_DEFAULT_S

_child: Optional[Dict[str, Any]] = None    # this process's capture, if any
_hooked = False
_delivering = False
# this process's capturing Profilers: folder -> (entry, still capturing?)
_published: Dict[str, Tuple[Dict[str, Any], Callable[[], bool]]] = {}
_ended: Set[str] = set()    # their folders, until the config drops them
_pending_signal = 0     # a SIGTERM that came while delivering


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
        self.sigterm_deadline_s = _deadline_s(SIGTERM_DEADLINE_S)
        # only the OS calls inside the try: an exception that a signal
        # handler of the program's raises in between (a TimeoutError is
        # an OSError) is the program's, and goes on
        try:
            tmp = tempfile.gettempdir()
        except OSError as e:
            self._no_folder(e)
            return
        folder = self.folder = os.path.join(
            tmp, f"aquaprof-children-{os.getpid()}-{os.urandom(6).hex()}")
        # before the folder exists: a Ctrl-C anywhere after still leaves
        # it to be removed when this object goes
        weakref.finalize(self, remove_folder, folder, self.pid)
        try:
            os.mkdir(folder, 0o700)
        except OSError as e:
            self._no_folder(e)
            return
        me = weakref.ref(self)

        def live() -> bool:
            # a nested Profiler its outer's stop() ended captures no more
            capture = me()
            return capture is not None and capture.folder == folder \
                and running()

        publish({"dir": folder, "settings": settings, "overhead": overhead,
                 "sigterm_deadline_s": self.sigterm_deadline_s}, live)

    def _no_folder(self, error: OSError) -> None:
        """No temporary folder (read-only disk, a bad TMPDIR): the process
        is profiled alone, and the report says why."""
        self.folder = None
        self.result = ([], {"started": 0, "reported": 0, "lost": [],
                            "error": f"no folder for child processes' "
                                     f"reports: {error}"})

    def end(self, max_children: int) -> None:
        """Reads what the children delivered and removes the folder;
        children that report later find it gone. Nothing in a forked
        child's copy: the folder is the parent's."""
        folder, self.folder = self.folder, None
        if folder is None or os.getpid() != self.pid:
            return
        try:
            withdraw()
            self.result = collect(folder, max_children,
                                  self.sigterm_deadline_s)
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
            _os_ok(os.unlink, os.path.join(folder, name))
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


def collect(folder: str, max_children: int,
            sigterm_deadline_s: float = SIGTERM_DEADLINE_S
            ) -> Tuple[List[Report], Dict[str, Any]]:
    """The reports delivered to `folder`, oldest start first (at most
    max_children), and the account of the children: how many started,
    reported, and which were lost or left out and why (sigterm_deadline_s:
    the deadline the children were given, for the reason)."""
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
        elif state == "killed":
            reason = f"killed by SIGTERM while in C code: its handler " \
                     f"could not start within {sigterm_deadline_s:g} s " \
                     f"(SIGTERM_DEADLINE_S), so its report was not " \
                     f"delivered"
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
        text = _read(os.path.join(path, name))
        marker = None if text is None else _marker(text)
        if marker is not None:    # else written by no child of ours
            found[name[:-len(".started")]] = marker
    return found


def _marker(text: bytes) -> Optional[Dict[str, Any]]:
    """A start marker's pid and label; None when no child of ours wrote
    it."""
    try:
        marker = json.loads(text)
    except ValueError:
        return None
    if not isinstance(marker, dict):
        return None
    pid, label = marker.get("pid"), marker.get("label")
    if type(pid) is not int or not 0 < pid < 2 ** 31 or \
            not isinstance(label, str):
        return None
    return {"pid": pid, "label": label}


def _read(path: str) -> Optional[bytes]:
    """The file's bytes, or None where it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _os_ok(call: Callable[..., Any], *args: Any) -> bool:
    """call(*args), False when it fails with an OSError. Only the call is
    in the try: an exception that a signal handler of the program's
    raises in our code around it (a TimeoutError is an OSError) is the
    program's, and goes on."""
    try:
        call(*args)
    except OSError:
        return False
    return True


def _state(path: str, token: str) -> str:
    if os.path.exists(os.path.join(path, f"{token}.json")):
        return "reported"
    if os.path.exists(os.path.join(path, f"{token}.killed")):
        return "killed"
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
    stat = _read(f"/proc/{pid}/stat")
    if stat is None:
        return True
    fields = stat.rsplit(b")", 1)
    return len(fields) < 2 or fields[1].split()[:1] != [b"Z"]


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
    _catch_sigterm([os.path.join(entry["dir"], f"{token}.killed")
                    for entry in entries],
                   _deadline_s(entries[0].get("sigterm_deadline_s")))
    # last: a child counted as started can deliver from here on
    marker = json.dumps({"pid": os.getpid(), "label": _label()})
    for entry in entries:
        if not _write(os.path.join(entry["dir"], f"{token}.started"),
                      marker):
            _child = None     # the parent is gone: run on unprofiled
            prof.stop()
            _core._sigterm_release()
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
        if any(os.path.isdir(folder) for folder in folders):
            continue
        if _child is child and not _delivering:
            _child = None
            child["profiler"].stop()
            # nothing left to deliver: SIGTERM ends the process as it
            # would have, at once (one that came and was not handled
            # yet too)
            _core._sigterm_release()
        return


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
        # a SIGTERM meanwhile waits for the delivery, even one in C
        _core._sigterm_hold(True)
        _deliver(child)
    finally:
        _child = None
        _delivering = False
        _core._sigterm_hold(False)
        if _pending_signal:
            _die_by(_pending_signal)


def _deliver(child: Dict[str, Any]) -> None:
    token, entries = child["token"], child["entries"]
    for entry in entries:
        if not _write(os.path.join(entry["dir"], f"{token}.exiting"), ""):
            return      # a parent gone: nobody to read it
    text = _report_text(child["profiler"])
    if text is None:
        return      # the parent counts it lost
    for entry in entries:
        _write(os.path.join(entry["dir"], f"{token}.json"), text)


def _report_text(prof: Any) -> Optional[str]:
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


def _write(path: str, text: str) -> bool:
    """Whole or not at all: a temporary name, then a rename. No fsync:
    the files live as long as the parent's run. False when an OS call
    failed (the temporary file removed); an exception of the program's
    (a signal handler's) goes on, the temporary file removed too."""
    folder, name = os.path.split(path)
    part = os.path.join(folder, f".{name}.{os.getpid()}.part")
    data = memoryview(text.encode())
    written = False
    try:
        try:
            fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_TRUNC |
                         os.O_CLOEXEC, 0o600)
        except OSError:
            return False
        try:
            while data:
                try:
                    n = os.write(fd, data)
                except OSError:
                    return False
                data = data[n:]
        finally:
            closed = _os_ok(os.close, fd)
        written = closed and _os_ok(os.replace, part, path)
        return written
    finally:
        if not written:
            _os_ok(os.unlink, part)


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
        _os_ok(signal.signal, signal.SIGTERM, signal.SIG_DFL)


def _deadline_s(value: Any) -> float:
    """value as a SIGTERM deadline in seconds, or the default where it is
    none."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and 0 < value <= 1e6:
        return float(value)
    return _SIGTERM_DEADLINE_DEFAULT_S


def _on_sigterm(signum: int, _frame: Any) -> None:
    global _pending_signal
    # for good: the process ends by the signal once delivered
    _core._sigterm_hold(True)
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

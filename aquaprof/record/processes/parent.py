"""The parent's side: a Profiler's capture of the processes it starts.

A Profiler running with ``children=True`` makes a folder and names it in
its process's multiprocessing config (``current_process()._config``),
which every ``multiprocessing.Process`` created from then on copies and
carries into its child, whatever the start method: the fork copies it,
spawn and forkserver pickle it with the process object. That covers
``multiprocessing`` Processes and Pools, ``ProcessPoolExecutor`` and torch
DataLoader workers, which are all built on it. At its stop the Profiler
reads what its children left in the folder (processes.folder says what)
and removes it.

This side never imports the child's (processes.child), which imports the
Profiler: the child side attaches itself (attach_child_side) as the door
imports it, handing over what a published entry needs to start a child.

SIGTERM_DEADLINE_S is a setting users assign (``aquaprof.children`` is
this module): each Profiler reads it as it starts and carries it to its
children.
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Set, Tuple

from ...report import Report, ReportError
from . import folder as files

# Both read by each Profiler as it starts, and carried to its children.
# How long a parent's stop() waits for its children's reports (those still
# running, asked for theirs, and those caught writing theirs as they
# exit), and a child's exit for a delivery under way in another thread.
EXIT_WAIT_S = files.EXIT_WAIT_DEFAULT_S
# how long a child's SIGTERM waits for its Python handler to start (the
# main thread busy in C) before it ends the child as it would unprofiled
SIGTERM_DEADLINE_S = files.SIGTERM_DEADLINE_DEFAULT_S

Entry = Dict[str, Any]
# this process's capturing Profilers: folder -> (entry, still capturing?)
_published: Dict[str, Tuple[Entry, Callable[[], bool]]] = {}
_ended: Set[str] = set()    # their folders, until the config drops them
# from the child side: the type the config's entries travel in, and the
# registration of its after-fork hook
_carrier: Callable[[Sequence[Entry]], Tuple[Entry, ...]] = tuple
_register: Callable[[], None] = lambda: None


def attach_child_side(carrier: Callable[[Sequence[Entry]],
                                        Tuple[Entry, ...]],
                      register: Callable[[], None]) -> None:
    """What the child side gives: `carrier`, the type the entries travel
    in (unpickled in a child that spawn or forkserver starts, it starts
    the child's capture), and `register`, which has a forked child start
    it. Until it is attached, processes are not captured."""
    global _carrier, _register
    _carrier, _register = carrier, register


class Capture:
    """One Profiler's capture of its children: a folder named to the
    processes created while `running()` holds, read once by end(). After
    end(), `result` is (the reports, the account), or None when there was
    nothing to read. options: what a child records with (its
    record.options.Options); overhead: the calibration it reuses."""

    def __init__(self, options: Any, overhead: Optional[Dict[str, Any]],
                 running: Callable[[], bool]):
        import tempfile
        import weakref
        self.pid = os.getpid()
        self.result: Optional[Tuple[List[Report], Dict[str, Any]]] = None
        self.folder: Optional[str] = None
        # the module's values now: settings assigned before the start
        self.sigterm_deadline_s = files.seconds(
            SIGTERM_DEADLINE_S, files.SIGTERM_DEADLINE_DEFAULT_S)
        self.exit_wait_s = files.seconds(EXIT_WAIT_S,
                                         files.EXIT_WAIT_DEFAULT_S)
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

        publish({"dir": folder, "options": options, "overhead": overhead,
                 "sigterm_deadline_s": self.sigterm_deadline_s,
                 "exit_wait_s": self.exit_wait_s}, live)

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
        folder = self.folder
        if folder is None or os.getpid() != self.pid:
            return
        self.result = ([], {"started": 0, "reported": 0, "lost": [],
                            "error": "stopped before the children's "
                                     "reports were read: they are missing"})
        try:
            self.folder = None
            withdraw()
            self.result = collect(folder, max_children,
                                  self.sigterm_deadline_s, self.exit_wait_s)
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
            files.os_ok(os.unlink, os.path.join(folder, name))
        try:
            os.rmdir(folder)
            return
        except OSError:
            pass


def publish(entry: Entry, live: Callable[[], bool]) -> None:
    """Names a capturing Profiler's folder to the processes created from
    now on, for as long as live() says."""
    import multiprocessing.util  # noqa: F401 - the hook needs it loaded
    _register()
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
    config = files.config()
    ours = set(_published) | _ended
    kept = [e for e in config.get(files.CONFIG_KEY, ())
            if e["dir"] not in ours]
    kept += [entry for entry, _ in list(_published.values())]
    if kept:
        config[files.CONFIG_KEY] = _carrier(kept)
    else:
        config.pop(files.CONFIG_KEY, None)
    _ended.clear()


def collect(folder: str, max_children: int,
            sigterm_deadline_s: Optional[float] = None,
            exit_wait_s: Optional[float] = None
            ) -> Tuple[List[Report], Dict[str, Any]]:
    """The reports delivered to `folder`, oldest start first (at most
    max_children), and the account of the children: how many started,
    reported, and which were lost or left out and why (sigterm_deadline_s:
    the deadline the children were given, for the reason; exit_wait_s:
    how long to wait for their reports; the settings' values now when
    not given)."""
    if sigterm_deadline_s is None:
        sigterm_deadline_s = files.seconds(
            SIGTERM_DEADLINE_S, files.SIGTERM_DEADLINE_DEFAULT_S)
    if exit_wait_s is None:
        exit_wait_s = files.seconds(EXIT_WAIT_S, files.EXIT_WAIT_DEFAULT_S)
    # children still running deliver what they recorded when asked (their
    # thread looks every child.REQUEST_CHECK_S); those caught writing finish
    files.write(files.request(folder), "")
    # plain strings: pathlib interns every part of a path, and on
    # Python 3.12 an interned string is never freed, so a Path of each
    # run's unique folder would leak a string a run
    deadline = time.monotonic() + exit_wait_s
    started = _markers(folder)
    states = _states(folder, started)
    while time.monotonic() < deadline and any(
            states[token] in ("running", "exiting") and
            _alive(marker["pid"]) for token, marker in started.items()):
        time.sleep(0.01)
        states = _states(folder, started)
    # named again meanwhile (a spawned child's process object arrived)
    started.update((token, marker) for token, marker in
                   _markers(folder).items() if token in started)
    reports: List[Report] = []
    lost: List[Dict[str, Any]] = []
    for token, marker in started.items():
        state = states[token]
        if state == "reported":
            try:
                reports.append(Report.load(
                    files.path(folder, token, files.REPORT)))
                continue
            except ReportError as e:
                reason = f"its report could not be read: {e}"
        elif state == "killed":
            reason = f"killed by SIGTERM while in C code: its handler " \
                     f"could not start within {sigterm_deadline_s:g} s " \
                     f"(SIGTERM_DEADLINE_S), so its report was not " \
                     f"delivered"
        elif state == "exiting" and _alive(marker["pid"]):
            reason = f"still writing its report {exit_wait_s:g} s after " \
                     f"the profiler stopped (EXIT_WAIT_S)"
        elif state == "exiting":
            reason = "ended while writing its report"
        elif state == "failed":
            reason = "its report could not be made"
        elif state == "own":
            reason = "still running a Profiler of its own, which " \
                     "stopping its capture would have cut short: its " \
                     "calls are not in this report"
        elif state == "later":
            reason = "still running, recording for an enclosing " \
                     "Profiler: its calls are in that one's report"
        elif _alive(marker["pid"]):
            reason = f"still running when the profiler stopped, and its " \
                     f"report did not come within {exit_wait_s:g} s " \
                     f"(EXIT_WAIT_S)"
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


def _markers(folder: str) -> Dict[str, Dict[str, Any]]:
    found: Dict[str, Dict[str, Any]] = {}
    try:
        names = os.listdir(folder)  # a list, not an iterator to leave open
    except OSError:
        return found
    for name in names:
        if not name.endswith(files.STARTED):
            continue
        text = files.read(os.path.join(folder, name))
        marker = None if text is None else files.marker(text)
        if marker is not None:    # else written by no child of ours
            found[name[:-len(files.STARTED)]] = marker
    return found


def _states(folder: str, started: Dict[str, Dict[str, Any]]
            ) -> Dict[str, str]:
    """Where each started child is: reported, killed, failed (its report
    could not be made), exiting, later (it records on for an enclosing
    Profiler), own (a Profiler of its own runs) or running; from one
    listing of the folder."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        names = set()
    found = {}
    for token in started:
        found[token] = next(
            (state for suffix, state in ((files.REPORT, "reported"),
                                         (files.KILLED, "killed"),
                                         (files.FAILED, "failed"),
                                         (files.EXITING, "exiting"),
                                         (files.LATER, "later"),
                                         (files.OWN, "own"))
             if token + suffix in names), "running")
    return found


def _alive(pid: int) -> bool:
    """Running (a zombie, ended but not yet waited for, is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = files.read(f"/proc/{pid}/stat")
    if stat is None:
        return True
    fields = stat.rsplit(b")", 1)
    return len(fields) < 2 or fields[1].split()[:1] != [b"Z"]

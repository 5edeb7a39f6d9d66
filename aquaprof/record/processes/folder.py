"""The folder a capturing Profiler shares with its children: how it is
named to them, the files each child leaves in it, and how they are
written.

The entries travel in multiprocessing's process config under CONFIG_KEY,
outermost Profiler first, each a dict: "dir" (the folder), "options"
(the child's record.options.Options), "overhead" (the parent's
calibration, or None), "sigterm_deadline_s" and "exit_wait_s". A child
names its files by a token of its own (`<pid>-<random>`):

- `<token>.started`: JSON {"pid", "label"}, written once its capture runs;
- `<token>.exiting`: empty, written as its delivery begins;
- `<token>.json`: its report (Report.to_dict(), with "label" and, for a
  DataLoader worker, "worker");
- `<token>.killed`: written by the native SIGTERM watcher when the
  deadline passed with the main thread in C;
- `<token>.failed`: empty, written where its report could not be made;
- `<token>.later`: empty, written by a child still running when the
  parent asked for its report, where an enclosing Profiler of the
  parent's still runs and the child records on for it;
- `<token>.own`: empty, written by a child asked for its report while a
  Profiler of its own runs, which stopping its capture would end.

The parent asks children still running for their reports at its stop by
writing `report-now` (REQUEST) into the folder.

Every file appears whole: written under a temporary name, then renamed,
so the parent reads whole files only.
"""
from __future__ import annotations

import json
import os
from typing import Any, Callable, Dict, Optional

# the multiprocessing config key the entries travel under
CONFIG_KEY = "aquaprof_children"
# the files' suffixes, in the order a child writes them, and the parent's
# request
STARTED, EXITING, REPORT, KILLED = ".started", ".exiting", ".json", ".killed"
FAILED, LATER, OWN = ".failed", ".later", ".own"
REQUEST = "report-now"
# the settings' defaults (processes.parent)
SIGTERM_DEADLINE_DEFAULT_S = 1.0
EXIT_WAIT_DEFAULT_S = 2.0


def path(folder: str, token: str, suffix: str) -> str:
    """A child's file of that kind in the folder."""
    return os.path.join(folder, token + suffix)


def request(folder: str) -> str:
    """The file by which the parent asks for the reports now."""
    return os.path.join(folder, REQUEST)


def config() -> Dict[str, Any]:
    """What each Process copies from the process creating it (the
    authkey lives there too); private to multiprocessing but the same
    since Python 3.4."""
    import multiprocessing
    found: Dict[str, Any] = getattr(multiprocessing.current_process(),
                                    "_config")
    return found


def seconds(value: Any, default: float) -> float:
    """value as a setting in seconds (SIGTERM_DEADLINE_S, EXIT_WAIT_S), or
    the default where it is none or out of bounds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) \
            and 0 < value <= 1e6:
        return float(value)
    return default


def marker_text(pid: int, label: str) -> str:
    return json.dumps({"pid": pid, "label": label})


def marker(text: bytes) -> Optional[Dict[str, Any]]:
    """A start marker's pid and label; None when no child of ours wrote
    it."""
    try:
        found = json.loads(text)
    except ValueError:
        return None
    if not isinstance(found, dict):
        return None
    pid, label = found.get("pid"), found.get("label")
    if type(pid) is not int or not 0 < pid < 2 ** 31 or \
            not isinstance(label, str):
        return None
    return {"pid": pid, "label": label}


def read(file: str) -> Optional[bytes]:
    """The file's bytes, or None where it cannot be read."""
    try:
        with open(file, "rb") as f:
            return f.read()
    except OSError:
        return None


def os_ok(call: Callable[..., Any], *args: Any) -> bool:
    """call(*args), False when it fails with an OSError. Only the call is
    in the try: an exception that a signal handler of the program's
    raises in our code around it (a TimeoutError is an OSError) is the
    program's, and goes on."""
    try:
        call(*args)
    except OSError:
        return False
    return True


def write(file: str, text: str) -> bool:
    """Whole or not at all: a temporary name, then a rename. No fsync:
    the files live as long as the parent's run. False when an OS call
    failed (the temporary file removed); an exception of the program's
    (a signal handler's) goes on, the temporary file removed too."""
    folder, name = os.path.split(file)
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
            closed = os_ok(os.close, fd)
        written = closed and os_ok(os.replace, part, file)
        return written
    finally:
        if not written:
            os_ok(os.unlink, part)

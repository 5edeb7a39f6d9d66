"""Monitor: watches a running Profiler(window=N) from a background thread.
Every `interval` seconds it takes a snapshot, checks it against the limits
and rules it was given, calls on_alert for each new alert, and keeps every
alert in .alerts. It can publish the rolling figures to Prometheus.

An alert fires when its condition becomes true and again only after it
has been false: a memory limit crossed once gives one alert, not one per
check; an anomalous call is reported once, whether it is seen open (a
hang) and then closed, or closed in several checks' windows. Each check
judges every call of the window that closed since the check before, not
only each stage's latest.
"""
from __future__ import annotations

import collections
import threading
import time
import warnings
from dataclasses import dataclass
from typing import (TYPE_CHECKING, Any, Callable, Deque, Dict, List,
                    Optional, Sequence, Tuple)

from ..analysis.own_frames import OWN_THREAD
from ..common.checks import whole
from ..common.units import fmt_bytes, fmt_time
from ..common.words import plural
from .snapshot import Snapshot

if TYPE_CHECKING:
    from ..record.profiler import Profiler

Rule = Callable[[Snapshot], Optional[str]]
#: starts of one call in two snapshots differ by less (an anomalous call
#: is longer than this, so two of them on a thread start further apart)
SAME_CALL_NS = 1000
#: the calls alerted on that are remembered a stage and thread
ALERTED_KEPT = 64
#: the most of the run's time the monitor's checks may take: a check
#: that took longer than this share of its interval puts the next off
#: (counted in Monitor.late), so that a wide window checked often never
#: takes the program's CPU and GIL from it
MAX_SHARE = 0.1
#: the alerts (the latest) and callback errors (the first) kept: a
#: monitor that runs for weeks alerting every check must not grow
#: without end; the others are counted (alerts_dropped, errors_dropped)
KEPT = 1000


@dataclass
class Alert:
    kind: str                   # host_memory, gpu_memory, anomaly, rule,
    #                             check (a check raised)
    message: str
    elapsed: float              # seconds since the profiler started
    value: Optional[float] = None
    limit: Optional[float] = None
    stage: Optional[str] = None

    def __str__(self) -> str:
        return f"[aquaprof {fmt_time(self.elapsed)}] {self.kind}: " \
               f"{self.message}"


def _limit(value: Any, what: str) -> Optional[int]:
    if value is None:
        return None
    if not whole(value, 1):
        raise ValueError(f"{what} must be a number of bytes > 0, got "
                         f"{value!r}")
    return value


class Monitor:
    """Watches prof (a running or about to run Profiler(window=N)).

    interval: seconds between checks.
    on_alert: called with each new Alert, on the monitor's thread; what it
        raises is kept in .errors and warned about once, and never stops
        the monitor.
    host_memory: alert when the process RSS goes above this many bytes.
    gpu_memory: alert when a device's memory in use (NVML, every process)
        goes above this many bytes; RuntimeError at start when NVML cannot
        be read, so that a limit asked for is never silently unwatched.
    anomalies: alert on calls far outside their stage's window
        (Snapshot.anomalies(threshold, since=the check before)): every
        call the window holds that closed since the check before, and
        the calls open.
    rules: callables taking a Snapshot and returning a message (alert) or
        None; a rule that raises gives an alert saying so.
    prometheus: a port to serve the figures on (prometheus_client's HTTP
        server, all interfaces), or a prometheus_client registry to
        register them with; None for neither.
    """

    def __init__(self, prof: "Profiler", *, interval: float = 1.0,
                 on_alert: Optional[Callable[[Alert], Any]] = None,
                 host_memory: Optional[int] = None,
                 gpu_memory: Optional[int] = None, anomalies: bool = True,
                 threshold: float = 6.0, rules: Sequence[Rule] = (),
                 prometheus: Any = None):
        if not prof.window:
            raise ValueError("a Monitor needs rolling windows: create the "
                             "Profiler with window=N")
        if isinstance(interval, bool) or not isinstance(
                interval, (int, float)) or not 0.001 <= interval <= 3600:
            raise ValueError(f"interval must be between 0.001 and 3600 "
                             f"seconds, got {interval!r}")
        if on_alert is not None and not callable(on_alert):
            raise ValueError("on_alert must be callable")
        if not all(callable(r) for r in rules):
            raise ValueError("rules must be callables taking a Snapshot")
        if not threshold > 0:
            raise ValueError(f"threshold must be > 0, got {threshold!r}")
        self.prof = prof
        self.interval = float(interval)
        self.on_alert = on_alert
        self.host_memory = _limit(host_memory, "host_memory")
        self.gpu_memory = _limit(gpu_memory, "gpu_memory")
        self.anomalies = bool(anomalies)
        self.threshold = threshold
        self.rules = list(rules)
        #: the latest KEPT alerts raised, oldest first
        self.alerts: List[Alert] = []
        #: alerts raised before those, no longer kept
        self.alerts_dropped = 0
        #: alerts raised by kind, all of them (what Prometheus counts)
        self.counts: Dict[str, int] = {}
        #: (alert, exception) for the first KEPT on_alert calls that
        #: raised, each exception without its traceback (which held the
        #: check's snapshot alive)
        self.errors: List[Tuple[Alert, BaseException]] = []
        #: on_alert calls that raised past those
        self.errors_dropped = 0
        #: seconds the monitor's thread spent in checks, and the checks
        #: it put off past `interval` to stay under MAX_SHARE of the run
        self.busy = 0.0
        self.late = 0
        #: the latest snapshot taken, None before the first check
        self.last: Optional[Snapshot] = None
        #: device memory in use at the latest check (NVML), when watched
        self.gpu_used: Optional[List[int]] = None
        self._active: Dict[Any, bool] = {}
        # the starts of the calls alerted on, a bounded few a stage and
        # thread: a snapshot maps a call's start from the clock's ticks
        # anew, a few ns apart from one snapshot to the next
        self._alerted: Dict[Tuple[str, int], Deque[int]] = {}
        # calls that closed before the monitor was made are not its to
        # judge
        self._checked = prof.snapshot().elapsed if prof.running else 0.0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None
        self._server: Any = None
        #: the threads the monitor started, kept so that the report names
        #: them as its own once they ended
        self.threads: List[threading.Thread] = []
        self._prometheus = prometheus
        if self.gpu_memory is not None:
            from .nvml import memory_used
            self._gpu = memory_used
            memory_used()      # RuntimeError now if NVML cannot be read
        #: the port the Prometheus figures are served on, when they are
        self.prometheus_port: Optional[int] = None
        if prometheus is not None:
            from .prometheus import register
            self._server = register(self, prometheus)
            self.prometheus_port = getattr(self._server, "server_port", None)

    # ------------------------------------------------------------ checks
    def _edge(self, key: Any, on: bool) -> bool:
        """True when the condition `key` has just become true."""
        was = self._active.get(key, False)
        self._active[key] = on
        return on and not was

    def _first_alert(self, path: str, thread: int, start_ns: int) -> bool:
        """Whether the call of `path` on `thread` that started at start_ns
        is alerted on for the first time (and note it)."""
        seen = self._alerted.setdefault(
            (path, thread), collections.deque(maxlen=ALERTED_KEPT))
        if any(abs(start_ns - s) < SAME_CALL_NS for s in seen):
            return False
        seen.append(start_ns)
        return True

    def _anomaly_alerts(self, snap: Snapshot) -> List[Alert]:
        """An alert a stage with calls far off its window not alerted on
        before: the longest of them, and how many there were."""
        since, self._checked = self._checked, snap.elapsed
        spans = snap.spans()
        fresh: Dict[str, List[Any]] = {}
        for a in snap.anomalies(self.threshold, since=since):
            span = spans[a.span]
            if self._first_alert(a.path, int(span["thread"]),
                                 int(span["start_ns"])):
                fresh.setdefault(a.path, []).append(a)
        alerts = []
        for path, found in fresh.items():
            a = max(found, key=lambda f: f.duration)
            what = "still open after" if a.running else "took"
            calls = ("a call" if len(found) == 1 else
                     f"{len(found)} calls far off their window since the "
                     f"last check; the longest")
            alerts.append(Alert(
                "anomaly", f"{path}: {calls} {what} {fmt_time(a.duration)}, "
                f"usually {fmt_time(a.usual)} ({a.score:.0f} robust SD "
                f"above)", snap.elapsed, a.duration, a.usual, path))
        return alerts

    def check(self) -> List[Alert]:
        """Takes a snapshot now, raises the alerts it calls for and returns
        them (also kept in .alerts). Called by the monitor's thread every
        interval; may be called directly."""
        with self._lock:
            snap = self.prof.snapshot()
            self.last = snap
            new: List[Alert] = []
            if self.host_memory and snap.rss is not None and self._edge(
                    "host_memory", snap.rss > self.host_memory):
                new.append(Alert(
                    "host_memory", f"RSS {fmt_bytes(snap.rss)} above the "
                    f"limit of {fmt_bytes(self.host_memory)}", snap.elapsed,
                    snap.rss, self.host_memory))
            if self.gpu_memory:
                self.gpu_used = self._gpu()
                for device, used in enumerate(self.gpu_used):
                    if self._edge(("gpu_memory", device),
                                  used > self.gpu_memory):
                        new.append(Alert(
                            "gpu_memory", f"device {device} has "
                            f"{fmt_bytes(used)} in use, above the limit of "
                            f"{fmt_bytes(self.gpu_memory)}", snap.elapsed,
                            used, self.gpu_memory))
            if self.anomalies:
                new += self._anomaly_alerts(snap)
            for i, rule in enumerate(self.rules):
                try:
                    message = rule(snap)
                except Exception as e:   # a broken rule is worth an alert
                    message = f"rule {i} ({rule!r}) raised {e!r}"
                if self._edge(("rule", i), message is not None):
                    new.append(Alert("rule", str(message), snap.elapsed))
            self._keep(new)
        for alert in new:
            self._notify(alert)
        return new

    def _keep(self, new: List[Alert]) -> None:
        for alert in new:
            self.counts[alert.kind] = self.counts.get(alert.kind, 0) + 1
        self.alerts.extend(new)
        if len(self.alerts) > KEPT:
            cut = len(self.alerts) - KEPT
            del self.alerts[:cut]
            self.alerts_dropped += cut

    def _notify(self, alert: Alert) -> None:
        if self.on_alert is None:
            return
        try:
            self.on_alert(alert)
        except Exception as e:     # the user's callback: never stop on it
            if not self.errors and not self.errors_dropped:
                warnings.warn(f"aquaprof Monitor: on_alert raised "
                              f"{e!r}; kept in Monitor.errors",
                              RuntimeWarning, stacklevel=2)
            if len(self.errors) < KEPT:
                self.errors.append((alert, e.with_traceback(None)))
            else:
                self.errors_dropped += 1

    # ----------------------------------------------------------- running
    def _run(self) -> None:
        wait = self.interval
        while not self._stop.wait(wait):
            if not self.prof.running:
                break
            began = time.perf_counter()
            try:
                self.check()
            except Exception as e:      # noqa: BLE001 - said, never fatal
                if not self.prof.running:   # stopped between the two
                    break
                # a check that failed (out of memory, say) is an alert:
                # the monitor goes on, and its silence is not taken for
                # a quiet run
                if self._edge("check", True):
                    failed = Alert("check", f"a check raised {e!r}; the "
                                   f"monitor goes on", self._checked)
                    self._keep([failed])
                    self._notify(failed)
            else:
                self._edge("check", False)
            took = time.perf_counter() - began
            self.busy += took
            wait = max(self.interval, took * (1 - MAX_SHARE) / MAX_SHARE)
            self.late += wait > self.interval

    def start(self) -> "Monitor":
        if self._thread is not None:
            raise RuntimeError("this Monitor has already started")
        self._thread = threading.Thread(target=self._run, daemon=True,
                                        name=f"{OWN_THREAD}monitor")
        self.threads.append(self._thread)
        self.prof.on_stop(self.stop)
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stops the thread (and the Prometheus server it started)."""
        self._stop.set()
        if self._thread is not None and \
                self._thread is not threading.current_thread():
            self._thread.join()
        if self._server is not None and hasattr(self._server, "shutdown"):
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> "Monitor":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def __repr__(self) -> str:
        late = f", {plural(self.late, 'check')} put off" if self.late \
            else ""
        return (f"<aquaprof.Monitor every {self.interval:g} s, "
                f"{plural(len(self.alerts) + self.alerts_dropped, 'alert')}, "
                f"{self.busy:.2f} s checking{late}>")

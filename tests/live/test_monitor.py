"""Live figures: Profiler(window=N).snapshot(), the Monitor's alerts and
callbacks, GPU memory through a fake NVML, and the Prometheus exporter."""
import ctypes
import itertools
import threading
import time
import urllib.request

import numpy as np
import pytest

import aquaprof as ap
import aquaprof.live.nvml
from aquaprof import _core
from aquaprof.live.snapshot import Snapshot


def test_snapshot_items_per_second_count_overlapping_calls_once():
    """Four threads loading at once, each 10 items in 20 ms: the live
    figure is the pool's rate, as the report's is, not a quarter of it."""
    def worker():
        for _ in range(5):
            with ap.stage("load", items=10):
                time.sleep(0.02)

    with ap.Profiler(window=100) as prof:
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        live = prof.snapshot().recent["load"].throughput
    report = prof.report()["load"].throughput
    assert live == pytest.approx(report, rel=0.02)
    # four at once: well over the 500/s one thread makes
    assert live > 1000, live


def test_snapshot_keeps_the_last_calls_of_every_thread():
    def worker():
        for i in range(3):
            with ap.stage("step", items=100):
                time.sleep(0.001)

    with ap.Profiler(window=5) as prof:
        for i in range(8):
            with ap.stage("step", items=i):
                pass
        t = threading.Thread(target=worker)
        t.start()
        t.join()
        with ap.stage("outer"):
            snap = prof.snapshot()
    assert isinstance(snap, Snapshot) and snap.window == 5
    spans = snap.spans()
    step = snap.recent["step"]
    assert snap.stages["step"].count == 11 and step.calls == 5
    # the latest five of both threads: the worker's 3 and the main's last 2
    closed = spans[(spans["flags"] == 0)]
    kept = closed[np.argsort(closed["end_ns"])][-5:]
    assert sorted(kept["items"].tolist()) == [6, 7, 100, 100, 100]
    wall = (kept["end_ns"] - kept["start_ns"]) * 1e-9
    assert step.mean == pytest.approx(wall.mean())
    assert step.max == pytest.approx(wall.max())
    assert step.last == pytest.approx(wall[-1])
    assert step.throughput == pytest.approx(313 / wall.sum())
    assert step.p95 == pytest.approx(np.sort(wall)[-1])
    assert step.running == 0 and step.running_for is None
    outer = snap.recent["outer"]
    assert (outer.calls, outer.running, outer.mean) == (0, 1, None)
    assert 0 <= outer.running_for <= snap.elapsed
    assert snap.rss > 0 and snap.elapsed > 0
    text = str(snap)
    assert "last 5 calls" in text and "1 for" in text
    row = {s["path"]: s for s in snap.to_dict()["stages"]}["step"]
    assert row["count"] == 11 and row["calls"] == 5


def test_snapshot_is_refused_without_a_window_or_a_run():
    prof = ap.Profiler(window=10)
    with pytest.raises(RuntimeError, match="needs a running Profiler"):
        prof.snapshot()
    with prof:
        pass
    with pytest.raises(RuntimeError, match="after stop"):
        prof.snapshot()
    with ap.Profiler() as prof:
        with pytest.raises(RuntimeError, match=r"window=N"):
            prof.snapshot()


@pytest.mark.parametrize("window, error", [
    (-1, ValueError), (True, TypeError), (1.5, TypeError),
    ((1 << 20) + 1, ValueError)])
def test_bad_window_is_refused(window, error):
    with pytest.raises(error, match="window must be"):
        ap.Profiler(window=window)


def _with_durations(snap, durations_ms, open_ms=None):
    """snap's data with its closed 'step' calls set to exact durations and
    its open call (if any) to an exact age."""
    data = dict(snap._data)
    spans = data["spans"].copy()
    end = data["stop_ns"]
    for i, d in zip(np.flatnonzero(spans["flags"] == 0), durations_ms):
        spans["start_ns"][i] = spans["end_ns"][i] - int(d * 1e6)
    if open_ms is not None:
        i = np.flatnonzero(spans["flags"] != 0)[-1]
        spans["start_ns"][i] = end - int(open_ms * 1e6)
    data["spans"] = spans
    return Snapshot(data, snap.window)


def test_snapshot_anomalies_flag_the_latest_call_and_a_hang():
    with ap.Profiler(window=30) as prof:
        for _ in range(20):
            with ap.stage("step"):
                pass
        with ap.stage("step"):
            real = prof.snapshot()
    steady = [1.0 + 0.01 * (i % 3) for i in range(20)]
    assert _with_durations(real, steady, open_ms=1.2).anomalies() == []
    slow = _with_durations(real, steady[:-1] + [9.0], open_ms=0.5)
    (a,) = slow.anomalies()
    assert (a.path, a.running) == ("step", False)
    assert a.duration == pytest.approx(9e-3) and \
        a.usual == pytest.approx(1.01e-3)
    hung = _with_durations(real, steady, open_ms=40.0)
    (a,) = hung.anomalies()
    assert a.running and a.duration == pytest.approx(40e-3)
    assert hung.spans()["flags"][a.span] == _core.SPAN_UNCLOSED
    with pytest.raises(ValueError, match="threshold"):
        hung.anomalies(threshold=0)


@pytest.mark.parametrize("period", [4, 8, 20])
def test_snapshot_anomalies_leave_periodic_calls_alone(period):
    # 1 ms calls, identical (MAD 0), every period-th about 3 ms: the
    # latest call or an open one as long as them is the stage's pattern
    with ap.Profiler(window=60) as prof:
        for _ in range(60):
            with ap.stage("step"):
                pass
        with ap.stage("step"):
            real = prof.snapshot()
    rng = np.random.default_rng(period)
    steps = [3.0 * (1 + rng.uniform(-0.02, 0.02)) if i % period == 0
             else 1.0 for i in range(60)][::-1]      # the latest one long
    assert _with_durations(real, steps, open_ms=1.0).anomalies() == []
    assert _with_durations(real, steps[1:] + [1.0],
                           open_ms=3.05).anomalies() == []
    # a spike among them is still found, closed or open
    (a,) = _with_durations(real, steps[:-1] + [20.0],
                           open_ms=1.0).anomalies()
    assert (a.running, a.usual) == (False, pytest.approx(1e-3))
    (a,) = _with_durations(real, steps, open_ms=20.0).anomalies()
    assert a.running and a.duration == pytest.approx(20e-3)


def test_monitor_alerts_once_per_crossing_and_keeps_callback_errors():
    seen = []

    def on_alert(alert):
        seen.append(alert)
        raise KeyError("the pager is down")

    with ap.Profiler(window=10) as prof:
        with ap.stage("load"):
            pass
        mon = ap.Monitor(prof, host_memory=1 << 20, on_alert=on_alert,
                         rules=[lambda s: "three loads" if
                                s.stages["load"].count >= 3 else None,
                                lambda s: 1 / 0])
        with pytest.warns(RuntimeWarning, match="on_alert raised"):
            first = mon.check()
        assert [a.kind for a in first] == ["host_memory", "rule"]
        assert "above the limit of 1.0 MiB" in first[0].message
        assert first[0].value > first[0].limit == 1 << 20
        assert "raised ZeroDivisionError" in first[1].message
        assert mon.check() == []                 # still above: no repeat
        for _ in range(2):
            with ap.stage("load"):
                pass
        (third,) = mon.check()
        assert third.message == "three loads"
        mon.host_memory = 1 << 50                # back under: re-armed
        assert mon.check() == []
        mon.host_memory = 1 << 20
        assert [a.kind for a in mon.check()] == ["host_memory"]
    assert seen == mon.alerts and len(mon.alerts) == 4
    assert [type(e) for _, e in mon.errors] == [KeyError] * 4
    assert mon.last.stages["load"].count == 3


def test_monitor_thread_alerts_while_a_stage_hangs():
    alerts = []
    with ap.Profiler(window=50) as prof:
        for _ in range(20):
            with ap.stage("step"):
                time.sleep(0.001)
        mon = prof.monitor(interval=0.01, on_alert=alerts.append)
        with ap.stage("step"):
            deadline = time.monotonic() + 5
            # (a preempted 1 ms call may be flagged too: look past it)
            while time.monotonic() < deadline and not any(
                    "still open" in a.message for a in alerts):
                time.sleep(0.01)
            hung = [a for a in alerts if "still open" in a.message]
    assert hung, "no alert while the call hung"
    assert hung[0].kind == "anomaly" and hung[0].stage == "step"
    assert hung[0].message.startswith("step: a call still open after ")
    assert len(hung) == 1                        # once per call
    assert not mon._thread.is_alive()            # stopped with the profiler
    assert str(hung[0]).startswith("[aquaprof ")


def test_a_hung_call_is_alerted_once_over_many_checks_and_its_close():
    """A snapshot maps a call's start from the clock's ticks anew each
    time, a few ns apart: the call is still the one alerted on, open for
    30 checks and then closed."""
    alerts = []
    with ap.Profiler(window=50) as prof:
        for _ in range(20):
            with ap.stage("step"):
                pass
        mon = prof.monitor(interval=0.01, on_alert=alerts.append)
        begun = prof.snapshot().elapsed
        with ap.stage("step"):
            time.sleep(0.3)
        for _ in range(5):
            with ap.stage("step"):
                pass
        time.sleep(0.05)
    said = [a.message for a in alerts]
    # (a preempted call of nothing may be flagged too: look past it)
    hung = [a for a in alerts if "still open after" in a.message and
            abs(a.elapsed - a.value - begun) < 0.05]
    assert len(hung) == 1, said
    # and its close, 0.3 s, is not alerted on again
    assert not any("took" in a.message and a.value >= 0.25
                   for a in alerts), said


def test_a_slow_call_that_is_not_the_latest_at_a_check_is_alerted():
    """Each check judges every call that closed since the one before, so
    a spike followed by steady calls is not missed; one alert a stage a
    check, saying how many calls and the longest."""
    with ap.Profiler(window=100) as prof:
        for _ in range(30):
            with ap.stage("step"):
                pass
        mon = ap.Monitor(prof, anomalies=True)
        mon.check()
        with ap.stage("step"):
            time.sleep(0.03)
        for _ in range(30):
            with ap.stage("step"):
                pass
        found = mon.check()
        again = mon.check()
    (alert,) = [a for a in found if a.kind == "anomaly"]
    assert alert.stage == "step" and 0.03 <= alert.value < 0.3
    assert alert.message.startswith("step: a call took ") or \
        "calls far off their window since the last check" in alert.message
    assert again == []


def test_gpu_memory_alerts_through_nvml(fakes, monkeypatch):
    monkeypatch.setenv("AQUAPROF_LIBNVML", str(fakes / "libnvidia-ml.so"))
    monkeypatch.setattr(aquaprof.live.nvml, "_lib", None)
    fake = ctypes.CDLL(str(fakes / "libnvidia-ml.so"))
    fake.fake_nvml_set(2, 0, ctypes.c_ulonglong(10 << 30))
    fake.fake_nvml_set(2, 1, ctypes.c_ulonglong(70 << 30))
    with ap.Profiler(window=10) as prof:
        mon = ap.Monitor(prof, gpu_memory=64 << 30, anomalies=False)
        (alert,) = mon.check()
        assert alert.kind == "gpu_memory" and alert.value == 70 << 30
        assert alert.message.startswith("device 1 has 70.0 GiB in use")
        assert mon.gpu_used == [10 << 30, 70 << 30]
        fake.fake_nvml_set(2, 0, ctypes.c_ulonglong(65 << 30))
        assert [a.message[:8] for a in mon.check()] == ["device 0"]


def test_gpu_memory_limit_without_nvml_is_an_error(tmp_path, monkeypatch):
    monkeypatch.setenv("AQUAPROF_LIBNVML", str(tmp_path / "none.so"))
    monkeypatch.setattr(aquaprof.live.nvml, "_lib", None)
    with ap.Profiler(window=10) as prof:
        with pytest.raises(RuntimeError, match="no NVML: cannot open"):
            ap.Monitor(prof, gpu_memory=1 << 30)


@pytest.mark.parametrize("options, message", [
    ({"interval": 0}, "interval must be"),
    ({"interval": True}, "interval must be"),
    ({"host_memory": -1}, "host_memory must be"),
    ({"gpu_memory": 1.5}, "gpu_memory must be"),
    ({"on_alert": 3}, "on_alert must be callable"),
    ({"rules": [3]}, "rules must be callables"),
    ({"threshold": 0}, "threshold must be"),
    ({"prometheus": "9100"}, "prometheus must be a port"),
    ({"prometheus": 70000}, "port must be 0..65535"),
])
def test_bad_monitor_options_are_refused(options, message):
    with ap.Profiler(window=10) as prof:
        with pytest.raises(ValueError, match=message):
            ap.Monitor(prof, **options)
    with ap.Profiler() as prof:
        with pytest.raises(ValueError, match="window=N"):
            ap.Monitor(prof)


def _metrics(text):
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
            for line in text.splitlines() if line and line[0] != "#"}


def test_prometheus_registry_and_http_server():
    prometheus_client = pytest.importorskip("prometheus_client")
    registry = prometheus_client.CollectorRegistry()
    with ap.Profiler(window=10) as prof:
        for i in range(4):
            with ap.stage("step", items=2):
                time.sleep(0.001)
        mon = prof.monitor(interval=60, prometheus=registry)
        served = prof.monitor(interval=60, prometheus=0)
        got = _metrics(prometheus_client.generate_latest(registry).decode())
        url = f"http://127.0.0.1:{served.prometheus_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            over_http = _metrics(response.read().decode())
        snap = prof.snapshot()
    assert got['aquaprof_stage_calls_total{stage="step"}'] == 4
    assert over_http['aquaprof_stage_calls_total{stage="step"}'] == 4
    recent = snap.recent["step"]
    # Each snapshot maps ticks to seconds with the tick rate measured up to
    # that moment, so two snapshots of one span agree to about 1e-6, not
    # exactly.
    assert got['aquaprof_stage_recent_mean_seconds{stage="step"}'] == \
        pytest.approx(recent.mean, rel=1e-4)
    assert got['aquaprof_stage_recent_items_per_second{stage="step"}'] == \
        pytest.approx(recent.throughput, rel=1e-4)
    assert got['aquaprof_stage_open_seconds{stage="step"}'] == 0
    assert got["aquaprof_host_rss_bytes"] > 0
    assert got['aquaprof_alerts_total{kind="anomaly"}'] == 0
    assert mon._server is None and served._server is None   # shut down
    with pytest.raises(OSError):
        urllib.request.urlopen(url, timeout=2)


def _recent_by_stage(snap, path):
    """The rolling figures of one stage, computed on its own from the
    kept spans, as the snapshot's definition says."""
    spans = snap.spans()
    sid = list(snap.stages).index(path)
    mine = spans[spans["stage"] == sid]
    closed = mine[(mine["flags"] & _core.SPAN_UNCLOSED) == 0]
    closed = closed[np.argsort(closed["end_ns"], kind="stable")][
        -snap.window:]
    wall = (closed["end_ns"] - closed["start_ns"]) * 1e-9
    return (len(wall), wall.mean() if len(wall) else None,
            np.percentile(wall, 95, method="inverted_cdf")
            if len(wall) else None, wall[-1] if len(wall) else None,
            closed["items"].sum() / _open_for(closed)
            if closed["items"].sum() else None)


def _open_for(spans):
    """Seconds at least one of the calls was open, merged one by one."""
    total, reach = 0, None
    for start, end in sorted(zip(spans["start_ns"].tolist(),
                                 spans["end_ns"].tolist())):
        if reach is None or start >= reach:
            total += end - start
            reach = end
        elif end > reach:
            total += end - reach
            reach = end
    return total * 1e-9


def test_snapshot_figures_of_many_stages_and_threads_are_each_stages_own():
    rng = np.random.default_rng(3)

    def worker(seed):
        r = np.random.default_rng(seed)
        for _ in range(400):
            with ap.stage(f"s{r.integers(60)}", items=int(r.integers(3))):
                time.sleep(float(r.uniform(0, 2e-5)))

    with ap.Profiler(window=7, memory=False) as prof:
        threads = [threading.Thread(target=worker, args=(s,))
                   for s in (1, 2)]
        for t in threads:
            t.start()
        worker(int(rng.integers(1000)))
        for t in threads:
            t.join()
        with ap.stage("s1"), ap.stage("held"):
            snap = prof.snapshot()
    assert len(snap.recent) > 50
    for path, r in snap.recent.items():
        calls, mean, p95, last, rate = _recent_by_stage(snap, path)
        assert r.calls == calls
        if calls:
            assert (r.mean, r.p95, r.last) == pytest.approx(
                (mean, p95, last)), path
            assert r.throughput == (pytest.approx(rate) if rate else None)
    assert snap.recent["s1/held"].running == 1


def test_a_check_that_raises_is_an_alert_and_the_monitor_goes_on(
        monkeypatch):
    """The monitor's own thread never dies silently: a failed check (out
    of memory in a wide window, say) is an alert, once, and the checks
    after it still run."""
    alerts = []
    failing = {"left": 2}
    real = Snapshot.anomalies

    def anomalies(self, *args, **kwargs):
        if failing["left"]:
            failing["left"] -= 1
            raise MemoryError("planted")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(Snapshot, "anomalies", anomalies)
    with ap.Profiler(window=20) as prof:
        mon = prof.monitor(interval=0.01, on_alert=alerts.append,
                           rules=[lambda s: "ran" if not failing["left"]
                                  else None])
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and not any(
                a.kind == "rule" for a in alerts):
            time.sleep(0.01)
    kinds = [a.kind for a in alerts]
    assert kinds.count("check") == 1, alerts
    assert "raised MemoryError('planted')" in alerts[0].message
    assert "rule" in kinds                  # it went on checking


def test_a_wide_window_judges_each_new_call_against_its_last_calls():
    """Each call is judged against at most HISTORY calls before it: a
    spike after 3,000 steady calls is found, however wide the window."""
    from aquaprof.live.snapshot import HISTORY
    with ap.Profiler(window=3000) as prof:
        for _ in range(3000):
            with ap.stage("step"):
                pass
        mon = ap.Monitor(prof)
        mon.check()
        with ap.stage("step"):
            time.sleep(0.02)
        for _ in range(10):
            with ap.stage("step"):
                pass
        (alert,) = [a for a in mon.check() if a.kind == "anomaly"]
    assert HISTORY < 3000 and alert.value >= 0.02


def test_a_raising_callback_keeps_no_snapshot_and_the_lists_are_bounded(
        monkeypatch):
    """A callback that raises at every check kept each check's snapshot
    alive through its exception's traceback: memory grew with the run.
    Alerts and errors past monitor.KEPT are counted, not kept."""
    import gc
    from aquaprof.live import monitor as monitor_module
    from aquaprof.live.snapshot import Snapshot
    monkeypatch.setattr(monitor_module, "KEPT", 10)
    flip = itertools.cycle(["on", None])

    def broken(alert):
        raise KeyError(alert.message)

    with ap.Profiler(window=10) as prof:
        with ap.stage("load"):
            pass
        mon = ap.Monitor(prof, rules=[lambda snap: next(flip)],
                         on_alert=broken, anomalies=False)
        with pytest.warns(RuntimeWarning, match="on_alert raised"):
            for _ in range(60):
                mon.check()
    gc.collect()
    alive = [o for o in gc.get_objects() if type(o) is Snapshot]
    assert len(alive) <= 1, len(alive)          # mon.last at most
    assert all(e.__traceback__ is None for _, e in mon.errors)
    assert len(mon.errors) == 10 and mon.errors_dropped == 20
    assert len(mon.alerts) == 10 and mon.alerts_dropped == 20
    assert mon.counts == {"rule": 30}
    assert "30 alerts" in repr(mon)


def test_checks_that_take_long_are_put_off_to_keep_the_monitor_cheap(
        monkeypatch):
    """A check of a wide window can take longer than a short interval:
    back to back, the monitor's thread would take the program's CPU and
    GIL. A check that took t waits t (1 - MAX_SHARE) / MAX_SHARE before
    the next: the checks' share of the run stays near MAX_SHARE."""
    from aquaprof.live import monitor as monitor_module
    calls = []

    def slow_check(self):
        calls.append(time.perf_counter())
        time.sleep(0.03)
        return []

    monkeypatch.setattr(monitor_module.Monitor, "check", slow_check)
    with ap.Profiler(window=10) as prof:
        mon = prof.monitor(interval=0.001)
        began = time.perf_counter()
        time.sleep(1.0)
        elapsed = time.perf_counter() - began
    # back to back: about 30 checks in the second; kept to a tenth of it
    assert 2 <= len(calls) <= 6, len(calls)
    assert mon.late >= len(calls) - 1
    assert mon.busy <= 0.2 * elapsed
    assert "checks put off" in repr(mon)


def test_its_repr_counts_in_the_right_number():
    with ap.Profiler(window=10) as prof:
        mon = ap.Monitor(prof, rules=[lambda snap: "always"],
                         anomalies=False)
        assert ", 0 alerts, " in repr(mon)
        mon.check()
        assert ", 1 alert, " in repr(mon)

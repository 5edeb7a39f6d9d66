"""The monitor's figures for Prometheus (prometheus_client, optional): a
collector that takes a fresh snapshot at each scrape, so the figures are
never older than the scrape itself."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Iterator

from ..analysis.own_frames import OWN_THREAD
from ..common.checks import whole

if TYPE_CHECKING:
    from .monitor import Monitor


def _client() -> Any:
    try:
        import prometheus_client
    except ImportError:
        raise ImportError("Monitor(prometheus=...) needs prometheus_client: "
                          "pip install prometheus_client") from None
    return prometheus_client


class Collector:
    """Yields aquaprof_* metric families from the monitor's profiler."""

    def __init__(self, monitor: "Monitor"):
        self.monitor = monitor

    def collect(self) -> Iterator[Any]:
        _client()
        from prometheus_client import core
        mon = self.monitor
        try:
            snap = mon.prof.snapshot()
        except RuntimeError:          # stopped: its last figures
            snap = mon.last
        if snap is None:
            return
        stage = ["stage"]
        calls = core.CounterMetricFamily(
            "aquaprof_stage_calls", "Calls of the stage closed so far",
            labels=stage)
        seconds = core.CounterMetricFamily(
            "aquaprof_stage_seconds", "Wall time of the stage's closed "
            "calls", labels=stage)
        gauges = {
            "mean": core.GaugeMetricFamily(
                "aquaprof_stage_recent_mean_seconds", "Mean wall time of "
                "the stage's last calls (the profiler's window)",
                labels=stage),
            "p95": core.GaugeMetricFamily(
                "aquaprof_stage_recent_p95_seconds", "95th percentile of "
                "the stage's last calls", labels=stage),
            "throughput": core.GaugeMetricFamily(
                "aquaprof_stage_recent_items_per_second", "Items per second "
                "of stage wall time over its last calls", labels=stage),
            "running_for": core.GaugeMetricFamily(
                "aquaprof_stage_open_seconds", "Age of the stage's oldest "
                "open call, 0 when none is open", labels=stage),
        }
        for path, recent in snap.recent.items():
            calls.add_metric([path], snap.stages[path].count)
            seconds.add_metric([path], snap.stages[path].wall.total)
            for field, family in gauges.items():
                value = getattr(recent, field)
                if value is not None or field == "running_for":
                    family.add_metric([path], value or 0.0)
        yield calls
        yield seconds
        yield from gauges.values()
        if snap.rss is not None:
            yield core.GaugeMetricFamily(
                "aquaprof_host_rss_bytes", "Resident set size of the "
                "profiled process", value=snap.rss)
        if mon.gpu_used is not None:
            gpu = core.GaugeMetricFamily(
                "aquaprof_gpu_memory_used_bytes", "Device memory in use "
                "(NVML, all processes)", labels=["device"])
            for device, used in enumerate(mon.gpu_used):
                gpu.add_metric([str(device)], used)
            yield gpu
        alerts = core.CounterMetricFamily(
            "aquaprof_alerts", "Alerts the monitor raised", labels=["kind"])
        for kind in ("host_memory", "gpu_memory", "anomaly", "rule",
                     "check"):
            alerts.add_metric([kind], mon.counts.get(kind, 0))
        yield alerts


def register(monitor: "Monitor", target: Any) -> Any:
    """Registers the monitor's collector with target, a registry, or
    serves it on target, a port (int): returns the HTTP server then."""
    client = _client()
    if whole(target):
        if not 0 <= target <= 65535:
            raise ValueError(f"prometheus port must be 0..65535, got "
                             f"{target}")
        registry = client.CollectorRegistry()
        registry.register(Collector(monitor))
        server, thread = client.start_http_server(target, registry=registry)
        # the profiler's own thread: its samples are no part of the
        # program's (analysis.own_frames). The sampler may have noted it
        # under its first name as it started; it reads the name again at
        # the end while the thread's object lives, which the monitor keeps
        thread.name = f"{OWN_THREAD}prometheus"
        monitor.threads.append(thread)
        return server
    if not hasattr(target, "register"):
        raise ValueError(f"prometheus must be a port (int) or a "
                         f"prometheus_client registry, got {target!r}")
    target.register(Collector(monitor))
    return None

"""Figures while a Profiler runs: snapshots, the monitor and its alerts,
Prometheus and NVML."""

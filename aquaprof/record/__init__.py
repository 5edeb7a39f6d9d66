"""Recording a run: the Profiler (profiler) and its options (options),
nested profilers (nesting), the profiler's own cost (calibration),
asyncio and greenlet suspension (suspendable), the host (host), the GPU
status line (gpu_status), CUPTI's lookup (cupti), child processes
(processes) and torch (torch)."""

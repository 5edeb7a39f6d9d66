"""Recording a run: the Profiler and its options, nested profilers, the
profiler's own cost, CUPTI's lookup, the capture of child processes
(processes) and of torch ops, modules, backward passes and DataLoader
waits (torch)."""

"""What the profiler records of torch: ops (ops), module calls (modules)
and backward passes (backward) as stages, sharing their state (state),
put on and taken off as one switch (switch), their own cost measured
(cost), with hooks as the entry the Profiler and docs/torch.md use; the
DataLoader's waits (dataloader); and torch.profiler in the same process
(torch_profiler)."""

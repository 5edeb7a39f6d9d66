"""What the profiler records of torch: ops, module calls and backward
passes (hooks), and DataLoader waits (dataloader)."""

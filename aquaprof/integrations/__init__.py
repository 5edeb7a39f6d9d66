"""aquaprof where users already work: the command line, the pytest plugin,
the IPython magic, the batch-size sweep, the demo, and the gathering of a
torch.distributed job's reports."""

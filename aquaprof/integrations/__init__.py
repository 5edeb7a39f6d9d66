"""aquaprof where users already work: the command line, the pytest plugin,
the IPython magic, the batch-size sweep and the demo."""

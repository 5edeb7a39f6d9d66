"""Child processes' stages, delivered to the Profiler that started them
(docs/processes.md).

- parent: what a Profiler uses to capture its children (Capture): the
  folder named to them, read and removed at its stop;
- child: a child's own Profiler, started from the parent's options, its
  SIGTERM handling and the delivery of its report;
- folder: what both sides share: the config key, the files' names and
  their atomic writes.

The Profiler imports the parent side only; the child side imports the
Profiler and attaches itself to the parent side as the door imports it
(child.register_hook()). Nothing is imported here: each side is imported
by name.
"""

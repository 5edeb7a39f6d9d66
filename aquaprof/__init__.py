"""aquaprof: a low-overhead profiler for GPU pipelines with a C core.

    import aquaprof as ap

    @ap.stage("depth_estimation")
    def estimate(x): ...

    with ap.Profiler() as prof:
        with ap.stage("load", items=16):
            ...
        estimate(x)
    print(prof.report())
"""
import sys as _sys

from . import moved
from ._core import Stage, StagedFunction, active, stage
from ._version import __version__
from .record.processes import child as _child
from .record.profiler import Profiler
from .report import ProcessStats, Report, ReportError, StageStats, Timing

moved.install()
# a process started by a profiling parent records from its start
_child.register_hook()
if "IPython" in _sys.modules:
    # in a notebook: an edited module's staged functions reload
    from .integrations.autoreload import watch_autoreload
    watch_autoreload()


def diff_flamegraph(base: Report, new: Report, path, title: str =
                    "aquaprof differential flamegraph"):
    """An SVG flamegraph of new, each stage coloured by its change from
    base (red slower, blue faster). Returns the path."""
    from .views.flamegraph import write_flamegraph
    return write_flamegraph(new, path, title, base=base)


def merge(reports, labels=None) -> Report:
    """One report of several processes (torch.distributed ranks, workers):
    stages merged by path, spans and threads kept per process. In a
    running torch.distributed job, aquaprof.distributed.gather gathers
    and merges the ranks' reports."""
    from .report import merge_reports
    return merge_reports(reports, labels)


def __getattr__(name: str):
    if f"{__name__}.{name}" in moved.MOVED:   # aquaprof.schema.KERNEL
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    # History pulls in sqlite3: only for those who use it
    if name in ("History", "HistoryError"):
        from .integrations import history
        return getattr(history, name)
    if name == "distributed":
        # a module whose gather() imports torch only when called;
        # `from . import` would ask this __getattr__ again
        import importlib
        return importlib.import_module(f"{__name__}.distributed")
    if name == "sweep":
        from .integrations.batch_size import sweep
        return sweep
    if name in ("Monitor", "Alert"):
        from .live import monitor
        return getattr(monitor, name)
    if name == "Snapshot":
        from .live.snapshot import Snapshot
        return Snapshot
    raise AttributeError(f"module 'aquaprof' has no attribute {name!r}")


def load_ipython_extension(shell) -> None:
    """``%load_ext aquaprof``: the ``%%aquaprof`` cell magic."""
    from .integrations.notebook import load_ipython_extension as load
    load(shell)


__all__ = [
    "Alert", "History", "HistoryError", "Monitor", "ProcessStats",
    "Profiler", "Report", "ReportError", "Snapshot", "Stage", "StageStats",
    "StagedFunction", "Timing", "active", "diff_flamegraph", "distributed",
    "merge", "stage", "sweep",
    "__version__",
]

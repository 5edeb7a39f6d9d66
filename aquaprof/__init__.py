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
__version__ = "0.1.0"

from ._core import Stage, StagedFunction, active, stage
from .profiler import Profiler
from .report import Report, ReportError, StageStats, Timing

__all__ = [
    "Profiler", "Report", "ReportError", "Stage", "StageStats",
    "StagedFunction", "Timing", "active", "stage", "__version__",
]

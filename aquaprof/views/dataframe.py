"""The report as a pandas DataFrame: one row per stage path, in the
table's order, times in seconds (pandas is optional)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..model.report import Report

COLUMNS = ["path", "name", "depth", "count", "total_s", "self_s", "mean_s",
           "std_s", "min_s", "p50_s", "p95_s", "p99_s", "max_s", "cpu_s",
           "share", "items", "items_per_s", "mem_peak", "mem_delta",
           "raised"]


def report_dataframe(report: "Report") -> Any:
    """One row per stage path, in the table's order, times in seconds."""
    try:
        import pandas as pd
    except ImportError:
        raise ImportError("Report.to_dataframe() needs pandas, which is "
                          "not installed: pip install pandas") from None
    rows = []
    for s in report.stages:
        w = s.wall
        rows.append([s.path, s.name, s.depth, s.count, w.total, s.self_time,
                     w.mean, w.std, w.min, w.p50, w.p95, w.p99, w.max, s.cpu,
                     s.share, s.items, s.throughput, s.mem_peak, s.mem_delta,
                     s.raised])
    return pd.DataFrame(rows, columns=COLUMNS)

"""Reports over time, in one SQLite file (no server): each run with its
metadata (git commit, host, Python, torch, CUDA, device), its per-stage
figures for trends, and the whole report to load back.

Writers take SQLite's write lock for the whole insertion (``BEGIN
IMMEDIATE``) in WAL mode and wait up to ``timeout`` seconds for it, so
concurrent writers (pytest workers, ranks) each add their runs whole.
"""
from __future__ import annotations

import json
import os
import platform
import sqlite3
import statistics
import subprocess
import sys
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union, cast

from ..report import Report

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL, label TEXT, git_commit TEXT, host TEXT,
    python TEXT, torch TEXT, cuda TEXT, device TEXT,
    report BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS stages (
    run INTEGER NOT NULL REFERENCES runs(id), path TEXT NOT NULL,
    count INTEGER, total_s REAL, self_s REAL, mean_s REAL, p50_s REAL,
    p95_s REAL, PRIMARY KEY (run, path));
"""
METRICS = ("total_s", "self_s", "mean_s", "p50_s", "p95_s")
_RUN_COLUMNS = ("r.id, r.time, r.label, r.git_commit, r.host, r.python, "
                "r.torch, r.cuda, r.device")


@dataclass
class Run:
    id: int
    time: float            # when the profiled run started (Unix time)
    label: Optional[str]
    git_commit: Optional[str]
    host: Optional[str]
    python: Optional[str]
    torch: Optional[str]
    cuda: Optional[str]
    device: Optional[str]


def _git_commit(cwd: Optional[str]) -> Optional[str]:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or None,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.strip() or None


def run_metadata(report: Report) -> Dict[str, Optional[str]]:
    """What a run ran on. torch is asked only if the process imported it,
    and the device only if torch already initialised CUDA: adding to the
    history never starts either."""
    host = report.meta.get("host", {})
    torch = sys.modules.get("torch")
    cuda = device = None
    if torch is not None:
        cuda = getattr(torch.version, "cuda", None)
        if torch.cuda.is_initialized():
            device = torch.cuda.get_device_name()
    return {"git_commit": _git_commit(host.get("cwd")),
            "host": host.get("hostname") or platform.node(),
            "python": host.get("python") or platform.python_version(),
            "torch": getattr(torch, "__version__", None),
            "cuda": cuda, "device": device}


class History:
    """``History(path)``: the runs stored in the SQLite file at path
    (created if missing)."""

    def __init__(self, path: Union[str, os.PathLike], timeout: float = 60.0):
        self.path = Path(path)
        self._db = sqlite3.connect(str(self.path), timeout=timeout,
                                   isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("BEGIN IMMEDIATE")
        try:
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, report: Report, label: Optional[str] = None,
            **meta: Optional[str]) -> int:
        """Stores report; meta overrides what run_metadata finds (git_commit,
        host, python, torch, cuda, device). Returns the run's id."""
        if not isinstance(report, Report):
            raise TypeError(f"report must be an aquaprof Report, got "
                            f"{type(report).__name__}")
        unknown = set(meta) - {"git_commit", "host", "python", "torch",
                               "cuda", "device"}
        if unknown:
            raise TypeError(f"unknown run metadata: {sorted(unknown)}")
        info = dict(run_metadata(report), **meta)
        started = report.meta.get("host", {}).get("started_at", time.time())
        blob = zlib.compress(json.dumps(report.to_dict()).encode(), 6)
        self._db.execute("BEGIN IMMEDIATE")
        try:
            cursor = self._db.execute(
                "INSERT INTO runs (time, label, git_commit, host, python, "
                "torch, cuda, device, report) VALUES (?,?,?,?,?,?,?,?,?)",
                (started, label, info["git_commit"], info["host"],
                 info["python"], info["torch"], info["cuda"],
                 info["device"], blob))
            # an INSERT just ran on this cursor: lastrowid is its row id,
            # not None
            run = cast(int, cursor.lastrowid)
            self._db.executemany(
                "INSERT INTO stages VALUES (?,?,?,?,?,?,?,?)",
                [(run, s.path, s.count, s.wall.total, s.self_time,
                  s.wall.mean, s.wall.p50, s.wall.p95)
                 for s in report.stages])
            self._db.execute("COMMIT")
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        return int(run)

    def runs(self) -> List[Run]:
        """Every run, oldest first."""
        rows = self._db.execute(
            f"SELECT {_RUN_COLUMNS} FROM runs r ORDER BY r.time, r.id"
        ).fetchall()
        return [Run(*row) for row in rows]

    def report(self, run: int) -> Report:
        row = self._db.execute("SELECT report FROM runs WHERE id = ?",
                               (run,)).fetchone()
        if row is None:
            raise KeyError(f"no run {run} in {self.path}")
        return Report.from_dict(json.loads(zlib.decompress(row[0])))

    def trend(self, stage: str, metric: str = "p50_s"
              ) -> List[Tuple[Run, float]]:
        """(run, value) for every run that has stage, oldest first; metric
        is one of total_s, self_s, mean_s, p50_s, p95_s."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got "
                             f"{metric!r}")
        rows = self._db.execute(
            f"SELECT {_RUN_COLUMNS}, s.{metric} FROM stages s JOIN runs r "
            f"ON r.id = s.run WHERE s.path = ? ORDER BY r.time, r.id",
            (stage,)).fetchall()
        return [(Run(*row[:-1]), row[-1]) for row in rows]

    def stages(self) -> List[str]:
        return [row[0] for row in self._db.execute(
            "SELECT DISTINCT path FROM stages ORDER BY path")]

    def steps(self, stage: str, threshold: float = 0.1, window: int = 5,
              metric: str = "p50_s") -> List[Tuple[Run, float]]:
        """Runs where stage stepped up: its metric above the median of the
        previous `window` runs by more than threshold, those runs taken
        from the last step on (a new level is flagged once). (run,
        change)."""
        series = self.trend(stage, metric)
        out, level = [], 0
        for i in range(1, len(series)):
            before = [v for _, v in series[max(level, i - window):i]]
            reference = statistics.median(before)
            change = series[i][1] / reference - 1 if reference > 0 else 0.0
            if change > threshold:
                out.append((series[i][0], change))
                level = i
        return out

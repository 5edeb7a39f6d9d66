"""Reports over time, in one SQLite file (no server): each run with its
metadata (git commit, host, Python, torch, CUDA, device), its per-stage
figures for trends, and the whole report to load back.

Writers take SQLite's write lock for the whole insertion (``BEGIN
IMMEDIATE``) in WAL mode and wait up to ``timeout`` seconds for it, so
concurrent writers (pytest workers, ranks) each add their runs whole.

The file records what it is in SQLite's header, as a report records its
"format" and "version": the application id APPLICATION_ID and, in
user_version, the schema VERSION of its tables. A history of a newer
schema is refused with both versions named; one written before versions
were recorded (both 0, tables of version 1) is read, and stamped when a
run is added to it. A history of an older version is read as it is (its
rows lack what later versions added: None) and brought up to VERSION
when a run is added to it.

Each stage row keeps what the run's calls said of the spread of its
total and tail (verdict.own_spread, from the calls compare judges), so
that a few runs agreeing by chance on a figure their calls cannot pin
down are no certainty in steps(), as they are none in compare; a step
on another kind of machine or Python, or a busier or quieter one, says
so, as compare does, from the stored reports.

Opening a history writes nothing unless the file is new, so a history on
a read-only file or filesystem can still be read. A run that cannot be
added (a full disk, a read-only file) is rolled back whole and the error
says why, in a HistoryError; the runs already there stay as they were.
"""
from __future__ import annotations

import json
import math
import os
import platform
import sqlite3
import stat
import subprocess
import sys
import time
import urllib.parse
import zlib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple, Union, cast

from ..model import limits, schema
from ..report import Report
from ..analysis.compare import machine_notes, run_figures
from ..analysis.verdict import (
    MIN_TAIL_CALLS, SLOWER, RunFigures, Verdict, judge, own_spread)

#: "AQPF": what marks a SQLite file as an aquaprof history, in every
#: schema version
APPLICATION_ID = 0x41515046
#: the schema version this aquaprof writes and reads (user_version);
#: 2 added the stages' own spreads
VERSION = 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL, label TEXT, git_commit TEXT, host TEXT,
    python TEXT, torch TEXT, cuda TEXT, device TEXT,
    report BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS stages (
    run INTEGER NOT NULL REFERENCES runs(id), path TEXT NOT NULL,
    count INTEGER, total_s REAL, self_s REAL, mean_s REAL, p50_s REAL,
    p95_s REAL, total_spread REAL, tail_spread REAL,
    PRIMARY KEY (run, path));
"""
#: the columns version 2 added to the stages table
_SPREAD_COLUMNS = ("total_spread", "tail_spread")
#: the columns of each table in each schema version, as _SCHEMA makes
#: them (version 1 before the spreads): what tells a history from
#: another program's SQLite file
_TABLES_V1 = {
    "runs": ["id", "time", "label", "git_commit", "host", "python", "torch",
             "cuda", "device", "report"],
    "stages": ["run", "path", "count", "total_s", "self_s", "mean_s",
               "p50_s", "p95_s"],
}
_TABLES_BY_VERSION = {
    1: _TABLES_V1,
    2: dict(_TABLES_V1, stages=_TABLES_V1["stages"] + list(_SPREAD_COLUMNS)),
}
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


class HistoryError(Exception):
    """A history file that cannot be opened, read or added to; the message
    names the file and the cause (SQLite's own words)."""


def _uri(path: Path, **options: str) -> str:
    query = urllib.parse.urlencode(options)
    return f"file:{urllib.parse.quote(str(path.absolute()))}?{query}"


class History:
    """``History(path)``: the runs stored in the SQLite file at path
    (created if missing). HistoryError when path is not a history (another
    program's database, a directory, a device) or cannot be opened; a
    history that cannot be written is opened to read."""

    def __init__(self, path: Union[str, os.PathLike], timeout: float = 60.0):
        self.path = Path(path)
        self._timeout = timeout
        # False for a history written before versions were recorded
        self._stamped = True
        # the schema version of the file's tables
        self._version = VERSION
        self._db = self._open()

    def _fail(self, doing: str, e: object) -> HistoryError:
        return HistoryError(f"cannot {doing} history {str(self.path)!r}: "
                            f"{e}")

    def _open(self) -> sqlite3.Connection:
        try:
            info: Optional[os.stat_result] = os.stat(self.path)
        except FileNotFoundError:
            info = None
        except OSError as e:
            raise self._fail("open", e.strerror or e) from None
        if info is not None and not stat.S_ISREG(info.st_mode):
            kind = "a directory" if stat.S_ISDIR(info.st_mode) else \
                "not a regular file"
            raise self._fail("open", kind)
        # read-write where the file allows it; else, read-only, and on a
        # read-only filesystem (where SQLite cannot make the WAL's shared
        # memory file) as an immutable file
        tries = [{"mode": "rwc" if info is None else "rw"}]
        if info is not None:
            tries += [{"mode": "ro"}, {"mode": "ro", "immutable": "1"}]
        error: Optional[sqlite3.Error] = None
        for options in tries:
            db = None
            try:
                db = sqlite3.connect(_uri(self.path, **options), uri=True,
                                     timeout=self._timeout,
                                     isolation_level=None)
                self._check_version(db)
                tables = self._tables(db)
                break
            except sqlite3.DatabaseError as e:
                if db is not None:
                    db.close()
                if "not a database" in str(e):
                    raise self._fail("open", "not an aquaprof history: "
                                     "not a SQLite database") from None
                error = e
        else:
            raise self._fail("open", error) from None
        try:
            if not tables:
                self._create(db)
        except BaseException:
            db.close()
            raise
        return db

    def _check_version(self, db: sqlite3.Connection) -> None:
        """HistoryError, db closed, unless db is a history of a schema this
        aquaprof reads, or has no application id (an empty file, one
        written before versions were recorded: its tables tell)."""
        application = db.execute("PRAGMA application_id").fetchone()[0]
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if application == 0:
            self._stamped = False
            self._version = 1
            return
        if application != APPLICATION_ID:
            problem = (f"not an aquaprof history: its SQLite application "
                       f"id is {application & 0xFFFFFFFF:#010x}")
        elif version > VERSION:
            problem = (f"history schema version {version} is newer than "
                       f"this aquaprof reads ({VERSION}); upgrade aquaprof")
        elif version < 1:
            problem = f"history schema version {version} is invalid"
        else:
            self._version = version
            return
        db.close()
        raise self._fail("open", problem)

    def _tables(self, db: sqlite3.Connection) -> Dict[str, List[str]]:
        """The tables of db with their columns; HistoryError when they
        are not a history's (sqlite_sequence is SQLite's own)."""
        names = [row[0] for row in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND "
            "name NOT LIKE 'sqlite_%' ORDER BY name")]
        tables = {name: [row[1] for row in db.execute(
            "SELECT * FROM pragma_table_info(?)", (name,))]
            for name in names}
        if tables and tables != _TABLES_BY_VERSION[self._version]:
            listed = ", ".join(names[:5]) + (", ..." if len(names) > 5
                                             else "")
            what = "a damaged" if self._stamped else "not an"
            db.close()
            raise self._fail("open", f"{what} aquaprof history: its "
                             f"tables are {listed}")
        return tables

    def _create(self, db: sqlite3.Connection) -> None:
        try:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("BEGIN IMMEDIATE")
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    db.execute(statement)
            _stamp(db)
            db.execute("COMMIT")
        except sqlite3.Error as e:
            _rollback(db)
            raise self._fail("create", e) from None
        except BaseException:
            _rollback(db)
            raise
        self._stamped = True
        self._version = VERSION

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> "History":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, report: Report, label: Optional[str] = None,
            **meta: Optional[str]) -> int:
        """Stores report; meta overrides what run_metadata finds (git_commit,
        host, python, torch, cuda, device). Returns the run's id.
        HistoryError when it cannot be stored (read-only file, full
        disk): nothing of it is then kept."""
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
        spreads = _spreads(report)
        try:
            self._db.execute("BEGIN IMMEDIATE")
            # another writer may have changed the file since it was opened
            newer = self._db.execute("PRAGMA user_version").fetchone()[0]
            if newer > VERSION:
                raise self._fail("add to", f"history schema version {newer} "
                                 f"is newer than this aquaprof reads "
                                 f"({VERSION}); upgrade aquaprof")
            if self._version < VERSION:
                _upgrade(self._db)
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
                "INSERT INTO stages VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(run, s.path, s.count, s.wall.total, s.self_time,
                  s.wall.mean, s.wall.p50, s.wall.p95,
                  *spreads.get(s.path, (None, None)))
                 for s in report.stages])
            if not self._stamped or self._version < VERSION:
                _stamp(self._db)
            self._db.execute("COMMIT")
        except sqlite3.Error as e:
            # SQLite may have rolled back already (a full disk does): the
            # error to report is the first one, not the rollback's
            _rollback(self._db)
            raise self._fail("add to", e) from None
        except BaseException:
            _rollback(self._db)
            raise
        self._stamped = True
        self._version = VERSION
        return int(run)

    def _rows(self, sql: str, args: Tuple[Any, ...] = ()) -> List[Any]:
        try:
            return self._db.execute(sql, args).fetchall()
        except sqlite3.Error as e:
            raise self._fail("read", e) from None

    def _run(self, row: Tuple[Any, ...]) -> Run:
        """A runs row as a Run; HistoryError when it is not one that add()
        writes (a file edited by hand or by another program)."""
        number, when, texts = row[0], row[1], row[2:]
        if (not isinstance(number, int) or not _is_number(when)
                or not all(t is None or isinstance(t, str) for t in texts)):
            raise self._fail("read", f"a malformed run ({number!r})")
        return Run(number, float(when), *texts)

    def runs(self) -> List[Run]:
        """Every run, oldest first."""
        return [self._run(row) for row in self._rows(
            f"SELECT {_RUN_COLUMNS} FROM runs r ORDER BY r.time, r.id")]

    def report(self, run: int) -> Report:
        rows = self._rows("SELECT report FROM runs WHERE id = ?", (run,))
        row = rows[0] if rows else None
        if row is None:
            raise KeyError(f"no run {run} in {self.path}")
        if not isinstance(row[0], bytes):
            raise schema.ReportError(f"run {run} of {str(self.path)!r} "
                                     f"holds no stored report")
        try:
            # bounded as a report file is: a stored zlib bomb costs no more
            raw = schema.inflate(row[0], limits.MAX_FILE_BYTES,
                                 "the stored report")
            return Report.from_dict(schema.parse_json(raw))
        except schema.ReportError as e:
            raise schema.ReportError(f"run {run} of {str(self.path)!r}: "
                                     f"{e}") from None

    def trend(self, stage: str, metric: str = "total_s"
              ) -> List[Tuple[Run, float]]:
        """(run, value) for every run that has stage, oldest first; metric
        is one of total_s (the default: what a run paid for the stage),
        self_s, mean_s, p50_s, p95_s."""
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {METRICS}, got "
                             f"{metric!r}")
        rows = self._rows(
            f"SELECT {_RUN_COLUMNS}, s.{metric} FROM stages s JOIN runs r "
            f"ON r.id = s.run WHERE s.path = ? ORDER BY r.time, r.id",
            (stage,))
        out = []
        for row in rows:
            if not _is_number(row[-1]) or row[-1] < 0:
                raise self._fail("read", f"run {row[0]!r} holds a "
                                 f"malformed {metric} for {stage!r}")
            out.append((self._run(row[:-1]), float(row[-1])))
        return out

    def stages(self) -> List[str]:
        return [row[0] for row in self._rows(
            "SELECT DISTINCT path FROM stages ORDER BY path")
            if isinstance(row[0], str)]

    def figures(self, stage: str) -> List[Tuple[Run, RunFigures]]:
        """(run, the stage's figures in it: total, calls, p50, p95, and
        the spread its calls gave the total and tail where it was kept)
        for every run that has stage, oldest first."""
        # rows of an older version have no spreads: None, as unknown
        spread = ("s.total_spread, s.tail_spread" if self._version >= 2
                  else "NULL, NULL")
        rows = self._rows(
            f"SELECT {_RUN_COLUMNS}, s.total_s, s.count, s.p50_s, s.p95_s, "
            f"{spread} FROM stages s JOIN runs r ON r.id = s.run "
            f"WHERE s.path = ? ORDER BY r.time, r.id", (stage,))
        out = []
        for row in rows:
            total, count, p50, p95, *spreads = row[-6:]
            if not (all(_is_number(v) and v >= 0 for v in (total, p50, p95))
                    and isinstance(count, int) and count >= 0
                    and all(v is None or (_is_number(v) and v >= 0)
                            for v in spreads)):
                raise self._fail("read", f"run {row[0]!r} holds malformed "
                                 f"figures for {stage!r}")
            known = [None if v is None else float(v) for v in spreads]
            out.append((self._run(row[:-6]),
                        RunFigures(float(total), count, float(p50),
                                   float(p95),
                                   spread=(known[0], known[1]))))
        return out

    def steps(self, stage: str, threshold: float = 0.1, window: int = 5,
              alpha: float = 0.01) -> List[Tuple[Run, Verdict]]:
        """Runs where stage stepped up, with the verdict that says so: each
        run judged against the previous `window` runs (their spread is
        the noise between runs) by the rule compare uses (on the total
        and tail a run), those runs taken from the last step
        on, so that a new level is flagged once. A run with one run before
        it gets a hedged verdict ("slower?", the change alone). Where the
        flagged run ran on another kind of machine or Python, or met a
        busier or quieter machine, than every run it was judged against,
        the verdict's `machine` says so, as compare's notes do (from the
        stored reports)."""
        if window < 1:
            raise ValueError(f"window must be 1 or more, got {window!r}")
        series = self.figures(stage)
        out, level = [], 0
        for i in range(1, len(series)):
            first = max(level, i - window)
            before = [f for _, f in series[first:i]]
            new = [series[i][1]]
            if len(before) == 1:
                # one run a side: the history keeps no calls to resample
                # as compare does, and its spreads alone would be bolder
                before, new = [replace(before[0], spread=None)], \
                    [replace(new[0], spread=None)]
            verdict = judge(before, new, threshold, alpha)
            if verdict.word in SLOWER:
                note = self._machine([run for run, _ in series[first:i]],
                                     series[i][0])
                out.append((series[i][0], replace(verdict, machine=note)))
                level = i
        return out

    def _machine(self, base: List[Run], new: Run) -> str:
        """compare's sentences on the machines of these runs, from
        their stored reports; "" where a report cannot be read."""
        try:
            reports = [self.report(run.id) for run in (*base, new)]
        except (KeyError, schema.ReportError, HistoryError):
            return ""
        return machine_notes(reports[:-1], reports[-1:])


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _spreads(report: Report
             ) -> Dict[str, Tuple[Optional[float], Optional[float]]]:
    """Each stage's own_spread of its total and of its tail, from the
    calls compare judges (a benchmark's timed rounds); None where they
    tell nothing: too few calls, dropped spans, a tail never judged."""
    out = {}
    for path, figures in run_figures(report).items():
        calls = figures.calls
        tail = calls if figures.calls_known >= MIN_TAIL_CALLS else None
        out[path] = (own_spread("total", calls), own_spread("tail", tail))
    return out


def _upgrade(db: sqlite3.Connection) -> None:
    """Brings the tables of an older history up to VERSION (the columns
    it lacks, None in its rows); part of the transaction open on db."""
    have = {row[1] for row in db.execute(
        "SELECT * FROM pragma_table_info('stages')")}
    for column in _SPREAD_COLUMNS:
        if column not in have:
            db.execute(f"ALTER TABLE stages ADD COLUMN {column} REAL")


def _stamp(db: sqlite3.Connection) -> None:
    """Records in db's header that it is a history of schema VERSION;
    part of the transaction open on db."""
    db.execute(f"PRAGMA application_id = {APPLICATION_ID}")
    db.execute(f"PRAGMA user_version = {VERSION}")


def _rollback(db: sqlite3.Connection) -> None:
    """Ends the transaction if one is still open, never raising: the
    error that made us roll back is the one to report."""
    if db.in_transaction:
        try:
            db.execute("ROLLBACK")
        except sqlite3.Error:
            pass

"""A history file records its schema version, as a report does: a newer
one is refused saying which versions, one written before versions were
recorded still loads, and headers no history has are refused."""
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

import aquaprof as ap
from aquaprof.analysis import history as history_module
from profiled import busy

from repo_paths import ROOT  # noqa: E402
VERSION = history_module.VERSION
APPLICATION_ID = history_module.APPLICATION_ID


def report(calls=3):
    with ap.Profiler() as prof:
        for _ in range(calls):
            with ap.stage("step"):
                busy(0.0003)
    return prof.report()


def cli(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof",
                           *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=ROOT)


def header(path):
    db = sqlite3.connect(path)
    try:
        return tuple(db.execute(f"PRAGMA {name}").fetchone()[0]
                     for name in ("application_id", "user_version"))
    finally:
        db.close()


def edit(path, *statements):
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for statement in statements:
            db.execute(statement)
    finally:
        db.close()


def contents(path):
    """The file's bytes, and its WAL's: what a refusal must leave alone."""
    wal = Path(f"{path}-wal")
    return path.read_bytes(), wal.read_bytes() if wal.exists() else None


@pytest.fixture
def saved(tmp_path):
    path = tmp_path / "h.db"
    with ap.History(path) as history:
        history.add(report(), label="first")
    return path


def test_a_new_history_records_its_schema_version(saved):
    assert header(saved) == (APPLICATION_ID, VERSION)
    with ap.History(saved) as history:
        assert [r.label for r in history.runs()] == ["first"]


def test_a_history_of_a_newer_schema_is_refused_naming_both_versions(
        saved):
    # what a newer aquaprof might write: a version on, a table more
    edit(saved, f"PRAGMA user_version = {VERSION + 1}",
         "CREATE TABLE tags (run INTEGER, tag TEXT)",
         "ALTER TABLE runs ADD COLUMN branch TEXT")
    before = contents(saved)
    words = (f"history schema version {VERSION + 1} is newer than this "
             f"aquaprof reads ({VERSION}); upgrade aquaprof")
    with pytest.raises(ap.HistoryError) as raised:
        ap.History(saved)
    assert words in str(raised.value)
    assert "not an aquaprof history" not in str(raised.value)
    for args in ([], ["--add", report().save(saved.parent / "r.json")]):
        out = cli("history", saved, *args)
        assert out.returncode == 2
        assert words in out.stderr and out.stderr.count("\n") == 1
    assert contents(saved) == before


def version_1(path, *header_statements):
    """A history as aquaprof wrote version 1: no spreads in the stage
    rows, the header as header_statements leave it."""
    with ap.History(path) as history:
        history.add(report(), label="old")
    edit(path, "ALTER TABLE stages DROP COLUMN total_spread",
         "ALTER TABLE stages DROP COLUMN tail_spread",
         "PRAGMA user_version = 1", *header_statements)
    return path


def old_history(path):
    """A history as aquaprof wrote it before versions were recorded: the
    tables of version 1, nothing in SQLite's header."""
    version_1(path, "PRAGMA application_id = 0", "PRAGMA user_version = 0")
    assert header(path) == (0, 0)
    return path


def stage_columns(path):
    db = sqlite3.connect(path)
    try:
        return [row[1] for row in db.execute(
            "SELECT * FROM pragma_table_info('stages')")]
    finally:
        db.close()


def test_a_history_written_before_versions_still_loads(tmp_path):
    path = old_history(tmp_path / "old.db")
    before = contents(path)
    with ap.History(path) as history:
        runs = history.runs()
        assert [r.label for r in runs] == ["old"]
        assert history.report(runs[0].id)["step"].count == 3
    out = cli("history", path, "--stage", "step")
    assert out.returncode == 0, out.stderr
    assert "1 run(s)" in out.stdout
    # read, it is left as it was
    assert contents(path) == before
    with ap.History(path) as history:
        history.add(report(calls=5), label="new")
    assert header(path) == (APPLICATION_ID, VERSION)
    with ap.History(path) as history:
        assert [r.label for r in history.runs()] == ["old", "new"]
        old, new = (f.spread for _, f in history.figures("step"))
    assert old == (None, None) and new[0] is not None


def test_a_version_1_history_is_read_as_it_is_and_upgraded_on_add(
        tmp_path):
    """Version 1 kept no spreads: its runs read with none (the runs alone
    then give the noise), and the file is left as it was until a run is
    added, which brings its tables to this version."""
    path = version_1(tmp_path / "v1.db")
    assert header(path) == (APPLICATION_ID, 1)
    before = contents(path)
    with ap.History(path) as history:
        [(_, figures)] = history.figures("step")
        assert figures.count == 3 and figures.spread == (None, None)
        assert history.steps("step") == []
    out = cli("history", path, "--stage", "step")
    assert out.returncode == 0, out.stderr
    assert contents(path) == before
    with ap.History(path) as history:
        history.add(report(calls=5), label="new")
        old, new = (f.spread for _, f in history.figures("step"))
    assert header(path) == (APPLICATION_ID, VERSION)
    assert stage_columns(path)[-2:] == ["total_spread", "tail_spread"]
    # 5 calls: too few for the tail to be judged, or its spread kept
    assert old == (None, None) and new[0] > 0 and new[1] is None


def test_tables_of_another_version_than_the_header_says_are_refused(
        tmp_path):
    path = version_1(tmp_path / "v1.db", f"PRAGMA user_version = {VERSION}")
    before = contents(path)
    with pytest.raises(ap.HistoryError, match="a damaged aquaprof history: "
                       "its tables are runs, stages"):
        ap.History(path)
    assert contents(path) == before


@pytest.mark.parametrize("statements, words", [
    (["PRAGMA user_version = 0"], "history schema version 0 is invalid"),
    (["PRAGMA user_version = -3"],
     "history schema version -3 is invalid"),
    (["PRAGMA application_id = 1234"],
     "not an aquaprof history: its SQLite application id is 0x000004d2"),
    (["PRAGMA application_id = -1"],
     "not an aquaprof history: its SQLite application id is 0xffffffff"),
    (["CREATE TABLE notes (text TEXT)"],
     "a damaged aquaprof history: its tables are notes, runs, stages"),
])
def test_headers_no_history_has_are_refused(saved, statements, words):
    edit(saved, *statements)
    before = contents(saved)
    with pytest.raises(ap.HistoryError, match=words):
        ap.History(saved)
    out = cli("history", saved)
    assert out.returncode == 2 and words in out.stderr
    assert contents(saved) == before


def test_another_programs_database_with_a_version_of_its_own(tmp_path):
    """user_version alone marks nothing: many programs set it."""
    path = tmp_path / "other.db"
    edit(path, "PRAGMA user_version = 7", "CREATE TABLE notes (text TEXT)")
    with pytest.raises(ap.HistoryError,
                       match="not an aquaprof history: its tables are "
                             "notes"):
        ap.History(path)
    assert header(path) == (0, 7)

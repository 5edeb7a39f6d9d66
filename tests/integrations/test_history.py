"""History in SQLite: runs with metadata, trends, step detection, reports
loaded back, two processes writing at once; other programs' files
refused, a read-only filesystem read, a full disk reported."""
import json
import multiprocessing
import os
import shutil
import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import aquaprof as ap
import crafted
from profiled import busy

from repo_paths import ROOT  # noqa: E402


def report(step=0.0003, calls=5):
    with ap.Profiler() as prof:
        for _ in range(calls):
            with ap.stage("step"):
                busy(step)
    return prof.report()


def test_runs_trend_and_reports_come_back(tmp_path):
    with ap.History(tmp_path / "h.db") as history:
        first = history.add(report(), label="a", git_commit="abc")
        rep = report()
        second = history.add(rep, label="b")
        runs = history.runs()
        assert [r.id for r in runs] == [first, second]
        assert runs[0].git_commit == "abc" and runs[0].label == "a"
        assert runs[1].git_commit          # this repository's HEAD
        assert runs[1].host == rep.meta["host"]["hostname"]
        assert runs[1].python == rep.meta["host"]["python"]
        assert history.report(second) == rep
        trend = history.trend("step")
        assert [r.id for r, _ in trend] == [first, second]
        assert trend[1][1] == pytest.approx(rep["step"].wall.total)
        assert history.trend("step", "p50_s")[1][1] == \
            pytest.approx(rep["step"].wall.p50)
        assert history.stages() == ["step"]
        assert history.trend("none") == []
        with pytest.raises(KeyError, match="no run 99"):
            history.report(99)
        with pytest.raises(ValueError, match="metric"):
            history.trend("step", "fastest")
        with pytest.raises(TypeError, match="Report"):
            history.add("report.json")
        with pytest.raises(TypeError, match="unknown run metadata"):
            history.add(rep, gpu="h100")
    # the file outlives the object
    assert len(ap.History(tmp_path / "h.db").runs()) == 2


def test_steps_flag_the_run_where_a_stage_got_slower(tmp_path):
    # calls of milliseconds: a busy machine's preemption moves a 0.3 ms
    # call by more than the step itself
    history = ap.History(tmp_path / "h.db")
    for _ in range(4):
        history.add(report(0.004))
    slow = history.add(report(0.008))
    history.add(report(0.008))       # the new level: not a second step
    steps = history.steps("step", threshold=0.3)
    assert [run.id for run, _ in steps] == [slow]
    assert steps[0][1].change > 0.5 and steps[0][1].word == "slower"
    assert steps[0][1].evidence == "4 vs 1 runs"
    with pytest.raises(ValueError, match="window"):
        history.steps("step", window=0)


def test_a_run_whose_total_grew_steps_up_whatever_its_median(tmp_path):
    # a loader: 40 calls, most instant, a few long waits; the waits got
    # more frequent, the median call faster: a step up, not a speed-up
    history = ap.History(tmp_path / "h.db")
    for total in (0.150, 0.155, 0.148, 0.152):
        history.add(report(0.0003), label="base")
    runs = history.runs()
    import sqlite3 as sql
    db = sql.connect(tmp_path / "h.db")
    for r in runs:
        db.execute("UPDATE stages SET total_s = ?, count = 40, p50_s = ?, "
                   "p95_s = ? WHERE run = ?", (0.15 + r.id * 1e-3, 0.0054,
                                               0.060, r.id))
    db.commit()
    slow = history.add(report(0.0003))
    db.execute("UPDATE stages SET total_s = 0.428, count = 40, "
               "p50_s = 0.0028, p95_s = 0.203 WHERE run = ?", (slow,))
    db.commit()
    db.close()
    [(run, verdict)] = history.steps("step", threshold=0.05)
    assert run.id == slow and verdict.word == "slower"
    assert verdict.figure == "total" and verdict.change > 1.5


def writer(path, n):
    with ap.History(path) as history:
        for _ in range(n):
            history.add(report(0.00005, calls=2))


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    path = tmp_path / "h.db"
    ap.History(path).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=writer, args=(path, 15)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    history = ap.History(path)
    runs = history.runs()
    assert len(runs) == 30
    assert len(history.trend("step")) == 30
    assert all(history.report(r.id)["step"].count == 2 for r in runs)


# ------------------------------------------ foreign, read-only, full disk

def test_other_files_are_refused_and_left_as_they_were(tmp_path):
    other = tmp_path / "notes.sqlite"
    db = sqlite3.connect(other)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.commit()
    db.close()
    before = other.read_bytes()
    with pytest.raises(ap.HistoryError, match="not an aquaprof history: its "
                       "tables are notes"):
        ap.History(other)
    assert other.read_bytes() == before      # no table added to it
    text = tmp_path / "text.db"
    text.write_text("not a database at all, " * 100)
    with pytest.raises(ap.HistoryError, match="not a SQLite database"):
        ap.History(text)
    with pytest.raises(ap.HistoryError, match="a directory"):
        ap.History(tmp_path)
    with pytest.raises(ap.HistoryError, match="not a regular file"):
        ap.History("/dev/zero")
    empty = tmp_path / "empty.db"
    empty.write_bytes(b"")
    with ap.History(empty) as history:        # an empty file is a new one
        assert history.runs() == []


def test_file_names_with_uri_characters_work(tmp_path):
    """The file is opened by a SQLite URI: '?', '#', '%' and spaces in its
    name are the file's, not the URI's."""
    path = tmp_path / "runs ?mode=ro#x%20.db"
    with ap.History(path) as history:
        history.add(report())
    with ap.History(path) as history:
        assert len(history.runs()) == 1
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


def test_malformed_rows_and_stored_bombs_are_errors_not_crashes(tmp_path):
    path = tmp_path / "h.db"
    with ap.History(path) as history:
        run = history.add(report())
    db = sqlite3.connect(path)
    db.execute("UPDATE runs SET report = ? WHERE id = ?",
               (crafted.zlib_bomb(1 << 31), run))
    db.commit()
    with ap.History(path) as history:
        with pytest.raises(ap.ReportError, match="inflates past"):
            history.report(run)
    db.execute("UPDATE stages SET p50_s = 'fast'")
    db.execute("UPDATE runs SET time = 'yesterday'")
    db.commit()
    db.close()
    with ap.History(path) as history:
        with pytest.raises(ap.HistoryError, match="malformed"):
            history.runs()
        with pytest.raises(ap.HistoryError, match="malformed p50_s"):
            history.trend("step", "p50_s")
        with pytest.raises(ap.HistoryError, match="malformed figures"):
            history.figures("step")


class FullDisk:
    """A connection whose insertion of stage rows fails as SQLite fails on
    a full disk: the transaction is rolled back by SQLite itself, then the
    error comes (so a second ROLLBACK finds no transaction)."""

    def __init__(self, db):
        self.db = db

    def __getattr__(self, name):
        return getattr(self.db, name)

    def executemany(self, sql, rows):
        self.db.execute("ROLLBACK")
        raise sqlite3.OperationalError("database or disk is full")


def test_a_full_disk_reports_its_own_error_and_keeps_the_runs(tmp_path):
    path = tmp_path / "h.db"
    history = ap.History(path)
    first = history.add(report(), label="kept")
    history._db = FullDisk(history._db)
    with pytest.raises(ap.HistoryError, match="cannot add to history .*: "
                       "database or disk is full$"):
        history.add(report())
    history._db = history._db.db
    assert not history._db.in_transaction
    assert [r.id for r in history.runs()] == [first]
    history.add(report())                     # usable again
    history.close()
    with ap.History(path) as again:
        assert [r.label for r in again.runs()] == ["kept", None]


def namespaces_work():
    """Whether this process may make a mount namespace (as root, or as a
    user where unprivileged user namespaces are on) and mount in it."""
    if not shutil.which("unshare") or not shutil.which("mount"):
        return False
    probe = subprocess.run(["unshare", "-rm", "mount", "-t", "tmpfs",
                            "tmpfs", "/mnt"], capture_output=True)
    return probe.returncode == 0


NAMESPACES = pytest.mark.skipif(
    not namespaces_work(), reason="no mount namespace here (unshare -rm "
    "fails): the read-only and full-disk cases run on a small tmpfs in one")

IN_NAMESPACE = """
import json, subprocess, sys
sys.path.insert(0, {root!r})
import aquaprof as ap
from aquaprof.integrations import cli
folder = {folder!r}
def mount(*options):
    subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join(options),
                    "tmpfs", folder], check=True)
def remount(*options):
    subprocess.run(["mount", "-o", ",".join(("remount",) + options),
                    folder], check=True)
with ap.Profiler() as prof:
    for i in range({stages}):
        with ap.stage(f"stage {{i}}"):
            pass
rep = prof.report()
out = {{}}
"""


def in_namespace(tmp_path, body, stages=1):
    """Runs body (Python, after IN_NAMESPACE) in a new mount namespace;
    returns the dict `out` it fills, from its last line of output."""
    folder = tmp_path / "mnt"
    folder.mkdir()
    code = IN_NAMESPACE.format(root=str(ROOT), folder=str(folder),
                               stages=stages) + textwrap.dedent(body) + \
        "\nprint(json.dumps(out))\n"
    result = subprocess.run(["unshare", "-rm", sys.executable, "-c", code],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout.strip().splitlines()[-1])


@NAMESPACES
def test_a_history_on_a_read_only_filesystem_can_be_read(tmp_path):
    out = in_namespace(tmp_path, """
        mount("size=4m")
        path = folder + "/h.db"
        with ap.History(path) as history:
            history.add(rep, label="one")
            history.add(rep, label="two")
        remount("ro")
        history = ap.History(path)
        out["labels"] = [r.label for r in history.runs()]
        out["trend"] = len(history.trend("stage 0"))
        out["count"] = history.report(2)["stage 0"].count
        try:
            history.add(rep)
        except ap.HistoryError as e:
            out["add"] = str(e)
        out["cli"] = cli.main(["history", path, "--stage", "stage 0"])
        out["cli_add"] = cli.main(["history", path, "--add",
                                   rep.save("/tmp/r.json").as_posix()])
    """)
    assert out["labels"] == ["one", "two"]
    assert out["trend"] == 2 and out["count"] == 1
    assert "cannot add to history" in out["add"] and \
        "readonly database" in out["add"]
    assert out["cli"] == 0 and out["cli_add"] == 2


@NAMESPACES
def test_a_full_disk_during_add_says_so_and_loses_nothing(tmp_path):
    out = in_namespace(tmp_path, """
        mount("size=256k")
        path = folder + "/h.db"
        history = ap.History(path)
        added = 0
        try:
            while added < 1000:
                history.add(rep)
                added += 1
        except ap.HistoryError as e:
            out["error"] = str(e)
        out["added"] = added
        out["runs"] = len(history.runs())
        history.close()
        again = ap.History(path)
        out["reopened"] = len(again.runs())
        out["last"] = again.report(added)["stage 299"].count
        out["check"] = again._db.execute("PRAGMA integrity_check").fetchone()
    """, stages=300)
    assert out["error"].endswith("database or disk is full"), out
    assert 0 < out["added"] < 1000
    assert out["runs"] == out["reopened"] == out["added"]
    assert out["last"] == 1 and out["check"] == ["ok"]


READ_ONLY_FILE = """
import json, sys
sys.path.insert(0, {root!r})
import aquaprof as ap
path = {path!r}
out = {{}}
with ap.History(path) as history:
    out["runs"] = len(history.runs())
    out["trend"] = len(history.trend("step"))
    try:
        history.add(history.report(1))
    except ap.HistoryError as e:
        out["add"] = str(e)
print(json.dumps(out))
"""


def as_a_user():
    """How to run a command as a user that file modes bind: as it is, or,
    for root (whom they do not bind), in a user namespace as uid 1000;
    None where neither can be had."""
    if os.geteuid() != 0:
        return []
    command = ["unshare", "--user", "--map-user=1000", "--map-group=1000"]
    if shutil.which("unshare") and subprocess.run(
            command + ["true"], capture_output=True).returncode == 0:
        return command
    return None


@pytest.mark.skipif(as_a_user() is None, reason="run as root with no user "
                    "namespace: root ignores file modes, and the read-only "
                    "filesystem test covers it")
def test_a_read_only_history_file_can_be_read(tmp_path):
    """Mode 0444 in a 0555 folder: SQLite can neither write the file nor
    make its WAL files beside it."""
    path = tmp_path / "h.db"
    with ap.History(path) as history:
        history.add(report())
    path.chmod(0o444)
    tmp_path.chmod(0o555)
    code = READ_ONLY_FILE.format(root=str(ROOT), path=str(path))
    try:
        result = subprocess.run(as_a_user() + [sys.executable, "-c", code],
                                capture_output=True, text=True, timeout=120)
    finally:
        tmp_path.chmod(0o755)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["runs"] == 1 and out["trend"] == 1
    assert "cannot add to history" in out["add"] and \
        "readonly database" in out["add"]


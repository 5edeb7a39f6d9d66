"""Malformed, hostile and foreign files: every loader refuses them with a
ReportError that says why, and every command answers them with one line
on stderr and exit code 2, bounded in time and memory (aquaprof.model.limits):
numbers out of range, NaN and Infinity, negative durations and counts,
duplicate and misnamed stages, JSON nested without end, zlib bombs,
stage chains deeper than the cap, devices, folders, FIFOs, other
programs' files."""
import base64
import copy
import json
import os
import subprocess
import sys
import tracemalloc
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

import aquaprof as ap
from aquaprof import _core
from aquaprof.model import limits, schema
from aquaprof.integrations import cli
import crafted

from repo_paths import ROOT  # noqa: E402
GOOD = crafted.report([crafted.stage("a", count=3),
                       crafted.stage("b", parent=0, depth=1)])


def bent(change):
    """A copy of GOOD with change(doc) applied."""
    doc = copy.deepcopy(GOOD)
    change(doc)
    return doc


def setter(*path_and_value):
    *path, value = path_and_value

    def change(doc):
        for key in path[:-1]:
            doc = doc[key]
        doc[path[-1]] = value
    return change


HOSTILE = {
    # numbers beyond 64 bits: they would wrap in the core's merge and in
    # SQLite, and no run can record them
    "count 2**70": (setter("stages", 0, "count", 2**70), "64 bits"),
    "total 2**64": (setter("stages", 1, "total_ns", 2**64), "64 bits"),
    "stop 2**90": (setter("stop_ns", 2**90), "64 bits"),
    "pid 2**63": (setter("pid", 2**63), "64 bits"),
    "native id -2**70": (setter("threads", 0, "native_id", -2**70),
                         "64 bits"),
    "hist count 2**70": (setter("stages", 0, "hist", [[300, 2**70]]),
                         "bad bucket"),
    "memory sample 2**64": (setter("memory_samples", [[1, 2**64]]),
                            "memory_samples"),
    # not numbers a run can have
    "mean NaN": (setter("stages", 0, "mean_ns", float("nan")), "nan"),
    "m2 Infinity": (setter("stages", 0, "m2", float("inf")), "inf"),
    "started_at -Infinity": (setter("host", {"started_at": -float("inf")}),
                             "inf"),
    "overhead NaN": (setter("overhead", {"span_ns": float("nan"),
                                         "inside_ns": 1.0}), "nan"),
    # negative durations and counts (shown as "share -16519.3 %" once)
    "negative total": (setter("stages", 0, "total_ns", -10**15),
                       "negative"),
    "negative self": (setter("stages", 1, "self_ns", -1), "negative"),
    "negative count": (setter("stages", 0, "count", -1), "negative"),
    "negative mean": (setter("stages", 0, "mean_ns", -5.0), "negative"),
    "negative m2": (setter("stages", 0, "m2", -1.0), "negative"),
    "negative cpu": (setter("stages", 0, "cpu_ns", -1), "negative"),
    "negative dropped": (setter("spans_dropped", -5), "negative"),
    "negative thread spans": (setter("threads", 0, "spans", -1),
                              "negative"),
    "negative memory": (setter("memory_samples", [[1, -4096]]),
                        "memory_samples"),
    "negative hist count": (setter("stages", 0, "hist", [[300, -3]]),
                            "bad bucket"),
    "stop before start": (setter("stop_ns", crafted.START - 1),
                          "before its 'start_ns'"),
    "hist out of order": (setter("stages", 0, "hist", [[301, 1], [300, 2]]),
                          "ascending"),
    "negative device size": (setter("gpu", {
        "events": schema.encode_array(np.zeros(0, _core.GPU_DTYPE),
                                      _core.GPU_DTYPE),
        "kernel_names": [], "devices": [{"name": "x", "sms": -1}],
        "dropped": 0, "unattributed": 0}), "negative"),
    # stages that no run makes: aquaprof.stage() refuses these names, and
    # a path must name one stage
    "duplicate stage": (lambda d: d["stages"].append(
        copy.deepcopy(d["stages"][1])), r"repeats stages\[1\]"),
    "slash in a name": (setter("stages", 1, "name", "x/y"), "contains '/'"),
    "empty name": (setter("stages", 1, "name", ""), "empty name"),
    "lone surrogate": (setter("stages", 1, "name", "\ud800"),
                       "not valid Unicode"),
    "self parent": (setter("stages", 0, "parent", 0),
                    "does not name an earlier stage"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_the_loader_refuses_what_no_run_writes(case):
    change, message = HOSTILE[case]
    with pytest.raises(ap.ReportError, match=message):
        ap.Report.from_dict(bent(change))


def spans_of(doc, **columns):
    spans = schema.decode_array(doc["spans"], _core.SPAN_DTYPE,
                                "spans").copy()
    for key, value in columns.items():
        spans[key] = value
    return dict(doc, spans=schema.encode_array(spans, _core.SPAN_DTYPE))


@pytest.mark.parametrize("columns, message", [
    ({"end_ns": crafted.START - 10}, "ends before it starts"),
    ({"cpu_ns": -1}, "negative CPU time"),
    ({"items": -7}, "negative CPU time or items"),
])
def test_spans_with_negative_durations_are_refused(columns, message):
    doc = crafted.chain(3)
    ap.Report.from_dict(doc)                # the chain itself is fine
    with pytest.raises(ap.ReportError, match=message):
        ap.Report.from_dict(spans_of(doc, **columns))


def run_cli(capsys, *args):
    """The command line in this process: (exit code, stdout, stderr)."""
    code = cli.main([str(a) for a in args])
    out, err = capsys.readouterr()
    return code, out, err


def one_line_exit_2(code, err, text=""):
    assert code == 2, err
    assert err.count("\n") == 1 and err.startswith("aquaprof: error: "), err
    assert "Traceback" not in err and "internal error" not in err, err
    assert text in err


def every_command(path, good, folder):
    """Each command that reads a report, with path in each place."""
    return [("show", path), ("compare", good, path), ("compare", path, good),
            ("merge", good, path, "-o", folder / "m.json"),
            ("flamegraph", path, "-o", folder / "f.svg"),
            ("flamegraph", good, "-o", folder / "f.svg", "--diff", path),
            ("trace", path, "-o", folder / "t.json"),
            ("html", path, "-o", folder / "p.html"),
            ("history", folder / "h.db", "--add", path)]


@pytest.fixture
def good_file(tmp_path):
    path = tmp_path / "good.json"
    path.write_text(json.dumps(GOOD))
    return path


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_every_command_answers_a_hostile_report_with_one_line(
        case, tmp_path, good_file, capsys):
    change, message = HOSTILE[case]
    path = tmp_path / "hostile.json"
    # NaN and Infinity as Python writes them (a report never has them)
    path.write_text(json.dumps(bent(change)))
    for args in every_command(path, good_file, tmp_path):
        code, out, err = run_cli(capsys, *args)
        one_line_exit_2(code, err, "hostile.json")
    assert not (tmp_path / "h.db").exists()    # nothing half-added


def foreign_files(folder):
    """{what: path} of files that are not reports at all."""
    sqlite = folder / "other.sqlite"
    import sqlite3
    db = sqlite3.connect(sqlite)
    db.execute("CREATE TABLE notes (body TEXT)")
    db.execute("INSERT INTO notes VALUES ('not a profile')")
    db.commit()
    db.close()
    (folder / "empty.json").write_bytes(b"")
    (folder / "junk.bin").write_bytes(bytes(range(256)) * 20)
    (folder / "deep.json").write_text("[" * 100_000 + "]" * 100_000)
    (folder / "deep_object.json").write_text('{"a":' * 50_000 + "1" +
                                             "}" * 50_000)
    (folder / "a folder").mkdir()
    (folder / "big_int.json").write_text("[" + "9" * 5000 + "]")
    (folder / "nan.json").write_text('{"format": NaN}')
    (folder / "huge_float.json").write_text('{"format": 1e999}')
    (folder / "list.json").write_text("[1, 2, 3]")
    # another run than good.json's: a merge refuses one run given twice
    (folder / "utf16.json").write_text(json.dumps(dict(GOOD, pid=43)),
                                       encoding="utf-16")
    os.mkfifo(folder / "fifo")
    return {"another tool's SQLite file": (sqlite, "not valid JSON"),
            "an empty file": (folder / "empty.json", "not valid JSON"),
            "binary junk": (folder / "junk.bin", "not valid JSON"),
            "deep JSON": (folder / "deep.json", "nested too deeply"),
            "deep object": (folder / "deep_object.json",
                            "nested too deeply"),
            "a folder": (folder / "a folder", "a directory"),
            "a missing file": (folder / "missing.json", "No such file"),
            "/dev/zero": (Path("/dev/zero"), "not a regular file"),
            "a FIFO": (folder / "fifo", "not a regular file"),
            "a 5000-digit int": (folder / "big_int.json", "not valid JSON"),
            "NaN": (folder / "nan.json", "NaN is not a number"),
            "1e999": (folder / "huge_float.json", "out of range"),
            "a JSON list": (folder / "list.json", "not an aquaprof report"),
            "UTF-16": (folder / "utf16.json", "")}


def test_foreign_files_are_refused_by_every_command(tmp_path, good_file,
                                                    capsys):
    for what, (path, message) in foreign_files(tmp_path).items():
        if what != "UTF-16":
            with pytest.raises(ap.ReportError, match=message):
                ap.Report.load(path)
        for args in every_command(path, good_file, tmp_path):
            code, out, err = run_cli(capsys, *args)
            if what == "UTF-16":          # JSON's other encodings load
                assert code == 0, (what, args, err)
                continue
            one_line_exit_2(code, err, message)


def cli_process(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof",
                           *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_the_process_answers_devices_and_deep_json_in_one_line(tmp_path):
    """In a real process: no traceback reaches the terminal, and /dev/zero
    (read without end before) is refused at once."""
    files = foreign_files(tmp_path)
    for what in ("/dev/zero", "deep JSON", "another tool's SQLite file"):
        out = cli_process("show", files[what][0], timeout=60)
        assert out.returncode == 2, (what, out.stderr)
        assert out.stderr.count("\n") == 1 and "Traceback" not in \
            out.stderr, (what, out.stderr)


# ------------------------------------------------------ bounded inflating

def bomb_report(declared, inflates_to):
    """GOOD with spans whose data inflates to `inflates_to` zero bytes
    while declaring `declared` spans."""
    doc = copy.deepcopy(GOOD)
    data = base64.b64encode(crafted.zlib_bomb(inflates_to)).decode("ascii")
    doc["spans"] = dict(doc["spans"], count=declared, data=data)
    return doc


def test_a_zlib_bomb_is_refused_without_inflating_it(tmp_path, capsys):
    # 4 MB of file that would inflate to 4 GiB: the loader stops at the
    # 3 spans (144 bytes) the file declares
    path = tmp_path / "bomb.json"
    path.write_text(json.dumps(bomb_report(3, 4 << 30)))
    assert path.stat().st_size < 6 << 20
    tracemalloc.start()
    try:
        with pytest.raises(ap.ReportError, match="more than 144 bytes"):
            ap.Report.load(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 << 20, peak       # the file and its decoding, no more
    code, out, err = run_cli(capsys, "show", path)
    one_line_exit_2(code, err, "not the 3 spans it declares")


def test_an_array_declared_past_the_cap_is_refused_before_inflating():
    too_many = limits.MAX_ARRAY_BYTES // _core.SPAN_DTYPE.itemsize + 1
    doc = bomb_report(too_many, 1 << 20)
    with pytest.raises(ap.ReportError, match="MAX_ARRAY_BYTES"):
        ap.Report.from_dict(doc)


def test_the_caps_are_read_when_used(tmp_path, monkeypatch, good_file):
    """Each cap refuses a file just past it and takes one at it."""
    size = good_file.stat().st_size
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", size)
    ap.Report.load(good_file)
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", size - 1)
    with pytest.raises(ap.ReportError, match="MAX_FILE_BYTES"):
        ap.Report.load(good_file)
    monkeypatch.undo()
    raw = good_file.read_bytes()
    items = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    monkeypatch.setattr(limits, "MAX_JSON_ITEMS", items)
    ap.Report.load(good_file)
    monkeypatch.setattr(limits, "MAX_JSON_ITEMS", items - 1)
    with pytest.raises(ap.ReportError, match="MAX_JSON_ITEMS"):
        ap.Report.load(good_file)
    monkeypatch.undo()
    spans = crafted.chain(2)          # 3 spans of 48 bytes
    monkeypatch.setattr(limits, "MAX_ARRAY_BYTES", 3 * 48)
    ap.Report.from_dict(spans)
    monkeypatch.setattr(limits, "MAX_ARRAY_BYTES", 3 * 48 - 1)
    with pytest.raises(ap.ReportError, match="MAX_ARRAY_BYTES"):
        ap.Report.from_dict(spans)
    monkeypatch.undo()
    # paths "s", "s/s", "s/s/s": 1 + 3 + 5 characters
    monkeypatch.setattr(limits, "MAX_PATH_CHARS", 9)
    ap.Report.from_dict(crafted.chain(2))
    monkeypatch.setattr(limits, "MAX_PATH_CHARS", 8)
    with pytest.raises(ap.ReportError, match="MAX_PATH_CHARS"):
        ap.Report.from_dict(crafted.chain(2))


def test_a_file_that_grows_past_the_cap_while_read_is_refused(
        tmp_path, monkeypatch, good_file):
    """The cap holds for what is read, not what stat() said before."""
    monkeypatch.setattr(limits, "MAX_FILE_BYTES", 100)
    real_fstat = os.fstat

    def small_fstat(fd):
        info = real_fstat(fd)
        return os.stat_result((info.st_mode, *info[1:6], 10, *info[7:]))
    monkeypatch.setattr(os, "fstat", small_fstat)
    with pytest.raises(ap.ReportError, match="MAX_FILE_BYTES"):
        ap.Report.load(good_file)


# ------------------------------------------------------------- depth

def test_a_chain_deeper_than_the_cap_is_refused_at_once(tmp_path, capsys):
    """20,000 stages deep (5 MB): show took 125 s before the cap."""
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(crafted.chain(20_000)))
    with pytest.raises(ap.ReportError, match="MAX_DEPTH"):
        ap.Report.load(path)
    code, out, err = run_cli(capsys, "show", path)
    one_line_exit_2(code, err, "deeper than the limit of 4096")
    out = cli_process("show", path, timeout=60)
    assert out.returncode == 2 and "MAX_DEPTH" in out.stderr


def test_a_chain_at_the_cap_loads_and_every_view_renders(tmp_path,
                                                         capsys):
    doc = crafted.chain(limits.MAX_DEPTH, name="d")
    rep = ap.Report.from_dict(doc)
    deepest = rep.stages[-1]
    assert deepest.depth == limits.MAX_DEPTH
    assert deepest.path == "/".join(["d"] * (limits.MAX_DEPTH + 1))
    with pytest.raises(ap.ReportError, match="MAX_DEPTH"):
        ap.Report.from_dict(crafted.chain(limits.MAX_DEPTH + 1))
    path = tmp_path / "deep.json"
    rep.save(path)
    other = tmp_path / "deep2.json"        # another run, for the merge
    other.write_text(json.dumps(dict(doc, pid=doc["pid"] + 1)))
    for args in [("show", path), ("compare", path, path),
                 ("flamegraph", path, "-o", tmp_path / "f.svg"),
                 ("trace", path, "-o", tmp_path / "t.json"),
                 ("html", path, "-o", tmp_path / "p.html"),
                 ("merge", path, other, "-o", tmp_path / "m.json")]:
        code, out, err = run_cli(capsys, *args)
        assert code == 0, (args, err)
    rep.to_folded(tmp_path / "f.txt")
    rep.to_speedscope(tmp_path / "s.json")
    rep._repr_html_()
    # the compensation counts every call below each stage
    ap.Report.from_dict(dict(doc, overhead={"span_ns": 1.0,
                                            "inside_ns": 0.5}))


def test_compensation_counts_calls_below_in_one_pass():
    """Calls below a stage are summed up the tree: a chain of 3 stages of
    2, 3 and 5 calls has 8 calls below the top, 5 below the middle."""
    doc = crafted.report([crafted.stage("a", count=2),
                          crafted.stage("b", 0, 1, count=3),
                          crafted.stage("c", 1, 2, count=5)],
                         overhead={"span_ns": 10.0, "inside_ns": 0.0})
    rep = ap.Report.from_dict(doc)
    assert rep["a"].compensated_total == pytest.approx(
        rep["a"].wall.total - 8 * 10e-9)
    assert rep["a/b"].compensated_total == pytest.approx(
        rep["a/b"].wall.total - 5 * 10e-9)
    assert rep["a/b/c"].compensated_total == rep["a/b/c"].wall.total


# --------------------------------------------------------- odd names

ODD = "q\x1b[31m\nz\x00\u202e\t"


def test_control_characters_in_names_are_shown_escaped(tmp_path, capsys):
    """aquaprof.stage() takes any printable or unprintable name but '/'
    and '': every view shows the unprintable ones as escapes, so a name
    cannot rewrite the terminal, break a table's line or an XML file."""
    with ap.Profiler() as prof:
        with ap.stage("outer"):
            with ap.stage(ODD):
                pass
    rep = prof.report()
    path = rep.save(tmp_path / "odd.json")
    assert ap.Report.load(path)[f"outer/{ODD}"].count == 1   # data kept
    shown = r"q\x1b[31m\nz\x00\u202e\t"
    text = str(rep)
    assert shown in text and "\x1b" not in text and "\x00" not in text
    assert all(line.isprintable() for line in text.splitlines())
    for args in [("show", path), ("compare", path, path)]:
        code, out, err = run_cli(capsys, *args)
        assert code == 0 and shown in out
        assert all(line.isprintable() for line in out.splitlines())
    svg = rep.to_flamegraph(tmp_path / "f.svg")
    ET.parse(svg)                                   # well-formed XML
    assert shown in svg.read_text()
    folded = rep.to_folded(tmp_path / "f.txt").read_text().splitlines()
    assert len(folded) == sum(s.self_time > 0 for s in rep.stages)
    assert "\x1b" not in rep._repr_html_()
    assert all(line.isprintable()
               for line in str(rep.diagnose()).splitlines())


def test_merging_reports_whose_sums_overflow_is_one_line(tmp_path, capsys):
    big = crafted.report([crafted.stage("a", count=2**62, ns=1)])
    paths = []
    for i in range(2):
        paths.append(tmp_path / f"r{i}.json")
        paths[-1].write_text(json.dumps(dict(big, pid=big["pid"] + i)))
    code, out, err = run_cli(capsys, "merge", *paths, "-o",
                             tmp_path / "m.json")
    one_line_exit_2(code, err, "64 bits")


def test_an_internal_error_is_still_one_line(monkeypatch, capsys,
                                             good_file):
    """Whatever a file makes go wrong inside aquaprof ends as one line
    and exit 2, saying it is not the user's mistake."""
    def broken(report):
        raise KeyError("a bug")
    monkeypatch.setattr(cli, "_load", broken)
    code = cli.main(["show", str(good_file)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1
    assert "internal error (KeyError" in err and "please report" in err

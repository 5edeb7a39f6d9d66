"""Fuzzing: the report loader, the views and the command line take random
and mutated input and answer with clean errors, never a crash or a hang;
random stage programs on several threads keep the span and stack
invariants."""
import base64
import copy
import json
import os
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aquaprof as ap
import crafted
from aquaprof import _core
from aquaprof.model import schema
from aquaprof.analysis import gpu_stats
from aquaprof.integrations import cli
from aquaprof.report import ReportError

from repo_paths import ROOT  # noqa: E402
# more with AQUAPROF_FUZZ_EXAMPLES / AQUAPROF_FUZZ_RUNS (a long campaign)
EXAMPLES = int(os.environ.get("AQUAPROF_FUZZ_EXAMPLES", "300"))
RUNS = int(os.environ.get("AQUAPROF_FUZZ_RUNS", "3000"))
FUZZ = settings(max_examples=EXAMPLES, deadline=None,
                suppress_health_check=[HealthCheck.too_slow,
                                       HealthCheck.function_scoped_fixture])


def sample_report():
    def worker():
        with ap.stage("w", items=2):
            pass
    with ap.Profiler() as prof:
        with ap.stage("a"):
            with ap.stage("b"):
                pass
        t = threading.Thread(target=worker)
        t.start()
        t.join()
    return prof.report()


VALID = sample_report().to_dict()

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70)
    | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)


def paths(obj, prefix=()):
    """Every (path, value) inside a JSON-like object."""
    yield prefix, obj
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from paths(v, prefix + (i,))


ALL_PATHS = [p for p, _ in paths(VALID) if p]


def set_at(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    if value is _DELETE:
        del obj[path[-1]]
    else:
        obj[path[-1]] = value


_DELETE = object()


def views_work(report, folder):
    """Everything a user can do with a report that loaded; what it prints
    is printable, line by line, whatever the names hold."""
    assert all(line.isprintable() for line in str(report).splitlines())
    report._repr_html_()
    report.to_chrome_trace(folder / "t.json")
    report.to_folded(folder / "f.txt")
    report.to_flamegraph(folder / "f.svg")
    report.to_html(folder / "p.html")
    report.flamegraph()._repr_html_()
    report.to_speedscope(folder / "s.json")
    report.compare(report)


@FUZZ
@given(mutations=st.lists(st.tuples(st.sampled_from(ALL_PATHS),
                                    json_values | st.just(_DELETE)),
                          min_size=1, max_size=4))
def test_mutated_reports_load_or_say_why(mutations, tmp_path):
    doc = copy.deepcopy(VALID)
    for path, value in mutations:
        try:
            set_at(doc, path, value)
        except (KeyError, IndexError, TypeError):
            pass            # an earlier mutation removed the place
    try:
        report = ap.Report.from_dict(doc)
    except ReportError:
        return
    views_work(report, tmp_path)


def corrupt_spans(doc, raw):
    spans = dict(doc["spans"])
    spans["data"] = base64.b64encode(zlib.compress(raw)).decode()
    spans["count"] = len(raw) // 48
    return dict(doc, spans=spans)


@FUZZ
@given(raw=st.binary(max_size=48 * 6).filter(lambda b: len(b) % 48 == 0))
def test_random_span_records_load_or_say_why(raw, tmp_path):
    """Span records of random bytes: stage, thread and parent indices out
    of range are refused; whatever loads renders."""
    try:
        report = ap.Report.from_dict(corrupt_spans(VALID, raw))
    except ReportError:
        return
    views_work(report, tmp_path)


@FUZZ
@given(data=st.binary(max_size=2000))
def test_random_files_are_refused_cleanly(data, tmp_path):
    path = tmp_path / "r.json"
    path.write_bytes(data)
    with pytest.raises(ReportError):
        ap.Report.load(path)


WORDS = ["run", "show", "compare", "flamegraph", "trace", "merge", "history",
         "-o", "--out", "--threshold", "--alpha", "--diff", "--max-events",
         "--add", "--label", "--stage", "--trace", "5%", "0.05", "-1", "x",
         "10", "1e9", "nan", "--help", "--version", "GOOD", "BAD", "NONE",
         "OUT", "DB", "HOSTILE", "DEEP", "ZERO", "SQLITE", "DIR", "BOMB"]


def hostile_files(folder):
    """The files the command-line fuzzing picks from, besides good ones:
    a report with a NaN, JSON nested without end, a device, another
    program's database, a folder, a small zlib bomb."""
    doc = copy.deepcopy(VALID)
    doc["stages"][0]["mean_ns"] = float("nan")
    (folder / "hostile.json").write_text(json.dumps(doc))
    (folder / "deep.json").write_text("[" * 50_000 + "]" * 50_000)
    import sqlite3
    db = sqlite3.connect(folder / "other.sqlite")
    db.execute("CREATE TABLE t (x)")
    db.commit()
    db.close()
    (folder / "dir").mkdir()
    bomb = copy.deepcopy(VALID)
    bomb["spans"]["data"] = base64.b64encode(zlib.compress(
        bytes(64 << 20), 9)).decode()
    (folder / "bomb.json").write_text(json.dumps(bomb))
    return hostile_table(folder)


def hostile_table(folder):
    return {"HOSTILE": folder / "hostile.json", "DEEP": folder / "deep.json",
            "ZERO": "/dev/zero", "SQLITE": folder / "other.sqlite",
            "DIR": folder / "dir", "BOMB": folder / "bomb.json"}


@FUZZ
@given(argv=st.lists(st.sampled_from(WORDS) | st.text(max_size=6),
                     max_size=6))
def test_command_line_never_tracebacks(argv, tmp_path, capsys,
                                      monkeypatch):
    # random words become file names: they land in the temporary folder
    monkeypatch.chdir(tmp_path)
    good = tmp_path / "good.json"
    if not good.exists():
        ap.Report.from_dict(VALID).save(good)
        (tmp_path / "bad.json").write_text("{")
        hostile_files(tmp_path)
    table = {"GOOD": good, "BAD": tmp_path / "bad.json",
             "NONE": tmp_path / "none.json", "OUT": tmp_path / "o" / "x",
             "DB": tmp_path / "h.db", **hostile_table(tmp_path)}
    args = [str(table.get(a, a)) for a in argv]
    if args[:1] in (["run"], ["demo"]):
        return          # they run user code: covered by their own tests
    capsys.readouterr()
    try:
        code = cli.main(args)
    except SystemExit as e:            # argparse: --help, usage errors
        assert e.code in (0, 2)
        return
    err = capsys.readouterr().err
    assert code in (0, 1, 2)
    assert code != 1 or args[0] == "compare"     # 1 is only "slower"
    if code == 2:
        assert err.count("\n") == 1 and err.startswith("aquaprof: error: ")
    assert "Traceback" not in err and "internal error" not in err, err


def test_atheris_drives_the_loader(tmp_path):
    """Coverage-guided fuzzing (libFuzzer) of what Report.load does with
    a file's bytes, for a bounded number of inputs."""
    pytest.importorskip("atheris")         # installed by `make test`
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "valid.json").write_text(json.dumps(VALID))
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "support" / "fuzz_report_loader.py"),
         f"-runs={RUNS}", "-max_len=4096", str(corpus)],
        capture_output=True, text=True, timeout=3600,
        env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"Done {RUNS} runs" in out.stderr


# ---------------------------------------------- random stage programs

programs = st.recursive(
    st.just([]),
    lambda inner: st.lists(st.tuples(st.sampled_from("abc"), inner,
                                     st.booleans()), max_size=3),
    max_leaves=10)


def run_program(program):
    """Nested stages as the program says; True in a node raises inside
    that stage (caught by the caller)."""
    for name, children, raises in program:
        try:
            with ap.stage(name):
                run_program(children)
                if raises:
                    raise KeyError(name)
        except KeyError:
            pass


def expected_counts(program, prefix=""):
    counts = {}
    for name, children, _ in program:
        path = prefix + name
        counts[path] = counts.get(path, 0) + 1
        for p, n in expected_counts(children, path + "/").items():
            counts[p] = counts.get(p, 0) + n
    return counts


@settings(max_examples=max(60, EXAMPLES // 5), deadline=None)
@given(per_thread=st.lists(programs, min_size=1, max_size=4),
       cap=st.integers(1, 64))
def test_random_programs_keep_the_invariants(per_thread, cap):
    threads = [threading.Thread(target=run_program, args=(p,))
               for p in per_thread]
    with ap.Profiler(max_spans=cap) as prof:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    rep = prof.report()
    expected = {}
    for program in per_thread:
        for path, n in expected_counts(program).items():
            expected[path] = expected.get(path, 0) + n
    assert {s.path: s.count for s in rep.stages} == expected
    total = sum(expected.values())
    assert rep.spans_recorded + rep.spans_dropped == total
    spans = rep.spans()
    for i, s in enumerate(spans):
        assert s["start_ns"] <= s["end_ns"]
        if s["parent"] >= 0:
            parent = spans[s["parent"]]
            assert parent["thread"] == s["thread"]
            assert parent["start_ns"] <= s["start_ns"]
            assert s["end_ns"] <= parent["end_ns"]
            child_path = rep.stage_names[s["stage"]]
            assert child_path.rsplit("/", 1)[0] == \
                rep.stage_names[parent["stage"]]


# ------------------------------------------------- random stage tables

NAMES = st.sampled_from(["a", "b", "a b", "a_b", "", "x/y", "\x1b[2J",
                         "\n", "\x00", "\u202e", "\ud800", "é", "a;b"])


@st.composite
def stage_tables(draw):
    """Stage tables of any shape, some invalid: random parents (earlier
    stages mostly, sometimes not), names from a hostile alphabet,
    duplicates, one span per stage."""
    n = draw(st.integers(1, 12))
    stages, spans = [], []
    for i in range(n):
        parent = draw(st.integers(-1, i - 1) | st.integers(-3, n + 2))
        depth = (stages[parent]["depth"] + 1
                 if 0 <= parent < i else 0)
        stages.append(crafted.stage(draw(NAMES), parent, depth,
                                    count=draw(st.integers(0, 3))))
    return crafted.report(stages)


@FUZZ
@given(doc=stage_tables())
def test_random_stage_tables_load_or_say_why(doc, tmp_path):
    try:
        report = ap.Report.from_dict(doc)
    except ReportError:
        return
    paths = report.stage_names
    assert len(set(paths)) == len(paths)          # a path names one stage
    assert all(s.name and "/" not in s.name for s in report.stages)
    views_work(report, tmp_path)


# ------------------------------------- GPU figures, against the definition

def reference_stage_cuda(report):
    """Each stage's GPU figures by their definition: its subtree's events
    picked one stage at a time (quadratic, and clearly right)."""
    events = report.gpu_events()
    names = report.stage_names
    within = {i: [i] for i in range(len(names))}
    for i, path in enumerate(names):
        for j in range(len(names)):
            if j != i and path.startswith(names[j] + "/"):
                within[j].append(i)
    memory, in_use = report.gpu_memory()
    out = {}
    for sid, ids in within.items():
        mine = events[np.isin(events["stage"], ids)]
        if not len(mine):
            continue
        duration = (mine["end_ns"] - mine["start_ns"]) * 1e-9
        kernel = mine["kind"] == schema.KERNEL
        allocs = mine["kind"] == schema.ALLOC
        peak = None
        if allocs.any():
            at = np.isin(memory["correlation"], mine["correlation"][allocs])
            peak = int(in_use[at].max())
        copies = {}
        for code, label in schema.COPY_NAMES.items():
            chosen = (mine["kind"] == schema.MEMCPY) & (mine["copy"] == code)
            if chosen.any():
                copies[label] = (int(chosen.sum()),
                                 pytest.approx(float(duration[chosen].sum())),
                                 int(mine["bytes"][chosen].sum()))
        out[sid] = {
            "kernels": int(kernel.sum()),
            "kernel_time": pytest.approx(float(duration[kernel].sum())),
            "self": pytest.approx(float(duration[
                kernel & (mine["stage"] == sid)].sum())),
            "copies": copies,
            "allocations": int(allocs.sum()),
            "peak": peak,
            "top": [k.name for k in gpu_stats.kernel_table(report, mine, 3)],
        }
    return out


@st.composite
def gpu_reports(draw):
    """A random stage tree with random GPU events launched from it."""
    n = draw(st.integers(1, 8))
    stages = []
    for i in range(n):
        parent = draw(st.integers(-1, i - 1))
        depth = stages[parent]["depth"] + 1 if parent >= 0 else 0
        stages.append(crafted.stage(f"s{i}", parent, depth))
    m = draw(st.integers(0, 40))
    events = np.zeros(m, _core.GPU_DTYPE)
    events["stage"] = draw(st.lists(st.integers(-1, n - 1), min_size=m,
                                    max_size=m)) if m else []
    events["span"] = -1
    events["kind"] = draw(st.lists(st.sampled_from(
        [schema.KERNEL, schema.MEMCPY, schema.ALLOC, schema.FREE]),
        min_size=m, max_size=m)) if m else []
    events["start_ns"] = crafted.START + np.arange(m) * 10
    events["end_ns"] = events["start_ns"] + draw(st.lists(
        st.integers(0, 30), min_size=m, max_size=m)) if m else []
    events["bytes"] = draw(st.lists(st.integers(0, 1000), min_size=m,
                                    max_size=m)) if m else []
    events["name"] = np.arange(m) % 3
    events["correlation"] = np.arange(m) // 2
    events["copy"] = np.arange(m) % 4
    gpu = {"events": events, "kernel_names": ["k0", "k1", "k2"],
           "devices": [], "dropped": 0, "unattributed": 0}
    return crafted.report(stages, gpu=gpu)


@FUZZ
@given(doc=gpu_reports())
def test_gpu_figures_per_stage_match_their_definition(doc):
    report = ap.Report.from_dict(doc)
    expected = reference_stage_cuda(report)
    got = {s.id: s.cuda for s in report.stages if s.cuda is not None}
    assert set(got) == set(expected)
    for sid, cuda in got.items():
        want = expected[sid]
        assert cuda.kernels == want["kernels"]
        assert cuda.kernel_time == want["kernel_time"]
        assert cuda.self_kernel_time == want["self"]
        assert {label: (c.count, c.time, c.bytes)
                for label, c in cuda.memcpy.items()} == want["copies"]
        assert cuda.allocations == want["allocations"]
        assert cuda.mem_peak == want["peak"]
        assert [k.name for k in cuda.top_kernels] == want["top"]

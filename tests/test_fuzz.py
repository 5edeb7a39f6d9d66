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

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import aquaprof as ap
from aquaprof.integrations import cli
from aquaprof.report import ReportError

ROOT = Path(__file__).resolve().parent.parent
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
    """Everything a user can do with a report that loaded."""
    str(report)
    report._repr_html_()
    report.to_chrome_trace(folder / "t.json")
    report.to_folded(folder / "f.txt")
    report.to_flamegraph(folder / "f.svg")
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
         "OUT", "DB"]


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
    table = {"GOOD": good, "BAD": tmp_path / "bad.json",
             "NONE": tmp_path / "none.json", "OUT": tmp_path / "o" / "x",
             "DB": tmp_path / "h.db"}
    args = [str(table.get(a, a)) for a in argv]
    if args[:1] in (["run"], ["demo"]):
        return          # they run user code: covered by their own tests
    try:
        code = cli.main(args)
    except SystemExit as e:            # argparse: --help, usage errors
        assert e.code in (0, 2)
        return
    assert code in (0, 1, 2)


def test_atheris_drives_the_loader(tmp_path):
    """Coverage-guided fuzzing of Report.from_dict(json.loads(...)) with
    libFuzzer, for a bounded number of inputs."""
    pytest.importorskip("atheris")         # installed by `make test`
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "valid.json").write_text(json.dumps(VALID))
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "fuzz_report_loader.py"),
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

"""Stage names as a program gives them: a name is held by the profiler
only once a session records it (a program that makes a name a request,
with the profiler off, keeps no memory for them), a stage made before
start() records under its name, and `with aquaprof.stage()` without a
name is named after where it is, profiled or not: turning the profiler
on never changes what the program does."""
import os

import pytest

import aquaprof as ap


def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def quiet():
    return ap.Profiler(compensate=False, cuda=False, memory=False)


@pytest.mark.skipif(os.environ.get("AQUAPROF_SANITIZED") == "1",
                    reason="under `make asan` freed memory waits in ASan's "
                    "quarantine; the normal run of the suite checks this")
def test_names_made_without_a_profiler_are_not_kept():
    n = 300_000
    for i in range(1000):                  # the allocator's first growth
        with ap.stage(f"warm-{i}"):
            pass
    before = rss()
    for i in range(n):
        with ap.stage(f"request-{i}"):
            pass
    grown = rss() - before
    # kept for the process's life before: about 100 bytes a name
    assert grown < n * 10, f"{grown / n:.1f} bytes a name"


def test_a_stage_made_before_start_records_under_its_name():
    early = ap.stage("made-early", items=4)
    decorated = ap.stage("decorated-early")(lambda: None)
    with quiet() as prof:
        with early:
            pass
        with early:
            pass
        decorated()
    rep = prof.report()
    assert rep["made-early"].count == 2 and rep["made-early"].items == 8
    assert rep["decorated-early"].count == 1
    with quiet() as again:         # and in a later session
        with early:
            pass
    assert again.report()["made-early"].count == 1


def load_batch():
    with ap.stage():
        return sum(range(10))


def test_an_unnamed_with_is_named_where_it_is_profiled_or_not():
    line = load_batch.__code__.co_firstlineno + 1
    assert load_batch() == 45                   # no profiler: runs
    with quiet() as prof:
        assert load_batch() == 45
        load_batch()
    assert prof.report()[f"load_batch:{line}"].count == 2


def test_an_unnamed_with_at_module_level_is_named_by_its_file(tmp_path):
    code = compile("import aquaprof as ap\n\nwith ap.stage():\n    pass\n",
                   str(tmp_path / "job.py"), "exec")
    with quiet() as prof:
        exec(code, {})
    assert prof.report()["job.py:3"].count == 1


def test_bad_names_are_refused_profiled_or_not():
    for bad, error in (("", ValueError), ("a/b", ValueError),
                       (b"x", TypeError), (3, TypeError)):
        with pytest.raises(error):
            ap.stage(bad)
        with quiet():
            with pytest.raises(error):
                ap.stage(bad)


def test_a_file_name_that_is_not_utf8_names_a_stage(tmp_path):
    # os.fsdecode of a Linux file name gives lone surrogates: kept as
    # their escape, through the report, its file and its table
    name = os.fsdecode(b"data_\xff.bin")
    with quiet() as prof:
        with ap.stage(name):
            pass
    rep = prof.report()
    assert rep["data_\\udcff.bin"].count == 1
    rep.save(tmp_path / "run.json")
    assert ap.Report.load(tmp_path / "run.json")["data_\\udcff.bin"].count \
        == 1
    assert "data_\\udcff.bin" in str(rep)


def test_the_overflow_stages_name_is_refused():
    # it would merge with the stages filed past max_stages
    for profiled in (False, True):
        with quiet() if profiled else open(os.devnull):
            with pytest.raises(ValueError, match="aquaprof's own"):
                ap.stage("(over max_stages)")

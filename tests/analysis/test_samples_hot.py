"""A stage's hottest functions from planted samples, checked against
shares and seconds worked out by hand; the accessors over the samples
section; the text report's sampling line; diagnose()'s hottest code."""
import pickle

import pytest

from aquaprof.analysis import samples
from aquaprof.analysis.samples import HotFunction, SampleStack, Sampling
from aquaprof.model.report import CodeFrame
from sampled_reports import FRAMES, MS, main_tid, profile_stages, \
    with_samples


@pytest.fixture(scope="module")
def base():
    return profile_stages()


def planted(tid):
    """Stacks whose hot functions are worked out by hand in the tests:
    frames 0 <module>, 1 main, 2 run_decode, 3 nms, 4 iou, 5 parse,
    6 idle."""
    return [
        (0, tid, "decode", [0, 1, 2, 3], 5, 5 * MS, 4 * MS),
        (0, tid, "decode", [0, 1, 2, 3, 4], 3, 3 * MS, 3 * MS),
        (0, tid, "decode", [0, 1, 2, 5], 2, 2 * MS, 1 * MS),
        (0, tid, "decode", [], 1, 1 * MS, 0),
        (0, tid, "decode/nms", [0, 1, 2, 3, 3], 2, 2 * MS, 2 * MS),
        (0, tid, "load", [0, 1, 6], 4, 4 * MS, 0),
        (0, tid, None, [0, 1], 1, 1 * MS, 0),
    ]


@pytest.fixture(scope="module")
def rep(base):
    return with_samples(base, planted(main_tid(base)), rounds=20, late=2,
                        lost=1)


def test_hot_shares_a_stage_and_its_sub_stages_sampled_time(rep):
    # decode and decode/nms: 13 ms sampled. nms is innermost in 5 + 2 ms
    # (CPU 4 + 2 ms) and on the stack in 5 + 3 + 2 ms (counted once in
    # the recursive stack)
    hot = rep["decode"].hot()
    assert [h.function for h in hot] == [
        "nms", "iou", "parse", "<module>", "main", "run_decode"]
    nms = hot[0]
    assert (nms.file, nms.line) == ("/app/postproc.py", 40)
    assert nms.own == pytest.approx(7 / 13)
    assert nms.total == pytest.approx(10 / 13)
    assert nms.own_s == pytest.approx(0.007)
    assert nms.total_s == pytest.approx(0.010)
    assert nms.cpu_s == pytest.approx(0.006)
    iou, parse, module = hot[1], hot[2], hot[3]
    assert (iou.own, iou.total, iou.cpu_s) == pytest.approx(
        (3 / 13, 3 / 13, 0.003))
    assert (parse.own_s, parse.cpu_s) == pytest.approx((0.002, 0.001))
    assert (module.own, module.total, module.total_s) == pytest.approx(
        (0.0, 12 / 13, 0.012))


def test_hot_of_a_stage_alone_leaves_its_sub_stages_out(rep):
    # decode alone: 11 ms sampled, nms innermost in 5 of them
    hot = rep["decode"].hot(sub_stages=False)
    assert hot[0].function == "nms"
    assert (hot[0].own, hot[0].total, hot[0].cpu_s) == pytest.approx(
        (5 / 11, 8 / 11, 0.004))
    nested = rep["decode/nms"].hot()
    assert [(h.function, h.own, h.total) for h in nested[:1]] == [
        ("nms", 1.0, 1.0)]
    load = rep["load"].hot(1)
    assert [(h.function, h.own, h.cpu_s) for h in load] == [
        ("idle", 1.0, 0.0)]


def test_hot_keeps_n_and_refuses_a_bad_n(rep):
    assert rep["decode"].hot(2) == rep["decode"].hot()[:2]
    assert rep["decode"].hot(0) == []
    for bad in (-1, 1.5, True, "3", None):
        with pytest.raises(ValueError, match="n must be an int >= 0"):
            rep["decode"].hot(bad)


def test_hot_is_empty_without_samples_of_the_stage(base):
    assert base["decode"].hot() == []
    with pytest.raises(ValueError):
        base["decode"].hot(-2)
    only_outside = with_samples(base, [(0, main_tid(base), None, [0, 1],
                                        1, MS, 0)])
    assert only_outside["load"].hot() == []


def test_hot_function_reads_well(rep):
    nms = rep["decode"].hot(1)[0]
    assert nms.label == "nms (postproc.py:40)"
    assert repr(nms) == ("HotFunction(nms (postproc.py:40): own 53.8 % "
                         "7.0 ms, total 76.9 % 10.0 ms, cpu 6.0 ms)")
    assert isinstance(nms, HotFunction) and nms[0] == "nms"


def test_the_accessors_read_the_section(rep):
    tid = main_tid(rep)
    stacks = samples.stacks(rep)
    assert stacks[0] == SampleStack(0, tid, rep.stage_names.index("decode"),
                                    (0, 1, 2, 3), 5, 5 * MS, 4 * MS)
    assert stacks[-1].stage == -1 and stacks[-1].count == 1
    assert samples.frame(rep, 3) == CodeFrame(*FRAMES[3])
    assert samples.frame(rep, 3).label == "nms (postproc.py:40)"
    for bad in (-1, 7, "3"):
        with pytest.raises(IndexError, match="7 sampled frames"):
            samples.frame(rep, bad)
    assert samples.hot(rep, "decode", 3) == rep["decode"].hot(3)
    with pytest.raises(KeyError, match="no stage 'nope'"):
        samples.hot(rep, "nope")


def test_a_report_without_samples_has_no_stacks_and_no_frames(base):
    assert samples.stacks(base) == []
    with pytest.raises(IndexError, match="0 sampled frames"):
        samples.frame(base, 0)


def test_a_code_label_keeps_the_file_base_name_only():
    assert CodeFrame("f", "C:\\work\\a.py", 3).label == "f (a.py:3)"
    assert CodeFrame("g", "<string>", 1).label == "g (<string>:1)"
    assert CodeFrame("A.m", "/x/y/b.py", 12).label == "A.m (b.py:12)"


def test_sampling_sums_up_the_run(rep, base):
    assert rep.sampling == Sampling(interval=0.001, rounds=20, samples=18,
                                    late=2, lost=1, timeline=0,
                                    timeline_dropped=0)
    assert base.sampling is None


def test_the_text_report_says_how_the_run_was_sampled(rep, base):
    text = str(rep)
    line = [t for t in text.splitlines() if t.startswith("code sampled")]
    assert line == ["code sampled every 1.0 ms: 18 samples in 20 rounds "
                    "(late rounds: 2, samples lost: 1); report[STAGE].hot() "
                    "names the hot functions"]
    quiet = with_samples(base, planted(main_tid(base)), rounds=20)
    assert "code sampled every 1.0 ms: 18 samples in 20 rounds; " in \
        str(quiet)
    assert "code sampled" not in str(base)
    # the table stays stage-level: no code frame among its rows
    assert "nms (postproc.py" not in text.split("Top ")[0]


def test_diagnose_quotes_the_hottest_code_of_each_stage(rep, base):
    evidence = {f.path: f.evidence for f in rep.diagnose(top=3)}
    # decode's own samples: 11 ms, 5 of them in nms
    assert evidence["decode"].endswith(
        "; hottest code: nms (postproc.py:40), 45 % of its sampled self "
        "time")
    assert evidence["load"].endswith(
        "; hottest code: idle (main.py:90), 100 % of its sampled self time")
    assert "hottest code: nms (postproc.py:40), 100 %" in \
        evidence["decode/nms"]
    assert all("hottest code" not in f.evidence for f in base.diagnose(3))
    assert [f.code for f in base.diagnose(3)] == ["", "", ""]


def test_the_printed_diagnosis_names_the_hottest_code(rep, base):
    lines = rep.diagnose(top=3).summary().splitlines()
    line = [t for t in lines if t.startswith("  ") and ". decode:" in t]
    assert line[0].endswith("; hottest code: nms (postproc.py:40)")
    assert "hottest code" not in base.diagnose(top=3).summary()


def test_a_sampled_report_pickles_with_its_hot_functions(rep):
    back = pickle.loads(pickle.dumps(rep))
    assert back == rep
    assert back["decode"].hot() == rep["decode"].hot()

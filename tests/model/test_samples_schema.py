"""The samples section of a report file: it loads back equal, its
timeline is stored like the spans, and every malformed part of it is
refused with a ReportError naming what is wrong."""
import copy
import json

import numpy as np
import pytest

import aquaprof as ap
from aquaprof.model import schema
from sampled_reports import MS, main_tid, profile_stages, section, \
    span_of, with_samples


@pytest.fixture(scope="module")
def base():
    return profile_stages()


@pytest.fixture(scope="module")
def good(base):
    """A report file's dict whose samples section is valid."""
    tid = main_tid(base)
    start, _ = span_of(base, "decode")
    data = base.to_dict()
    data["samples"] = section(
        base, [(0, tid, "decode", [0, 1, 2, 3], 3, 3 * MS, 2 * MS),
               (0, tid, None, [0, 1], 1, MS, 0)],
        timeline=[(start + MS, 0), (start + 2 * MS, 0), (start + 3 * MS, 0),
                  (start + 20 * MS, 1)],
        timeline_dropped=0)
    return json.loads(json.dumps(data))


def test_a_sampled_report_saves_and_loads_back_equal(good, tmp_path):
    rep = ap.Report.from_dict(good)
    timeline = rep.samples["timeline"]
    assert timeline.dtype == schema.TIMELINE_DTYPE
    assert timeline["stack"].tolist() == [0, 0, 0, 1]
    back = ap.Report.load(rep.save(tmp_path / "r.json"))
    assert back == rep
    assert np.array_equal(back.samples["timeline"], timeline)
    stored = json.loads((tmp_path / "r.json").read_text())
    assert stored["samples"]["timeline"]["encoding"] == schema.ENCODING
    assert stored["samples"]["timeline"]["count"] == 4
    assert stored["samples"]["stacks"] == good["samples"]["stacks"]


def test_reports_differing_only_in_their_samples_differ(good):
    rep = ap.Report.from_dict(good)
    other = copy.deepcopy(good)
    other["samples"]["stacks"][0][4] = 4
    assert ap.Report.from_dict(other) != rep
    moved = copy.deepcopy(good)
    array = rep.samples["timeline"].copy()
    array["t_ns"] += 1
    moved["samples"]["timeline"] = schema.encode_array(
        array, schema.TIMELINE_DTYPE)
    assert ap.Report.from_dict(moved) != rep
    untimed = copy.deepcopy(good)
    del untimed["samples"]["timeline"]
    assert ap.Report.from_dict(untimed) != rep
    bare = copy.deepcopy(good)
    del bare["samples"]
    assert ap.Report.from_dict(bare) != rep


def test_a_report_without_samples_has_none(base):
    assert base.samples is None and base.sampling is None
    assert "samples" not in base.to_dict()
    assert "samples" not in base.meta


def test_samples_built_with_tuples_compare_equal_to_their_json(base):
    """The C binding may build tuples where JSON gives lists: a live
    report and the same loaded back are equal."""
    tid = main_tid(base)
    data = base.to_dict()
    data["samples"] = section(base, [(0, tid, "load", [0, 1], 1, MS, MS)])
    loaded = ap.Report.from_dict(data)
    decoded = schema.decode(json.loads(json.dumps(data)))
    decoded["samples"]["frames"] = [tuple(f) for f in
                                    decoded["samples"]["frames"]]
    decoded["samples"]["stacks"] = [tuple(s[:3]) + (tuple(s[3]),) +
                                    tuple(s[4:]) for s in
                                    decoded["samples"]["stacks"]]
    assert ap.Report(decoded) == loaded


def bend(good, change):
    bad = copy.deepcopy(good)
    change(bad["samples"])
    return bad


def set_key(key, value):
    return lambda s: s.__setitem__(key, value)


def set_stack(i, field, value):
    return lambda s: s["stacks"][i].__setitem__(field, value)


def set_frame(i, field, value):
    return lambda s: s["frames"][i].__setitem__(field, value)


def timeline_of(pairs, dtype=schema.TIMELINE_DTYPE):
    if dtype == schema.TIMELINE_DTYPE:
        pairs = [(t, k, schema.CPU_UNKNOWN) for t, k in pairs]
    array = np.array(pairs, dtype=dtype)
    return set_key("timeline", schema.encode_array(array, dtype))


BAD = {
    "no interval": (lambda s: s.pop("interval_ns"), "lacks 'interval_ns'"),
    "no rounds": (lambda s: s.pop("rounds"), "lacks 'rounds'"),
    "no late": (lambda s: s.pop("late"), "lacks 'late'"),
    "no lost": (lambda s: s.pop("lost"), "lacks 'lost'"),
    "no frames": (lambda s: s.pop("frames"), "lacks 'frames'"),
    "no stacks": (lambda s: s.pop("stacks"), "lacks 'stacks'"),
    "interval a str": (set_key("interval_ns", "1ms"),
                       r"\['interval_ns'\] must be int"),
    "rounds a float": (set_key("rounds", 1.5), r"\['rounds'\] must be int"),
    "late a bool": (set_key("late", True), r"\['late'\] must be int"),
    "negative lost": (set_key("lost", -1), r"\['lost'\] is negative"),
    "rounds past 64 bits": (set_key("rounds", 1 << 64),
                            "does not fit in 64 bits"),
    "frames an object": (set_key("frames", {}), r"\['frames'\] must be list"),
    "stacks a str": (set_key("stacks", "x"), r"\['stacks'\] must be list"),
    "dropped negative": (set_key("timeline_dropped", -3),
                         r"\['timeline_dropped'\] is negative"),
    "dropped a str": (set_key("timeline_dropped", "x"),
                      r"\['timeline_dropped'\] must be int"),
    "frame not a list": (lambda s: s["frames"].__setitem__(0, "main"),
                         r"\['frames'\]\[0\] must be \[function, file"),
    "frame of two": (lambda s: s["frames"][1].pop(),
                     r"\['frames'\]\[1\] must be"),
    "frame function not str": (set_frame(2, 0, 7), r"\['frames'\]\[2\]"),
    "frame file not str": (set_frame(2, 1, None), r"\['frames'\]\[2\]"),
    "frame line negative": (set_frame(3, 2, -1), r"\['frames'\]\[3\]"),
    "frame line a str": (set_frame(3, 2, "40"), r"\['frames'\]\[3\]"),
    "stack not a list": (lambda s: s["stacks"].__setitem__(0, 5),
                         r"\['stacks'\]\[0\] must be \[process, tid"),
    "stack of six": (lambda s: s["stacks"][0].pop(),
                     r"\['stacks'\]\[0\] must be"),
    "stack frames not a list": (set_stack(0, 3, 3),
                                r"\['stacks'\]\[0\] must be"),
    "negative process": (set_stack(0, 0, -1), r"\['stacks'\]\[0\] must be"),
    "process the report lacks": (set_stack(1, 0, 1),
                                 r"\['stacks'\]\[1\] names process 1"),
    "negative tid": (set_stack(0, 1, -5), r"\['stacks'\]\[0\] must be"),
    "stage a float": (set_stack(0, 2, 0.0), r"\['stacks'\]\[0\] must be"),
    "stage below -1": (set_stack(0, 2, -2),
                       r"\['stacks'\]\[0\] names stage -2"),
    "stage past the last": (set_stack(0, 2, 3),
                            r"\['stacks'\]\[0\] names stage 3"),
    "frame index past the last": (
        lambda s: s["stacks"][0][3].append(7),
        r"\['stacks'\]\[0\] names a frame the report lacks"),
    "negative frame index": (
        lambda s: s["stacks"][1][3].append(-1),
        r"\['stacks'\]\[1\] names a frame"),
    "frame index a bool": (
        lambda s: s["stacks"][1][3].append(True),
        r"\['stacks'\]\[1\] names a frame"),
    "negative count": (set_stack(0, 4, -1), r"\['stacks'\]\[0\] must be"),
    "negative wall": (set_stack(0, 5, -1), r"\['stacks'\]\[0\] must be"),
    "negative cpu": (set_stack(1, 6, -1), r"\['stacks'\]\[1\] must be"),
    "count a float": (set_stack(1, 4, 1.0), r"\['stacks'\]\[1\] must be"),
    "wall past 64 bits": (set_stack(1, 5, 1 << 63),
                          r"\['stacks'\]\[1\] must be"),
    "threads an object": (set_key("threads", {}),
                          r"\['threads'\] must be list"),
    "thread not a list": (set_key("threads", ["crunch_0"]),
                          r"\['threads'\]\[0\] must be \[process, tid, name\]"),
    "thread of two": (set_key("threads", [[0, 7]]),
                      r"\['threads'\]\[0\] must be"),
    "thread's tid negative": (set_key("threads", [[0, -7, "a"]]),
                              r"\['threads'\]\[0\] must be"),
    "thread's name not str": (set_key("threads", [[0, 7, 7]]),
                              r"\['threads'\]\[0\] must be"),
    "thread's process the report lacks": (
        set_key("threads", [[0, 7, "a"], [1, 8, "b"]]),
        r"\['threads'\]\[1\] names process 1"),
    "timeline not an object": (set_key("timeline", [1, 2]),
                               "'samples timeline' must be an object"),
    "timeline of another dtype": (
        timeline_of([(1, 0)], np.dtype([("t_ns", "<i8"), ("stack", "<i4")])),
        "'samples timeline' has dtype"),
    "timeline cut short": (
        lambda s: s["timeline"].__setitem__("count", 9),
        "'samples timeline' holds"),
    "timeline naming a stack the report lacks": (
        timeline_of([(1, 0), (2, 2)]), "timeline'] names a stack"),
    "timeline out of time order": (
        timeline_of([(5, 0), (4, 1)]), "timeline'] is not in time order"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_a_malformed_samples_section_is_refused(good, case):
    change, message = BAD[case]
    with pytest.raises(ap.ReportError, match=message):
        ap.Report.from_dict(bend(good, change))


def test_a_samples_section_that_is_no_object_is_refused(good):
    bad = copy.deepcopy(good)
    bad["samples"] = [1]
    with pytest.raises(ap.ReportError,
                       match=r"report\['samples'\] must be an object"):
        ap.Report.from_dict(bad)


def test_the_report_validator_refuses_a_timeline_that_is_no_array(good):
    data = schema.decode(copy.deepcopy(good))
    data["samples"]["timeline"] = [(1, 0)]
    with pytest.raises(ap.ReportError, match="must be a timeline array"):
        ap.Report(data)
    data["samples"]["timeline"] = np.zeros(1, [("t_ns", "<i8")])
    with pytest.raises(ap.ReportError, match="must be a timeline array"):
        ap.Report(data)


def test_a_stack_may_name_any_process_of_a_merged_report(base):
    """process 1 is refused in a report of one process (above), taken in
    a report of two."""
    merged = ap.merge([base, base])
    tid = main_tid(base)
    rep = with_samples(merged, [(1, tid, "decode/nms", [3], 1, MS, MS)])
    assert rep.samples["stacks"][0][0] == 1
    data = merged.to_dict()
    data["samples"] = section(merged, [(2, tid, None, [3], 1, MS, MS)])
    with pytest.raises(ap.ReportError, match="names process 2"):
        ap.Report.from_dict(data)

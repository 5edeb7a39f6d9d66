"""_core.merge_stage, the core's merge of one stage's aggregates exposed to
Python: it must give exactly, to the bit, what merging the same stage
dicts in plain Python gives (the reference below, the rule that
aquaprof.merge relies on), refuse what is not a stage dict by naming
the key, and keep no reference or memory."""
import copy
import random
import sys

import pytest

import aquaprof as ap
from aquaprof import _core
from leaks import blocks_after

BUCKETS = len(_core.HIST_LOWER_NS) - 1   # the bounds: one past the last
KEYS = ["name", "parent", "depth", "count", "raised", "unclosed",
        "suspended", "total_ns", "self_ns", "min_ns", "max_ns", "mean_ns", "m2",
        "cpu_ns", "proc_cpu_ns", "items", "mem_peak", "mem_delta", "mem_rise",
        "hist"]
#: keys that files written by earlier versions lack
OPTIONAL = ("suspended", "mem_rise", "proc_cpu_ns")
#: of those, the ones a stage without them is merged with as 0
AS_ZERO = ("suspended", "mem_rise")
#: of those, sums over every call: merged with calls that lack them,
#: the sum would pass for all the calls' while it holds some
WHOLE = ("proc_cpu_ns",)


def reference(into, other):
    """Plain Python: Chan's parallel mean and variance, sums, extremes and
    histogram, on copies; into keeps its name, parent and depth."""
    into, other = copy.deepcopy(into), copy.deepcopy(other)
    if other["count"] == 0:
        return into
    n_a, n_b = into["count"], other["count"]
    if n_a == 0:
        into.update({k: v for k, v in other.items()
                     if k not in ("name", "parent", "depth")})
        into["hist"] = list(other["hist"])
        return into
    n = n_a + n_b
    delta = other["mean_ns"] - into["mean_ns"]
    into["mean_ns"] += delta * n_b / n
    into["m2"] += other["m2"] + delta * delta * n_a * n_b / n
    into["count"] = n
    for key in ("raised", "unclosed", "suspended", "total_ns", "self_ns",
                "cpu_ns", "proc_cpu_ns", "items", "mem_delta"):
        into[key] += other[key]
    into["min_ns"] = min(into["min_ns"], other["min_ns"])
    into["max_ns"] = max(into["max_ns"], other["max_ns"])
    into["mem_peak"] = max(into["mem_peak"], other["mem_peak"])
    into["mem_rise"] = max(into["mem_rise"], other["mem_rise"])
    buckets = dict(into["hist"])
    for index, count in other["hist"]:
        buckets[index] = buckets.get(index, 0) + count
    into["hist"] = sorted(buckets.items())
    return into


def random_stage(rng, name="load", count=None):
    """A stage dict shaped as report_data() gives one."""
    big = rng.random() < 0.2
    if count is None:
        count = rng.choice([0, 1, 2, rng.randrange(1, 10**6),
                            rng.randrange(1, 1 << 61)])
    top = (1 << 60) if big else 10**9
    lo = rng.randrange(0, top) if count else 0
    hi = lo + rng.randrange(0, top) if count else 0
    hist = sorted(rng.sample(range(BUCKETS), rng.randrange(0, 8)))
    return {
        "name": name, "parent": rng.randrange(-1, 5),
        "depth": rng.randrange(0, 4), "count": count,
        "raised": rng.randrange(0, count + 1) if count < 1000 else 7,
        "unclosed": rng.randrange(0, 3),
        "suspended": rng.randrange(0, count + 1) if count < 1000 else 3,
        "total_ns": rng.randrange(0, top), "self_ns": rng.randrange(0, top),
        "min_ns": lo, "max_ns": hi,
        "mean_ns": rng.uniform(lo, hi) if count else 0.0,
        "m2": rng.random() * 10.0 ** rng.randrange(0, 30) if count > 1
        else 0.0,
        "cpu_ns": rng.randrange(0, top),
        "proc_cpu_ns": rng.randrange(0, top), "items": rng.randrange(0, 100),
        "mem_peak": rng.randrange(0, 1 << 40),
        "mem_delta": rng.randrange(-(1 << 30), 1 << 30),
        "mem_rise": rng.randrange(0, 1 << 40),
        "hist": [(b, rng.randrange(1, 1 << 40)) for b in hist],
    }


def exact(d):
    """d as comparable items, floats by their bits, types kept."""
    return [(k, type(v).__name__, v.hex() if isinstance(v, float) else v)
            for k, v in d.items()]


def test_equals_the_python_merge_on_random_stages():
    rng = random.Random(20240607)
    for _ in range(3000):
        into, other = random_stage(rng), random_stage(rng, "other")
        before = copy.deepcopy((into, other))
        got = _core.merge_stage(into, other)
        assert exact(got) == exact(reference(into, other))
        assert (into, other) == before          # inputs untouched
        assert got is not into


def test_equals_the_python_merge_on_real_reports():
    reports = []
    for calls in (3, 17, 1):
        with ap.Profiler() as prof:
            for i in range(calls):
                with ap.stage("outer"):
                    with ap.stage("inner", items=i):
                        pass
        reports.append(prof._core.report_data()["stages"])
    into = dict(reports[0][1], count=0, hist=[])   # as a merge starts
    for stages in reports:
        for s in stages:
            if s["name"] == "inner":
                want = reference(into, s)
                into = _core.merge_stage(into, s)
                assert exact(into) == exact(want)
    assert into["count"] == 21


def test_a_stage_of_count_zero_contributes_nothing():
    rng = random.Random(1)
    into = random_stage(rng, count=5)
    into["extra"] = object()
    got = _core.merge_stage(into, random_stage(rng, count=0))
    assert got == into and got is not into
    assert list(got) == list(into)


def test_into_keeps_its_name_parent_depth_and_key_order():
    rng = random.Random(2)
    into = random_stage(rng, "mine", count=3)
    other = random_stage(rng, "theirs", count=4)
    into = {k: into[k] for k in reversed(KEYS)}
    into["note"] = "kept"
    got = _core.merge_stage(into, other)
    assert list(got) == list(into)
    assert (got["name"], got["parent"], got["depth"], got["note"]) == \
        (into["name"], into["parent"], into["depth"], "kept")
    fresh = dict(into, count=0, depth=9)
    got = _core.merge_stage(fresh, other)
    assert got["depth"] == 9 and got["count"] == other["count"]
    assert got["mean_ns"] == other["mean_ns"]


def good_pair():
    rng = random.Random(3)
    return random_stage(rng, count=4), random_stage(rng, count=5)


@pytest.mark.parametrize("key", [k for k in KEYS if k not in OPTIONAL])
@pytest.mark.parametrize("which", [0, 1])
def test_a_missing_key_is_named(key, which):
    pair = list(good_pair())
    del pair[which][key]
    with pytest.raises(ValueError, match=f"{['into', 'other'][which]} has "
                                         f"no '{key}'"):
        _core.merge_stage(*pair)


@pytest.mark.parametrize("key", OPTIONAL)
def test_a_field_neither_stage_holds_stays_unknown(key):
    """Files written before a field existed lack it: their merge must not
    invent a 0 that readers would take for a measurement."""
    into, other = good_pair()
    del into[key], other[key]
    got = _core.merge_stage(into, other)
    assert set(got) == set(KEYS) - {key}


@pytest.mark.parametrize("key", AS_ZERO)
def test_a_field_one_stage_holds_is_merged_with_the_other_as_zero(key):
    into, other = good_pair()
    del into[key]
    got = _core.merge_stage(into, other)
    assert set(got) == set(KEYS) and got[key] == other[key]


@pytest.mark.parametrize("key", WHOLE)
@pytest.mark.parametrize("which", [0, 1])
def test_a_sum_one_side_with_calls_lacks_is_unknown(key, which):
    """A run that did not measure it (a file from before the figure) in
    a merge with one that did: the merged stage's calls are both runs',
    its figure would be one run's."""
    pair = list(good_pair())
    del pair[which][key]
    got = _core.merge_stage(*pair)
    assert set(got) == set(KEYS) - {key}
    # and it stays unknown through the next merge
    assert key not in _core.merge_stage(got, good_pair()[1])


@pytest.mark.parametrize("key", WHOLE)
def test_a_sum_a_side_without_calls_lacks_is_the_others(key):
    """A stage's first merge is into an empty copy of it (aquaprof.merge
    makes one per path): the copy's calls add nothing to miss."""
    into, other = good_pair()
    empty = dict(into, count=0, hist=[])
    del empty[key]
    assert _core.merge_stage(empty, other)[key] == other[key]
    del into[key]
    assert key not in _core.merge_stage(dict(other, count=0, hist=[]), into)


@pytest.mark.parametrize("key,value,error", [
    ("name", 3, TypeError), ("parent", "0", TypeError),
    ("depth", 1.0, TypeError), ("count", "5", TypeError),
    ("count", 5.0, TypeError), ("total_ns", None, TypeError),
    ("mean_ns", "70", TypeError), ("m2", [], TypeError),
    ("hist", 5, TypeError), ("hist", [(1,)], TypeError),
    ("hist", [1, 2], TypeError), ("hist", [("1", 2)], TypeError),
    ("hist", [(BUCKETS, 1)], ValueError), ("hist", [(-1, 1)], ValueError),
    ("hist", [(3, -1)], ValueError), ("hist", [(3, 1), (3, 2)], ValueError),
    ("count", -1, ValueError), ("items", 1 << 64, ValueError),
    ("m2", 1 << 1100, ValueError),
])
def test_a_bad_value_is_named(key, value, error):
    into, other = good_pair()
    other[key] = value
    with pytest.raises(error, match=f"other\\['{key}'\\]"):
        _core.merge_stage(into, other)


def test_sums_past_64_bits_are_refused():
    into, other = good_pair()
    into["total_ns"] = other["total_ns"] = 1 << 62
    with pytest.raises(OverflowError, match="'total_ns'"):
        _core.merge_stage(into, other)
    into, other = good_pair()
    into["hist"] = other["hist"] = [(4, (1 << 63) - 1)]
    assert _core.merge_stage(into, other)["hist"] == [(4, (1 << 64) - 2)]


def test_bad_calls():
    into, other = good_pair()
    with pytest.raises(TypeError, match="into must be a stage dict"):
        _core.merge_stage([], other)
    with pytest.raises(TypeError, match="other must be a stage dict"):
        _core.merge_stage(into, None)
    with pytest.raises(TypeError, match="2 arguments"):
        _core.merge_stage(into)
    with pytest.raises(TypeError):
        _core.merge_stage(into, other=other)


def test_keeps_no_reference_and_no_memory():
    into, other = good_pair()
    # small ints are shared by the whole interpreter: their counts move
    values = [v for v in list(into.values()) + list(other.values())
              if not (isinstance(v, int) and -5 <= v <= 256)]
    counts = [sys.getrefcount(v) for v in values]
    dict_counts = sys.getrefcount(into), sys.getrefcount(other)
    for _ in range(1000):
        _core.merge_stage(into, other)
        _core.merge_stage(dict(into, count=0), other)
        _core.merge_stage(into, dict(other, count=0))
    assert [sys.getrefcount(v) for v in values] == counts
    assert (sys.getrefcount(into), sys.getrefcount(other)) == dict_counts
    assert blocks_after(lambda: _core.merge_stage(into, other)) < 20

    def errors():
        for bad in (dict(other, m2="x"), {"name": "x"},
                    dict(other, hist=[(1, 1), (1, 1)]),
                    dict(other, total_ns=(1 << 63) - 1)):
            try:
                _core.merge_stage(into, bad)
            except (TypeError, ValueError, OverflowError):
                pass
    assert blocks_after(errors) < 20

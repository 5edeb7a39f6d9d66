"""What a run writes, its own reader reads: stages nested past the deepest
a report holds fold into "(over max depth)" at that depth (counted and
said), items= sums hold at 2**63 - 1 instead of wrapping negative, and a
child process's report obeys the same bounds, so no report is refused
or lost whole for its shape."""
import contextlib
import multiprocessing as mp

import pytest

import aquaprof as ap
from aquaprof.model import limits

DEEP = limits.MAX_DEPTH + 900


def nest(depth):
    """Stages nested depth + 1 deep, as a staged recursion would make
    them, without Python's recursion (whose C limit differs by version)."""
    with contextlib.ExitStack() as stack:
        for _ in range(depth + 1):
            stack.enter_context(ap.stage("f"))
    return 0


def quiet(**options):
    return ap.Profiler(compensate=False, cuda=False, memory=False, **options)


def test_nesting_past_the_depth_limit_saves_and_loads(tmp_path):
    with quiet() as prof:
        nest(DEEP)
    rep = prof.report()
    deepest = max(rep.stages, key=lambda s: s.depth)
    assert deepest.depth == limits.MAX_DEPTH
    assert deepest.name == "(over max depth)"
    # entries at depths MAX_DEPTH.. DEEP, folded into one path
    assert deepest.count == DEEP + 1 - limits.MAX_DEPTH
    assert rep.meta["stages_too_deep"] == deepest.count
    assert "counted under '(over max depth)'" in str(rep)
    rep.save(tmp_path / "deep.json")
    back = ap.Report.load(tmp_path / "deep.json")
    assert back.meta["stages_too_deep"] == deepest.count
    assert len(back.stages) == len(rep.stages)


def test_the_reader_limit_is_the_writer_limit():
    assert limits.MAX_DEPTH == ap._core.MAX_DEPTH == 4096


def _child(queue):
    queue.put(nest(DEEP))


def test_a_child_nesting_past_the_limit_is_delivered():
    # spawn: the bound is the start method's no matter, and a fork of a
    # process whose earlier tests left threads may deadlock in the child
    # under AddressSanitizer (a lock held at the fork)
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with quiet(children=True) as prof:
        p = ctx.Process(target=_child, args=(queue,))
        p.start()
        assert queue.get(timeout=60) == 0
        p.join(60)
    rep = prof.report()
    assert rep.meta["children"]["reported"] == 1, rep.meta["children"]
    assert rep.meta["stages_too_deep"] == DEEP + 1 - limits.MAX_DEPTH


def test_items_sums_hold_at_the_int64_bound(tmp_path):
    big = ap.stage("batch", items=2 ** 62)
    with quiet() as prof:
        for _ in range(3):
            with big:
                pass
    rep = prof.report()
    assert rep["batch"].items == 2 ** 63 - 1
    rep.save(tmp_path / "items.json")
    assert ap.Report.load(tmp_path / "items.json")["batch"].items == \
        2 ** 63 - 1


@pytest.mark.parametrize("name", ["(over max_stages)", "(over max depth)"])
def test_the_folding_stages_names_are_refused(name):
    with pytest.raises(ValueError, match="aquaprof's own"):
        ap.stage(name)


def test_items_may_be_a_numpy_integer():
    np = pytest.importorskip("numpy")
    with quiet() as prof:
        with ap.stage("batch", items=np.int64(32)):
            pass
        with ap.stage("batch", items=np.uint8(8)):
            pass
    assert prof.report()["batch"].items == 40
    for bad in (np.float64(3.0), np.bool_(True), True, 2.0, np.int64(-1)):
        with pytest.raises((TypeError, ValueError)):
            ap.stage("batch", items=bad)

"""A rank waiting at a collective for a slower rank, in a real program:
two gloo ranks on this host (tests/support/planted_ranks.py), rank 1
taking 30 ms longer a step in `compute` before both meet at
`all_reduce`. Asleep there, both ranks are off the CPU in one stage each
and the totals alone cannot tell which waits for which; the calls' times,
on the host's one clock, can. Computing there, its stage is no wait."""
import importlib.util

import pytest

from planted_runs import planted_json

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("torch") is None,
    reason="the planted program runs torch.distributed ranks: torch is "
           "not installed for this Python")


def planted(how, sample):
    return planted_json("planted_ranks.py", how, sample, timeout=240)


@pytest.mark.parametrize("how, sample", [
    ("sleep", "none"), ("sleep", "0.001"), ("spin", "none")])
def test_the_all_reduce_is_a_wait_for_the_rank_slow_in_compute(how, sample):
    got = planted(how, sample)
    assert got["waits"] == ["step/all_reduce"], got
    found = got["findings"]
    reduce = found["step/all_reduce"]
    assert reduce["kind"] == "straggler-bound", reduce
    slow = next(label for label in got["labels"]
                if label.startswith("rank 1"))
    assert reduce["evidence"].startswith(
        f"the other process waits here for {slow}: it is slowest in "
        f"step/compute by "), reduce["evidence"]
    assert "even out its data" in reduce["fix"]
    # the slow stage is the cause, no wait (asleep, its own class says it
    # waits; computing, on a busy machine it may be mixed or starved)
    compute = found.get("step/compute", {"kind": "not a top stage"})
    assert compute["kind"] != "straggler-bound", compute
    if how == "sleep":
        assert compute["kind"] == "waiting", compute

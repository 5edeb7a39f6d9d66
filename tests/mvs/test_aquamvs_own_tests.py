"""AquaMVS's own dense tests (cost, depth extraction, plane sweep), run
unmodified with the drop-in swapped in for every public function they
reach (tests/support/aquamvs_harness/plugin.py), in both parities, and with
AquaMVS's own functions as the baseline. Each test, what it reaches and
why it passes, fails or is skipped is listed in
tests/support/aquamvs_harness/own_tests.py."""
import sys
from pathlib import Path

import pytest

from aquamvs_harness import WHY_MISSING, load, own_tests, plugin  # noqa: E402

torch = pytest.importorskip("torch")
try:
    AQ = load()
except ImportError as e:    # the message says how to install it
    AQ, WHY = None, str(e)
else:
    WHY = WHY_MISSING
FOLDER = own_tests.tests_folder()
needs_aquamvs = pytest.mark.skipif(AQ is None, reason=WHY)
needs_their_tests = pytest.mark.skipif(FOLDER is None,
                                       reason=own_tests.WHY_MISSING)


@needs_aquamvs
@needs_their_tests
@pytest.mark.parametrize("run", plugin.RUNS)
def test_aquamvss_dense_tests_through_the_dropin(run):
    report = own_tests.run(FOLDER, run)
    outcomes = report["outcomes"]
    ran = {own_tests.base_id(n) for n in outcomes}
    assert ran == set(own_tests.REACHES), "a test is not listed, or gone"
    got = {n: o for n, o in outcomes.items()}
    want = {n: own_tests.expected(run, n) for n in outcomes}
    assert got == want
    # every public function the test modules import is the drop-in's in
    # the swapped runs and AquaMVS's in the baseline
    imported = report["imported"]
    assert len(imported) == len(own_tests.FILES)
    flags = [flag for names in imported.values() for flag in names.values()]
    assert len(flags) == sum(len(v) for v in plugin.SWAPPED.values())
    assert all(flags) if run != "theirs" else not any(flags)


@needs_aquamvs
@pytest.mark.parametrize("parity", ["aquamvs", "textbook"])
def test_the_swapped_modules_hold_the_dropin_with_its_parity(parity):
    from aquaprof.mvs import aquamvs as dropin
    module = plugin.swapped_module(AQ.plane_sweep,
                                   plugin.SWAPPED["plane_sweep"], parity)
    assert module.__name__ == "aquamvs.dense.plane_sweep"
    assert module.build_cost_volume.func is dropin.build_cost_volume
    assert module.build_cost_volume.keywords == {"parity": parity}
    assert module.extract_depth is dropin.extract_depth
    # what the drop-in does not offer stays AquaMVS's
    assert module._bgr_to_gray is AQ.plane_sweep._bgr_to_gray
    assert AQ.plane_sweep.build_cost_volume.__module__ == \
        "aquamvs.dense.plane_sweep"


def test_every_listed_failure_is_a_listed_test_with_a_reason():
    for (run, test), why in own_tests.FAILS.items():
        assert run in plugin.RUNS and run != "theirs"
        assert test in own_tests.REACHES and len(why) > 40

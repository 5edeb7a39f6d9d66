"""The gate's advice for a change within the noise names only what could
tell: thread CPU time (--aquaprof-measure=cpu) is blind to a stage that
waits (its wait made longer reads "no regression" on CPU time) and to a
test that opens no stage (its CPU time is not recorded), so it is not
offered for them."""
from pathlib import Path

import pytest

import aquaprof as ap
from plugin_args import PLUGIN, SUITE_HEAD

pytest_plugins = ["pytester"]

SUITE = SUITE_HEAD + """
def test_waits(aquaprof):
    for _ in range(10):
        with ap.stage("wait"):
            time.sleep({wait})

def test_no_stage(aquaprof):
    time.sleep({wait} * 10)
"""


@pytest.fixture
def suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(Path(ap.__file__).parent.parent))

    def run(*args, wait):
        pytester.makepyfile(test_suite=SUITE.format(wait=wait))
        result = pytester.runpytest_subprocess(
            *PLUGIN, "-p", "no:cacheprovider", *args)
        return result, result.stdout.str()
    return run


def test_cpu_time_is_offered_only_where_it_could_tell(suite, pytester):
    # base runs 2 ms and 8 ms a call, the new 25 ms: three times their
    # mean and more, but two runs this far apart cannot tell it from
    # chance: "within the noise", with what would tell
    base = pytester.path / "base"
    for n, wait in enumerate((0.002, 0.008)):
        suite(f"--aquaprof={base / f'run{n}'}", wait=wait)[0] \
            .assert_outcomes(passed=2)
    result, out = suite(f"--aquaprof-compare={base}", "--aquaprof-fail=30%",
                        wait=0.025)
    lines = {line.split(": ")[0]: line for line in out.splitlines()
             if line.startswith("test_suite.py::")}
    noisy = "no regression shown, but within the noise"
    waits = lines["test_suite.py::test_waits"]
    assert noisy in waits, out
    # a sleep's CPU time does not move with it: CPU time would say "no
    # regression" of a wait made ten times longer
    assert "--aquaprof-measure=cpu" not in waits, out
    assert "(more base runs or --aquaprof-rounds would tell)" in waits, out
    whole = lines["test_suite.py::test_no_stage"]
    if noisy in whole:
        # under --aquaprof-measure=cpu this test compares nothing
        assert "--aquaprof-measure=cpu" not in whole, out

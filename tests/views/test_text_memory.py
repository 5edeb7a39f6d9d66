"""The text report's word on mem delta where stages' calls are shorter
than the RSS interval: what one keeps is charged to whichever is open at
the next sample, so the column alone may name the wrong stage."""
import aquaprof as ap
from aquaprof import Report
from crafted import report as crafted_report, stage

MS = 1_000_000
SAID = "! mem delta comes from RSS sampled every 1.0 ms"


def test_a_short_stage_keeping_memory_beside_a_flat_one_is_warned_of():
    kept = []
    with ap.Profiler() as prof:
        for _ in range(300):
            with ap.stage("cache_put"):
                kept.append(bytearray(1 << 20))
            with ap.stage("decode"):
                sum(range(20000))
    text = str(prof.report())
    assert SAID in text
    assert "cache_put (" in text and "decode (" in text


def crafted(ns, delta):
    stages = [stage("put", count=100, ns=ns), stage("decode", count=100,
                                                    ns=ns)]
    for s in stages:
        s["mem_delta"] = delta
    return Report.from_dict(crafted_report(stages, memory=True))


def test_calls_longer_than_the_interval_get_no_warning():
    assert SAID not in str(crafted(2 * MS, 200 << 20))


def test_memory_that_barely_moved_gets_no_warning():
    assert SAID not in str(crafted(10_000, 1 << 20))
    assert SAID in str(crafted(10_000, 200 << 20))

"""Shared pieces of the pytest-benchmark suite (`make bench`)."""
import pytest

import aquaprof as ap

LOOP = 1000     # stage pairs per benchmarked call: the per-op figure is /LOOP


def profiled_report(spans: int) -> ap.Report:
    """A report of `spans` calls of one stage (nested one level)."""
    outer, inner = ap.stage("outer"), ap.stage("inner")
    with ap.Profiler(max_spans=spans, memory=False) as prof:
        for _ in range(spans // 2):
            with outer:
                with inner:
                    pass
    return prof.report()


@pytest.fixture(scope="session")
def large_report():
    """200,000 spans: what the exporters chew on."""
    return profiled_report(200_000)

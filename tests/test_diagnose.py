"""diagnose(): planted workloads whose class is known are classified so."""
import time

import numpy as np
import pytest

import aquaprof as ap
from conftest import busy


@pytest.fixture(scope="module")
def report():
    with ap.Profiler(memory_interval=0.001, cpu_resolution=0) as prof:
        with ap.stage("sleep"):              # I/O-like wait
            time.sleep(0.06)
        with ap.stage("compute"):            # a busy loop
            busy(0.05)
        with ap.stage("allocate"):           # 400 MiB touched, kept
            block = np.ones(400 << 20 >> 3)
            busy(0.03)
        with ap.stage("half"):               # computes 2/3, then waits
            busy(0.03)
            time.sleep(0.015)
    del block
    return prof.report()


def test_planted_workloads_are_classified(report):
    found = {f.path: f for f in report.diagnose(top=4)}
    assert found["sleep"].kind == "waiting"
    assert found["compute"].kind == "cpu-bound"
    assert found["half"].kind == "mixed"
    assert "allocation-heavy" in found["allocate"].also
    assert "allocation-heavy" not in found["compute"].also
    for f in found.values():
        assert "wall" in f.evidence and f.fix and f.verify


def test_the_printed_report_ends_with_the_diagnosis(report):
    text = str(report)
    assert "Diagnosis (details: report.diagnose()):" in text
    assert "sleep: waiting; thread CPU time" in text
    assert text.index("Diagnosis") > text.index("bottleneck")
    full = str(report.diagnose())
    assert "GPU classes" in full and "verify:" in full


def test_bad_top_is_refused(report):
    with pytest.raises(ValueError, match="top"):
        report.diagnose(top=0)


def test_nothing_to_diagnose():
    with ap.Profiler() as prof:
        pass
    assert "no stage" in str(prof.report().diagnose())

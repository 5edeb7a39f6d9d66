"""Processes that bear one name but their pids (a DataLoader's `worker 0`
started anew each epoch) are one frame in the flamegraph and the folded
stacks: a frame a pid made a comb of hundreds of frames too narrow to
read, each holding a sliver of the same work."""
import multiprocessing
import sys
import time

import pytest

import aquaprof as ap

pytestmark = pytest.mark.skipif(sys.platform != "linux",
                                reason="children are captured by fork")


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        sum(range(1000))


@pytest.fixture(scope="module")
def report():
    fork = multiprocessing.get_context("fork")
    with ap.Profiler(sample=0.001) as prof:
        for _ in range(3):
            child = fork.Process(target=busy, args=(0.15,), name="decoder")
            child.start()
            child.join()
        with ap.stage("main"):
            busy(0.05)
    return prof.report()


def test_processes_of_one_name_fold_into_one_frame(report, tmp_path):
    labels = [p["label"] for p in report.processes]
    assert sum(label.startswith("decoder (pid ") for label in labels) == 3
    roots = {line.split(";", 1)[0] for line in
             report.to_folded(tmp_path / "f.txt").read_text().splitlines()}
    assert "decoder (all pids)" in roots
    assert not any(root.startswith("decoder (pid") for root in roots)


def test_the_flamegraph_draws_them_as_one_frame(report, tmp_path):
    svg = report.to_flamegraph(tmp_path / "f.svg").read_text()
    assert "decoder (all pids): " in svg     # its tooltip
    assert "decoder (pid" not in svg

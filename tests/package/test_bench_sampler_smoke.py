"""The sampler benchmark's scripts at a size for the suite, so that they
cannot rot: the pipeline workload runs and records its four stages,
bench_sampler refuses bad arguments, and its children and parsers still
speak the format the parent reads. The figures come from running
benchmarks/bench_sampler.py itself, never from here."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

import aquaprof as ap

pytest.importorskip("torch")  # installed by `make test`

from repo_paths import ROOT  # noqa: E402
BENCH = ROOT / "benchmarks"
sys.path.insert(0, str(BENCH))
import bench_sampler  # noqa: E402
import pipeline_workload as workload  # noqa: E402


def run_script(name, *args):
    return subprocess.run([sys.executable, str(BENCH / name), *args],
                          capture_output=True, text=True, timeout=300)


def test_workload_script_prints_its_run():
    out = run_script("pipeline_workload.py", "--frames", "3")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert got["frames"] == 3
    assert got["seconds"] > 0
    assert got["detections"] > 0


def test_workload_refuses_no_frames():
    out = run_script("pipeline_workload.py", "--frames", "0")
    assert out.returncode == 2
    assert "--frames must be >= 1" in out.stderr
    with pytest.raises(ValueError, match="count must be >= 1"):
        workload.make_frames(0)


def test_workload_runs_each_part_in_its_stage():
    frames = workload.make_frames(4)
    model = workload.build_model()
    with ap.Profiler(memory=False) as prof:
        counts = workload.run(frames, model)
    rep = prof.report()
    for stage in ("load", "preprocess", "model", "postprocess"):
        assert rep[stage].count == 4
    # a profiler must not change what the pipeline computes
    assert workload.run(frames, model) == counts


@pytest.mark.parametrize("argv, message", [
    (["--repeats", "0"], "must be >= 1, got 0"),
    (["--repeats", "two"], "expected an integer, got 'two'"),
    (["--frames", "-3"], "must be >= 1, got -3"),
    (["--planted-seconds", "0"], "must be in (0, 600], got 0"),
    (["--planted-seconds", "nan"], "must be in (0, 600], got nan"),
    (["--planted-seconds", "soon"], "expected seconds, got 'soon'"),
    (["--planted-period", "-1"], "must be in (0, 600], got -1"),
    (["--planted-seconds", "1", "--planted-period", "2"],
     "--planted-period (2 s) is longer than --planted-seconds (1 s)"),
    (["--skip", "everything"], "invalid choice: 'everything'"),
    (["--child", "planted", "--kind", "sleep"],
     "--child planted needs --tool and --kind"),
    (["--child", "nothing"], "invalid choice: 'nothing'"),
])
def test_bench_sampler_refuses_bad_arguments(argv, message, capsys):
    with pytest.raises(SystemExit) as stop:
        bench_sampler.main(argv)
    assert stop.value.code == 2
    assert message in capsys.readouterr().err


def test_bench_sampler_defaults_are_the_targets():
    args = bench_sampler.parser().parse_args([])
    assert (args.repeats, args.frames) == (5, 200)
    assert (args.planted_seconds, args.planted_period) == (1.5, 0.01)
    assert args.skip is None and args.child is None
    assert bench_sampler.INTERVAL == 0.001


def test_bare_child_reports_the_timed_pipeline():
    out = run_script("bench_sampler.py", "--child", "bare", "--frames", "2")
    assert out.returncode == 0, out.stderr
    got = bench_sampler.parse_child(out.stdout)
    assert got["mode"] == "bare" and got["seconds"] > 0
    assert got["counts"]["detections"] > 0


def test_sample_child_reports_its_samples():
    out = run_script("bench_sampler.py", "--child", "sample", "--frames",
                     "4")
    assert out.returncode == 0, out.stderr
    got = bench_sampler.parse_child(out.stdout)
    assert got["mode"] == "sample" and got["seconds"] > 0
    assert 0 < got["samples"] and got["rounds"] > 0
    assert got["lost"] == 0
    assert got["hot"] and all(0 < own <= 1 for _, own in got["hot"])


@pytest.mark.parametrize("tool", bench_sampler.PLANTED_TOOLS)
def test_planted_child_gives_both_shares(tool):
    if tool == "pyinstrument":   # make test installs it; a bare GPU image may not
        pytest.importorskip("pyinstrument")
    out = run_script("bench_sampler.py", "--child", "planted", "--tool",
                     tool, "--kind", "numpy",
                     "--planted-seconds", "0.1", "--planted-period",
                     "0.02")
    assert out.returncode == 0, out.stderr
    got = bench_sampler.parse_child(out.stdout)
    for shares in (got["measured"], got["reported"]):
        # both functions seen; no figure judged here (a short run on a
        # shared machine): the script's own run judges them
        assert 0 < shares["a"] < 1 and 0 < shares["b"] < 1
        assert shares["a"] + shares["b"] <= 1.0 + 1e-9
    assert got["samples"] > 0


def test_pyinstrument_shares_count_only_the_stage():
    me = bench_sampler.__file__

    def frame(function, file=me):
        return f"{function}\x00{file}\x001"
    body = frame("stage_body")
    records = [
        ([frame("<module>"), body, frame("a")], 0.003),
        ([frame("<module>"), body, frame("a"), frame("len", "<built-in>")],
         0.003),
        ([frame("<module>"), body, frame("b"), frame("sort", "np.py")],
         0.002),
        ([frame("<module>"), frame("a")], 5.0),     # outside the stage
        ([frame("<module>"), body, frame("a", "other.py")], 0.002),
    ]
    got = bench_sampler.pyinstrument_shares(records)
    assert got == pytest.approx({"a": 0.6, "b": 0.2})
    assert bench_sampler.pyinstrument_shares([]) == {"a": 0.0, "b": 0.0}


def test_pyspy_samples_are_those_inside_the_pipeline():
    raw = ("<module> (bench_sampler.py:9);timed_run (pipeline_workload.py:"
           "180);run (pipeline_workload.py:160);iou (pipeline_workload.py:"
           "120) 41\n"
           "<module> (bench_sampler.py:9);make_frames (pipeline_workload.py"
           ":50) 7\n"
           "<module> (bench_sampler.py:9);timed_run (pipeline_workload.py:"
           "180);run (pipeline_workload.py:160) 2\n")
    assert bench_sampler.pyspy_window_samples(raw) == 43
    assert bench_sampler.pyspy_window_samples("") == 0


def test_parse_child_finds_the_marked_line():
    text = "py-spy> Sampling\nBENCH {\"seconds\": 1.5}\nother\n"
    assert bench_sampler.parse_child(text) == {"seconds": 1.5}
    assert bench_sampler.parse_child("no result\n") is None


class FakeReport:
    """What aquaprof_shares reads of a report with samples, where the
    stage's statistics have no hot(): the samples data alone."""

    def __init__(self, data):
        self.data = data

    def __getitem__(self, path):
        return object()

    def to_dict(self):
        return self.data


def test_aquaprof_shares_from_samples_data_count_only_the_stage():
    me = bench_sampler.__file__
    frames = [["<module>", me, 1], ["a", me, 2], ["b", me, 3],
              ["sort", "np.py", 4], ["a", "other.py", 5]]
    stacks = [                   # process tid stage frames count wall cpu
        [0, 7, 1, [0, 1], 3, 3_000, 3_000],
        [0, 7, 1, [0, 2, 3], 1, 1_000, 1_000],
        [0, 7, 1, [0, 4], 1, 1_000, 1_000],
        [0, 7, 0, [0, 1], 50, 50_000, 50_000],      # another stage
        [0, 7, -1, [0, 2], 50, 50_000, 0],          # no stage open
    ]
    rep = FakeReport({"stages": [{"name": "load"}, {"name": "planted"}],
                      "samples": {"frames": frames, "stacks": stacks}})
    shares, source = bench_sampler.aquaprof_shares(rep)
    assert source == "samples data"
    assert shares == pytest.approx({"a": 0.6, "b": 0.2})

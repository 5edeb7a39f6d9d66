"""`make demo` runs `python -m aquaprof demo`: check it as a user sees it."""
import json
import os
import subprocess
import xml.etree.ElementTree as ET
import sys
from pathlib import Path

import aquaprof as ap

from flamegraph_frames import frames_by_path
from repo_paths import ROOT  # noqa: E402
STAGES = ("load", "undistort", "build_cost_volume", "extract_depth", "fuse",
          "evaluate")


def run_demo(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof", "demo", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT)


def test_demo_profiles_the_pipeline_and_saves_the_report(tmp_path):
    out = run_demo("--height", "96", "--width", "128", "--views", "3",
                   "--depths", "32", "--window", "7", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "Top 3 bottlenecks by self time:" in out.stdout
    assert "depth accuracy, flat scene, 3 views, 32 depths" in out.stdout
    rep = ap.Report.load(tmp_path / "report.json")
    assert [rep[s].count for s in STAGES] == [1] * 6
    assert str(rep) in out.stdout
    median_mm = float(out.stdout.split("median |error|")[1].split()[0])
    step_mm = float(out.stdout.split("(step ")[1].split()[0])
    assert median_mm < step_mm     # the plane is found within a step
    trace = json.loads((tmp_path / "trace.json").read_text())
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert {e["name"] for e in slices if e["cat"] == "stage"} == \
        set(STAGES)
    # the demo samples call stacks: code inside the stages, by name
    code = {e["name"] for e in slices if e["cat"] == "code"}
    assert any(name.startswith("build_cost_volume (") for name in code)
    assert "hottest code:" in out.stdout
    svg = ET.parse(tmp_path / "flamegraph.svg").getroot()
    assert {path for path, g in frames_by_path(svg).items()
            if g.get("class") == "f"} == {""} | set(STAGES)
    assert any(g.get("class") == "f c" for g in svg.iter())


def test_demo_rejects_bad_arguments():
    for args, message in ((("--views", "1"), "--views must be at least 2"),
                          (("--window", "4"), "--window must be an odd"),
                          (("--device", "tpu"), "invalid choice")):
        out = run_demo(*args)
        assert out.returncode == 2
        assert message in out.stderr


def test_demo_on_cuda_runs_where_there_is_a_gpu_and_says_why_not_elsewhere(
        tmp_path):
    from aquaprof.integrations.demo import cuda_problem
    problem = cuda_problem()
    out = run_demo("--device", "cuda", "--height", "96", "--width", "128",
                   "--views", "3", "--depths", "32", "--window", "7",
                   "--out", str(tmp_path))
    if problem:
        assert out.returncode == 2
        assert f"--device cuda: {problem}" in out.stderr
    else:
        assert out.returncode == 0, out.stderr
        rep = ap.Report.load(tmp_path / "report.json")
        assert [rep[s].count for s in STAGES] == [1] * 6
        median_mm = float(out.stdout.split("median |error|")[1].split()[0])
        step_mm = float(out.stdout.split("(step ")[1].split()[0])
        assert median_mm < step_mm

"""`make demo` runs `python -m aquaprof.demo`: check it as a user sees it."""
import os
import subprocess
import sys
from pathlib import Path

import aquaprof as ap

ROOT = Path(__file__).resolve().parent.parent


def run_demo(*args):
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "aquaprof.demo", *args],
                          capture_output=True, text=True, env=env, cwd=ROOT)


def test_demo_prints_the_report_and_saves_it(tmp_path):
    out = run_demo("--pairs", "2", "--out", str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert "Top 3 bottlenecks by self time:" in out.stdout
    assert "mean disparity error over 2 pairs" in out.stdout
    rep = ap.Report.load(tmp_path / "report.json")
    assert rep["frame/match/disparity"].count == 2 * 32
    assert rep["render"].count == 2 and len(rep.threads) >= 2
    assert str(rep) in out.stdout


def test_demo_rejects_bad_arguments():
    out = run_demo("--pairs", "0")
    assert out.returncode == 2
    assert "--pairs must be at least 1" in out.stderr

"""The verdict in a real training loop: a torch DataLoader whose 2 workers
were made twice as slow is slower, however its median call moved, and the
same code run again is not (benchmarks/slow_loader.py's loop)."""
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")        # installed by `make test`

from repo_paths import ROOT  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
from slow_loader import train  # noqa: E402


def test_slower_loader_workers_are_caught_and_a_rerun_is_not(tmp_path):
    base = [train(0.0015, tmp_path / f"base{i}.json") for i in range(5)]
    again = train(0.0015, tmp_path / "again.json")
    slow = train(0.003, tmp_path / "slow.json")
    import aquaprof as ap
    base = [ap.Report.load(p) for p in base]
    judged = {c.path: c for c in ap.Report.load(slow).compare(base).changes}
    data = judged["data"]
    assert data.verdict == "slower", data.summary()
    assert data.judgement.figure in ("total", "tail")
    assert data.change > 0.5
    assert "5 vs 1 runs" in data.summary()
    rerun = {c.path: c for c in ap.Report.load(again).compare(base).changes}
    assert rerun["data"].verdict != "slower", rerun["data"].summary()

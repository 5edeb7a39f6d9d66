"""A planted regression in a real training loop: a torch DataLoader whose
2 workers are made twice as slow, judged by `aquaprof compare`.

Each run trains a small model for 40 steps; the loader's batches come
from 2 worker processes whose __getitem__ sleeps (the base: 1.5 ms an
item; the slow run: 3 ms), a stage, `getitem`, that the workers deliver
when the Profiler stops with the loader's iterator still alive. The main process waits for most batches,
some briefly and some long: the median wait jumps between runs of the
same code, and misses the long waits growing. (train()'s
step_iterations=60 makes the model the bottleneck instead: a batch is
then mostly ready, benchmarks/loader_verdicts.py's second shape.)

    python benchmarks/slow_loader.py [OUT_DIR]

writes base1.json ... base5.json (five runs of the base), again.json (the
base's code once more) and slow.json to OUT_DIR (a temporary folder by
default) and prints what `aquaprof compare` says of again and of slow
against the five base runs, and of slow against the first base run
alone. tests/analysis/test_compare_loader.py runs the same loop.
"""
from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils.data import DataLoader, Dataset

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aquaprof as ap  # noqa: E402

STEPS = 40
BATCH = 8


class Slow(Dataset):
    """Items that take `seconds` each to make, as a decoder would."""

    def __init__(self, seconds: float):
        self.seconds = seconds

    def __len__(self) -> int:
        return STEPS * BATCH

    @ap.stage("getitem")
    def __getitem__(self, i: int) -> torch.Tensor:
        time.sleep(self.seconds)
        return torch.full((16,), float(i % 7))


def train(item_seconds: float, path: Path, step_iterations: int = 20
          ) -> ap.Report:
    """40 steps of a small model fed by 2 workers, each step
    step_iterations passes over its batch; the report saved."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 256), torch.nn.ReLU(),
                                torch.nn.Linear(256, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loader = DataLoader(Slow(item_seconds), batch_size=BATCH, num_workers=2)
    with ap.Profiler() as prof:
        batches = iter(loader)
        for _ in range(STEPS):
            with ap.stage("data"):
                x = next(batches)
            with ap.stage("step"):
                for _ in range(step_iterations):
                    loss = model(x).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
    return prof.report().save(path)


def main() -> None:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else \
        Path(tempfile.mkdtemp())
    out.mkdir(parents=True, exist_ok=True)
    base = [str(train(0.0015, out / f"base{i}.json")) for i in range(1, 6)]
    train(0.0015, out / "again.json")
    train(0.003, out / "slow.json")
    more = [arg for path in base[1:] for arg in ("--base", path)]
    for args in ([base[0], str(out / "again.json"), *more],
                 [base[0], str(out / "slow.json"), *more],
                 [base[0], str(out / "slow.json")]):
        print(f"$ aquaprof compare {' '.join(args)}", flush=True)
        subprocess.run([sys.executable, "-m", "aquaprof", "compare", *args],
                       cwd=ROOT)
        print(flush=True)


if __name__ == "__main__":
    main()

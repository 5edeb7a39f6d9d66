"""A small PyTorch CNN trained as a new user would profile it: a
DataLoader with two worker processes over a synthetic dataset, a few
epochs of a few steps, under ``Profiler(sample=0.001,
torch_modules=True)``. Child capture is on by default, so the workers
arrive as processes of their own, with their queue feeder and other
threads that wait all run.

    python tests/support/training_script.py REPORT.json [--epochs N] [--steps N]
    python tests/support/training_script.py --no-profiler [--seconds S]

Writes the report's JSON to REPORT.json. With --no-profiler it trains
under no Profiler of its own (its stages are marked all the same), for
`aquaprof run` or another profiler to run it; --seconds keeps training,
epoch after epoch, for that long. The views' tests and
benchmarks/bench_view_sizes.py run it; docs/make_screenshots.py draws
the docs' screenshots from it.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
import aquaprof as ap                    # noqa: E402  (this checkout's)

BATCH = 16


class Images(Dataset):
    """Noisy 3x32x32 images with a label each, made on demand (a
    slowish __getitem__, as decoding would be)."""

    def __init__(self, count: int):
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, i: int):
        with ap.stage("getitem"):
            rng = np.random.default_rng(i)
            image = rng.standard_normal((3, 32, 32)).astype(np.float32)
            # a smoothing pass stands for decoding and augmenting
            image = np.cumsum(image, axis=2) / 32.0
            return torch.from_numpy(image), int(i % 10)


class SmallCNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(32 * 8 * 8, 10)

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))


def train(epochs: int, steps: int, seconds: float = 0.0) -> None:
    """`epochs` epochs of `steps` steps, and more until `seconds` have
    passed."""
    torch.manual_seed(0)
    model = SmallCNN()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    loader = DataLoader(Images(BATCH * steps), batch_size=BATCH,
                        num_workers=2)
    until = time.monotonic() + seconds
    epoch = 0
    while epoch < epochs or time.monotonic() < until:
        epoch += 1
        with ap.stage("epoch"):
            for images, labels in loader:
                with ap.stage("step"):
                    with ap.stage("forward"):
                        loss = loss_fn(model(images), labels)
                    with ap.stage("backward"):
                        optimizer.zero_grad()
                        loss.backward()
                    with ap.stage("optimizer"):
                        optimizer.step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("report", nargs="?",
                        help="where the report's JSON goes")
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--seconds", type=float, default=0.0,
                        help="train at least this long")
    parser.add_argument("--no-profiler", action="store_true",
                        help="no Profiler of the script's own")
    args = parser.parse_args()
    if not args.no_profiler and args.report is None:
        parser.error("the report's path is needed, or --no-profiler")
    torch.set_num_threads(1)     # two cores: the workers need the other
    if args.no_profiler:
        train(args.epochs, args.steps, args.seconds)
        return
    with ap.Profiler(sample=0.001, torch_modules=True) as prof:
        train(args.epochs, args.steps, args.seconds)
    print(prof.report().save(args.report))


if __name__ == "__main__":
    main()

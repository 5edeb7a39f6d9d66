"""A realistic CPU pipeline for measuring what a profiler costs: frames
kept as compressed bytes are decoded (load), normalised and downsampled
with NumPy (preprocess), run through a small CNN in torch, one thread,
no grad (model), and turned into detections by pure-Python loops: a scan
of the score map, greedy non-maximum suppression and matching against
the previous frame's detections (postprocess). Each part runs in its own
aquaprof stage, which costs one flag check when no Profiler runs, so the
same code is the bare run and the profiled one.

The mix is what profilers are judged on: C code reached from Python
(zlib, NumPy, torch) next to Python loops whose speed a tracing profiler
changes.

    python benchmarks/pipeline_workload.py [--frames 200]

prints one JSON line: frames, seconds (the pipeline alone, inputs and
model built beforehand) and the detections found.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import zlib
from pathlib import Path
from typing import List, Sequence, Tuple

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import aquaprof as ap  # noqa: E402

HEIGHT = WIDTH = 256          # decoded frame, uint8 HxWx3
CLASSES = 5
TOP_SHARE = 0.02              # of each map's cells, the candidates
IOU_LIMIT = 0.3
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)

LOAD = ap.stage("load")
PREPROCESS = ap.stage("preprocess")
MODEL = ap.stage("model")
POSTPROCESS = ap.stage("postprocess")

Box = Tuple[float, float, float, float, float, int]   # x0 y0 x1 y1 score cls


def make_frames(count: int, seed: int = 0) -> List[bytes]:
    """`count` frames as zlib-compressed bytes: moving blobs over a
    gradient, with noise so that the bytes do not compress to nothing."""
    if count < 1:
        raise ValueError(f"count must be >= 1, got {count}")
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:HEIGHT, 0:WIDTH].astype(np.float32)
    frames = []
    for i in range(count):
        img = np.empty((HEIGHT, WIDTH, 3), dtype=np.float32)
        img[...] = (xx / WIDTH * 96)[..., None]
        for k in range(6):
            cy = (17 * k + 3 * i) % HEIGHT
            cx = (29 * k + 5 * i) % WIDTH
            blob = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 60.0)
            img[..., k % 3] += 150 * blob
        img += rng.normal(0, 12, img.shape).astype(np.float32)
        raw = np.clip(img, 0, 255).astype(np.uint8).tobytes()
        frames.append(zlib.compress(raw, 1))
    return frames


def build_model(seed: int = 0):
    """A small fully convolutional detector: a score map per class at a
    quarter of the input's resolution (after preprocess halves it)."""
    import torch
    torch.manual_seed(seed)
    torch.set_num_threads(1)
    net = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(16, 32, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(32, 48, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(48, CLASSES, 1), torch.nn.Sigmoid())
    return net.eval()


def decode(blob: bytes) -> np.ndarray:
    raw = zlib.decompress(blob)
    return np.frombuffer(raw, dtype=np.uint8).reshape(HEIGHT, WIDTH, 3)


def prepare(img: np.ndarray) -> np.ndarray:
    """Normalised float32 CHW at half resolution (2x2 box filter)."""
    x = (img.astype(np.float32) / 255.0 - MEAN) / STD
    x = x.reshape(HEIGHT // 2, 2, WIDTH // 2, 2, 3).mean(axis=(1, 3))
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def infer(model, x: np.ndarray) -> List[List[List[float]]]:
    import torch
    with torch.no_grad():
        out = model(torch.from_numpy(x)[None])[0]
    return out.tolist()


def candidates(scores: List[List[List[float]]]) -> List[Box]:
    """Local maxima among the top TOP_SHARE of each class's map become
    boxes around them, in input pixels (the map is a quarter of the
    frame's resolution). A per-map cut, since an untrained detector's
    scores sit in a narrow band."""
    boxes: List[Box] = []
    for cls, plane in enumerate(scores):
        ranked = sorted(v for row in plane for v in row)
        cut = ranked[int(len(ranked) * (1.0 - TOP_SHARE))]
        last = len(plane) - 1
        for y, row in enumerate(plane):
            above = plane[max(y - 1, 0)]
            below = plane[min(y + 1, last)]
            for x, s in enumerate(row):
                if s < cut:
                    continue
                lo, hi = max(x - 1, 0), x + 2
                if s < max(row[lo:hi]) or s < max(above[lo:hi]) or \
                        s < max(below[lo:hi]):
                    continue
                cx, cy = 4.0 * x + 2.0, 4.0 * y + 2.0
                half = 6.0 + 40.0 * (s - cut)
                boxes.append((cx - half, cy - half, cx + half, cy + half,
                              s, cls))
    return boxes


def iou(a: Box, b: Box) -> float:
    ix = min(a[2], b[2]) - max(a[0], b[0])
    iy = min(a[3], b[3]) - max(a[1], b[1])
    if ix <= 0.0 or iy <= 0.0:
        return 0.0
    inter = ix * iy
    union = ((a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1])
             - inter)
    return inter / union


def suppress(boxes: List[Box]) -> List[Box]:
    """Greedy non-maximum suppression per class."""
    kept: List[Box] = []
    for box in sorted(boxes, key=lambda b: b[4], reverse=True):
        if all(k[5] != box[5] or iou(k, box) < IOU_LIMIT for k in kept):
            kept.append(box)
    return kept


def match(previous: Sequence[Box], current: Sequence[Box]) -> int:
    """Detections of this frame that continue one of the last frame's."""
    matched = 0
    for box in current:
        best = 0.0
        for old in previous:
            if old[5] == box[5]:
                best = max(best, iou(old, box))
        if best > 0.1:
            matched += 1
    return matched


def run(frames: Sequence[bytes], model) -> dict:
    """The pipeline over `frames`; its counts (the same for a bare run
    and a profiled one: a profiler must not change the result)."""
    detections = tracked = 0
    previous: List[Box] = []
    for blob in frames:
        with LOAD:
            img = decode(blob)
        with PREPROCESS:
            x = prepare(img)
        with MODEL:
            scores = infer(model, x)
        with POSTPROCESS:
            kept = suppress(candidates(scores))
            tracked += match(previous, kept)
            previous = kept
        detections += len(kept)
    return {"detections": detections, "tracked": tracked}


def timed_run(frames: Sequence[bytes], model) -> Tuple[float, dict]:
    """Seconds of run() alone, and its counts."""
    t0 = time.perf_counter()
    counts = run(frames, model)
    return time.perf_counter() - t0, counts


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--frames", type=int, default=200)
    args = parser.parse_args(argv)
    if args.frames < 1:
        parser.error(f"--frames must be >= 1, got {args.frames}")
    frames = make_frames(args.frames)
    model = build_model()
    run(frames[:2], model)                   # torch's first call is slow
    seconds, counts = timed_run(frames, model)
    print(json.dumps({"frames": args.frames, "seconds": seconds, **counts}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

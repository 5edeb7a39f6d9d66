"""The sampled call tree of a stage as text: what `aquaprof run` prints
for a script, so that a script with no stages of its own still shows
where its time went, the way a tracing profiler's tree would.

Each line gives a function's share of the stage's sampled wall time,
with and without its callees, and where it is defined. Branches under
`min_share` of the root are folded into one "(N more)" line, so that
the tree fits a terminal.
"""
from __future__ import annotations

import os
from typing import Any, Dict, List, Optional, Sequence, Tuple

Frames = Tuple[int, ...]


class _Node:
    __slots__ = ("total", "own", "children")

    def __init__(self) -> None:
        self.total = 0
        self.own = 0
        self.children: Dict[int, "_Node"] = {}


def _in_stage(stage: int, wanted: Optional[set]) -> bool:
    return wanted is None or stage in wanted


def _descendants(stages: Sequence[Dict[str, Any]], root: int) -> set:
    """root and every stage below it."""
    found = {root}
    for i, s in enumerate(stages):     # parents come before children
        if s["parent"] in found:
            found.add(i)
    return found


def _stacks(data: Dict[str, Any], stage: Optional[int],
            start_file: Optional[str]) -> List[Tuple[Frames, int]]:
    samples = data["samples"]
    wanted = None if stage is None else _descendants(data["stages"], stage)
    files = [f[1] for f in samples["frames"]]
    out = []
    for row in samples["stacks"]:
        if not _in_stage(row[2], wanted):
            continue
        frames: Frames = tuple(row[3])
        if start_file is not None:
            first = next((i for i, f in enumerate(frames)
                          if files[f] == start_file), None)
            if first is not None:
                frames = frames[first:]
        out.append((frames, row[5]))
    return out


def _common_depth(stacks: Sequence[Tuple[Frames, int]]) -> int:
    """How many outer frames all stacks share, less one: the frames above
    the code that opened the stage, its deepest kept as the root."""
    if not stacks:
        return 0
    first = stacks[0][0]
    depth = min(len(f) for f, _ in stacks)
    for i in range(depth):
        if any(f[i] != first[i] for f, _ in stacks):
            return max(i - 1, 0)
    return max(depth - 1, 0)


def _tree(stacks: Sequence[Tuple[Frames, int]], skip: int) -> _Node:
    root = _Node()
    for frames, wall in stacks:
        node = root
        root.total += wall
        for f in frames[skip:]:
            node = node.children.setdefault(f, _Node())
            node.total += wall
        node.own += wall
    return root


def _label(frame: Sequence[Any]) -> str:
    function, file, line = frame
    return f"{function} ({os.path.basename(file)}:{line})"


def call_tree(data: Dict[str, Any], stage: Optional[int] = None, *,
              start_file: Optional[str] = None, min_share: float = 0.01,
              max_depth: int = 40) -> List[str]:
    """The lines of the call tree of samples filed under `stage` (a
    report stage index, its sub-stages included; None: all samples) of a
    report's data. start_file drops each stack's frames above the first
    one in that file (the script's, under `aquaprof run`). [] when there
    are no such samples."""
    if "samples" not in data:
        return []
    stacks = _stacks(data, stage, start_file)
    root = _tree(stacks, _common_depth(stacks))
    if root.total <= 0:
        return []
    frames = data["samples"]["frames"]
    lines = [f"{'total':>6} {'own':>6}  function (file:line)"]
    todo: List[Tuple[int, _Node, int]] = []

    def expand(node: _Node, depth: int) -> None:
        big = [(f, n) for f, n in _biggest(node.children)
               if n.total >= min_share * root.total]
        small = len(node.children) - len(big)
        if small:
            todo.append((-small, node, depth))
        todo.extend((f, n, depth) for f, n in reversed(big))

    expand(root, 0)
    while todo:
        frame, node, depth = todo.pop()
        indent = "  " * depth
        if frame < 0:                     # small branches, folded
            lines.append(f"{'':>6} {'':>6}  {indent}({-frame} more under "
                         f"{min_share:.0%})")
            continue
        lines.append(f"{node.total / root.total:>6.1%} "
                     f"{node.own / root.total:>6.1%}  {indent}"
                     f"{_label(frames[frame])}")
        if depth + 1 < max_depth:
            expand(node, depth + 1)
    return lines


def _biggest(children: Dict[int, _Node]) -> List[Tuple[int, _Node]]:
    return sorted(children.items(), key=lambda kv: -kv[1].total)

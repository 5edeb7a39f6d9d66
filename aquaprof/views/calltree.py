"""The sampled call tree of a stage as text: what `aquaprof run` prints
for a script, so that a script with no stages of its own still shows
where its time went, the way a tracing profiler's tree would.

Each line gives a function's share of the stage's sampled wall time,
with and without its callees, and where it is defined. Branches under
`min_share` of the whole are folded into one "(N more)" line, so that
the tree fits a terminal.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from ..report import subtree
from .code import Chain, labels, shared

if TYPE_CHECKING:
    from ..report import Report


class _Node:
    __slots__ = ("total", "own", "children")

    def __init__(self) -> None:
        self.total = 0
        self.own = 0
        self.children: Dict[int, "_Node"] = {}


def _chains(report: "Report", stage: str,
            start_file: Optional[str]) -> List[Tuple[Chain, int]]:
    """(frames, wall ns) of each stack sampled in the stage or below it,
    from its first frame in start_file (stacks without one left out)."""
    samples = report.samples or {"frames": [], "stacks": []}
    ids = {path: i for i, path in enumerate(report.stage_names)}
    parents = [ids[s.parent] if s.parent is not None else -1
               for s in sorted(report.stages, key=lambda s: s.id)]
    inside = subtree(parents, ids[stage])
    files = [f[1] for f in samples["frames"]]
    out = []
    for s in samples["stacks"]:
        if s[2] not in inside or not s[3]:
            continue
        chain: Chain = tuple(s[3])
        if start_file is not None:
            first = next((i for i, f in enumerate(chain)
                          if files[f] == start_file), None)
            if first is None:
                continue    # runpy or aquaprof before the file's code ran
            chain = chain[first:]
        out.append((chain, s[5]))
    return out


def _tree(stacks: Sequence[Tuple[Chain, int]]) -> _Node:
    """The stacks as a tree, without the frames all of them share but the
    deepest: those above the code that opened the stage."""
    skip = max(shared([c for c, _ in stacks]) - 1, 0) if stacks else 0
    root = _Node()
    for chain, wall in stacks:
        node = root
        root.total += wall
        for f in chain[skip:]:
            node = node.children.setdefault(f, _Node())
            node.total += wall
        node.own += wall
    return root


def call_tree(report: "Report", stage: str, *,
              start_file: Optional[str] = None, min_share: float = 0.01,
              max_depth: int = 40) -> List[str]:
    """The lines of the call tree of the samples filed under `stage` (a
    stage path; its sub-stages included). start_file drops each stack's
    frames above its first one in that file (the script's, under
    `aquaprof run`), and the stacks with none (runpy reading the file).
    [] when the stage has no samples."""
    root = _tree(_chains(report, stage, start_file))
    if root.total <= 0:
        return []
    names = labels(report.samples or {"frames": []})
    lines = [f"{'total':>6} {'own':>6}  function (file:line)"]
    todo: List[Tuple[int, _Node, int]] = []

    def expand(node: _Node, depth: int) -> None:
        big = sorted(((f, n) for f, n in node.children.items()
                      if n.total >= min_share * root.total),
                     key=lambda fn: -fn[1].total)
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
                     f"{node.own / root.total:>6.1%}  {indent}{names[frame]}")
        if depth + 1 < max_depth:
            expand(node, depth + 1)
    return lines

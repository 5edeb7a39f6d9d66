"""The sampled call tree of a stage as text: what `aquaprof run` prints
for a script, so that a script with no stages of its own still shows
where its time went, the way a tracing profiler's tree would.

Each line gives a function's share of the stage's sampled wall time,
with and without its callees, and where it is defined. Branches under
`min_share` of the whole are folded into one "(N more)" line, so that
the tree fits a terminal.

Folded (`fold=True`), the tree leads with the user's code, as
pyinstrument's does: each run of consecutive library frames in a stack
(site-packages, the standard library, frozen import machinery, files
outside the user's folders) keeps the library function the user's code
called, then one line "[N frames hidden] torch, importlib" for the
frames between, then the innermost frame where the stack ends in the
library, since that is where the time is spent (`Conv2d._conv_forward`
for a convolution). An import keeps none of its frames: it folds into
the user's frame that imported, as one hidden line whose own time is
the import's. User code that a library calls back (a module's
`forward`) stays, under the hidden line of the frames between.
"""
from __future__ import annotations

import os
import sysconfig
from typing import (TYPE_CHECKING, Dict, Iterable, List, Optional, Sequence,
                    Set, Tuple)

from ..model.report import subtree
from ..analysis.sampled_code import Chain, labels, shared

if TYPE_CHECKING:
    from ..model.report import Report

#: the key, among a node's children, of its folded library frames
HIDDEN = -1
#: the library name of Python's import machinery: a run of library
#: frames that starts there is an import, folded whole
IMPORTLIB = "importlib"
#: widest line the tree writes (deeper levels stop indenting, longer
#: names are cut in their middle)
WIDTH = 120
#: levels indented; deeper lines say their depth instead
MAX_INDENT = 20
#: libraries named on a hidden line, at most
MAX_LIBRARIES = 4
#: the library of code with no file of its own ("<string>": made by
#: exec, as dataclasses and namedtuple make methods): its caller's
CALLERS = ""
_PREFIX = 15                    # "100.0%   0.0%  "
_PACKAGE_DIRS = ("site-packages", "dist-packages")


class _Node:
    __slots__ = ("total", "own", "children", "hidden", "libraries")

    def __init__(self) -> None:
        self.total = 0
        self.own = 0
        self.children: Dict[int, "_Node"] = {}
        # of a HIDDEN node: the frames folded into it, and each
        # library's wall time there
        self.hidden: Set[int] = set()
        self.libraries: Dict[str, int] = {}


class Libraries:
    """Which sampled files are library code, and which library: a
    package under site-packages or dist-packages, a module of the
    standard library, a frozen module (`<frozen importlib._bootstrap>`
    is importlib), or a file outside every one of user_roots (named by
    its folder). A relative path, and one under a user root, is the
    user's; with no user roots only the first three are libraries.
    Code with no file ("<string>") is CALLERS: its caller's."""

    def __init__(self, user_roots: Iterable[str] = ()) -> None:
        self._stdlib = _prefixes(sysconfig.get_paths().get(key, "")
                                 for key in ("stdlib", "platstdlib"))
        self._user = _prefixes(user_roots)
        self._roots_given = bool(self._user)

    def of(self, path: str) -> Optional[str]:
        """The library that path belongs to; None for the user's code."""
        if path.startswith("<frozen ") and path.endswith(">"):
            return path[len("<frozen "):-1].split(".")[0]
        if path.startswith("<"):
            return CALLERS
        if not os.path.isabs(path):
            return None     # found from the cwd: the user's
        norm = os.path.normcase(os.path.normpath(path))
        parts = norm.replace("\\", "/").split("/")
        for i in range(len(parts) - 2, -1, -1):
            if parts[i] in _PACKAGE_DIRS:
                return _module_name(parts[i + 1])
        for prefix in self._stdlib:
            if norm.startswith(prefix):
                return _module_name(norm[len(prefix):].replace(
                    "\\", "/").split("/")[0])
        if not self._roots_given or any(norm.startswith(p)
                                        for p in self._user):
            return None
        return parts[-2] if len(parts) > 1 else _module_name(parts[-1])


def _prefixes(folders: Iterable[str]) -> List[str]:
    """Each folder as a path prefix, as given and with links resolved
    (a venv's or Debian's stdlib is reached both ways)."""
    out = set()
    for folder in folders:
        if not folder:
            continue
        for form in (os.path.abspath(folder), os.path.realpath(folder)):
            out.add(os.path.join(os.path.normcase(form), ""))
    return sorted(out)


def _module_name(file: str) -> str:
    return file.split(".")[0] or file


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


# (key, frames folded, their libraries): a frame's id, () and (), or
# HIDDEN, the frames and the library of each
Step = Tuple[int, Tuple[int, ...], Tuple[str, ...]]


def _kinds(chain: Chain,
           library: Sequence[Optional[str]]) -> List[Optional[str]]:
    """The library of each frame of chain (None: the user's), CALLERS
    resolved to the caller's."""
    kinds: List[Optional[str]] = []
    for f in chain:
        kind = library[f]
        kinds.append((kinds[-1] if kinds else None) if kind == CALLERS
                     else kind)
    return kinds


def _folded(chain: Chain, library: Sequence[Optional[str]]) -> List[Step]:
    """chain's steps once each run of library frames is folded."""
    kinds = _kinds(chain, library)
    steps: List[Step] = []
    i = 0
    while i < len(chain):
        if kinds[i] is None:
            steps.append((chain[i], (), ()))
            i += 1
            continue
        end = i
        while end < len(chain) and kinds[end] is not None:
            end += 1
        run = chain[i:end]
        steps += _folded_run(run, [k or "" for k in kinds[i:end]],
                             end == len(chain))
        i = end
    return steps


def _folded_run(run: Chain, kinds: Sequence[str],
                innermost: bool) -> List[Step]:
    """A run of library frames (kinds: the library of each): the
    function the user's code called, the frames between as one hidden
    step, and the innermost frame when the stack ends there (its own
    time is what the run cost). An import shows none of its frames:
    where it went is the import's own."""
    importing = IMPORTLIB in kinds
    first = 0 if kinds[0] == IMPORTLIB else 1
    end = len(run)
    if innermost and not importing and end - first >= 2:
        end -= 1                # the innermost frame, shown
    if end - first == 1 and not importing:
        first = end             # one frame hidden: shown instead
    steps: List[Step] = [(f, (), ()) for f in run[:first]]
    if end > first:
        steps.append((HIDDEN, tuple(run[first:end]), tuple(kinds[first:end])))
    return steps + [(f, (), ()) for f in run[end:]]


def _tree(stacks: Sequence[Tuple[Chain, int]],
          library: Optional[Sequence[Optional[str]]]) -> _Node:
    """The stacks as a tree, without the frames all of them share but the
    deepest: those above the code that opened the stage. Library frames
    folded where library (each frame's library, None for the user's) is
    given."""
    skip = max(shared([c for c, _ in stacks]) - 1, 0) if stacks else 0
    root = _Node()
    for chain, wall in stacks:
        steps = (_folded(chain[skip:], library) if library is not None
                 else [(f, (), ()) for f in chain[skip:]])
        node = root
        root.total += wall
        for key, frames, kinds in steps:
            node = node.children.setdefault(key, _Node())
            node.total += wall
            node.hidden.update(frames)
            for name in set(kinds):
                node.libraries[name] = node.libraries.get(name, 0) + wall
        node.own += wall
    return root


def call_tree(report: "Report", stage: str, *,
              start_file: Optional[str] = None, min_share: float = 0.01,
              max_depth: int = 40, fold: bool = False,
              user_roots: Sequence[str] = (),
              max_lines: Optional[int] = None) -> List[str]:
    """The lines of the call tree of the samples filed under `stage` (a
    stage path; its sub-stages included). start_file drops each stack's
    frames above its first one in that file (the script's, under
    `aquaprof run`), and the stacks with none (runpy reading the file).
    fold folds library frames (see the module's docstring), files
    outside user_roots counting as libraries. max_lines, when given,
    raises the share under which branches fold (2 %, 5 %, ... each
    "(N more under X)" line says which) until the tree fits, and cuts
    what still does not. [] when the stage has no samples."""
    return _tree_lines(report, _chains(report, stage, start_file),
                       min_share, max_depth, fold, user_roots, max_lines)


def threads_tree(report: "Report", *, min_share: float = 0.01,
                 max_depth: int = 40, fold: bool = False,
                 user_roots: Sequence[str] = (),
                 max_lines: Optional[int] = None
                 ) -> Tuple[List[str], List[Tuple[int, int]]]:
    """The call tree, as call_tree draws it, of the samples of the
    threads other than the program's main one, in their stages or not,
    but for the threads that only waited (views.threads.idle_threads: a
    pool's workers between jobs): where a script's work ran when it
    handed it to threads. Its lines and the threads it holds, (process,
    tid) in order."""
    from .threads import idle_threads, program_main
    skip = idle_threads(report) | program_main(report)
    samples = report.samples or {"stacks": []}
    theirs = [s for s in samples["stacks"]
              if s[3] and (s[0], s[1]) not in skip]
    chains = [(tuple(s[3]), s[5]) for s in theirs]
    return (_tree_lines(report, chains, min_share, max_depth, fold,
                        user_roots, max_lines),
            sorted({(s[0], s[1]) for s in theirs}))


def _tree_lines(report: "Report", chains: List[Tuple[Chain, int]],
                min_share: float, max_depth: int, fold: bool,
                user_roots: Sequence[str], max_lines: Optional[int]
                ) -> List[str]:
    samples = report.samples or {"frames": []}
    library = None
    if fold:
        libraries = Libraries(user_roots)
        library = [libraries.of(f[1]) for f in samples["frames"]]
    root = _tree(chains, library)
    if root.total <= 0:
        return []
    names = labels(samples)
    lines: List[str] = []
    for share in _shares(min_share, max_lines):
        lines = _lines(root, names, share, max_depth)
        if max_lines is None or len(lines) <= max_lines:
            return lines
    assert max_lines is not None
    cut = len(lines) - max_lines + 1
    return lines[:max_lines - 1] + [f"{'':>6} {'':>6}  ({cut} more lines)"]


def _shares(min_share: float, max_lines: Optional[int]) -> List[float]:
    if max_lines is None:
        return [min_share]
    return [min_share] + [s for s in (0.02, 0.05, 0.1, 0.2) if s > min_share]


def _lines(root: _Node, names: Sequence[str], min_share: float,
           max_depth: int) -> List[str]:
    lines = [f"{'total':>6} {'own':>6}  function (file:line)"]
    todo: List[Tuple[int, _Node, int]] = []

    def expand(node: _Node, depth: int) -> None:
        big = sorted(((f, n) for f, n in node.children.items()
                      if n.total >= min_share * root.total),
                     key=lambda fn: -fn[1].total)
        small = len(node.children) - len(big)
        if small:
            todo.append((-small - 1, node, depth))
        todo.extend((f, n, depth) for f, n in reversed(big))

    expand(root, 0)
    while todo:
        key, node, depth = todo.pop()
        if key < HIDDEN:                  # small branches, folded
            lines.append(_line("", "", depth, f"({-key - 1} more under "
                                              f"{min_share:.0%})"))
            continue
        text = _hidden_text(node) if key == HIDDEN else names[key]
        lines.append(_line(f"{node.total / root.total:.1%}",
                           f"{node.own / root.total:.1%}", depth, text))
        if depth + 1 < max_depth:
            expand(node, depth + 1)
    return lines


def _hidden_text(node: _Node) -> str:
    """"[N frames hidden] torch, numpy, importlib": the libraries by
    time, the import machinery last (what was imported says more)."""
    count = len(node.hidden)
    named = sorted((n for n in node.libraries if n != IMPORTLIB),
                   key=lambda n: (-node.libraries[n], n))
    listed = named[:MAX_LIBRARIES] + (["..."] if len(named) > MAX_LIBRARIES
                                      else [])
    if IMPORTLIB in node.libraries:
        listed.append(IMPORTLIB)
    return (f"[{count} frame{'s' if count != 1 else ''} hidden] "
            f"{', '.join(listed)}")


def _line(total: str, own: str, depth: int, text: str) -> str:
    """One line, at most WIDTH columns: indented by depth up to
    MAX_INDENT levels, deeper ones marked with their depth."""
    indent = "  " * min(depth, MAX_INDENT)
    if depth > MAX_INDENT:
        indent += f"[depth {depth}] "
    room = WIDTH - _PREFIX - len(indent)
    if len(text) > room:
        tail = room // 2
        text = f"{text[:room - 3 - tail]}...{text[len(text) - tail:]}"
    return f"{total:>6} {own:>6}  {indent}{text}"

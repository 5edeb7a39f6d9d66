"""Flamegraphs of a Report: Brendan Gregg's folded stacks, and a
self-contained interactive SVG (hover for name, time and share; click to
zoom; a search box), plain or differential.

A frame is a stage path, as wide as its time on the clocks of the
threads that ran it (sampled_code.stage_clock: its total wall time,
where its calls on a thread never overlapped; asyncio tasks open at once
on one event loop counted once, not summed); its children sit on it,
left to right by name, and the gap beside them is its own time. Widths
are thread time (threads that ran at once add up past the run's wall
time); shares are of the run's wall time, as in the table. A
differential flamegraph colours each stage by the verdict Report.compare
gives its self time per call, so that a parent is not painted for what
its sub-stages did.
Where the run was sampled, code frames (``function (file.py:line)``, in
cool colours) share out a stage's own time in proportion to the sampled
time of each call stack; a stage whose calls were suspended at awaits
gives its code only the time sampled running and the rest to an
"(awaiting)" frame. Code sampled outside any stage sits on the root, as
wide as its sampled time, under a frame naming its process where the
report holds several.

The work leads: time that threads spent waiting outside any stage
(views/threads.py) folds into one grey frame, last on the root and drawn
as their CPU time, which the script expands to their wall time. Every
frame carries its wall and its CPU width, and the script switches
between them. Code frames under
MIN_SHARE of the root are merged into the frame under them, and a note
says how many. A frame names its parent by index and holds only its
own name (the script makes paths), so that the drawing's size is linear
in the frames it shows, however deep the stacks.
"""
from __future__ import annotations

import html
import math
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Dict, List, NamedTuple, Optional, \
    Sequence, Tuple, Union

from ..analysis.compare import Comparison
from ..common.atomic import write_atomic
from ..common.words import plural, shorten_path
from ..common.units import fmt_time, printable
from ..analysis.sampled_code import (
    IDLE_GROUP, Chain, CodeNames, StageClock, code_names, code_times,
    stage_clock)
from .flamegraph_script import flamegraph_script
from .threads import count_phrase, idle_threads, thread_count, threads_summary

if TYPE_CHECKING:
    from ..analysis.compare import StageChange
    from ..model.report import Report

FRAME_HEIGHT = 18
WIDTH = 1200
PAD = 10
_TOP = 77          # title, legend, switches and details lines
#: the frame the threads that only waited fold into
IDLE_LABEL = "idle threads"


def folded_lines(report: "Report") -> List[str]:
    """``a;b;c <self ns>`` per stage path with own time, then a line per
    sampled code stack under it, its share of that own time (and the
    awaiting frame's); the values of a path and everything under it add
    up to its width, the flamegraph's (sampled_code.stage_clock: calls
    that overlapped on a thread counted once). Code sampled outside any
    stage comes last, at its sampled time, under its process's frame in
    a report of several; that of the threads that only waited outside
    any stage (threads.idle_threads) under the frame the flamegraph
    folds them into, ``idle threads (N)``, at their CPU time, as the
    flamegraph draws them folded: a reader such as flamegraph.pl then
    neither draws their waiting as the program's work nor lets it crowd
    the program's code out. Frames
    are stage names and code labels, ';' in a name written as ':',
    characters that are not printable escaped (_units.printable)."""
    clock = stage_clock(report)
    idle = idle_threads(report)
    code = {}
    for group, chains in code_times(report, idle, clock).items():
        # (wall, cpu): the idle threads' frame at its CPU time, as the
        # flamegraph draws it
        which = 1 if group == IDLE_GROUP else 0
        code[group] = {c: times[which] for c, times in chains.items()
                       if times[which] > 0}
    names = [n.replace(";", ":") for n in code_names(report).names]
    lines = []
    for stage in report.stages:
        frames = [printable(part).replace(";", ":")
                  for part in stage.path.split("/")]
        mine = code.get(stage.id, {})
        self_ns = clock.own[stage.id] - sum(mine.values())
        if self_ns > 0:
            lines.append(f"{';'.join(frames)} {self_ns}")
        lines += _code_lines(frames, mine, names)
    lines += _code_lines([], code.get(-1, {}), names)
    return lines + _code_lines([f"{IDLE_LABEL} ({len(idle)})"],
                               code.get(IDLE_GROUP, {}), names)


def _code_lines(frames: List[str], chains: Dict[Chain, int],
                names: Sequence[str]) -> List[str]:
    return [f"{';'.join(frames + [names[f] for f in chain])} {ns}"
            for chain, ns in chains.items()]


def write_folded(report: "Report", path: Union[str, os.PathLike]) -> Path:
    text = "\n".join(folded_lines(report))
    return write_atomic(path, (text + "\n" if text else "").encode("utf-8"))


# ------------------------------------------------------------------ SVG

#: code frames narrower than this share of the root, both by wall time
#: and by CPU time, are merged into the frame under them (their time
#: becomes its self time) and a note says how many and how much: 0.1 %
#: is about a pixel of a 1200 px drawing
MIN_SHARE = 0.001

class _Frame:
    __slots__ = ("path", "name", "key", "depth", "total", "cpu",
                 "self_time", "x", "children", "base", "code", "idle",
                 "hidden", "change", "calls", "parent", "about")

    def __init__(self, path: Optional[str], name: str, depth: int,
                 total: float, self_time: float, code: bool = False,
                 cpu: float = 0.0, key: Any = ()):
        # shown as text and kept in XML attributes: escaped, since XML
        # allows no control character. A code frame has no path (what it
        # is under says it); a stage's is only written cut short, in its
        # hover text, so that a view's size stays linear in its frames
        # however deep the stacks
        self.path = printable(path) if path is not None else None
        self.name = printable(name)
        self.key = key                  # the same frame in another report
        self.depth = depth
        self.total, self.cpu = total, cpu   # wall and CPU seconds
        self.self_time = self_time
        self.x = 0.0
        self.parent = 0                       # its parent's index, drawn
        self.children: List["_Frame"] = []
        self.base: Optional[float] = None     # total in the base report
        self.code = code                      # sampled code, not a stage
        self.idle = False                     # the idle threads' frame
        self.hidden = False                   # folded with the idle ones
        self.about = "sampled code" if code else ""   # hover text's end
        # a diff's verdicts on the stage: of its self time per call (its
        # colour), and of its whole calls (what compare says)
        self.change: Optional["StageChange"] = None
        self.calls: Optional["StageChange"] = None

    @property
    def width(self) -> float:
        """Its width as first drawn: wall time, the idle threads' frame
        folded to its CPU time (their waiting left out)."""
        return self.cpu if self.idle else self.total


class _Tree(NamedTuple):
    """The frames laid out, and what the drawing leaves out."""

    root: _Frame
    frames: List[_Frame]            #: pre-order, children in order
    idle: Optional[_Frame]          #: the idle threads' frame, if any
    idle_threads: int               #: threads folded into it
    merged: int                     #: code frames under min_share merged
    merged_s: float                 #: their wall time, seconds
    min_share: float


#: what the hover text says of the frames that are not code
AWAITING_ABOUT = ("its calls suspended at an await: time of the stage's "
                  "own that no sample shows its code running")
PROCESS_ABOUT = ("the code this process (or those of this name, together) "
                 "ran outside any stage")


def _about(f: int, names: CodeNames) -> str:
    """The end of a code chain's frame's hover text."""
    if f == names.awaiting:
        return AWAITING_ABOUT
    return PROCESS_ABOUT if f >= names.processes else "sampled code"


def _add_code(parent: _Frame, chains: Dict[Chain, Tuple[int, int]],
              names: CodeNames) -> None:
    """The sampled code stacks ((wall, cpu) ns each) as frames above
    parent."""
    # by label: code objects that read the same are one frame
    made: Dict[Tuple[int, str], _Frame] = {}
    for chain, (wall, cpu) in chains.items():
        under = parent
        for f in chain:
            name = names.names[f]
            frame = made.get((id(under), name))
            if frame is None:
                frame = _Frame(None, name, under.depth + 1, 0.0, 0.0,
                               code=True, key=(under.key, name))
                frame.about = _about(f, names)
                made[(id(under), name)] = frame
                under.children.append(frame)
            frame.total += wall * 1e-9
            frame.cpu += cpu * 1e-9
            under = frame
        under.self_time += wall * 1e-9


def _stage_frames(report: "Report", clock: StageClock
                  ) -> Tuple[_Frame, Dict[str, _Frame]]:
    """The root and a frame per stage path on it, as wide as the stage's
    time on its threads' clocks (calls that overlapped counted once)."""
    root = _Frame("", "all", 0, 0.0, 0.0)
    by_path: Dict[str, _Frame] = {}
    for s in report.stages:                 # tree order: parents first
        frame = _Frame(s.path, s.name, s.depth + 1,
                       clock.width[s.id] * 1e-9, clock.own[s.id] * 1e-9,
                       cpu=s.cpu, key=s.path)
        frame.about = _overlap(s, frame.total)
        by_path[s.path] = frame
        (by_path[s.parent] if s.parent else root).children.append(frame)
    return root, by_path


def _overlap(stage: Any, width: float) -> str:
    """What a stage frame narrower than its summed calls says of them:
    ``50 calls, up to 50 at once, 8.86 s summed``; or, where its calls
    did not overlap one another but were suspended while other tasks'
    calls were open on their thread, that they shared its time."""
    summed = stage.wall.total
    if summed - width < 1e-9:
        return ""
    if stage.at_once > 1:
        return (f"{plural(stage.count, 'call')}, up to {stage.at_once} at "
                f"once, {fmt_time(summed)} summed, drawn once on the clock")
    return (f"{plural(stage.count, 'call')}, {fmt_time(summed)} summed; "
            f"suspended, they shared their thread's time with the other "
            f"tasks' calls open then")


def _cpu_fitted(frame: _Frame) -> None:
    """Every frame at least as wide by CPU time as what stands on it: a
    stage whose calls were suspended at awaits knows no CPU time of
    those calls, its sub-stages and code may."""
    order, todo = [], [frame]
    while todo:
        f = todo.pop()
        order.append(f)
        todo.extend(f.children)
    for f in reversed(order):
        f.cpu = max(f.cpu, sum(c.cpu for c in f.children))


def _idle_frame(root: _Frame, chains: Dict[Chain, Tuple[int, int]],
                names: CodeNames, threads: int) -> _Frame:
    """The threads that only waited, folded into one frame on the root."""
    frame = _Frame(None, f"{IDLE_LABEL} ({threads})", 1, 0.0, 0.0,
                   code=True, key=((), IDLE_LABEL))
    frame.idle = True
    _add_code(frame, chains, names)
    frame.total = sum(f.total for f in frame.children)
    frame.cpu = sum(f.cpu for f in frame.children)
    root.children.append(frame)
    return frame


def _prune(root: _Frame, min_share: float) -> Tuple[int, float]:
    """Code frames narrower than min_share of the root by wall time and
    by CPU time taken out, with all above them: (how many, their wall
    seconds). Their parent keeps their width, as self time."""
    least_wall, least_cpu = min_share * root.total, min_share * root.cpu
    if min_share <= 0:
        return 0, 0.0
    merged, merged_s = 0, 0.0
    todo = [root]
    while todo:
        frame = todo.pop()
        kept = []
        for child in frame.children:
            if not child.code or child.idle or child.total >= least_wall \
                    or (root.cpu > 0 and child.cpu >= least_cpu):
                kept.append(child)
            else:
                merged += _size(child)
                merged_s += child.total
        frame.children = kept
        todo.extend(kept)
    return merged, merged_s


def _size(frame: _Frame) -> int:
    """How many frames from frame up."""
    count, todo = 0, [frame]
    while todo:
        f = todo.pop()
        count += 1
        todo.extend(f.children)
    return count


def _laid_out(root: _Frame) -> List[_Frame]:
    """Every frame in pre-order, children left to right by name (the
    idle threads' frame last: the work first), each frame's x in seconds
    from the left edge, as first drawn."""
    ordered: List[_Frame] = []
    todo = [root]
    while todo:
        frame = todo.pop()
        index = len(ordered)
        ordered.append(frame)
        frame.children.sort(key=lambda f: (f.idle, f.name))
        x = frame.x
        for child in frame.children:
            child.parent = index
            child.x = x
            child.hidden = frame.hidden or frame.idle
            x += child.width
        todo.extend(reversed(frame.children))
    return ordered


def _frames(report: "Report", min_share: float = MIN_SHARE) -> _Tree:
    """The root ("all") and every frame, laid out. The root is the
    thread time of everything on it (threads that ran at once add up
    past the run's wall time), the threads that only waited counted by
    their CPU time until the idle threads' frame is expanded."""
    clock = stage_clock(report)
    root, by_path = _stage_frames(report, clock)
    idle = idle_threads(report)
    code = code_times(report, idle, clock)
    names = code_names(report)
    for s in report.stages:
        if s.id in code:
            _add_code(by_path[s.path], code[s.id], names)
    _add_code(root, code.get(-1, {}), names)
    folded = _idle_frame(root, code[IDLE_GROUP], names, len(idle)) \
        if code.get(IDLE_GROUP) else None
    _cpu_fitted(root)
    root.total = sum(f.width for f in root.children)
    root.cpu = sum(f.cpu for f in root.children)
    merged, merged_s = _prune(root, min_share)
    return _Tree(root, _laid_out(root), folded,
                 len(idle) if folded else 0, merged, merged_s, min_share)


def _fit(name: str, width: float) -> str:
    """The label that fits a frame of width px (7 px a character), as the
    script does when it zooms."""
    room = int((width - 6) // 7)
    if room >= len(name):
        return name
    return name[:room - 2] + ".." if room > 2 else ""


NEUTRAL = "rgb(200,200,200)"    # same, or not judged
IDLE_FILL = "rgb(190,190,190)"  # the idle threads' frame
NEW = "rgb(220,40,40)"
FULL_AT = 2.0                   # a diff's colour is deepest at 2x or 1/2x


def _kind(frame: _Frame) -> str:
    """A diff frame's class: its self-time verdict ("slower?" is slower
    and hedged), "unjudged" for the root and sampled code."""
    if frame.change is None:
        return "unjudged"
    word = frame.change.verdict
    return f"{word[:-1]} hedged" if word.endswith("?") else word


def _colour(frame: _Frame, diff: bool) -> str:
    """Warm hues by name for a plain graph's stages, cool ones for its
    code, grey for the idle threads; for a diff, the frame's self-time
    verdict: red slower, blue faster, grey same or unjudged, deeper as
    the total moves further."""
    if frame.idle:
        return IDLE_FILL
    if not diff:
        h = sum(ord(c) for c in frame.name)
        if frame.code:
            return (f"rgb({40 + h % 60},{150 + (h * 7) % 80},"
                    f"{170 + (h * 3) % 60})")
        return f"rgb({205 + h % 50},{80 + (h * 7) % 120},{40 + (h * 3) % 50})"
    kind = _kind(frame).split()[0]
    if kind == "new":
        return NEW
    change = frame.change.change if frame.change else None
    if kind not in ("slower", "faster") or change is None:
        return NEUTRAL
    # by the ratio, so that 2x slower and 2x faster look alike; a called
    # change never fades to the grey of "same"
    ratio = math.log1p(max(change, -0.999)) / math.log(FULL_AT)
    fade = int(200 - 150 * min(0.3 + 0.7 * abs(ratio), 1.0))
    return (f"rgb(235,{fade},{fade})" if kind == "slower"
            else f"rgb({fade},{fade},235)")


def _root_label(report: "Report") -> str:
    """``all (11 threads in 3 processes)``: every thread that recorded a
    stage or was sampled."""
    return f"all ({count_phrase(*thread_count(report))})"


def _root_details(tree: _Tree, report: "Report") -> str:
    """The root's hover text: the thread time on it, on how many threads
    and processes, and what the idle threads count for."""
    root, wall = tree.root, report.wall
    share = root.total / wall * 100 if wall else 0.0
    threads, processes = thread_count(report)
    names = threads_summary(report.threads)
    text = (f"all: {fmt_time(root.total)} of thread time on "
            f"{count_phrase(threads, processes)}"
            f"{f' ({names})' if names else ''}, "
            f"{share:.1f} % of the run's {fmt_time(wall)} wall time")
    idle = tree.idle
    if idle is not None:
        text += (f"; the {tree.idle_threads} idle threads count their "
                 f"{fmt_time(idle.cpu)} of CPU time outside any stage, "
                 f"not their {fmt_time(idle.total)} of waiting there, "
                 f"until expanded")
    return text


def _details(frame: _Frame, tree: _Tree, report: "Report",
             diff: bool) -> str:
    """The hover text: time, share of the run's wall time (the table's
    share), self time, and for a diff the verdicts and the base. A code
    frame's starts with its name, not its path (the script puts the path
    before it), so that the text's size does not grow with depth."""
    if frame is tree.root:
        text = _root_details(tree, report)
    elif frame.idle:
        busy = frame.cpu / frame.total * 100 if frame.total else 0.0
        text = (f"{frame.name}: {fmt_time(frame.total)} of thread time, on "
                f"a CPU {busy:.0f} % of it: threads that waited outside "
                f"any stage, drawn as their {fmt_time(frame.cpu)} of "
                f"CPU time until expanded (click)")
    else:
        share = frame.total / report.wall * 100 if report.wall else 0.0
        self_time = frame.self_time if not frame.code else \
            frame.total - sum(c.total for c in frame.children)
        text = (f"{_hover_path(frame)}: "
                f"{fmt_time(frame.total)} ({share:.1f} % of the run), "
                f"self {fmt_time(max(self_time, 0.0))}"
                + (f"; {frame.about}" if frame.about else ""))
    return text + _diff_details(frame) if diff else text


#: the most characters of a stage's path in its hover text: a path grows
#: with its depth, and a recursive stage thousands deep made the drawing
#: its depth squared
HOVER_PATH_CHARS = 160


def _hover_path(frame: _Frame) -> str:
    """A stage's path for its hover text, past HOVER_PATH_CHARS cut in
    the middle (its last stage kept) with its depth; a code frame's
    name."""
    if frame.path is None:
        return frame.name
    if len(frame.path) <= HOVER_PATH_CHARS:
        return frame.path
    return f"{shorten_path(frame.path, HOVER_PATH_CHARS)} (depth " \
           f"{frame.path.count('/')})"


def _diff_details(frame: _Frame) -> str:
    """What a differential flamegraph adds to a frame's hover text."""
    if frame.change is not None:
        if frame.change.verdict == "new":
            return "; not in the base report"
        text = f"; self time: {frame.change.summary()}"
        if frame.calls is not None and any(not c.code
                                           for c in frame.children):
            text += (f"; whole calls, as compare judges them: "
                     f"{frame.calls.summary()}")
        return text
    if frame.base is None:
        return "; not in the base report"
    delta = frame.total - frame.base
    rel = f" ({delta / frame.base * 100:+.1f} %)" if frame.base else ""
    return (f"; base {fmt_time(frame.base)}, change "
            f"{'+' if delta >= 0 else '-'}{fmt_time(abs(delta))}{rel}"
            f"; not judged")


def legend_svg(diff: bool, threshold: float, alpha: float) -> str:
    """The lines under the title: what width and shares are, and for a
    diff what each colour says."""
    lines = ['<text class="legend" x="10" y="40">width: thread time, wall '
             'or CPU (threads that ran at once add up, tasks open at once '
             'on one thread count once); % of the run\'s wall time, as in '
             'the table; click to zoom</text>']
    if diff:
        key = [("slower", "rgb(235,95,95)"), ("same or noisy", NEUTRAL),
               ("faster", "rgb(95,95,235)"), ("new", NEW)]
        x = 10
        for word, fill in key:
            lines.append(f'<rect x="{x}" y="47" width="12" height="12" '
                         f'fill="{fill}"/><text class="legend" x="{x + 16}"'
                         f' y="57">{word}</text>')
            x += 22 + 7 * len(word)
        rule = [f"by its self time, judged as compare judges a stage: "
                f"its total or tail (p95 call) a run moved by more "
                f"than {threshold * 100:g} % at p < {alpha:g}",
                f"deeper = larger change, deepest at {FULL_AT:g}x; dashed: "
                f"too few calls to test; grey too: the root and sampled "
                f"code, not judged; hover for the change in %"]
        lines.append(f'<text class="legend" x="{x}" y="57">'
                     f'{html.escape(rule[0])}</text>')
        lines.append(f'<text class="legend" x="10" y="73">'
                     f'{html.escape(rule[1])}</text>')
    return "\n".join(lines)


def _judged(report: "Report", base: Optional["Report"], threshold: float,
            alpha: float, min_share: float) -> _Tree:
    """The frames laid out; with base, each with its base total and, for
    a stage, compare's verdicts on it."""
    tree = _frames(report, min_share)
    if base is not None:
        before = {f.key: f.total for f in _frames(base, 0.0).frames}
        # compare's own verdicts: one rule for both
        comparison = Comparison(base, report, threshold, alpha)
        # by the path as frames hold it, escaped (_Frame)
        own = {printable(c.path): c for c in comparison.own_changes}
        calls = {printable(c.path): c for c in comparison.changes}
        for frame in tree.frames:
            frame.base = before.get(frame.key)
            if not frame.code and frame.path:
                frame.change = own[frame.path]
                frame.calls = calls[frame.path]
    return tree


class Drawing(NamedTuple):
    """The frames as SVG groups, and what goes around them."""

    groups: str         #: the <g class="f"> elements, one per line
    height: int         #: the drawing's height, px
    idle_threads: int   #: threads folded into the idle threads' frame
    notes: List[str]    #: what the drawing folds and merges, in words


def _notes(tree: _Tree) -> List[str]:
    notes = []
    idle = tree.idle
    if idle is not None:
        busy = idle.cpu / idle.total * 100 if idle.total else 0.0
        n = tree.idle_threads
        notes.append(
            f"{plural(n, 'idle thread')} (outside any stage, on a CPU "
            f"{busy:.0f} % of their {fmt_time(idle.total)}) folded into "
            f"\"{IDLE_LABEL} ({n})\", drawn as their CPU time")
    if tree.merged:
        notes.append(
            f"{plural(tree.merged, 'code frame')} under "
            f"{tree.min_share * 100:g} % of the root merged into the frames "
            f"under them ({fmt_time(tree.merged_s)})")
    return notes


def _group(f: _Frame, details: str, label: str, x: float, w: float,
           y: int, diff: bool) -> str:
    """One frame's <g>: its parent's index, wall and CPU widths, its
    name (the script makes its path from those under it), a stage's
    hover text; a rect, a label if one fits, a tooltip."""
    kind = "f c" if f.code else "f"       # c: sampled code
    if f.idle:
        kind += " idle"
    verdict = ""
    if diff and not f.code:
        kind += f" {_kind(f)}"
        if f.change is not None:
            verdict = f' data-verdict="{f.change.verdict}"'
    attrs = f'class="{kind}"'
    if f.depth:
        attrs += f' data-p="{f.parent}"'
    attrs += f' data-w="{f.total:.9g}" data-c="{f.cpu:.9g}"'
    attrs += f' data-n="{html.escape(f.name, True)}"'
    if f.path is not None:
        attrs += f' data-details="{details}"'
    if f.hidden:
        attrs += ' display="none"'
    text = (f'<text x="{x + 3:.2f}" y="{y + FRAME_HEIGHT - 5}">'
            f'{html.escape(label)}</text>' if label else "")
    return (f'<g {attrs}{verdict}><title>{details}</title>'
            f'<rect x="{x:.2f}" y="{y}" width="{w:.2f}" '
            f'height="{FRAME_HEIGHT - 1}" fill="{_colour(f, diff)}" '
            f'rx="2"/>{text}</g>')


def frame_groups(report: "Report", base: Optional["Report"] = None,
                 threshold: float = 0.05, alpha: float = 0.01,
                 top: int = 0, min_share: float = MIN_SHARE) -> Drawing:
    """The frames as SVG groups (class "f"; data-p the index of the
    parent's group, data-w and data-c the wall and CPU widths in seconds,
    data-n its name, data-details a stage's hover text; a rect, a label
    and a tooltip each), in pre-order, laid out WIDTH wide
    under `top` pixels of header, with the height they fill down to."""
    tree = _judged(report, base, threshold, alpha, min_share)
    diff = base is not None
    depth = max(f.depth for f in tree.frames) + 1
    height = top + depth * FRAME_HEIGHT + PAD
    root = tree.root
    scale = (WIDTH - 2 * PAD) / root.total if root.total > 0 else 0.0
    tree.root.name = _root_label(report)
    groups = []
    for f in tree.frames:
        x = PAD + f.x * scale
        w = f.width * scale
        y = height - PAD - (f.depth + 1) * FRAME_HEIGHT
        details = html.escape(_details(f, tree, report, diff), quote=True)
        label = "" if f.hidden else _fit(f.name, w)
        groups.append(_group(f, details, label, x, w, y, diff))
    return Drawing("\n".join(groups), height, tree.idle_threads,
                   _notes(tree))


def controls_svg(drawing: Drawing, y: int) -> str:
    """The line of the SVG file under its legend: the wall/CPU switch,
    the idle threads' toggle and the notes, as text the script makes
    clickable."""
    parts = [f'<text class="legend" x="10" y="{y}">widths:</text>',
             f'<text class="mode button on" data-mode="wall" x="64" '
             f'y="{y}">wall</text>',
             f'<text class="mode button" data-mode="cpu" x="100" '
             f'y="{y}">CPU</text>']
    x = 140
    if drawing.idle_threads:
        show, fold = fold_labels(drawing.idle_threads)
        parts.append(f'<text class="fold button" x="{x}" y="{y}" '
                     f'data-show="{show}" data-fold="{fold}">{show}</text>')
        x += 7 * max(len(show), len(fold)) + 14
    if drawing.notes:
        # what does not fit ends in an ellipsis, its tooltip holds it all;
        # the script fits it again to the width the drawing takes
        note = "; ".join(drawing.notes)
        shown = html.escape(ellipsized(note, int((WIDTH - PAD - x) / 7.5)))
        note = html.escape(note, True)
        parts.append(f'<text class="legend note" x="{x}" y="{y}" '
                     f'data-note="{note}"><title>{note}</title>{shown}'
                     f'</text>')
    return "\n".join(parts)


def ellipsized(text: str, room: int) -> str:
    """text cut to `room` characters at a word's end, an ellipsis
    after it, where it holds more."""
    if len(text) <= room:
        return text
    cut = text[:max(room - 1, 0)]
    if text[len(cut)] != " " and " " in cut:     # a word cut short
        cut = cut[:cut.rindex(" ")]
    return cut.rstrip(" ;,") + "\u2026"


def fold_labels(threads: int) -> Tuple[str, str]:
    """The idle threads' toggle, folded and expanded."""
    return (f"expand {IDLE_LABEL} ({threads})",
            f"fold {IDLE_LABEL} ({threads})")


def flamegraph_svg(report: "Report", title: str = "aquaprof flamegraph",
                   base: Optional["Report"] = None, threshold: float = 0.05,
                   alpha: float = 0.01, min_share: float = MIN_SHARE) -> str:
    """The SVG text. With base, a differential flamegraph: frames as wide
    as in report, each stage coloured by the verdict compare gives its
    self time per call (threshold, alpha as in Report.compare); sampled
    code and the root are grey, their change only shown. Code frames
    under min_share of the root are merged into the frame under them."""
    diff = base is not None
    legend_end = 57 + (32 if diff else 0)   # the diff's two legend lines
    top = _TOP + (32 if diff else 0)
    drawing = frame_groups(report, base, threshold, alpha, top, min_share)
    return _SVG.format(
        width=WIDTH, height=drawing.height, title=html.escape(title),
        legend=legend_svg(diff, threshold, alpha),
        controls=controls_svg(drawing, legend_end), frames=drawing.groups,
        box=WIDTH - PAD - 300, right=PAD + 300, below=top - 4,
        wall=repr(report.wall),
        script=flamegraph_script(PAD, FRAME_HEIGHT,
                                 "document.documentElement", True))


def write_flamegraph(report: "Report", path: Union[str, os.PathLike],
                     title: str = "aquaprof flamegraph",
                     base: Optional["Report"] = None, threshold: float = 0.05,
                     alpha: float = 0.01,
                     min_share: float = MIN_SHARE) -> Path:
    return write_atomic(path, flamegraph_svg(report, title, base, threshold,
                                             alpha, min_share)
                        .encode("utf-8"))


# the search box is an HTML input in a foreignObject: browsers show it in
# a standalone SVG; a viewer without scripts shows neither it nor zoom.
# What hangs on the right edge says how far from it (data-right): the
# script moves it when the drawing takes the window's width.
_SVG = """<?xml version="1.0" encoding="UTF-8" standalone="no"?>
<svg version="1.1" xmlns="http://www.w3.org/2000/svg" width="{width}" \
height="{height}" viewBox="0 0 {width} {height}">
<style>
text {{ font: 12px Verdana, sans-serif; fill: #000; pointer-events: none; }}
.f {{ cursor: pointer; }}
.c text {{ font-style: italic; }}
.hedged rect {{ stroke: #555; stroke-width: 1; stroke-dasharray: 3 2; }}
.f:hover rect {{ stroke: #000; stroke-width: 0.5; }}
.hit rect {{ fill: rgb(230,0,230) !important; }}
#title {{ font-size: 17px; }}
.details, .matched, .legend {{ font-size: 12px; fill: #333; }}
.button {{ fill: #06c; cursor: pointer; pointer-events: all; }}
.mode.on {{ fill: #000; font-weight: bold; cursor: default; }}
.note {{ pointer-events: all; }}
.term {{ width: 290px; font: 12px Verdana, sans-serif; }}
.term.bad {{ outline: 2px solid #c00; }}
</style>
<rect width="100%" height="100%" fill="#f8f8f4"/>
<text id="title" x="50%" y="22" text-anchor="middle">{title}</text>
{legend}
<text class="reset button" x="10" y="{below}" visibility="hidden">\
Reset zoom</text>
<foreignObject x="{box}" data-right="{right}" y="6" width="300" \
height="24"><input xmlns="http://www.w3.org/1999/xhtml" id="term" \
class="term" type="search" \
placeholder="search: regular expression on stage paths" \
title="Ctrl-F or F3 here; Escape clears"/></foreignObject>
<text class="matched" x="{width}" dx="-10" data-right="0" y="40" \
text-anchor="end"></text>
<text class="details" x="110" y="{below}"> </text>
{controls}
<g id="frames" data-wall="{wall}">
{frames}
</g>
<script type="text/ecmascript"><![CDATA[
{script}
]]></script>
</svg>
"""

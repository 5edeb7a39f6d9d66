"""Words every room writes: counts with their noun, text and stage paths
cut to a width, lists cut to their first items."""
import re
from typing import List, Optional, Sequence

from .units import display_width

_ELLIPSIS = "..."


def plural(n: int, noun: str, many: Optional[str] = None) -> str:
    """A count and its noun in the right number: '1 span', '2 spans',
    '1,000 entries' (many: the plural when it is not noun + 's')."""
    return f"{n:,} {noun if n == 1 else many or noun + 's'}"


def shorten(text: str, width: int) -> str:
    """text cut in the middle to at most width terminal columns, '...'
    where the middle was: both ends of a stage path tell which stage it
    is."""
    if display_width(text) <= width:
        return text
    if width <= len(_ELLIPSIS):
        return _first(text, width)
    keep = width - len(_ELLIPSIS)
    head = (keep + 1) // 2
    tail = _first(text[::-1], keep - head)[::-1]
    # an accent kept without the letter it was on goes with it
    while tail and display_width(tail[0]) == 0:
        tail = tail[1:]
    return _first(text, head) + _ELLIPSIS + tail


def _first(text: str, width: int) -> str:
    """The longest start of text at most width terminal columns wide."""
    if text.isascii():
        return text[:width]
    used = 0
    for i, c in enumerate(text):
        used += display_width(c)
        if used > width:
            return text[:i]
    return text


def shorten_name(name: str, width: int) -> str:
    """A stage name cut to at most width characters. A torch op's input
    shapes (torch_ops="shapes": "aten::conv2d (1×3×32×32, 8×3×3×3, 8)")
    are cut whole, the last first, with '...' where they were, so that no
    shape is read cut; other names are cut in the middle (shorten)."""
    if display_width(name) <= width:
        return name
    head, _, shapes = name.partition(" (")
    if "::" not in head or " " in head or not shapes.endswith(")"):
        return shorten(name, width)
    kept = _shape_items(shapes[:-1])
    while kept:
        kept.pop()
        text = f"{head} ({', '.join(kept + [_ELLIPSIS])})"
        if display_width(text) <= width:
            return text
    return shorten(f"{head} ({_ELLIPSIS})", width)


def shorten_path(path: str, width: int) -> str:
    """A stage path cut to at most width characters: its stages cut in the
    middle, its last one as shorten_name cuts it (whole shapes)."""
    if display_width(path) <= width:
        return path
    parent, _, name = path.rpartition("/")
    if not parent:
        return shorten_name(name, width)
    name = shorten_name(name, max(width - display_width(parent) - 1,
                                    width // 2))
    room = width - display_width(name) - 1
    if room <= len(_ELLIPSIS):
        return shorten_name(name, width)
    return f"{shorten(parent, room)}/{name}"


def _shape_items(text: str) -> List[str]:
    """The comma-separated shapes of an op's name, a bracketed list of
    them one item."""
    items, depth, start = [], 0, 0
    for i, c in enumerate(text):
        depth += (c == "[") - (c == "]")
        if c == "," and depth == 0:
            items.append(text[start:i].strip())
            start = i + 1
    items.append(text[start:].strip())
    return items


def first_of(items: Sequence[str], shown: int) -> str:
    """'a, b, c and 4 more': the first `shown` items and how many were
    left out."""
    more = f" and {len(items) - shown:,} more" if len(items) > shown else ""
    return ", ".join(items[:shown]) + more


def first_clause(text: str) -> str:
    """text up to its first ", " outside brackets: a stage path or code
    name keeps the shapes in its parentheses, "aten::mm (8×3, 3×4)"."""
    depth = 0
    for i, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth = max(depth - 1, 0)
        elif c == "," and depth == 0 and text.startswith(", ", i):
            return text[:i]
    return text


#: what a line opens with that its wrapped lines are indented under:
#: its indent, then a list's marker ("1. ", "! ", "- ") or a label
#: ("evidence: ")
_HANGING = re.compile(r"[ \t]*(?:(?:\d+\.|[!*-]|[a-z]+:) +)?")


def wrap_line(line: str, width: Optional[int]) -> List[str]:
    """line cut at spaces into lines of at most width terminal columns,
    the lines after the first indented under the text after its own
    indent and list marker, so that a terminal's own wrapping never
    breaks a list's shape; [line] where width is None or it fits. A word
    wider than a line stays whole (a path)."""
    if width is None or display_width(line) <= width:
        return [line]
    marker = _HANGING.match(line)       # matches every line, maybe empty
    hang = marker.end() if marker else 0
    if hang > width // 2:
        hang = min(len(line) - len(line.lstrip(" \t")), width // 2)
    out: List[str] = []
    current, filled = line[:hang], False
    for word in _words(line[hang:]):
        if filled and display_width(current) + 1 + display_width(word) > \
                width:
            out.append(current)
            current, filled = " " * hang, False
        current += (" " if filled else "") + word
        filled = True
    out.append(current)
    return out


_NUMBER = re.compile(r"[(+-]?\d[\d.,]*")


def _words(text: str) -> List[str]:
    """text's words, a number kept with the word after it (its unit:
    "90.0 ms", "100 %", "3 calls")."""
    words: List[str] = []
    for word in text.split():
        if words and " " not in words[-1] and _NUMBER.fullmatch(words[-1]):
            words[-1] += " " + word
        else:
            words.append(word)
    return words

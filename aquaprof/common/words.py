"""Words every room writes: counts with their noun, text and stage paths
cut to a width, lists cut to their first items."""
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

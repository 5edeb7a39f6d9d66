"""Units and columns shared by every text and HTML rendering: times,
bytes and rates in their shortest honest form, and left/right-aligned
columns of text."""
from __future__ import annotations

import unicodedata
from typing import List, Optional, Sequence


def fmt_time(seconds: float) -> str:
    if seconds == 0:
        return "0"
    if seconds < 1e-6:
        return f"{seconds * 1e9:.0f} ns"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} us"
    if seconds < 1:
        return f"{seconds * 1e3:.1f} ms"
    return f"{seconds:.2f} s"


def fmt_bytes(n: Optional[int], signed: bool = False) -> str:
    if n is None:
        return "-"
    sign = ("+" if n > 0 else "-" if n < 0 else "") if signed else ""
    v = float(abs(n))
    if v < 1024:
        return f"{sign}{v:.0f} B"
    for unit in ("KiB", "MiB"):
        v /= 1024
        if v < 1024:
            return f"{sign}{v:.1f} {unit}"
    return f"{sign}{v / 1024:.1f} GiB"


def fmt_rate(per_second: Optional[float]) -> str:
    if per_second is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if per_second >= scale:
            return f"{per_second / scale:.2f}{suffix}/s"
    return f"{per_second:.1f}/s"


def printable(name: str) -> str:
    """A stage name or path as it is safe to show: characters that are not
    printable (newlines, terminal escapes, NUL, direction overrides) as
    Python writes them in a string literal (\\n, \\x1b, \\u202e), so a
    name cannot break a table's lines, a terminal or an XML file."""
    if name.isprintable():
        return name
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in name)


def align_columns(rows: Sequence[Sequence[str]]) -> List[str]:
    """Rows of cells as lines: the first column left-aligned, the rest
    right-aligned, two spaces apart."""
    widths = [max(display_width(r[i]) for r in rows)
              for i in range(len(rows[0]))]
    lines = []
    for r in rows:
        cells = [ljust(r[0], widths[0])]
        cells += [" " * (w - display_width(c)) + c
                  for c, w in zip(r[1:], widths[1:])]
        lines.append("  ".join(cells).rstrip())
    return lines


def display_width(text: str) -> int:
    """The terminal columns text takes: 2 a wide character (CJK), 0 a
    combining one (an accent on the letter before) or a format one, 1 any
    other."""
    if text.isascii():
        return len(text)
    return sum(0 if unicodedata.category(c) in _ZERO_WIDTH else
               2 if unicodedata.east_asian_width(c) in "WF" else 1
               for c in text)


#: marks combined with the character before, and format characters (a
#: zero-width joiner, a variation selector): no column of their own
_ZERO_WIDTH = ("Mn", "Me", "Cf")


def ljust(text: str, width: int) -> str:
    """text padded with spaces to `width` terminal columns."""
    return text + " " * max(0, width - display_width(text))


def text_html(text: str) -> str:
    """A text view as HTML that Jupyter shows as the text reads: the
    _repr_html_ of the result objects whose str() is a table."""
    import html
    return f"<pre>{html.escape(text)}</pre>"

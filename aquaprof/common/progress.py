"""A progress bar on stderr for long work, only where stderr is a
terminal (never in logs, pipes or tests)."""
from __future__ import annotations

import sys
from typing import Iterator, Sequence, TypeVar

T = TypeVar("T")

_WIDTH = 30


def progress(items: Sequence[T], label: str, every: int = 1
             ) -> Iterator[T]:
    """Yields items, drawing a bar when there are more than `every` of
    them and stderr is a terminal."""
    total = len(items)
    show = total > every and sys.stderr.isatty()
    step = max(1, total // 100)
    for done, item in enumerate(items):
        if show and done % step == 0:
            filled = _WIDTH * done // total
            sys.stderr.write(f"\r{label} [{'#' * filled}"
                             f"{'.' * (_WIDTH - filled)}] "
                             f"{100 * done // total:3d}%")
            sys.stderr.flush()
        yield item
    if show:
        sys.stderr.write(f"\r{label} [{'#' * _WIDTH}] 100%\n")
        sys.stderr.flush()

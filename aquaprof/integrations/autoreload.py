"""IPython's autoreload and the functions @aquaprof.stage decorates.

``%autoreload 2`` brings the functions of an edited module up to date in
place, so that the names a notebook imported from it (``from mod import
step``) run the new code: it copies each new function's code into the
old function object. A staged function is no plain function: left to
that, the old one would go on calling the old code, silently, profiled or
not. This module adds a rule to autoreload's (``UPDATE_RULES``) that has
the old staged function call the new one's function, under its stage
name. A wrapper of a suspending function (``async def``, generators) is
a plain function whose closure autoreload cannot replace: the rule moves
the new closure's contents into the old one.

The rule is added as soon as autoreload is imported: at once where it
already is, else at the start of the first cell run after it has been.
"""
from __future__ import annotations

import sys
from typing import Any, Callable, List, Tuple

AUTORELOAD = "IPython.extensions.autoreload"

Rule = Tuple[Callable[[Any, Any], bool], Callable[[Any, Any], None]]


def both_staged(old: Any, new: Any) -> bool:
    from .._core import StagedFunction
    from ..record.suspendable import is_wrapper
    return (type(old) is type(new) is StagedFunction) or (
        is_wrapper(old) and is_wrapper(new)
        and old.__code__ is new.__code__)


def update_staged(old: Any, new: Any) -> None:
    """old, called from now on, runs what new runs, under new's stage."""
    from .._core import StagedFunction
    if isinstance(old, StagedFunction):
        old._update_from(new)
    else:
        for old_cell, new_cell in zip(old.__closure__, new.__closure__):
            old_cell.cell_contents = new_cell.cell_contents
    # its name, docstring and __wrapped__, as functools.wraps set them
    old.__dict__.update(new.__dict__)


RULE: Rule = (both_staged, update_staged)


def teach(rules: List[Rule]) -> None:
    """Puts the rule first in autoreload's rules: its rule for plain
    functions would take a suspending function's wrapper before it."""
    if RULE not in rules:
        rules.insert(0, RULE)


def watch_autoreload() -> None:
    """Teaches autoreload now where it is imported, else in the IPython
    shell running, if any, once it is."""
    if AUTORELOAD in sys.modules:
        teach(sys.modules[AUTORELOAD].UPDATE_RULES)
        return
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    if shell is None:
        return

    # autoreload looks for edited modules at the start of each cell, after
    # this callback (registered first)
    def look(*_: Any) -> None:
        if AUTORELOAD in sys.modules:
            teach(sys.modules[AUTORELOAD].UPDATE_RULES)
            shell.events.unregister("pre_run_cell", look)
    shell.events.register("pre_run_cell", look)

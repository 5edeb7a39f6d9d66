"""The ``%%aquaprof`` cell magic for IPython and Jupyter
(``%load_ext aquaprof``)."""
from __future__ import annotations

import shlex
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..report import Report


def aquaprof_magic(line: str, cell: str, shell: Any) -> "Report":
    """``%%aquaprof [-o report.json]``: runs the cell under a Profiler,
    inside a stage named ``cell``, and returns the report, which IPython
    shows as the cell's output (once: it is not displayed as well). A
    cell that raised shows its report, then its error."""
    from .. import Profiler, stage
    args = shlex.split(line)
    save = None
    if args[:1] == ["-o"] and len(args) == 2:
        save = args[1]
    elif args:
        raise ValueError(f"usage: %%aquaprof [-o report.json], got "
                         f"{line!r}")
    with Profiler() as prof:
        with stage("cell"):
            result = shell.run_cell(cell)
    report = prof.report()
    if save:
        report.save(save)
    if result is not None and not result.success:
        from IPython.display import display
        display(report)
        result.raise_error()
    return report


def load_ipython_extension(shell: Any) -> None:
    shell.register_magic_function(
        lambda line, cell: aquaprof_magic(line, cell, shell),
        magic_kind="cell", magic_name="aquaprof")

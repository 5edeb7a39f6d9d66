"""The ``%%aquaprof`` cell magic for IPython and Jupyter
(``%load_ext aquaprof``).

The magic compiles the cell and runs it itself, between the Profiler's
start and stop and inside the stage ``cell``, as IPython's own ``%%time``
does. Handed to ``shell.run_cell`` instead, the cell would return only
after IPython had shown its value or formatted its traceback, and the
profile would count that work as the cell's: formatting a deep traceback
takes longer than most cells. A cell that raised shows its report, then
its error is raised again for IPython to print once, outside the profile;
a run of cells stops there as at any failing cell.
"""
from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import shlex
from pathlib import Path
from types import CodeType
from typing import (TYPE_CHECKING, Any, Callable, Dict, NoReturn, Optional,
                    Tuple)

from IPython.core.error import UsageError

from ..record.options import Options

if TYPE_CHECKING:
    from ..record.profiler import Profiler
    from ..report import Report

#: --gpu's words, as the Profiler's cuda argument
GPU_MODES: Dict[str, Any] = {"auto": "auto", "on": True, "off": False}


def usage_error(message: str) -> UsageError:
    # IPython prints a UsageError (that class, no subclass) as one line,
    # with no traceback
    return UsageError(f"%%aquaprof: {message} (usage: %%aquaprof -h)")


class _HelpShown(Exception):
    """-h printed the help: the cell is not run."""


class _LineParser(argparse.ArgumentParser):
    """argparse that raises where it would exit: exiting would end the
    kernel."""

    def error(self, message: str) -> NoReturn:
        raise usage_error(message)

    def exit(self, status: int = 0, message: Optional[str] = None) \
            -> NoReturn:
        if status:
            self.error(message or "bad options")
        raise _HelpShown()


def _seconds(name: str, check: Callable[[float], Any] = lambda v: v) \
        -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
            check(value)
        except (TypeError, ValueError) as e:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not {name} ({e})") from None
        return value
    return parse


def _sample_check(value: float) -> None:
    from ..record.options import sample_interval_ns
    if value == 0:
        raise ValueError("0 takes no samples: use --no-sample")
    sample_interval_ns(value)


#: the Profiler's defaults, as its options type holds them
_DEFAULT = {f.name: f.default for f in dataclasses.fields(Options)}


def line_parser() -> argparse.ArgumentParser:
    """The options of a %%aquaprof line: the Profiler's (docs/profiler.md),
    named as ``aquaprof run`` names those it has too."""
    p = _LineParser(
        prog="%%aquaprof", description="Runs the cell under a Profiler, "
        "inside a stage named 'cell', and shows its report (`_` holds it). "
        "A cell that raised shows its report, then its error.")
    p.add_argument("-o", "--out", metavar="REPORT.json",
                   help="also save the report here (Report.load reads it)")
    p.add_argument("--html", metavar="PAGE",
                   help="also write the report as an HTML page here")
    p.add_argument("--sample", type=_seconds("a sampling interval",
                                             _sample_check),
                   default=0.001, metavar="SECONDS",
                   help="seconds between samples of the call stacks "
                   "(default 0.001, as aquaprof run)")
    p.add_argument("--no-sample", action="store_true",
                   help="record stages only, no call stacks")
    p.add_argument("--torch-ops", nargs="?", const=True, default=False,
                   choices=["shapes"], metavar="shapes",
                   help="record each torch call as a stage; "
                   "--torch-ops=shapes keeps its input shapes in the name")
    p.add_argument("--torch-modules", action="store_true",
                   help="record each nn.Module call as a stage")
    p.add_argument("--gpu", choices=list(GPU_MODES), default="auto",
                   help="trace GPU activity: auto (where CUDA and CUPTI "
                   "load), on (an error where they do not), off")
    p.add_argument("--cuda-sync", action="store_true",
                   help="synchronize the device at every stage edge")
    p.add_argument("--no-memory", action="store_true",
                   help="no RSS samples (no memory columns)")
    p.add_argument("--memory-interval", type=_seconds("seconds"),
                   default=_DEFAULT["memory_interval"], metavar="SECONDS",
                   help=f"seconds between RSS samples (default "
                   f"{_DEFAULT['memory_interval']})")
    p.add_argument("--cpu-resolution", type=_seconds("seconds"),
                   default=_DEFAULT["cpu_resolution"], metavar="SECONDS",
                   help=f"how often a thread reads its CPU clock "
                   f"(default {_DEFAULT['cpu_resolution']})")
    p.add_argument("--no-compensate", action="store_true",
                   help="do not measure the profiler's own cost per stage")
    p.add_argument("--no-children", action="store_true",
                   help="do not record processes the cell starts")
    p.add_argument("--no-dataloaders", action="store_true",
                   help="no next(DataLoader) stages")
    for flag, what in (
            ("--window", "each stage's last calls kept for live figures"),
            ("--max-spans", "most raw spans kept"),
            ("--max-stages", "most distinct stage paths"),
            ("--max-samples", "most samples kept in time order"),
            ("--max-gpu-events", "most GPU events kept"),
            ("--max-children", "most child reports merged")):
        default = _DEFAULT[flag[2:].replace("-", "_")]
        p.add_argument(flag, type=int, default=default, metavar="N",
                       help=f"{what} (default {default:,})")
    return p


def profiler_options(args: argparse.Namespace) -> Dict[str, Any]:
    """The Profiler's keyword arguments for a parsed line."""
    return dict(
        sample=None if args.no_sample else args.sample,
        torch_ops=args.torch_ops, torch_modules=args.torch_modules,
        cuda=GPU_MODES[args.gpu], cuda_sync=args.cuda_sync,
        memory=not args.no_memory, memory_interval=args.memory_interval,
        cpu_resolution=args.cpu_resolution,
        compensate=not args.no_compensate,
        children=not args.no_children,
        dataloaders=not args.no_dataloaders, window=args.window,
        max_spans=args.max_spans, max_stages=args.max_stages,
        max_samples=args.max_samples, max_gpu_events=args.max_gpu_events,
        max_children=args.max_children)


def parse_line(line: str) -> Tuple[argparse.Namespace, "Profiler"]:
    """The line's options and the Profiler they make; UsageError for
    any the Profiler refuses, before the cell runs. _HelpShown after -h."""
    from ..record.profiler import Profiler
    try:
        words = shlex.split(line)
    except ValueError as e:
        raise usage_error(f"{e} in {line!r}") from None
    args = line_parser().parse_args(words)
    for flag, path in (("-o", args.out), ("--html", args.html)):
        # said before the cell runs, not after it has run for an hour
        if path and not Path(path).expanduser().absolute().parent.is_dir():
            raise usage_error(f"{flag} {path!r}: no such folder")
    options = profiler_options(args)
    try:
        return args, Profiler(**options)
    except (TypeError, ValueError) as e:
        # the Profiler names its argument; the line, its option
        said = str(e)
        name = said.split(" ", 1)[0]
        if name in options:
            said = f"--{name.replace('_', '-')}{said[len(name):]}"
        raise usage_error(said) from None


def compile_cell(line: str, cell: str, shell: Any) \
        -> Tuple[CodeType, Optional[CodeType]]:
    """The cell's statements and its last expression (None when it ends
    in a statement or a ';'), compiled as IPython compiles a cell
    (%magics, !commands and the shell's AST transformers applied), with
    the lines numbered as the notebook shows them, the magic's first."""
    source = shell.transform_cell(cell)
    magic = f"%%aquaprof {line}".rstrip()
    name = shell.compile.cache(f"{magic}\n{source}", _cell_number(shell),
                               raw_code=f"{magic}\n{cell}")
    # a blank line in the magic's place: the lines, a SyntaxError's too,
    # numbered as the notebook shows them
    tree = shell.transform_ast(shell.compile.ast_parse("\n" + source,
                                                       name))
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr) and \
            not _quiet(shell, cell):
        last = shell.compile(ast.Expression(tree.body.pop().value), name,
                             "eval")
    return shell.compile(tree, name, "exec"), last


def _cell_number(shell: Any) -> int:
    """The running cell's In[] number: IPython 9 counts the next cell's
    before it runs one, IPython 8 after."""
    running = shell.displayhook.exec_result
    if running is not None and running.execution_count is not None:
        return int(running.execution_count)
    return int(shell.execution_count)


def _quiet(shell: Any, cell: str) -> bool:
    """A cell ending in ';' shows no value, in IPython's reading of it."""
    ends_in_semicolon = getattr(shell.displayhook,
                                "semicolon_at_end_of_expression", None)
    if ends_in_semicolon is None:
        return cell.rstrip().endswith(";")
    return bool(ends_in_semicolon(cell))


def start(prof: "Profiler") -> None:
    """Starts the Profiler; UsageError, before the cell runs, where it
    cannot start (--gpu on where CUDA is missing)."""
    try:
        prof.start()
    except RuntimeError as e:
        raise usage_error(f"the Profiler cannot start: {e}") from None


def run_profiled(prof: "Profiler", body: CodeType,
                 last: Optional[CodeType], shell: Any) -> Any:
    """The cell's last value, its code run inside the started Profiler
    and the stage "cell", which stop at its last line: nothing of
    IPython's work is in them. A cell that raised stops the Profiler as
    the end of a `with` block would: its report says what cut it short."""
    __tracebackhide__ = True    # noqa: F841 (IPython hides this frame)
    from .._core import stage
    scope = (shell.user_global_ns, shell.user_ns)
    try:
        with stage("cell"):
            exec(body, *scope)
            return None if last is None else eval(last, *scope)
    except BaseException as e:
        # as a `with Profiler()` block ends: a cell cut short (an error,
        # the kernel's interrupt) has a report that says so
        prof.__exit__(type(e), e, e.__traceback__)
        raise
    finally:
        prof.stop()     # stopped already where the cell raised


def aquaprof_magic(line: str, cell: str, shell: Any) -> Optional["Report"]:
    """``%%aquaprof [options]``: runs the cell under a Profiler, inside a
    stage named ``cell``, and returns the report, which IPython shows as
    the cell's output (``%%aquaprof -h`` lists the options). The cell's
    value, if any, is shown first. A cell that raised shows its report,
    then its error."""
    __tracebackhide__ = True    # noqa: F841 (IPython hides this frame)
    import IPython.display
    try:
        args, prof = parse_line(line)
    except _HelpShown:
        return None
    body, last = compile_cell(line, cell, shell)
    _say_if_nested()
    start(prof)
    try:
        value = run_profiled(prof, body, last, shell)
    except BaseException:
        IPython.display.display(_saved(prof.report(), args))
        raise
    report = _saved(prof.report(), args)
    if value is not None:
        IPython.display.display(value)
    return report


def _say_if_nested() -> None:
    """A Profiler started in an earlier cell and never stopped is easily
    forgotten: the cell's report, nested in it, would lack what the line
    asked for (call stacks, GPU tracing) with no word of why."""
    from .._core import active
    if active():
        import sys
        print("%%aquaprof: a Profiler started earlier is still running: "
              "this cell's report is nested in it, recorded under its "
              "settings, with no call stacks or GPU tracing of its own; "
              "stop it for a report of the cell alone", file=sys.stderr)


def _saved(report: "Report", args: argparse.Namespace) -> "Report":
    if args.out:
        report.save(Path(args.out).expanduser())
    if args.html:
        report.to_html(Path(args.html).expanduser())
    return report


def load_ipython_extension(shell: Any) -> None:
    def aquaprof(line: str, cell: str) -> Optional["Report"]:
        __tracebackhide__ = True    # noqa: F841 (IPython hides this frame)
        return aquaprof_magic(line, cell, shell)
    # what `%%aquaprof?` shows
    aquaprof.__doc__ = f"{inspect.cleandoc(aquaprof_magic.__doc__ or '')}" \
        f"\n\n{line_parser().format_help()}"
    shell.register_magic_function(aquaprof, magic_kind="cell",
                                  magic_name="aquaprof")

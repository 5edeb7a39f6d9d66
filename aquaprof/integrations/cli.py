"""The command line: ``python -m aquaprof`` or ``aquaprof``.

    aquaprof run script.py [args]          profile a script
    aquaprof show run.json                 print a saved report
    aquaprof compare base.json new.json    exit 1 when a stage got slower
    aquaprof flamegraph run.json -o flame.svg [--diff base.json]
    aquaprof trace run.json -o trace.json
    aquaprof merge rank0.json rank1.json ... -o all.json
    aquaprof history runs.db [--add run.json] [--stage NAME]
    aquaprof demo                          the plane-sweep demo

A user's mistake (a missing or broken file, a bad threshold), and any file
that is not a report or a history, however crafted, is one line on stderr
and exit code 2, never a traceback; 1 is only compare's "slower" (and, for
run, the script's own code); 130 is Ctrl-C.
"""
from __future__ import annotations

import argparse
import runpy
import sys
from pathlib import Path
from typing import Any, Optional, Sequence

from .._version import __version__
from .._units import fmt_time, printable
from .._progress import progress
from ..report import Report, ReportError


class UserError(Exception):
    """A mistake in the command line or its files: one line, exit 2."""


def _load(path: str) -> Report:
    try:
        return Report.load(path)
    except ReportError as e:
        raise UserError(str(e)) from None


def _threshold(text: str) -> float:
    from ..analysis.compare import parse_threshold
    try:
        return parse_threshold(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def _interval(text: str) -> float:
    """--sample's seconds, within the Profiler's bounds (0, which turns
    sampling off there, is --no-sample's to say)."""
    from ..profiler import sample_interval_ns
    try:
        value = float(text)
        if value == 0:
            raise ValueError("0 takes no samples: use --no-sample")
        sample_interval_ns(value)
    except ValueError as e:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a sampling interval ({e})") from None
    return value


# ------------------------------------------------------------ commands

def cmd_run(args: argparse.Namespace) -> int:
    from .. import Profiler, stage
    script = Path(args.script)
    if not script.is_file():
        raise UserError(f"no script {str(script)!r}")
    out = Path(args.out) if args.out else script.parent
    out.mkdir(parents=True, exist_ok=True)
    sys.argv = [str(script)] + list(args.args)
    sys.path.insert(0, str(script.resolve().parent))
    run_stage = f"run {script.name}"
    with Profiler(sample=None if args.no_sample else args.sample) as prof:
        with stage(run_stage):
            code = _run_script(script)
    try:
        report = prof.report()
        print(report)
        _print_call_tree(report, run_stage, str(script))
        saved = report.save(out / f"{script.stem}.aquaprof.json")
        trace = report.to_chrome_trace(out / f"{script.stem}.trace.json")
        print(f"\nreport: {saved}\ntrace:  {trace} (open in "
              f"ui.perfetto.dev)")
    except KeyboardInterrupt:
        # a second Ctrl-C while saving: files are written atomically, so
        # each is whole or absent
        return _error("interrupted while saving the report", 130)
    sys.stdout.flush()
    return code


def _print_call_tree(report: Any, run_stage: str, script: str) -> None:
    """The script's sampled call tree, from its own first frame down."""
    from ..views.calltree import call_tree
    sampling = report.sampling
    if run_stage not in report or sampling is None:
        return
    lines = call_tree(report, run_stage, start_file=script)
    if lines:
        print(f"\ncall tree of {run_stage!r}: share of its sampled time "
              f"with and without callees (sampled every "
              f"{sampling.interval * 1e3:g} ms)")
        print("\n".join(lines))


def _run_script(script: Path) -> int:
    """Runs script as __main__ and returns the exit code Python would
    give it: the SystemExit code, 1 after an exception, 130 after Ctrl-C,
    with the traceback Python would print, aquaprof's frames left out.
    Whatever happens, the caller then keeps the profile."""
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return e.code or 0
        print(e.code, file=sys.stderr)     # sys.exit("message")
        return 1
    except KeyboardInterrupt as e:
        _print_script_error(e, script)
        return 130
    except BaseException as e:             # noqa: BLE001 -- the script's
        _print_script_error(e, script)
        return 1
    return 0


def _print_script_error(error: BaseException, script: Path) -> None:
    """The script's traceback from its own first frame on, through
    sys.excepthook as Python would (a hook the script set included)."""
    tb = error.__traceback__
    target = str(script.resolve())
    while tb is not None and \
            str(Path(tb.tb_frame.f_code.co_filename).resolve()) != target:
        tb = tb.tb_next
    if tb is not None:
        # the hook prints the traceback the exception holds
        error = error.with_traceback(tb)
    sys.stdout.flush()
    sys.excepthook(type(error), error, error.__traceback__)
    sys.stderr.flush()


def cmd_show(args: argparse.Namespace) -> int:
    from ..views.text import terminal_text
    print(terminal_text(_load(args.report)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    base, new = _load(args.base), _load(args.new)
    comparison = new.compare(base, args.threshold, args.alpha)
    print(f"{args.base} -> {args.new}")
    print(comparison)
    slower = comparison.regressions
    if slower:
        print(f"\n{len(slower)} regression(s): "
              f"{', '.join(printable(c.path) for c in slower)}")
        return 1
    print("\nno regression")
    return 0


def _when(run) -> str:
    import datetime
    try:
        return datetime.datetime.fromtimestamp(run.time).strftime(
            "%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):   # a time out of range
        return "????-??-?? ??:??"


def cmd_history(args: argparse.Namespace) -> int:
    from ..analysis.history import History, HistoryError
    if not args.add and not Path(args.db).exists():
        # only --add makes a new history: a mistyped name is not one
        raise UserError(f"no history {args.db!r} (--add REPORT makes one)")
    # every report first: a broken one adds nothing
    reports = [(path, _load(path)) for path in args.add or []]
    try:
        history = History(args.db)
    except HistoryError as e:
        raise UserError(str(e)) from None
    with history:
        for path, report in reports:
            try:
                run_id = history.add(report, label=args.label)
            except HistoryError as e:
                raise UserError(str(e)) from None
            print(f"added {path} as run {run_id}")
        try:
            _print_history(history, args)
        except HistoryError as e:
            raise UserError(str(e)) from None
    return 0


def _print_history(history, args: argparse.Namespace) -> None:
    runs = history.runs()
    print(f"{len(runs)} run(s) in {args.db}")
    for r in runs:
        print(f"  {r.id:4d}  {_when(r)}  "
              f"{printable((r.git_commit or '-')[:10]):10s}  "
              f"{printable(r.host or '-')}  {printable(r.label or '')}")
    stages = [args.stage] if args.stage else history.stages()
    if args.stage:
        print(f"\n{printable(args.stage)}, median call:")
        for r, value in history.trend(args.stage):
            print(f"  run {r.id:4d}  {_when(r)}  {fmt_time(value)}")
    flagged = [(stage, run, change) for stage in stages
               for run, change in history.steps(stage, args.threshold)]
    if flagged:
        print()
    for stage, run, change in flagged:
        print(f"! run {run.id} ({_when(run)}, "
              f"{printable((run.git_commit or '-')[:10])}): "
              f"{printable(stage)} stepped up {change * 100:+.0f} %")


def cmd_flamegraph(args: argparse.Namespace) -> int:
    report = _load(args.report)
    from ..views.flamegraph import write_flamegraph
    base = _load(args.diff) if args.diff else None
    title = (f"aquaprof: {args.report} against {args.diff}" if base
             else f"aquaprof: {args.report}")
    print(write_flamegraph(report, args.out, title, base))
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    path = _load(args.report).to_chrome_trace(args.out, args.max_events)
    print(f"{path} (open in ui.perfetto.dev or chrome://tracing)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from ..analysis.merging import merge_reports
    reports = [_load(p) for p in progress(args.reports, "loading")]
    merged = merge_reports(reports, [Path(p).stem for p in args.reports])
    print(merged)
    saved = merged.save(args.out)
    print(f"\nmerged report: {saved}")
    if args.trace:
        print(f"trace: {merged.to_chrome_trace(args.trace)}")
    return 0


# ---------------------------------------------------------------- main

def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="aquaprof", description="Profile GPU pipelines; view, compare "
        "and merge saved reports.")
    p.add_argument("--version", action="version",
                   version=f"aquaprof {__version__}")
    sub = p.add_subparsers(dest="command", metavar="command")
    sub.required = True

    run = sub.add_parser(
        "run", help="profile a Python script",
        description="Runs SCRIPT under a Profiler, inside a stage "
        "'run SCRIPT'; arguments after SCRIPT are the script's own.")
    run.add_argument("script")
    run.add_argument("args", nargs=argparse.REMAINDER,
                     help="the script's own arguments")
    run.add_argument("-o", "--out", help="folder for SCRIPT.aquaprof.json "
                     "and SCRIPT.trace.json (default: the script's)")
    run.add_argument("--sample", type=_interval, default=0.001,
                     metavar="SECONDS", help="seconds between samples of "
                     "the call stacks (default 0.001)")
    run.add_argument("--no-sample", action="store_true",
                     help="record stages only, no call stacks")
    run.set_defaults(func=cmd_run)

    show = sub.add_parser("show", help="print a saved report")
    show.add_argument("report")
    show.set_defaults(func=cmd_show)

    compare = sub.add_parser(
        "compare", help="compare two reports; exit 1 on a regression")
    compare.add_argument("base")
    compare.add_argument("new")
    compare.add_argument("--threshold", type=_threshold, default=0.05,
                         help="smallest change of a stage's median call "
                              "that counts (default 5%%)")
    compare.add_argument("--alpha", type=float, default=0.01,
                         help="significance of the Mann-Whitney test on "
                              "the call durations (default 0.01)")
    compare.set_defaults(func=cmd_compare)

    hist = sub.add_parser(
        "history", help="runs stored in a SQLite history; flags steps",
        description="Lists the runs of a history file (aquaprof.History), "
        "flags runs where a stage's median call stepped up against the "
        "runs before, and adds reports with --add.")
    hist.add_argument("db", help="the history file (created if missing)")
    hist.add_argument("--add", nargs="+", metavar="REPORT",
                      help="reports to store first")
    hist.add_argument("--label", help="label of the runs added")
    hist.add_argument("--stage", help="print this stage's trend")
    hist.add_argument("--threshold", type=_threshold, default=0.1,
                      help="step size that is flagged (default 10%%)")
    hist.set_defaults(func=cmd_history)

    flame = sub.add_parser("flamegraph", help="interactive SVG flamegraph")
    flame.add_argument("report")
    flame.add_argument("-o", "--out", required=True)
    flame.add_argument("--diff", metavar="BASE",
                       help="colour by the change from this report")
    flame.set_defaults(func=cmd_flamegraph)

    trace = sub.add_parser("trace", help="Chrome/Perfetto trace JSON")
    trace.add_argument("report")
    trace.add_argument("-o", "--out", required=True)
    trace.add_argument("--max-events", type=int, default=1_000_000)
    trace.set_defaults(func=cmd_trace)

    merge = sub.add_parser("merge", help="reports of several processes "
                           "or ranks as one")
    merge.add_argument("reports", nargs="+")
    merge.add_argument("-o", "--out", required=True)
    merge.add_argument("--trace", help="also write the merged trace here")
    merge.set_defaults(func=cmd_merge)

    # handled in main(): the demo parses its own arguments
    sub.add_parser("demo", help="the plane-sweep demo (see aquaprof demo "
                   "--help)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["demo"]:
        # every argument is the demo's, options first ones included
        from .demo import main as demo_main
        return demo_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        return args.func(args)
    except UserError as e:
        return _error(str(e))
    except (OSError, ValueError, ArithmeticError) as e:
        # files that cannot be written, bad values: the user's to fix
        text = e.strerror if isinstance(e, OSError) and e.strerror else e
        filename = getattr(e, "filename", None)
        name = f"{filename!r}: " if filename else ""
        return _error(f"{name}{text}")
    except MemoryError:
        return _error("out of memory")
    except KeyboardInterrupt:
        return _error("interrupted", 130)
    except Exception as e:      # noqa: BLE001 -- the contract: no traceback
        # a bug of ours, which some input reached: still one line, and
        # words that say it is not the user's mistake
        return _error(f"internal error ({type(e).__name__}: {e}); please "
                      f"report it with the file that caused it")


def _error(text: str, code: int = 2) -> int:
    """One line on stderr, whatever the text holds; code 2: the input or
    the command line was wrong (1 is compare's "slower")."""
    line = printable(" ".join(str(text).split()))
    print(f"aquaprof: error: {line}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())


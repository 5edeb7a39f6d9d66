"""The command line: ``python -m aquaprof`` or ``aquaprof``.

    aquaprof run script.py [args]          profile a script
    aquaprof show run.json                 print a saved report
    aquaprof compare base.json new.json    exit 1 when a stage got slower
    aquaprof flamegraph run.json -o flame.svg [--diff base.json]
    aquaprof trace run.json -o trace.json
    aquaprof merge rank0.json rank1.json ... -o all.json
    aquaprof history runs.db [--add run.json] [--stage NAME]
    aquaprof demo                          the plane-sweep demo

A user's mistake (a missing or broken file, a bad threshold) is one line on
stderr and exit code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import runpy
import sys
import traceback
from pathlib import Path
from typing import Optional, Sequence

from .._version import __version__
from .._units import fmt_time
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
    code = 0
    with Profiler() as prof:
        with stage(f"run {script.name}"):
            try:
                runpy.run_path(str(script), run_name="__main__")
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else (
                    0 if e.code is None else 1)
            except Exception:
                # the script's own error: its traceback, then the profile
                # of what ran up to it
                traceback.print_exc()
                code = 1
    report = prof.report()
    print(report)
    saved = report.save(out / f"{script.stem}.aquaprof.json")
    trace = report.to_chrome_trace(out / f"{script.stem}.trace.json")
    print(f"\nreport: {saved}\ntrace:  {trace} (open in ui.perfetto.dev)")
    return code


def cmd_show(args: argparse.Namespace) -> int:
    print(_load(args.report))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    base, new = _load(args.base), _load(args.new)
    comparison = new.compare(base, args.threshold, args.alpha)
    print(f"{args.base} -> {args.new}")
    print(comparison)
    slower = comparison.regressions
    if slower:
        print(f"\n{len(slower)} regression(s): "
              f"{', '.join(c.path for c in slower)}")
        return 1
    print("\nno regression")
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    import datetime
    from ..analysis.history import History
    try:
        history = History(args.db)
    except Exception as e:     # sqlite3.Error: not a database, locked...
        raise UserError(f"cannot open history {args.db!r}: {e}") from None
    with history:
        for path in args.add or []:
            run_id = history.add(_load(path), label=args.label)
            print(f"added {path} as run {run_id}")

        def when(run):
            return datetime.datetime.fromtimestamp(run.time).strftime(
                "%Y-%m-%d %H:%M")

        runs = history.runs()
        print(f"{len(runs)} run(s) in {args.db}")
        for r in runs:
            print(f"  {r.id:4d}  {when(r)}  {(r.git_commit or '-')[:10]:10s}"
                  f"  {r.host or '-'}  {r.label or ''}")
        stages = [args.stage] if args.stage else history.stages()
        if args.stage:
            print(f"\n{args.stage}, median call:")
            for r, value in history.trend(args.stage):
                print(f"  run {r.id:4d}  {when(r)}  {fmt_time(value)}")
        flagged = [(stage, run, change) for stage in stages
                   for run, change in history.steps(stage, args.threshold)]
        if flagged:
            print()
        for stage, run, change in flagged:
            print(f"! run {run.id} ({when(run)}, "
                  f"{(run.git_commit or '-')[:10]}): {stage} stepped up "
                  f"{change * 100:+.0f} %")
    return 0


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
        print(f"aquaprof: error: {e}", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        # files that cannot be written, bad values: the user's to fix
        text = e.strerror if isinstance(e, OSError) and e.strerror else e
        filename = getattr(e, "filename", None)
        name = f" {filename!r}" if filename else ""
        print(f"aquaprof: error:{name} {text}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())


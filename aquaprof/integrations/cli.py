"""The command line: ``python -m aquaprof`` or ``aquaprof``.

    aquaprof run script.py [args]          profile a script
    aquaprof show run.json                 print a saved report
    aquaprof compare base.json new.json [--base more.json] [--new more.json]
                                           exit 1 when a stage got slower
    aquaprof flamegraph run.json -o flame.svg [--diff base.json]
    aquaprof folded run.json [-o run.folded]    folded stacks
    aquaprof speedscope run.json -o run.speedscope.json
    aquaprof trace run.json -o trace.json
    aquaprof html run.json -o page.html    a self-contained HTML page
    aquaprof merge rank0.json rank1.json ... -o all.json [--labels a,b]
    aquaprof history runs.db [--add run.json] [--stage NAME]
    aquaprof demo                          the plane-sweep demo

A user's mistake (a missing or broken file, a bad threshold), and any file
that is not a report or a history, however crafted, is one line on stderr
and exit code 2, never a traceback; 1 is only compare's "slower" (and, for
run, the script's own code); Ctrl-C ends it by SIGINT, as it ends
Python (a shell shows 130, and stops a loop it runs); 141 a reader that
left early (``| head``), but for run, whose code stays the script's.
"""
from __future__ import annotations

import argparse
import contextlib
import difflib
import errno
import math
import os
# runpy.run_path imports pkgutil on its first call: before the run, not
# in the script's profile
import pkgutil  # noqa: F401
import re
import runpy
import signal
import sys
import threading
from pathlib import Path
from typing import (TYPE_CHECKING, Any, Dict, Iterator, List, NamedTuple,
                    NoReturn, Optional, Sequence, Tuple)

from .._version import __version__
from ..common.units import fmt_time, printable
from ..common.progress import progress
from ..common.words import first_of, plural, shorten
from ..analysis.verdict import MEASURES
from ..record.saving import SigtermSave, die_by
from ..report import Report, ReportError

if TYPE_CHECKING:
    from ..analysis.compare import Sessions


class UserError(Exception):
    """A mistake in the command line or its files: one line, exit 2."""


class _NotStarted(Exception):
    """The script never ran a line of its own (it does not compile): its
    error is printed as Python prints it, and there is no profile."""


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage error in one line like every other error,
    and a value such as -5%, -1e-3 or -inf handed to its option's check:
    argparse reads only -5 and -.5 as values and anything else that starts
    with "-" as an unknown option, which tells the user nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-\.?\d|^-(inf|nan)",
                                                   re.IGNORECASE)

    def error(self, message: str) -> NoReturn:
        sys.exit(_error(f"{message} (see {self.prog} --help)",
                        prog=self.prog))


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
    from ..record.options import sample_interval_ns
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
    from .._core import stage
    from ..record.profiler import Profiler
    # every path made absolute before the script runs: it may chdir
    here = Path.cwd()
    script = Path(args.script)
    if not script.is_file():
        raise UserError(f"no script {str(script)!r}")
    out = (Path(args.out) if args.out else script.parent).absolute()
    if out.exists() and not out.is_dir():
        raise UserError(f"-o {str(out)!r} is a file: run writes its report "
                        f"and trace into a folder")
    out.mkdir(parents=True, exist_ok=True)
    page = _out_path(args.html, f"{script.stem}.html").absolute() \
        if args.html else None
    if page is not None and not page.parent.is_dir():
        # said before the script runs, not after it has run for an hour
        raise UserError(f"--html {args.html!r}: folder "
                        f"{str(page.parent)!r} does not exist")
    sys.argv = [str(script)] + list(args.args)
    folder = script.resolve().parent
    sys.path.insert(0, str(folder))
    # a file name of undecodable bytes holds lone surrogates, which no
    # stage name may
    run_stage = f"run {printable(script.name)}"
    # a child the script forks (os.fork without exec) runs on into this
    # function as the script's copy: it has no profile of its own
    process = os.getpid()
    report_path = out / f"{script.stem}.aquaprof.json"
    given = args.out or args.script
    # a SIGTERM from the script's end to the report saved (the stop
    # waits for child processes' reports) waits for the save
    with _sigterm_noted() as terminated:
        try:
            with Profiler(sample=None if args.no_sample else args.sample) \
                    as prof, _sigterm_saves(prof, report_path, given, here):
                try:
                    with stage(run_stage):
                        ending = _run_script(script)
                        if ending.code:
                            # the report keeps it: the stage counts as
                            # raised
                            raise _ScriptFailed
                except _ScriptFailed:
                    pass
                # outside the stage: its time and call tree are the
                # script's
                left = _wait_for_threads()
        except _NotStarted:
            return 1            # as `python script.py` after a SyntaxError
        code = ending.code if left is None else _interrupted()
        if os.getpid() != process:
            # the forked child's end is the script's: its own exit code,
            # and no report (the parent's is the profile, and the child's
            # copy of the session has none), no files, nothing printed
            return code
        # saved before anything is printed: a reader that leaves early
        # (`| head`) still gets the files; a Ctrl-C meanwhile waits for
        # the report, which is what the run was for
        with _ctrl_c_noted(over_the_scripts=True) as pressed:
            report = prof.report()
            saved = report.save(report_path)
    if terminated:
        _say_terminated(saved, given, here)
        die_by(signal.SIGTERM)
    trace = None
    try:
        if pressed:
            raise KeyboardInterrupt
        trace = report.to_chrome_trace(out / f"{script.stem}.trace.json")
        if page is not None:
            page = report.to_html(page, f"aquaprof: {script.name}")
    except KeyboardInterrupt:
        # files are written atomically: each is whole or absent
        unwritten = ("the page was" if trace is not None else
                     "the trace and the page were" if page is not None
                     else "the trace was")
        return _error(f"interrupted: the report is saved "
                      f"({_shown(saved, given, here)}); {unwritten} not "
                      f"written", _interrupted())
    # only now: the script's own prints keep Python's encoding errors
    _escape_unencodable(sys.stdout)
    failed = _failure(script, ending)
    try:
        if failed:
            print(f"aquaprof: {failed}: the profile below covers the run "
                  f"up to there")
        print(_terminal_text(report))
        _print_call_tree(report, run_stage, str(script),
                         user_roots=[str(folder), str(here)],
                         show_all=args.show_all)
        print(f"\nreport: {_shown(saved, given, here)}"
              f"{f' (of a failed run: {failed})' if failed else ''}\n"
              f"trace:  {_shown(trace, given, here)} (open in "
              f"ui.perfetto.dev)")
        if page is not None:
            print(f"page:   {_shown(page, args.html, here)} (open in a "
                  f"browser)")
        sys.stdout.flush()
    except BrokenPipeError:
        # the report was cut, not the run: its code stays the script's
        _reader_gone()
    if left:
        _exit_now(code)
    return code


def _shown(path: Path, given: str, here: Path) -> str:
    """A path the command wrote, as the user's shell (still in `here`,
    whatever folder the script moved to) names it: relative where the
    user gave a relative path."""
    if Path(given).is_absolute():
        return str(path)
    try:
        return os.path.relpath(path, here)
    except ValueError:          # another drive, on Windows
        return str(path)


def _wait_for_threads() -> Optional[List[threading.Thread]]:
    """Waits, as Python does before it exits, for the non-daemon threads
    the script left running and any they start, so that their work is in
    the report; None once they all ended. Ctrl-C stops the wait: the
    threads still running then, whose work the report holds so far."""
    with _ctrl_c_noted() as pressed:
        _end_idle_executors()
        while not pressed:
            running = _threads_running()
            if not running:
                return None
            # a timeout, so that a Ctrl-C noted is seen within it
            running[0].join(0.05)
    running = _threads_running()
    if not running:             # they ended as Ctrl-C came: nothing lost
        return None
    names = _listed([t.name for t in running])
    print(f"aquaprof: interrupted while waiting for {len(running)} "
          f"thread(s) the script left running ({names}): the report "
          f"holds what they recorded so far", file=sys.stderr)
    return running


@contextlib.contextmanager
def _ctrl_c_noted(over_the_scripts: bool = False) -> Iterator[List[bool]]:
    """Ctrl-C noted in the list it yields instead of raised: a
    KeyboardInterrupt inside Thread.join can mark a thread that still
    runs as stopped (CPython 3.11), and the wait must know which run. A
    SIGINT handler the script set stays in place, unless
    over_the_scripts (the script has ended: its handler has nothing left
    to stop)."""
    pressed: List[bool] = []
    previous = signal.getsignal(signal.SIGINT)
    # None: a handler set in C, which Python could not put back
    swap = ((over_the_scripts and previous is not None
             or previous is signal.default_int_handler)
            and threading.current_thread() is threading.main_thread())
    if swap:
        signal.signal(signal.SIGINT, lambda *_: pressed.append(True))
    try:
        yield pressed
    except KeyboardInterrupt:           # raised by the script's handler
        pressed.append(True)
    finally:
        if swap:
            signal.signal(signal.SIGINT, previous)


@contextlib.contextmanager
def _sigterm_saves(prof: Any, path: Path, given: str,
                   here: Path) -> Iterator[None]:
    """While the script runs (and its threads are waited for), a SIGTERM
    that nobody handles (`kill`, a job scheduler's end, a container's
    stop) saves the report of the run up to there, says so on stderr and
    then ends the process by SIGTERM, as it would have ended unprofiled
    (aquaprof.record.saving.SigtermSave says when it cannot). Without
    this the profile was lost whole."""
    def save() -> None:
        try:
            prof.stop()
            saved = prof.report().save(path)
            _say_terminated(saved, given, here)
        except BaseException as e:      # noqa: BLE001 -- we end anyway
            _error(f"terminated by SIGTERM; the report could not be saved "
                   f"({type(e).__name__}: {e})", 143)

    keeper = SigtermSave(save)
    keeper.arm()
    try:
        yield
    finally:
        keeper.disarm()


@contextlib.contextmanager
def _sigterm_noted() -> Iterator[List[bool]]:
    """While the run stops and its report is saved, a SIGTERM nobody
    handles waits for the save (noted in the list it yields), instead of
    leaving no report and a half-written temporary file. _sigterm_saves,
    inside, takes this handler for none and puts it back."""
    noted: List[bool] = []

    def note(*_: Any) -> None:
        noted.append(True)

    note.notes_sigterm = True        # type: ignore[attr-defined]
    swap = (threading.current_thread() is threading.main_thread()
            and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
    if swap:
        signal.signal(signal.SIGTERM, note)
    try:
        yield noted
    finally:
        if swap and signal.getsignal(signal.SIGTERM) is note:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def _say_terminated(saved: Path, given: str, here: Path) -> None:
    print(f"aquaprof: terminated by SIGTERM: the report of the run up to "
          f"there is saved ({printable(_shown(saved, given, here))}); the "
          f"trace was not written", file=sys.stderr)


def _end_idle_executors() -> None:
    """Starts what Python's exit runs before it joins threads: it lets a
    ThreadPoolExecutor the script never shut down end its workers once
    their work is done, which would otherwise wait for work for ever.
    On a thread of its own, as it joins those workers, and Ctrl-C must
    not wait for that."""
    calls = list(reversed(getattr(threading, "_threading_atexits", [])))

    def end_them() -> None:
        for call in calls:
            call()
    if calls:
        threading.Thread(target=end_them, name="aquaprof: end executors",
                         daemon=True).start()


def _threads_running() -> List[threading.Thread]:
    ours = (threading.current_thread(), threading.main_thread())
    return [t for t in threading.enumerate()
            if not t.daemon and t.is_alive() and t not in ours]


#: the command was ended by Ctrl-C (its code then 130): the process ends
#: by SIGINT, as Python's does, where python -m aquaprof runs it
interrupted: List[bool] = []


def _interrupted(code: int = 130) -> int:
    """code, noting that Ctrl-C ended the command."""
    interrupted.append(True)
    return code


def _exit_now(code: int) -> NoReturn:
    """Ends the process with the threads Ctrl-C left running, which
    Python's own exit would wait for again; the atexit functions run
    first, as they do when Ctrl-C ends that wait."""
    import atexit
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_functions is not None:
        run_exit_functions()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):   # a reader gone, a closed stream
            pass
    if interrupted and hasattr(signal, "SIGINT"):
        die_by(signal.SIGINT)
    os._exit(code)


def _escape_unencodable(stream: Any) -> None:
    """Characters stream cannot encode (under an ASCII locale, or a lone
    surrogate from a file name of undecodable bytes) written escaped, as
    \\xe9 or \\udcff, rather than failing the whole output."""
    reconfigure = getattr(stream, "reconfigure", None)
    if reconfigure is None:
        return
    try:
        reconfigure(errors="backslashreplace")
    except (OSError, ValueError):       # a reader gone, a closed stream
        pass


#: lines of the call tree run prints, at most, unless --show-all: with
#: the report above it, a training script's output fits 60 lines
TREE_LINES = 30


def _print_call_tree(report: Any, run_stage: str, script: str,
                     user_roots: Sequence[str], show_all: bool) -> None:
    """The script's sampled call tree, from its own first frame down,
    then that of the threads it started that did more than wait (its
    work, where it handed it to a pool); library and import frames
    folded unless show_all."""
    from ..views.calltree import call_tree, threads_tree
    from ..views.threads import sampled_names
    sampling = report.sampling
    if run_stage not in report or sampling is None:
        return
    cut = None if show_all else TREE_LINES
    lines = call_tree(report, run_stage, start_file=script,
                      fold=not show_all, user_roots=user_roots,
                      max_lines=cut)
    if lines:
        print(f"\ncall tree of {run_stage!r}: share of its sampled time "
              f"with and without callees (sampled every "
              f"{sampling.interval * 1e3:g} ms)")
        if not show_all:
            print("library and import frames folded into [N frames "
                  "hidden] lines; --show-all shows every frame")
        print("\n".join(lines))
    others, threads = threads_tree(report, fold=not show_all,
                                   user_roots=user_roots, max_lines=cut)
    if others:
        names = sampled_names(report)
        named = first_of([shorten(names.get(k, f"tid {k[1]}"), 40)
                          for k in threads], 4)
        print(f"\ncall tree of the script's "
              f"{plural(len(threads), 'other thread')} that did more than "
              f"wait ({named}; their stages' samples too): share of their "
              f"sampled time")
        print("\n".join(others))


class _Ending(NamedTuple):
    """How the script ended: the exit code Python would give it, and
    what ended it when that is not 0 (an exception's type, sys.exit)."""

    code: int
    cause: str = ""


class _ScriptFailed(Exception):
    """Raised through the stage 'run SCRIPT' when the script failed, so
    that the report counts that stage as raised, then caught: the exit
    code stays the script's."""


def _failure(script: Path, ending: _Ending) -> str:
    """'job.py failed (ValueError, exit status 1)'; "" when it did not."""
    if not ending.code:
        return ""
    return (f"{printable(script.name)} failed ({ending.cause}, exit "
            f"status {ending.code})")


def _run_script(script: Path) -> _Ending:
    """Runs script as __main__ and returns how it ended, with the exit
    code Python would give it: the SystemExit code, 1 after an
    exception, 130 after Ctrl-C, with the traceback Python would print,
    aquaprof's frames left out. The caller then keeps the profile,
    unless the script never started (it does not compile): _NotStarted,
    its error printed."""
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as e:
        if e.code is None or isinstance(e.code, int):
            return _Ending(e.code or 0, f"sys.exit({e.code})")
        print(e.code, file=sys.stderr)     # sys.exit("message")
        return _Ending(1, "sys.exit with a message")
    except BaseException as e:             # noqa: BLE001 -- the script's
        own = _script_traceback(e)
        _print_script_error(e, own)
        if isinstance(e, KeyboardInterrupt):
            return _Ending(_interrupted(), "KeyboardInterrupt")
        if own is None:
            raise _NotStarted from None
        return _Ending(1, printable(type(e).__name__))
    return _Ending(0)


_RUN_CODE = getattr(getattr(runpy, "_run_code", None), "__code__", None)


def _script_traceback(error: BaseException) -> Any:
    """The part of error's traceback from the script's own first frame
    on (those below runpy's exec of its code); None when its code never
    ran: a SyntaxError, a file that cannot be decoded."""
    tb = error.__traceback__
    if _RUN_CODE is None:       # a runpy unlike 3.9 to 3.13's: all of it
        return tb
    while tb is not None:
        if tb.tb_frame.f_code is _RUN_CODE:
            return tb.tb_next
        tb = tb.tb_next
    return None


def _print_script_error(error: BaseException, tb: Any) -> None:
    """The script's error with traceback tb, through sys.excepthook as
    Python would (a hook the script set included)."""
    error = error.with_traceback(tb)
    sys.stdout.flush()
    sys.excepthook(type(error), error, tb)
    sys.stderr.flush()


def _alpha(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"alpha must be a number in (0, "
                                         f"1), got {text!r}")
    return value


def cmd_show(args: argparse.Namespace) -> int:
    print(_terminal_text(_load(args.report)))
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    from ..analysis.compare import Comparison
    base_files = [args.base, *(args.more_base or [])]
    new_files = [args.new, *(args.more_new or [])]
    base = [_load(path) for path in base_files]
    new = [_load(path) for path in new_files]
    comparison = Comparison(base, new, args.threshold, args.alpha,
                            args.measure, _sessions(base_files, new_files))
    print(f"{', '.join(base_files)} -> {', '.join(new_files)}")
    print(comparison)
    slower = comparison.regressions
    if slower:
        print(f"\n{len(slower)} regression(s): "
              f"{', '.join(printable(c.path) for c in slower)}")
        return 1
    print("\nno regression")
    return 0


def _sessions(base_files: Sequence[str], new_files: Sequence[str]
              ) -> Optional["Sessions"]:
    """How busy the machine was over the pytest session that wrote each
    report, read from its folder (a gate's --aquaprof folder); None where
    no folder holds a reading, so that the runs' own readings decide."""
    from .pytest_load import read_session
    base = [read_session(Path(p).parent) for p in base_files]
    new = [read_session(Path(p).parent) for p in new_files]
    return (base, new) if any(base + new) else None


def _when(run) -> str:
    import datetime
    try:
        return datetime.datetime.fromtimestamp(run.time).strftime(
            "%Y-%m-%d %H:%M")
    except (OverflowError, OSError, ValueError):   # a time out of range
        return "????-??-?? ??:??"


def cmd_history(args: argparse.Namespace) -> int:
    from .history import History, HistoryError
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
        try:
            # known before anything is added: a mistyped stage adds nothing
            stage = _stage_path(sorted({*history.stages(), *(
                s.path for _, r in reports for s in r.stages)}),
                args.stage, args.db) if args.stage else None
            for path, report in reports:
                run_id = history.add(report, label=args.label)
                print(f"added {path} as run {run_id}")
            _print_history(history, args.db, stage, args.threshold)
        except HistoryError as e:
            raise UserError(str(e)) from None
    return 0


def _print_history(history, db: str, stage: Optional[str],
                   threshold: float) -> None:
    from ..analysis.verdict import describe
    runs = history.runs()
    print(f"{len(runs)} run(s) in {db}")
    for r in runs:
        print(f"  {r.id:4d}  {_when(r)}  "
              f"{printable((r.git_commit or '-')[:10]):10s}  "
              f"{printable(r.host or '-')}  {printable(r.label or '')}")
    stages = [stage] if stage else history.stages()
    if stage:
        print(f"\n{printable(stage)}, a run's total (calls, p95 and median "
              f"call):")
        for r, f in history.figures(stage):
            print(f"  run {r.id:4d}  {_when(r)}  {fmt_time(f.total):>9s}  "
                  f"({f.count} calls, p95 {fmt_time(f.p95)}, median "
                  f"{fmt_time(f.p50)})")
    flagged = [(stage, run, verdict) for stage in stages
               for run, verdict in history.steps(stage, threshold)]
    if flagged:
        print()
    for stage, run, verdict in flagged:
        print(f"! run {run.id} ({_when(run)}, "
              f"{printable((run.git_commit or '-')[:10])}): "
              f"{printable(stage)} stepped up: {describe(verdict)}")
        if verdict.machine:
            print(f"  {verdict.machine}")


def _stage_path(stages: List[str], name: str, db: str) -> str:
    """The path of the stage `name` names: itself, or the one path that
    ends with it ("forward" for "train/step/forward"); else UserError
    with the paths it could mean, closest first."""
    if name in stages:
        return name
    ends = [path for path in stages if path.endswith("/" + name)]
    if len(ends) == 1:
        print(f"stage {printable(name)!r} is {printable(ends[0])!r}\n")
        return ends[0]
    if ends:
        raise UserError(f"stage {name!r} ends {len(ends)} paths in {db}: "
                        f"{_listed(ends)}; give more of its path")
    if not stages:
        raise UserError(f"no stage {name!r} in {db}: it holds no stages")

    def likeness(path: str) -> float:
        # a misspelt last part counts as much as a misspelt path
        return max(difflib.SequenceMatcher(None, name, part).ratio()
                   for part in (path, path.rsplit("/", 1)[-1]))
    closest = sorted(stages, key=likeness, reverse=True)
    raise UserError(f"no stage {name!r} in {db}; its stages, closest "
                    f"first: {_listed(closest)}")


def _listed(items: Sequence[str], shown: int = 5) -> str:
    more = f", ... ({len(items)} in all)" if len(items) > shown else ""
    return ", ".join(repr(printable(i)) for i in items[:shown]) + more


REPORT_HELP = "a saved report (Report.save, aquaprof run -o)"


def _out_path(out: str, name: str) -> Path:
    """-o's file; in a folder, `name` inside it (as cp does)."""
    path = Path(out)
    return path / name if path.is_dir() else path


def _stem(report: str) -> str:
    """A report file's name without .json and .aquaprof: the start of
    the names of the files made from it."""
    name = Path(report).name
    for suffix in (".json", ".aquaprof"):
        name = name[:-len(suffix)] if name.endswith(suffix) else name
    return name or "report"


def _benchmark_file(path: str) -> List[Any]:
    """The benchmarks of a pytest-benchmark JSON file (--benchmark-json,
    or one kept by --benchmark-autosave)."""
    import json
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise UserError(f"cannot read {path}: {e}") from None
    benches = data.get("benchmarks") if isinstance(data, dict) else None
    if not isinstance(benches, list):
        raise UserError(f"{path} is not a pytest-benchmark file (it has no "
                        f"'benchmarks' list)")
    return benches


def cmd_benchmarks(args: argparse.Namespace) -> int:
    columns = ("count", "total_s", "self_s", "mean_s", "p50_s", "p95_s")
    for path in args.files:
        for bench in _benchmark_file(path):
            bench = bench if isinstance(bench, dict) else {}
            name = printable(str(bench.get("fullname") or bench.get("name")))
            info = bench.get("extra_info")
            stages = info.get("aquaprof") if isinstance(info, dict) else None
            print(f"{path}: {name}")
            if not isinstance(stages, dict) or not stages:
                print("  no aquaprof breakdown: the test used no aquaprof "
                      "fixture")
                continue
            width = max(len(printable(str(p))) for p in stages)
            print(f"  {'stage':<{width}} {'count':>8} {'total':>9} "
                  f"{'self':>9} {'mean':>9} {'p50':>9} {'p95':>9}")
            for stage, row in stages.items():
                row = row if isinstance(row, dict) else {}
                cells = [row.get(c) for c in columns]
                numbers = [float(v) for v in cells
                           if isinstance(v, (int, float))]
                if len(numbers) != len(columns):
                    print(f"  {printable(str(stage)):<{width}} (unreadable)")
                    continue
                print(f"  {printable(str(stage)):<{width}} "
                      f"{int(numbers[0]):>8,} "
                      + " ".join(f"{fmt_time(v):>9}" for v in numbers[1:]))
    return 0


def cmd_flamegraph(args: argparse.Namespace) -> int:
    report = _load(args.report)
    from ..views.flamegraph import write_flamegraph
    base = _load(args.diff) if args.diff else None
    title = (f"aquaprof: {args.report} against {args.diff}" if base
             else f"aquaprof: {args.report}")
    out = _out_path(args.out, f"{_stem(args.report)}.svg")
    print(write_flamegraph(report, out, title, base))
    return 0


def cmd_folded(args: argparse.Namespace) -> int:
    from ..views.flamegraph import folded_lines, write_folded
    report = _load(args.report)
    if args.out is not None:
        print(write_folded(report, _out_path(
            args.out, f"{_stem(args.report)}.folded")))
        return 0
    # the file's bytes, UTF-8 whatever the locale says: a pipe into
    # flamegraph.pl gets what -o would have written
    text = "".join(f"{line}\n" for line in folded_lines(report))
    buffer = getattr(sys.stdout, "buffer", None)
    if buffer is None:
        sys.stdout.write(text)
    else:
        sys.stdout.flush()
        _write_all(buffer, text.encode("utf-8"))
    return 0


def _write_all(buffer: Any, data: bytes) -> None:
    """Writes all of data to a binary stream. A reader that leaves in the
    middle of a write makes the write return short, not raise: the next
    one raises BrokenPipeError, which main() answers as it does for
    show."""
    view = memoryview(data)
    while view:
        written = buffer.write(view)
        if not written:     # None or 0: the stream took nothing
            raise BrokenPipeError(errno.EPIPE, "stdout took no more bytes")
        view = view[written:]


def cmd_speedscope(args: argparse.Namespace) -> int:
    from ..views.speedscope import write_speedscope
    out = _out_path(args.out, f"{_stem(args.report)}.speedscope.json")
    path = write_speedscope(_load(args.report), out,
                            name=Path(args.report).name,
                            max_events=args.max_events)
    print(f"{path} (open in www.speedscope.app)")
    return 0


def cmd_trace(args: argparse.Namespace) -> int:
    out = _out_path(args.out, f"{_stem(args.report)}.trace.json")
    path = _load(args.report).to_chrome_trace(out, args.max_events)
    print(f"{path} (open in ui.perfetto.dev or chrome://tracing)")
    return 0


def _terminal_text(report: Report) -> str:
    """The report as printed: fit to a terminal, plain where piped."""
    from ..views.text import terminal_text
    return terminal_text(report)


def cmd_html(args: argparse.Namespace) -> int:
    out = _out_path(args.out, f"{_stem(args.report)}.html")
    path = _load(args.report).to_html(out, f"aquaprof: {args.report}")
    print(f"{path} (open in a browser)")
    return 0


def cmd_merge(args: argparse.Namespace) -> int:
    from ..report import merge_reports
    if args.labels and len(args.labels) != len(args.reports):
        raise UserError(f"--labels gives {len(args.labels)} label(s) for "
                        f"{len(args.reports)} reports: one each")
    reports = [_load(p) for p in progress(args.reports, "loading")]
    _refuse_a_run_twice(reports, args.reports)
    labels = args.labels or _unique(
        [_process_label(r, p) for r, p in zip(reports, args.reports)],
        args.reports)
    merged = merge_reports(reports, labels)
    # written before anything is printed: a reader that leaves early
    # (`| head`) still gets the files
    saved = merged.save(_out_path(args.out, "merged.aquaprof.json"))
    trace = merged.to_chrome_trace(
        _out_path(args.trace, "merged.trace.json")) if args.trace else None
    for label, path in zip(labels, args.reports):
        print(f"{printable(label)}: {printable(path)}")
    print(f"\n{_terminal_text(merged)}\n\nmerged report: {saved}")
    if trace:
        print(f"trace: {trace}")
    return 0


def _refuse_a_run_twice(reports: Sequence[Report],
                        paths: Sequence[str]) -> None:
    """UserError where two files hold one run (a file given twice, a copy,
    a glob that names it again, a merged report that holds it already):
    merged, its stages would count twice."""
    seen: dict = {}
    for report, path in zip(reports, paths):
        held = dict(_runs_held(report))
        for run, pid in held.items():
            if run in seen:
                raise UserError(
                    f"{printable(seen[run])} and {printable(path)} hold the "
                    f"same run (pid {pid}): merged, its stages would count "
                    f"twice; give each run once")
        seen.update(dict.fromkeys(held, path))


def _runs_held(report: Report) -> List[Tuple[Any, Any]]:
    """(what tells a run from another, its pid) of each run a report
    holds: its own, or each process's of a merged one (a process's host
    as merge gives it, the report's where it has none). A run is its pid,
    host and start time; without the start time (a file that lacks its
    host) its clock range stands in, for a report of one run alone."""
    meta = report.meta
    top: Dict[str, Any] = meta["host"] \
        if isinstance(meta.get("host"), dict) else {}
    merged = meta.get("processes")
    if not merged:
        rows: List[Any] = [{"pid": meta.get("pid"), "host": top}]
    else:
        rows = merged
    runs: List[Tuple[Any, Any]] = []
    for row in rows:
        host: Dict[str, Any] = row["host"] \
            if isinstance(row.get("host"), dict) else top
        started = host.get("started_at")
        if started is not None:
            runs.append(((row.get("pid"), host.get("hostname"), started),
                         row.get("pid")))
        elif not merged:
            runs.append(((row.get("pid"), host.get("hostname"),
                          meta.get("start_ns"), meta.get("stop_ns")),
                         row.get("pid")))
    return runs


def _process_label(report: Report, path: str) -> str:
    """host/pid from the report (after the label a child process's report
    holds, "worker 2"); the file name where it names no host."""
    meta = report.meta
    host = meta.get("host", {}).get("hostname")
    where = f"{host}/{meta['pid']}" if host else \
        f"{_stem(path)} (pid {meta['pid']})"
    return f"{meta['label']} {where}" if meta.get("label") else where


def _unique(labels: Sequence[str], paths: Sequence[str]) -> List[str]:
    """Labels that repeat (one process saved twice, or two runs of one
    pid) told apart by file name, then by a number."""
    named = [f"{label} ({Path(path).name})" if labels.count(label) > 1
             else label for label, path in zip(labels, paths)]
    out: List[str] = []
    for label in named:
        unique, n = label, 1
        while unique in out:
            n += 1
            unique = f"{label} #{n}"
        out.append(unique)
    return out


def _label_list(text: str) -> List[str]:
    """--labels a,b,c: one name per report, none empty or repeated."""
    labels = [label.strip() for label in text.split(",")]
    if not all(labels):
        raise argparse.ArgumentTypeError(
            f"{text!r} has an empty label: write them like a,b,c")
    repeated = [label for label in labels if labels.count(label) > 1]
    if repeated:
        raise argparse.ArgumentTypeError(
            f"label {repeated[0]!r} is given twice: each process needs a "
            f"name of its own")
    return labels


# ---------------------------------------------------------------- main

def parser() -> argparse.ArgumentParser:
    p = _Parser(
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
    run.add_argument("-o", "--out", metavar="FOLDER",
                     help="folder for SCRIPT.aquaprof.json and "
                     "SCRIPT.trace.json (default: the script's)")
    run.add_argument("--sample", type=_interval, default=0.001,
                     metavar="SECONDS", help="seconds between samples of "
                     "the call stacks (default 0.001)")
    run.add_argument("--no-sample", action="store_true",
                     help="record stages only, no call stacks")
    run.add_argument("--show-all", action="store_true",
                     help="print the whole call tree: every library and "
                     "import frame, however long (default: those folded "
                     "into [N frames hidden] lines, the tree in at most "
                     f"{TREE_LINES} lines)")
    run.add_argument("--html", metavar="PAGE",
                     help="also write the report as an HTML page here "
                     "(a folder: SCRIPT.html in it)")
    run.set_defaults(func=cmd_run)

    show = sub.add_parser("show", help="print a saved report")
    show.add_argument("report", help=REPORT_HELP)
    show.set_defaults(func=cmd_show)

    compare = sub.add_parser(
        "compare", help="compare two reports; exit 1 on a regression")
    compare.add_argument("base")
    compare.add_argument("new")
    compare.add_argument("--base", dest="more_base", action="append",
                         metavar="REPORT", help="another base run of the "
                         "same program (repeat: the noise between runs is "
                         "learned from them)")
    compare.add_argument("--new", dest="more_new", action="append",
                         metavar="REPORT", help="another new run (repeat)")
    compare.add_argument("--threshold", type=_threshold, default=0.05,
                         help="smallest change of a stage's total or tail "
                              "(p95 call) a run that counts (default 5%%)")
    compare.add_argument("--alpha", type=_alpha, default=0.01,
                         help="significance the evidence must reach "
                              "(default 0.01)")
    compare.add_argument("--measure", choices=MEASURES,
                         default="wall", help="judge wall time (default), "
                         "each call's thread CPU time, or the time of the "
                         "kernels each call launched (cuda)")
    compare.set_defaults(func=cmd_compare)

    hist = sub.add_parser(
        "history", help="runs stored in a SQLite history; flags steps",
        description="Lists the runs of a history file (aquaprof.History), "
        "flags runs where a stage stepped up against the runs before "
        "(its total or tail a run, judged as compare judges), "
        "and adds reports with --add.")
    hist.add_argument("db",
                      help="the history file (--add makes it if missing)")
    hist.add_argument("--add", nargs="+", metavar="REPORT",
                      help="reports to store first")
    hist.add_argument("--label", help="label of the runs added")
    hist.add_argument("--stage", help="print this stage's trend: its "
                      "path, or the end of one path (forward for "
                      "train/step/forward)")
    hist.add_argument("--threshold", type=_threshold, default=0.1,
                      help="step size that is flagged (default 10%%)")
    hist.set_defaults(func=cmd_history)

    benches = sub.add_parser(
        "benchmarks", help="per-stage breakdown of pytest-benchmark results",
        description="Prints the per-stage breakdown that the aquaprof "
        "fixture stores in each benchmark's extra_info, which "
        "pytest-benchmark's own compare does not show.")
    benches.add_argument("files", nargs="+", metavar="FILE",
                         help="pytest-benchmark JSON (--benchmark-json, or "
                         ".benchmarks/*/NNNN_*.json from --benchmark-autosave)")
    benches.set_defaults(func=cmd_benchmarks)

    flame = sub.add_parser("flamegraph", help="interactive SVG flamegraph")
    flame.add_argument("report", help=REPORT_HELP)
    flame.add_argument("-o", "--out", default=".", help="the SVG file, "
                       "or a folder for REPORT.svg (default: here)")
    flame.add_argument("--diff", metavar="BASE",
                       help="colour by the change from this report")
    flame.set_defaults(func=cmd_flamegraph)

    folded = sub.add_parser(
        "folded", help="folded stacks, for flamegraph.pl and friends",
        description="Writes REPORT as folded stacks: a line 'a;b;c NS' "
        "per stage path with self time NS (and per sampled code stack "
        "under it), to stdout unless -o is given.")
    folded.add_argument("report", help=REPORT_HELP)
    folded.add_argument("-o", "--out", help="the file, or a folder for "
                        "REPORT.folded (default: stdout)")
    folded.set_defaults(func=cmd_folded)

    scope = sub.add_parser("speedscope", help="speedscope JSON "
                           "(www.speedscope.app)")
    scope.add_argument("report", help=REPORT_HELP)
    scope.add_argument("-o", "--out", default=".", help="the file, or "
                       "a folder for REPORT.speedscope.json (default: here)")
    scope.add_argument("--max-events", type=int, default=1_000_000,
                       help="most spans written; past it the shortest are "
                       "left out and the file's name says so (default: "
                       "%(default)s)")
    scope.set_defaults(func=cmd_speedscope)

    trace = sub.add_parser("trace", help="Chrome/Perfetto trace JSON")
    trace.add_argument("report", help=REPORT_HELP)
    trace.add_argument("-o", "--out", default=".", help="the trace "
                       "file, or a folder for REPORT.trace.json (default: "
                       "here)")
    trace.add_argument("--max-events", type=int, default=1_000_000,
                       help="most events written; past it the shortest "
                       "spans are left out and the trace says so "
                       "(default: %(default)s)")
    trace.set_defaults(func=cmd_trace)

    page = sub.add_parser("html", help="the report as one self-contained "
                          "HTML page")
    page.add_argument("report", help=REPORT_HELP)
    page.add_argument("-o", "--out", default=".", help="the page, or a "
                      "folder for REPORT.html (default: here)")
    page.set_defaults(func=cmd_html)

    merge = sub.add_parser("merge", help="reports of several processes "
                           "or ranks as one")
    merge.add_argument("reports", nargs="+")
    merge.add_argument("-o", "--out", default=".", help="the merged "
                       "report, or a folder for merged.aquaprof.json "
                       "(default: here)")
    merge.add_argument("--trace", help="also write the merged trace here "
                       "(a folder: merged.trace.json in it)")
    merge.add_argument("--labels", type=_label_list, metavar="A,B,...",
                       help="the processes' names, one per report "
                       "(default: host/pid from each report)")
    merge.set_defaults(func=cmd_merge)

    # handled in main(): the demo parses its own arguments
    sub.add_parser("demo", help="the plane-sweep demo (see aquaprof demo "
                   "--help)")
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    interrupted.clear()         # a command run before in this process
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["run"]:
        # run escapes its own lines only, after the script ran
        _escape_unencodable(sys.stdout)
    if argv[:1] == ["demo"]:
        # every argument is the demo's, options first ones included
        from .demo import main as demo_main
        return demo_main(argv[1:])
    args = parser().parse_args(argv)
    try:
        code = args.func(args)
        sys.stdout.flush()      # a reader gone shows here, not at exit
        return code
    except BrokenPipeError:
        return _reader_gone()
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
        return _error("interrupted", _interrupted())
    except Exception as e:      # noqa: BLE001 -- the contract: no traceback
        # a bug of ours, which some input reached: still one line, and
        # words that say it is not the user's mistake
        return _error(f"internal error ({type(e).__name__}: {e}); please "
                      f"report it with the file that caused it")


def entry() -> int:
    """main() as the process's end (``aquaprof``, ``python -m aquaprof``):
    a command that Ctrl-C ended ends the process by SIGINT, as Python ends
    itself after an unhandled KeyboardInterrupt (its atexit functions run
    first), so that a shell stops the loop that ran it, where an exit
    code of 130 would let it go on."""
    code = main()
    if code == 130 and interrupted:
        sys.excepthook = lambda *exc: None      # what happened is said
        raise KeyboardInterrupt
    return code


def _error(text: str, code: int = 2, prog: str = "aquaprof") -> int:
    """One line on stderr, whatever the text holds; code 2: the input or
    the command line was wrong (1 is compare's "slower")."""
    line = printable(" ".join(str(text).split()))
    print(f"{prog}: error: {line}", file=sys.stderr)
    return code


def _reader_gone() -> int:
    """stdout's reader left (`aquaprof show r.json | head`): what is left
    to print goes nowhere, quietly, and the exit code is a shell's for a
    process ended by SIGPIPE."""
    try:
        # else Python's own flush at exit fails again, and says so
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):     # a stdout with no file: nothing kept
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())


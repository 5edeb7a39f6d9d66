"""aquaprof.Profiler: starts and stops one recording session."""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, List, Optional, Tuple

from .. import _core
from ..model.schema import TIMELINE_DTYPE
from ..report import Report
from .gpu_status import losses
from .host import Ticks, busy_between, cpu_ticks, host_info, process_cpus, \
    static_host
from .options import Options
from .saving import RunSave, save_path
from .processes.parent import Capture

# Held while a Profiler calibrates and starts: a Profiler started on
# another thread meanwhile would otherwise nest in a calibration session.
# Reentrant: a finalizer that the collector runs meanwhile, on this
# thread, may start one too.
_STARTING = threading.RLock()


class Profiler:
    """Records every aquaprof.stage entered while it runs, on any thread.

    ``with Profiler() as prof: ...`` or ``prof.start() ... prof.stop()``;
    then ``prof.report()``. A Profiler runs once.

    Profilers nest: one started while another runs (a script run by
    ``aquaprof run``, a test under ``pytest --aquaprof``, a library that
    profiles itself) shares the running one's session, which records on
    unchanged. Its report holds the calls closed while it ran and those
    entered while it ran and still open at its stop (closed there, as
    unclosed), with the paths it would record alone: the stages open on
    its thread when it started come off the front of the paths below
    them. Its figures are the outer's recording, under the outer's
    settings: its own max_spans, memory, memory_interval, cpu_resolution,
    cuda, cuda_sync and window do not apply (its report's run fields give
    the outer's, and ``nested: true``); it traces no GPU activity (its
    gpu_status says so). Inner ones may nest in turn and run one after
    another; the outer stopping first ends those still running there:
    their reports stop at that moment, and their own stop() does nothing
    more. aquaprof.nesting says how each figure is derived: counts, sums
    and histograms exactly, min, max and memory peak exactly or bounded.

    max_spans: most raw spans kept for spans() and traces (48 bytes each);
        beyond it spans are counted as dropped, aggregates stay exact.
        Each running thread reserves room in blocks of 4096 spans, so with
        several threads up to 4095 per thread of the cap may stay unused
        until the thread ends.
    max_gpu_events: most GPU events (kernels, copies, memsets, device
        allocations, host synchronizations) kept, 96 bytes each: the
        default of 1,000,000 holds about 96 MB. Beyond it events are
        counted (report.gpu["over_max"]) and report.gpu_status says how
        many were dropped, never silently left out.
    max_stages: most distinct stage paths recorded (100,000 by default;
        each costs about 1 KB per thread that enters it). An entry of a
        new path past it is counted under a stage named
        "(over max_stages)" beneath the same parent (one per parent, its
        own children counted in it too), and report.meta
        ["stages_overflowed"] and the printed report say how many.
    memory: sample the process RSS for per-stage peak and delta.
    memory_interval: seconds between RSS samples while stages are being
        entered or memory moves; after 100 ms with neither (no stage
        open, or one held open by a serve loop or `aquaprof run`), the
        sampler slows to one sample in 250 ms until a stage begins (which
        takes a fresh sample) or RSS moves, so a profiler left on costs
        next to nothing.
    cpu_resolution: the thread CPU clock is a system call (0.1-0.6 us), so
        each thread reads it at most this often (seconds) and counts the
        time in between as on-CPU; 0 reads it at every stage edge.
    compensate: measure the cost of a stage pair once per process and
        settings (about 35 ms at the first start() on a 2-vCPU VM) and
        report stage times with it taken out beside the raw ones
        (StageStats.compensated_total/_self).
    cuda: "auto" traces GPU activity with CUPTI when a CUDA driver, a
        device and CUPTI can be loaded, and otherwise says in
        report.gpu_status exactly what was missing; True makes a missing
        piece a RuntimeError at start(); False never touches CUDA. Tracing
        never synchronizes the device, except once at stop() so that work
        launched during the run is measured.
    cuda_sync: synchronize the device at every stage edge, the exact but
        pipeline-serializing style of stage timing: each stage's wall time
        then includes its GPU work, and the run changes its timing. Needs
        a CUDA driver and device whatever cuda says (RuntimeError at
        start() naming cuda_sync otherwise).
    window: keep each stage's last `window` calls on each thread (48
        bytes a call, allocated with the stage) for live figures while the
        profiler runs: snapshot() and monitor(). 0 keeps none.
    children: processes started through multiprocessing while it runs
        (Process, Pool, ProcessPoolExecutor, torch DataLoader workers; any
        start method) record their own stages, with this profiler's
        settings but no GPU tracing, and deliver them when they exit: the
        report holds each as a process of its own, and counts in
        meta["children"] those that never reported (killed, or still
        running at stop()). docs/processes.md says how and what it costs.
    max_children: most child reports merged into the report; the others
        are counted as lost with the reason.
    dataloaders: record each next() on a torch DataLoader iterator as the
        stage "next(DataLoader)" under the stage open around the loop: the
        time the loop waits for its data, which diagnose() reads
        (data-loading-bound); torch imported after start() is watched
        from its import on. docs/processes.md.
    sample: seconds between samples of every thread's Python call stack
        (0.001: 1 kHz), each filed under the stage open in that thread or
        asyncio task; None (the default) takes none. rep["stage"].hot()
        names the code a stage spends its time in, and the flamegraph,
        speedscope and trace show it under the stage. A nested Profiler
        takes none of its own. docs/sampling.md.
    max_samples: most samples kept in time order for the trace's code
        slices; past it samples still count in hot() and the flamegraph.
    torch_ops: record each torch call as a stage under the open one
        (``model/aten::conv2d``); "shapes" keeps its input shapes in the
        name (``aten::conv2d (1×3×32×32, 8×3×3×3, 8)``). torch_modules:
        record each nn.Module call as a stage named by its attribute path
        (``SmallCNN/features/features.0``), and its backward. Either one
        imports torch at start(). docs/torch.md.
    save: a file path the report is written to however the run ends: at
        stop() (the `with` block's end, by an exception or Ctrl-C too), at
        a SIGTERM the program does not handle (then the process ends by
        it, as unprofiled), or at the interpreter's exit while still
        running. A save that fails is a RuntimeWarning, never raised.
    """

    def __init__(self, *, max_spans: int = 1_000_000, memory: bool = True,
                 memory_interval: float = 0.001,
                 cpu_resolution: float = 20e-6, compensate: bool = True,
                 cuda: Any = "auto", cuda_sync: bool = False,
                 window: int = 0, max_stages: int = 100_000,
                 max_gpu_events: int = 1_000_000, children: bool = True,
                 max_children: int = 1000,
                 dataloaders: bool = True, sample: Optional[float] = None,
                 max_samples: int = 1_000_000, torch_ops: Any = False,
                 torch_modules: bool = False, save: Any = None):
        path = save_path(save)
        self._begin(Options(
            max_spans=max_spans, memory=memory,
            memory_interval=memory_interval, cpu_resolution=cpu_resolution,
            compensate=compensate, cuda=cuda, cuda_sync=cuda_sync,
            window=window, max_stages=max_stages,
            max_gpu_events=max_gpu_events, children=children,
            max_children=max_children, dataloaders=dataloaders,
            sample=sample, max_samples=max_samples, torch_ops=torch_ops,
            torch_modules=torch_modules), None)
        # not an Option: children made from the options never save
        self._save: Optional[RunSave] = (
            RunSave(self, path) if path is not None else None)

    @classmethod
    def from_options(cls, options: Options,
                     calibration: Optional[dict] = None) -> "Profiler":
        """A Profiler recording with `options` (aquaprof.record.options);
        calibration: the figures of a calibration made for the same
        settings on this machine (a parent process's, which its children
        reuse), reported as this run's where the Profiler makes none of
        its own (compensate=False)."""
        prof = cls.__new__(cls)
        prof._begin(options, calibration)
        return prof

    def _begin(self, options: Options, calibration: Optional[dict]) -> None:
        self._options = options
        self._core = _core.Profiler(**options.core_args())
        self._cuda = options.cuda is not False
        self.window: int = options.window
        self._on_stop: List[Callable[[], Any]] = []
        self._compensate = options.compensate
        self._overhead: Optional[dict] = calibration
        self._report: Optional[Report] = None
        self._started_at: Optional[float] = None
        # the machine's CPU ticks at the start and the stop: how busy it
        # was over the run (host.busy_between)
        self._ticks: Optional[Ticks] = None
        self._stop_ticks: Optional[Ticks] = None
        # start() has not returned; a stop() meanwhile (a signal handler's)
        self._starting = False
        self._stop_asked = False
        # the exception that ended the `with` block, for the report to say
        self._ended_by: Optional[str] = None
        self._torch = options.torch_hooks
        self._unwatch_torch: Optional[Callable[[], None]] = None
        self._torch_watch: Any = None   # its watch: counts() at report()
        self._unwatch: Optional[Callable[[], None]] = None
        # the capture of child processes while running, then what the
        # children delivered
        self._capture: Optional[Capture] = None
        self._children: Optional[tuple] = None
        self._sampler: Any = None       # an _core.Sampler while sampling
        self._sampler_to_stop: Any = None   # one whose thread may run
        self._stop_sampler: Any = None      # its weakref.finalize
        self._save = None

    def start(self) -> "Profiler":
        """Starts recording (nested in the running Profiler, if any).
        An exception on the way, KeyboardInterrupt included, leaves no
        session running."""
        if self._started_at is not None:
            raise RuntimeError("this Profiler has already run; a Profiler "
                               "runs once, create a new one")
        try:
            with _STARTING:
                self._started_at = time.time()
                self._starting = True
                if self._compensate and not _core.active():
                    self._overhead = _calibration(
                        self._options.cpu_resolution, self._options.memory,
                        torch=self._torch)
                neighbor = self._cupti_neighbor()
                # after the calibration (the first run's, tens of ms of
                # CPU): the process's and thread's figures are the run's;
                # before the last look at a stop, so that no Python runs
                # between it and the core's start
                self._ticks = cpu_ticks()
                if self._stop_asked:
                    return self
                self._core.start(neighbor=neighbor)
                # the profiler's own start is no part of the program: the
                # sampler last; the children's folder named after every
                # import the start makes, as a child forked meanwhile (by
                # another thread) inherits a module's import lock held,
                # and would wait on it for ever as it imports the same
                for step in (self._flush_torch_profiler,
                             self._watch_dataloaders, self._watch_torch,
                             self._capture_children, self._start_sampler):
                    if self._stop_asked:
                        break
                    step()
                if self._stop_asked:
                    # a stop() in a step: what that step began ends too
                    self._end_watches()
                elif self._save is not None:
                    self._save.arm()
        except BaseException:
            # the stop is one C call; an interrupt in _end_watches() after
            # it can leave a folder or a watch to the collector, never a
            # session running
            if self._core.running:
                self._stop_core()
                self._end_watches()
            elif not self._stop_asked:
                self._started_at = None   # never started: may retry
            raise
        finally:
            self._starting = False
        return self

    def _flush_torch_profiler(self) -> None:
        if self._cuda:
            from .torch.torch_profiler import flush_before_torch_profiler
            flush_before_torch_profiler()

    def stop(self) -> None:
        """Stops recording (after calling the on_stop callbacks); the
        recording stops even when a callback raises. A stop() while start()
        has not returned (a signal handler's) ends the run there: start()
        then returns at once, and report() has what was recorded (nothing,
        when the session had not begun)."""
        if self._starting and not self._stop_asked:
            self._stop_asked = True
            if not self._core.running:
                # still calibrating: an empty run, so that report() works
                self._core.start(neighbor=self._cupti_neighbor())
        try:
            for callback in self._on_stop:
                callback()
        finally:
            neighbor = None
            try:
                self._end_sampler()
                neighbor = self._cupti_neighbor()
            finally:
                # the C call itself, no Python call before it: a Ctrl-C
                # anywhere in stop() leaves no session running
                self._core.stop(neighbor=neighbor)
                try:
                    if self._stop_ticks is None:    # the first stop's
                        self._stop_ticks = cpu_ticks()
                finally:        # a Ctrl-C in it still ends the watches
                    self._end_watches()
        if self._save is not None:
            self._save.stopped()

    def _cupti_neighbor(self) -> Optional[str]:
        from .cupti import cupti_neighbor
        return cupti_neighbor() if self._cuda else None

    def _stop_core(self) -> None:
        self._core.stop(neighbor=self._cupti_neighbor())

    def _end_watches(self) -> None:
        """What the run watched besides stages: samples, loaders and torch,
        then children."""
        unwatch, self._unwatch = self._unwatch, None
        torch, self._unwatch_torch = self._unwatch_torch, None
        try:
            self._end_sampler()
            if unwatch is not None:
                unwatch()
        finally:
            try:
                if torch is not None:
                    torch()
            finally:
                self._collect_children()

    def _start_sampler(self) -> None:
        """Starts sampling call stacks, unless off or nested (the outer
        Profiler's sampler sees the same threads)."""
        interval_ns = self._options.sample_ns
        if not interval_ns or self._core.nested:
            return
        import weakref
        sampler = _core.Sampler(interval_ns, self._options.max_samples)
        # first: a Profiler dropped without stop(), the interpreter
        # exiting or a Ctrl-C from here on ends the thread, which would
        # otherwise sample for ever
        self._sampler_to_stop = sampler
        self._stop_sampler = weakref.finalize(self, sampler.stop)
        try:
            sampler.start()
        except (OSError, RuntimeError) as e:
            # no thread to spare, or a Python without a GIL: the run goes
            # on with stages only, and says why
            import warnings
            warnings.warn(f"aquaprof: call stacks are not sampled in this "
                          f"run: {e}", RuntimeWarning, stacklevel=4)
            return
        self._sampler = sampler

    def _end_sampler(self) -> None:
        # The thread ends in sampler.stop(), one C call that a Ctrl-C
        # cannot split: calling the finalize, Python code, could be
        # stopped after it unhooked itself and before it ended the
        # thread. Dropped only once stopped: a Ctrl-C before leaves it to
        # stop again (stop is idempotent), as does one in detach().
        sampler = self._sampler_to_stop
        if sampler is not None:
            sampler.stop()
            self._sampler_to_stop = None
        finalizer, self._stop_sampler = self._stop_sampler, None
        if finalizer is not None:
            finalizer.detach()

    def _watch_dataloaders(self) -> None:
        if self._options.dataloaders:
            import weakref
            from .torch.dataloader import watch_dataloaders
            # a watch a Ctrl-C kept from ending ends with its run; and
            # when a Profiler is dropped without stop()
            self._unwatch = weakref.finalize(
                self, watch_dataloaders(self._running_while_alive()))

    def _watch_torch(self) -> None:
        if self._torch is not None:
            import weakref
            from .torch.hooks import watch_torch
            self._torch_watch = watch_torch(*self._torch,
                                            self._running_while_alive())
            self._unwatch_torch = weakref.finalize(self, self._torch_watch)

    def _running_while_alive(self) -> Callable[[], bool]:
        """Whether this Profiler still records, without keeping it (or
        its session) alive: a dropped Profiler's session ends when it is
        freed."""
        import weakref
        owner = weakref.ref(self)

        def running() -> bool:
            prof = owner()
            return prof is not None and prof._core.running
        return running

    def _capture_children(self) -> None:
        """Names a fresh folder to the child processes created from now
        on: they record with the child's options and this run's
        calibration (processes.parent)."""
        if not self._options.children:
            return
        # what a child's report() needs, loaded and computed here once, so
        # that forked children do not each load it as they deliver, and
        # before the folder is named to them (the import locks, start())
        if self._options.sample:
            from ..analysis import own_frames  # noqa: F401
        static_host()
        self._capture = Capture(self._options.for_child(), self._overhead,
                                self._running_while_alive())

    def _collect_children(self) -> None:
        """What the children delivered, read once."""
        capture = self._capture
        if capture is not None:
            try:
                capture.end(self._options.max_children)
            finally:       # an interrupted read leaves its account too
                self._capture = None
                self._children = capture.result

    def on_stop(self, callback: Callable[[], Any]) -> None:
        """Calls callback() at stop(), before the recording ends: how a
        Monitor started on this profiler is stopped with it."""
        self._on_stop.append(callback)

    def snapshot(self) -> Any:
        """The figures so far while running (needs window=N): an
        aquaprof.Snapshot with each stage's totals, rolling figures over
        its last N calls, and its open calls."""
        from ..live.snapshot import Snapshot
        return Snapshot(self._own(self._core.snapshot_data()), self.window)

    def monitor(self, **options: Any) -> Any:
        """Starts an aquaprof.Monitor on this profiler (see its options:
        interval, on_alert, host_memory, gpu_memory, anomalies, rules,
        prometheus); stop() stops it."""
        from ..live.monitor import Monitor
        return Monitor(self, **options).start()

    @property
    def running(self) -> bool:
        return self._core.running

    @property
    def nested(self) -> bool:
        """True when it started inside another Profiler's session."""
        return self._core.nested

    def report(self) -> Report:
        """The Report of the run; built once, after stop()."""
        if self._report is None:
            data = self._own(self._core.report_data())
            if self._core.nested:
                self._overhead = self._nested_overhead(data)
            if "gpu" in data:
                data["gpu"]["events"].flags.writeable = False
                data["gpu_status"] += losses(data["gpu"])
            data["host"] = host_info(self._started_at, dict(
                busy_between(self._ticks, self._stop_ticks),
                **process_cpus(self._ticks, self._stop_ticks)))
            if self._sampler is not None:
                from ..analysis.own_frames import without_own_frames
                data["samples"] = without_own_frames(
                    _samples(self._sampler.data()))
            if self._overhead:
                data["overhead"] = self._overhead
                if self._torch_watch is not None:
                    # what the torch hooks did that no stage counts
                    data["overhead"] = dict(self._overhead,
                                            **self._torch_watch.counts())
            if self._children is not None:
                # children=True says what it saw, none included
                data["children"] = self._children[1]
            if self._ended_by is not None:
                data["ended_by"] = self._ended_by
            self._report = Report(data, _checked=True)
            if self._children and (self._children[1]["started"]
                                   or "error" in self._children[1]):
                self._report = self._with_children(self._report)
        return self._report

    def _with_children(self, own: Report) -> Report:
        """One report: this process's, then each child's as a process of
        its own, stages merged by path; the run's settings, calibration
        and GPU status are this process's."""
        from ..analysis.merging import merged_data
        assert self._children is not None
        reports, account = self._children
        data = merged_data([own, *reports],
                           [r.processes[0]["label"] for r in
                            (own, *reports)])
        # the run is this process's: a child still running at the stop
        # recorded on until it noticed (child.REQUEST_CHECK_S), which is
        # not the run's time
        data.update(gpu_status=own.gpu_status, children=account,
                    host=own.meta["host"], stop_ns=own.meta["stop_ns"])
        for key in ("overhead", "nested"):
            if key in own.meta:
                data[key] = own.meta[key]
        return Report(data, _checked=True)

    def _own(self, figures: dict) -> dict:
        """The core's figures as this Profiler's: for a nested one, the
        difference with the session's figures at its start."""
        base = self._core.nest_base
        if base is None:
            return figures
        from .nesting import nested_data
        return nested_data(base, figures)

    def _nested_overhead(self, data: dict) -> Optional[dict]:
        """The calibration of the session's settings, where one was made
        (a nested Profiler cannot run its own: the session is busy)."""
        if not self._compensate:
            return None
        from .calibration import cached
        figures = cached(data["cpu_resolution_ns"], data["memory"])
        if figures is not None and self._torch is not None:
            from .torch.hooks import calibrated_hooks
            figures.update(calibrated_hooks(*self._torch, data["memory"]))
        return figures

    def __enter__(self) -> "Profiler":
        fresh = self._started_at is None
        try:
            return self.start()
        except BaseException:
            # an interrupt just after start() returned: `with` binds
            # nothing and will not call __exit__
            if fresh and self._core.running:
                self._stop_core()
                self._end_watches()
            raise

    def __exit__(self, *exc: Any) -> None:
        if exc[0] is not None and self._core.running and not (
                isinstance(exc[1], SystemExit) and exc[1].code in (None, 0)):
            # a run cut short (Ctrl-C, an error) reads as one: its report
            # would pass for a whole run's (sys.exit() or sys.exit(0), a
            # program's normal end, is none)
            self._ended_by = getattr(exc[0], "__qualname__", "an exception")
        try:
            self.stop()
        finally:
            if self._core.running:   # stop() interrupted before it began
                self._stop_core()
                self._end_watches()

    def __repr__(self) -> str:
        state = "running" if self.running else "idle"
        return f"<aquaprof.Profiler {state}>"


def _reset_starting() -> None:
    # a lock another thread held at a fork stays held in the child: a
    # child starting its own Profiler would wait on it for ever
    global _STARTING
    _STARTING = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_starting)


def _calibration(cpu_resolution: float, memory: bool,
                 torch: Optional[Tuple[bool, bool, bool]] = None
                 ) -> Optional[dict]:
    from .calibration import SessionBusy, calibrate
    try:
        figures = calibrate(cpu_resolution, memory)
        if torch is not None:
            # what the torch hooks add a call: the report charges it
            from .torch.hooks import calibrate_hooks
            figures.update(calibrate_hooks(*torch, memory=memory))
        return figures
    except SessionBusy:
        # a session started meanwhile by other means than a Profiler (on
        # another thread): this run goes uncompensated
        return None


def _samples(raw: dict) -> dict:
    """The sampler's data as the report holds it: the timeline as one
    structured array (TIMELINE_DTYPE)."""
    import numpy as np
    times = np.frombuffer(raw.pop("timeline_t"),
                          dtype=TIMELINE_DTYPE["t_ns"])
    timeline = np.empty(len(times), dtype=TIMELINE_DTYPE)
    timeline["t_ns"] = times
    timeline["stack"] = np.frombuffer(raw.pop("timeline_stack"),
                                      dtype=TIMELINE_DTYPE["stack"])
    timeline["cpu_us"] = np.frombuffer(raw.pop("timeline_cpu"),
                                       dtype=TIMELINE_DTYPE["cpu_us"])
    raw["timeline"] = timeline
    return raw

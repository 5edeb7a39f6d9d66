"""A Profiler's options, checked once: Options holds every keyword of
aquaprof.Profiler, refuses a bad one as it is made (TypeError or
ValueError naming it; RuntimeError for a torch option without torch), and
pickles, so that a child process records with the options its parent
gave it (for_child()).

The session's bounds are the C binding's: an Options has the binding
check them, by making a _core.Profiler it then drops, so that the limits
and messages are written once, in C."""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Optional, Tuple

from .. import _core
from ..common.checks import whole
from . import cupti


@dataclasses.dataclass(frozen=True)
class Options:
    """aquaprof.Profiler's keywords, with its defaults (its docstring says
    what each does)."""

    max_spans: int = 1_000_000
    memory: bool = True
    memory_interval: float = 0.001
    cpu_resolution: float = 20e-6
    compensate: bool = True
    cuda: Any = "auto"
    cuda_sync: bool = False
    window: int = 0
    max_stages: int = 100_000
    max_gpu_events: int = 1_000_000
    children: bool = True
    max_children: int = 1000
    dataloaders: bool = True
    sample: Optional[float] = None
    max_samples: int = 1_000_000
    torch_ops: Any = False
    torch_modules: bool = False
    # derived, as the options are checked
    sample_ns: int = dataclasses.field(init=False, repr=False,
                                       compare=False)
    torch_hooks: Optional[Tuple[bool, bool, bool]] = dataclasses.field(
        init=False, repr=False, compare=False)
    _core_args: Dict[str, Any] = dataclasses.field(init=False, repr=False,
                                                   compare=False)

    def __post_init__(self) -> None:
        from .torch.hooks import check_options
        # in the order a Profiler has always checked them: the first bad
        # one named is the same
        derived: Dict[str, Any] = {"sample_ns":
                                   sample_interval_ns(self.sample)}
        _check_count("max_samples", self.max_samples)
        for name in ("children", "dataloaders", "memory", "compensate"):
            flag = getattr(self, name)
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be True or False, got "
                                f"{flag!r}")
        _check_count("max_children", self.max_children)
        core = dict(max_spans=self.max_spans, memory=self.memory,
                    memory_interval=self.memory_interval,
                    cpu_resolution=self.cpu_resolution, window=self.window,
                    max_stages=self.max_stages,
                    max_gpu_events=self.max_gpu_events,
                    **_cuda_args(self.cuda, self.cuda_sync))
        _core.Profiler(**core)
        derived["_core_args"] = core
        derived["torch_hooks"] = check_options(self.torch_ops,
                                               self.torch_modules)
        derived["compensate"] = bool(self.compensate)
        for name, value in derived.items():
            object.__setattr__(self, name, value)

    def core_args(self) -> Dict[str, Any]:
        """The keywords of the _core.Profiler that records with these
        options."""
        args = dict(self._core_args)
        if "cupti_paths" in args:
            args["cupti_paths"] = list(args["cupti_paths"])
        return args

    def for_child(self) -> "Options":
        """What a child process records with: the session's settings and
        sampling, no calibration of its own (it reuses the parent's: same
        machine, no 35 ms calibration at every worker start), no GPU
        tracing (a forked child cannot use CUDA, and workers must not
        initialise it), no capture of its own children (they report to
        the parent's folder directly), no DataLoader watch (its lock would
        be taken in the SIGTERM handler's stop); the rest at their
        defaults."""
        return Options(max_spans=self.max_spans, memory=self.memory,
                       memory_interval=self.memory_interval,
                       cpu_resolution=self.cpu_resolution,
                       max_stages=self.max_stages, sample=self.sample,
                       max_samples=self.max_samples, compensate=False,
                       cuda=False, children=False, dataloaders=False)


def _check_count(name: str, value: Any) -> None:
    if not whole(value):
        raise TypeError(f"{name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")


def sample_interval_ns(sample: Any) -> int:
    """The sampler's interval in ns, 0 when off (None or 0); TypeError or
    ValueError, naming the bounds, for any other value."""
    if sample is None:
        return 0
    if isinstance(sample, bool) or not isinstance(sample, (int, float)):
        raise TypeError(f"sample must be seconds between samples (0.001 "
                        f"for 1 kHz) or None, got {sample!r}")
    if sample == 0:
        return 0
    if not 1e-4 <= sample <= 60:
        raise ValueError(f"sample must be between 0.0001 and 60 seconds "
                         f"(or None, for no sampling), got {sample!r}")
    return round(sample * 1e9)


_CUDA_MODES = {False: 0, "auto": 1, True: 2}


def _cuda_args(cuda: Any, cuda_sync: Any) -> Dict[str, Any]:
    """The _core.Profiler keywords for cuda= and cuda_sync=."""
    if cuda is not True and cuda is not False and cuda != "auto":
        raise ValueError(f"cuda must be 'auto', True or False, got {cuda!r}")
    if not isinstance(cuda_sync, bool):
        raise ValueError(f"cuda_sync must be True or False, got "
                         f"{cuda_sync!r}")
    args: Dict[str, Any] = {"cuda": _CUDA_MODES[cuda], "cuda_sync": cuda_sync}
    if cuda is not False:
        # through the module: tests point it at a fake CUPTI
        args["cupti_paths"] = cupti.cupti_candidates()
    # the driver ($AQUAPROF_LIBCUDA, else libcuda.so.1) is the C loader's
    # to name, for the profiler and the plane-sweep kit alike
    return args

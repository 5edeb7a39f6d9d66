"""What the torch hooks cost a call, measured (calibrate_hooks), for the
report's cost line (aquaprof.analysis.run_cost.run_cost) and its
compensated figures (aquaprof.analysis.overhead): the hooks put in by
their switch around small torch work in private sessions, against the
same work unhooked (docs/torch.md#cost)."""
from __future__ import annotations

import time
from typing import Any, Callable, Dict, List, Tuple

from . import state
from ..calibration import run_alone
from .backward import BACKWARD
from .switch import load_torch, watch_torch

# what the calibration runs, a round: CAL_OPS rounds of its ops, and
# CAL_PASSES forward (and backward) passes through CAL_LAYERS times its
# three layers (a convolution, a ReLU, a linear layer)
CAL_OPS = 500
MIX = 4         # the ops of a round
CAL_LAYERS = 5
CAL_PASSES = 12
# the CPU clock of the calibration's sessions: never read where the cost
# all told is measured (the report charges readings apart, as for any
# stage), read at every edge where a stage's own CPU time is
_NO_READS, _EVERY_EDGE = 1.0, 0.0
# (what, settings...) -> figures, measured once per process
_calibrated: Dict[tuple, Dict[str, float]] = {}


def calibrate_hooks(ops: bool, shapes: bool, modules: bool,
                    memory: bool = True, rounds: int = 5
                    ) -> Dict[str, float]:
    """What the hooks add, in ns, for the report's overhead
    (aquaprof.record.calibration charges it, aquaprof.analysis.overhead
    takes it out):

    - ops: "torch_op_ns" per op call all told (torch's dispatch to the
      mode, the name, the stage pair), on a mix of ops torch dispatches
      from C (torch.add, F.conv2d with its five arguments) and from
      Python (F.relu, F.max_pool2d); shapes in the name when asked.
      Between the stage's two timestamps the mode runs the op alone, so
      the part inside it is a plain stage pair's. "torch_quiet_ns" per
      torch call the mode passes through without a stage (x.grad), and
      "torch_carry_ns" per module call whose hooks only carry the mode to
      its thread (torch_modules off);
    - modules: "torch_module_ns" per module call with grad (its hooks,
      its stage pair, the walk that hooks its autograd nodes),
      "torch_module_nograd_ns" without grad, "torch_backward_ns" per call
      of a backward stage (the node hooks that switch to it, its stage
      pair); each with "..._inside_ns", the part of it inside the call's
      own stage (the forward hook's walk, mostly). Measured on a chain of
      convolutions, ReLUs and linear layers.

    Each is measured in thread CPU time (other processes do not move it)
    over `rounds` private sessions, in turn with the same code unhooked,
    and is the least of the rounds. CPU-clock readings are not in them:
    the report charges those apart, as for any stage. Cached per process
    and settings (about 0.3 s of CPU the first time). Imports torch;
    SessionBusy (a RuntimeError) while a session runs, as
    aquaprof.record.calibration.calibrate."""
    load_torch()
    figures: Dict[str, float] = {}
    wanted: List[Tuple[tuple, Callable[[], Dict[str, float]]]] = []
    if ops:
        wanted.append((("ops", shapes, memory),
                       lambda: _op_cost(shapes, memory, rounds)))
    if modules:
        wanted.append((("modules", memory),
                       lambda: _module_cost(memory, rounds)))
    for key, measure in wanted:
        if key not in _calibrated:
            _calibrated[key] = _on_one_thread(measure)
        figures.update(_calibrated[key])
    return figures


def _on_one_thread(measure: Callable[[], Dict[str, float]]
                   ) -> Dict[str, float]:
    """measure() with torch's ops on the calling thread: the hooks run
    there, and a tiny op handed to a thread pool costs its wake-ups (a
    millisecond on a busy machine) instead of the op. The program's
    setting comes back after. A torch.profiler recording on this thread
    (a Profiler started inside ``with torch.profiler.profile()``) does
    not see the calibration's ops: they are aquaprof's, not the
    program's (some 270,000 of them, conv2d among them, would fill its
    table and trace)."""
    torch = state.torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    unseen = _unseen_by_torch_profiler(torch)
    try:
        return measure()
    finally:
        unseen()
        torch.set_num_threads(threads)


def _unseen_by_torch_profiler(torch: Any) -> Callable[[], None]:
    """Turns torch's RecordFunction off on this thread where a
    torch.profiler records on it, so that it records none of the
    calibration's ops; returns what turns it back on (nothing to do where
    none records, or on a torch without these switches)."""
    autograd = getattr(torch._C, "_autograd", None)
    enabled = getattr(autograd, "_profiler_enabled", None)
    switch = getattr(autograd, "_enable_record_function", None)
    try:
        if enabled is None or switch is None or not enabled():
            return lambda: None
        switch(False)
    except Exception:      # a torch whose switches differ: leave it be
        return lambda: None
    return lambda: switch(True)


def calibrated_hooks(ops: bool, shapes: bool, modules: bool,
                     memory: bool) -> Dict[str, float]:
    """The figures calibrate_hooks made for these settings, those of them
    it made: what a Profiler nested in another's session uses, as it
    cannot calibrate while that one runs."""
    figures: Dict[str, float] = {}
    for key in ((("ops", shapes, memory),) if ops else ()) + \
            ((("modules", memory),) if modules else ()):
        figures.update(_calibrated.get(key, {}))
    return figures


def _hooked(work: Callable[[], Any], ops: bool, shapes: bool,
            modules: bool, cpu_resolution: float, memory: bool
            ) -> Tuple[Any, Dict[str, dict]]:
    """work() with the hooks in, in a private session: its result and the
    stages recorded."""

    def watched() -> Any:
        unwatch = watch_torch(ops, shapes, modules)
        try:
            return work()
        finally:
            unwatch()
    return run_alone(watched, cpu_resolution, memory)


def _cpu(work: Callable[[], Any], times: int) -> int:
    """Thread CPU ns of work() called `times` times."""
    cpu = time.thread_time_ns()
    for _ in range(times):
        work()
    return time.thread_time_ns() - cpu


def _layers() -> Tuple[Any, Any]:
    """The calibration's chain of modules, and an input it takes with
    grad: CAL_LAYERS times a convolution, a ReLU and a linear layer, each
    of one op, whose output has the input's shape."""
    torch = state.torch
    nn = torch.nn
    chain = nn.Sequential(*(layer for _ in range(CAL_LAYERS) for layer in (
        nn.Conv2d(2, 2, 3, padding=1), nn.ReLU(), nn.Linear(4, 4))))
    return chain, torch.ones(1, 2, 4, 4, requires_grad=True)


def _op_cost(shapes: bool, memory: bool, rounds: int) -> Dict[str, float]:
    """Ops: CAL_OPS rounds of MIX ops on small tensors; as many reads of
    x.grad; CAL_PASSES forwards without grad through the chain
    of layers, with ops recorded and modules not."""
    torch = state.torch
    F = torch.nn.functional
    a, b = torch.ones(4), torch.ones(4)
    x, w, bias = torch.ones(1, 2, 4, 4), torch.ones(2, 2, 3, 3), \
        torch.ones(2)
    add, relu, conv, pool = torch.add, F.relu, F.conv2d, F.max_pool2d
    held = torch.ones(1, requires_grad=True)
    held.grad = torch.ones(1)
    chain, _ = _layers()

    def mix() -> None:
        add(a, b)
        conv(x, w, bias, 1, 1)
        relu(a)
        pool(x, 2)

    def quiet() -> None:
        held.grad

    def forward() -> None:
        with torch.no_grad():
            chain(x)

    works = {"mix": (mix, CAL_OPS), "quiet": (quiet, MIX * CAL_OPS),
             "forward": (forward, CAL_PASSES)}

    def hooked(name: str) -> Tuple[int, Dict[str, dict]]:
        return _hooked(lambda: _cpu(*works[name]), True, shapes, False,
                       _NO_READS, memory)

    least = _Least()
    for round_ in range(rounds + 1):     # the first warms caches, unkept
        for name, (work, times) in works.items():
            cpu, stages = hooked(name)
            if round_:
                least.add(**{name: _cpu(work, times), f"{name}_hooked": cpu})
        ops_in_forward = _summed(stages, lambda n: "::" in n)["count"]
    op = (least["mix_hooked"] - least["mix"]) / (MIX * CAL_OPS)
    quiet_ns = (least["quiet_hooked"] - least["quiet"]) / (MIX * CAL_OPS)
    # the no_grad switch's two calls pass through, as does each op's
    carry = (least["forward_hooked"] - least["forward"]
             - ops_in_forward * op - 2 * CAL_PASSES * quiet_ns) \
        / (CAL_PASSES * (3 * CAL_LAYERS + 1))
    return {"torch_op_ns": max(op, 0.0), "torch_quiet_ns": max(quiet_ns, 0.0),
            "torch_carry_ns": max(carry, 0.0)}


def _module_cost(memory: bool, rounds: int) -> Dict[str, float]:
    """Modules: CAL_PASSES forward and backward passes through the chain
    of layers, and as many forwards without grad. Inside: a module's
    stage's own CPU time less its forward called alone; a backward
    stage's less its autograd node's (the chain's backward less that of
    its first three layers, per layer)."""
    torch = state.torch
    chain, x = _layers()
    head = torch.nn.Sequential(*chain[:3])
    leaves = list(chain)
    calls = CAL_PASSES * (len(leaves) + 1)   # the chain and its modules

    def with_grad(model: Any = chain) -> Tuple[int, int]:
        forward = backward = 0
        for _ in range(CAL_PASSES):
            cpu = time.thread_time_ns()
            out = model(x)
            forward -= cpu - time.thread_time_ns()
            cpu = time.thread_time_ns()
            # no explicit gradient: torch imports sympy to check one
            out.sum().backward()
            backward -= cpu - time.thread_time_ns()
        return forward, backward

    def without_grad() -> Tuple[int, int]:
        with torch.no_grad():
            return _cpu(lambda: chain(x), CAL_PASSES), 0

    def alone(grad: bool) -> float:
        """CPU ns of a layer's forward called alone, on average."""
        with torch.set_grad_enabled(grad):
            return sum(_cpu(lambda: leaf.forward(x), CAL_PASSES)
                       for leaf in leaves) / (CAL_PASSES * len(leaves))

    def hooked(work: Callable[[], Any], reads: float
               ) -> Tuple[Any, Dict[str, dict]]:
        return _hooked(work, False, False, True, reads, memory)

    least = _Least()
    for round_ in range(rounds + 1):     # the first warms caches, unkept
        cpu, stages = hooked(with_grad, _NO_READS)
        nograd = hooked(without_grad, _NO_READS)[0]
        inside = hooked(with_grad, _EVERY_EDGE)[1]
        inside_nograd = hooked(without_grad, _EVERY_EDGE)[1]
        if not round_:
            continue
        least.add(bare=with_grad(), bare_nograd=without_grad(),
                  head=with_grad(head)[1], alone=alone(True),
                  alone_nograd=alone(False), hooked=cpu,
                  hooked_nograd=nograd, backward_calls=-_summed(
                      stages, lambda n: n.endswith(BACKWARD))["count"],
                  inside=_cpu_mean(inside, _leaf),
                  backward_inside=_cpu_mean(inside, _leaf_backward),
                  inside_nograd=_cpu_mean(inside_nograd, _leaf))
    bare, cpu = least["bare"], least["hooked"]
    node = (bare[1] - least["head"]) / (CAL_PASSES * (len(leaves) - 3))
    return {
        **_figures("torch_module", (cpu[0] - bare[0]) / calls,
                   least["inside"] - least["alone"]),
        **_figures("torch_module_nograd",
                   (least["hooked_nograd"][0] - least["bare_nograd"][0])
                   / calls, least["inside_nograd"] - least["alone_nograd"]),
        **_figures("torch_backward",
                   (cpu[1] - bare[1]) / -least["backward_calls"],
                   least["backward_inside"] - node)}


def _leaf(name: str) -> bool:
    """A calibration chain's module, not the chain (its outermost call,
    named by its class), nor a backward stage."""
    return name != "Sequential" and not name.endswith(BACKWARD)


def _leaf_backward(name: str) -> bool:
    return name.endswith(BACKWARD) and not name.startswith("Sequential")


class _Least(dict):
    """The least of each measure over the rounds (tuples element-wise)."""

    def add(self, **measures: Any) -> None:
        for key, value in measures.items():
            self[key] = value if key not in self else _lesser(self[key],
                                                              value)


def _lesser(a: Any, b: Any) -> Any:
    if isinstance(a, tuple):
        return tuple(_lesser(x, y) for x, y in zip(a, b))
    return min(a, b)


def _summed(stages: Dict[str, dict], which: Callable[[str], bool]
            ) -> Dict[str, int]:
    """count and cpu_ns of the stages whose name `which` takes."""
    picked = [s for name, s in stages.items() if which(name)]
    return {"count": max(sum(s["count"] for s in picked), 1),
            "cpu_ns": sum(s["cpu_ns"] for s in picked)}


def _cpu_mean(stages: Dict[str, dict], which: Callable[[str], bool]
              ) -> float:
    """CPU ns a call of the stages whose name `which` takes."""
    summed = _summed(stages, which)
    return summed["cpu_ns"] / summed["count"]


def _figures(prefix: str, all_told: float, inside: float
             ) -> Dict[str, float]:
    """A call's cost all told and the part inside its own stage, never
    below 0 nor above the whole (what noise is left)."""
    all_told = max(all_told, 0.0)
    return {f"{prefix}_ns": all_told,
            f"{prefix}_inside_ns": min(max(inside, 0.0), all_told)}

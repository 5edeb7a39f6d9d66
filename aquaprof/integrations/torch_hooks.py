"""torch ops and nn.Module calls as stages: ``Profiler(torch_ops=True)``
records each torch call of the program as a stage under the open stage
(``model/aten::conv2d``), ``torch_ops="shapes"`` with its input shapes in
the name (``aten::conv2d (1×3×32×32, 8×3×3×3, 8)``; past SHAPES_SHOWN
arguments or LIST_SHOWN tensors of a list, whole shapes left out and
counted), and ``Profiler(torch_modules=True)`` each ``nn.Module`` call as
a stage named by its attribute path and class
(``SmallCNN/features (Sequential)/features.0 (Conv2d)``) and, where
autograd runs it, its backward (``SmallCNN (backward)/...``).
calibrate_hooks() measures what the hooks cost a call, for the report's
cost line (aquaprof.calibration.run_cost) and its compensated figures
(aquaprof.analysis.overhead).

They are ordinary stages (``aquaprof.stage``), entered and left from the
hooks below: they nest with the program's own, count and time like
them, and with GPU tracing on, the kernels an op or a module launched
are attributed to it (the stage pushes its CUPTI correlation id).

Ops: a ``TorchFunctionMode``, measured against the alternatives
(``benchmarks/bench_torch_hooks.py``, docs/benchmarks.md). Per torch
call on this project's 2-vCPU VM, with the stage recorded: 1.2 us for
the function mode against 3.0 us for a ``TorchDispatchMode``, which also
made a CNN's training step 1.34x slower (autograd's ops go through
Python), and 4.8 us for one ``torch.profiler.record_function`` range;
torch's RecordFunction callbacks, which torch.profiler uses (0.2 us an
op, in C++), can be added from C++ only, and torch.profiler's results
come after its run, not as stages. The function mode also sees what the program called:
``aten::conv2d`` and ``aten::linear``, where the dispatch mode sees what
autograd decomposed them into (``aten::convolution``, ``aten::t`` and
``aten::addmm``). The name is ``aten::`` and the function's name (a
Tensor method's or operator's: ``x + y`` is ``aten::add``, ``x[0]`` is
``aten::__getitem__``); a ``torch.ops`` op keeps its own (``myns::op``).

- An op's stage is the whole call, inner ops included: torch takes the
  mode off its stack while the mode handles a call, so what the op calls
  inside (``F.relu`` calling ``torch.relu``, ``conv2d``'s convolution) is
  its own time, as the top-level rows of torch.profiler.
- Not recorded (one Python call each all the same, counted: tally()):
  attribute getters and setters (``x.shape``), ``size``, ``dim`` and the
  like, ``repr``, ``torch.no_grad``'s switch, and the ops by which
  torch's own record_function ranges begin and end
  (``profiler::_record_function_enter_new``: torch's instrumentation,
  not the program's work).
- The backward of ``loss.backward()`` is one op (``aten::backward``):
  autograd calls no Python; module backward stages nest in it.
- torch's mode stack belongs to each thread. The mode goes on the stack
  of the thread that starts the Profiler, at its bottom (so that a mode
  the program enters and leaves meanwhile is never taken off in ours'
  place; above a default-device mode, which must stay at the bottom),
  and comes off at stop(). On other threads it goes on for the duration
  of each outermost nn.Module call (module hooks carry it there, even
  with torch_modules off): their ops outside any module are not seen.
  stop() on another thread than start() cannot reach the first one's
  stack: the mode stays there, passing calls through (about 0.8 us a
  call) until a Profiler started on that thread takes it back.

Modules: torch's global forward pre- and post-hooks (``always_call``, so
that a forward raising an Exception closes its stage, counted raised).
The outermost module call on a thread is named by its class
(``SmallCNN``); a module called inside another by its attribute path
from that outermost one and its class (``features.0 (Conv2d)``: the path
first, so that names read as the model's tree), the path looked up in
the enclosing module's ``named_modules()`` (cached per module, weakly);
a module that is none of the enclosing one's is named by its class, and
its own sub-modules from it. A forward interrupted by a BaseException
that is not an Exception (KeyboardInterrupt) skips torch's post-hooks:
its stages stay open until the enclosing stage closes or the run stops.

Backward, without touching the module's outputs (full backward hooks
wrap them in an identity Function, which breaks in-place use): the
autograd nodes a forward created are those numbered, on its thread, from
the sequence number before it to the one after it; its post-hook walks
the graph back from its outputs through them and puts a pre-hook on each
node its sub-modules did not claim first. When autograd runs a node,
its hook makes the open backward stages those of the node's module and
its enclosing ones (closing the others): consecutive nodes of one module
are one call of ``<name> (backward)``. The last ones close when the
backward pass ends, returned or raised, before any stage of the
program's around it: on the thread that ran it, which reaches torch's
engine through a stand-in while modules are recorded
(``Variable._execution_engine``, put back at stop()), and on the thread
the pass ends on (an autograd final callback). On a GPU, autograd runs a
device's nodes on a thread of its own, where these stages are recorded
(at that thread's top level); a device thread the pass does not end on
closes its own at its next backward node, so they last too long there.
Nested backward passes (reentrant checkpointing) close the outer one's
stages while they run: its next nodes open them again, one more call.
Modules that autograd runs in an order other than the reverse of their
forward calls show as more calls. Hooks put on a graph during a run do
nothing after it.

torch.compile: dynamo inlines the (global) module hooks into the code
it traces, and traced the stages and the thread's open calls into the
program's graph (breaking it, or raising). So the hooks do nothing where
``torch.compiler.is_dynamo_compiling()``, a constant True while dynamo
traces: nothing of them is in the graph (fullgraph=True holds), and the
modules inside compiled code are not timed. They are counted as dynamo
traces them (``compiled()``, through ``comptime``, run at compile time)
and said once per run as a RuntimeWarning. A compiled module's call is
one stage, ``<name> (compiled)``: torch calls its hooks from uncompiled
code (an OptimizedModule's ``__call__``, or nn.Module's ``_call_impl``
for ``module.compile()``), where dynamo is told never to compile the
hooks as frames of their own, nor what they call. Code compiled before
the start holds no hooks (torch does not guard compiled code on global
hooks): only such compiled-module calls show it.

Nothing here raises into the program: an error inside a hook is
swallowed and counted (``errors()``), and said once per run as a
RuntimeWarning. torch is imported at start() by the Profiler that asks
for these (not by aquaprof otherwise). Several Profilers may ask at once
(nested ones): the hooks go in with the first and come out with the
last, recording what any of them asks (shapes if one does).
"""
from __future__ import annotations

import functools
import importlib.util
import itertools
import os
import sys
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

from .. import _core

SHAPES = "shapes"
BACKWARD = " (backward)"
_CLAIMED = "aquaprof"        # key of a claimed autograd node's metadata

# not worth a stage: metadata reads, attribute access, printing, switches
_NOISE = frozenset((
    "__get__", "__set__", "__delete__", "__repr__", "__str__", "__format__",
    "__hash__", "__len__", "__dir__", "__reduce_ex__", "__reduce__",
    "__getstate__", "__setstate__", "__deepcopy__", "__copy__",
    "__torch_function__", "_set_grad_enabled", "size", "dim", "stride",
    "numel", "nelement", "ndimension", "element_size", "is_contiguous",
    "is_floating_point", "is_complex", "is_signed", "data_ptr",
    "storage_offset", "get_device", "requires_grad_", "retain_grad",
    "register_hook", "_is_view", "is_leaf", "untyped_storage",
))
# Tensor operators as the functions they run
_OPERATORS = {
    "__add__": "add", "__radd__": "add", "__iadd__": "add_",
    "__sub__": "sub", "__rsub__": "rsub", "__isub__": "sub_",
    "__mul__": "mul", "__rmul__": "mul", "__imul__": "mul_",
    "__truediv__": "div", "__rtruediv__": "div", "__itruediv__": "div_",
    "__div__": "div", "__rdiv__": "div", "__idiv__": "div_",
    "__floordiv__": "floor_divide", "__rfloordiv__": "floor_divide",
    "__matmul__": "matmul", "__rmatmul__": "matmul",
    "__pow__": "pow", "__rpow__": "pow", "__ipow__": "pow_",
    "__mod__": "remainder", "__rmod__": "remainder",
    "__neg__": "neg", "__abs__": "abs", "__invert__": "bitwise_not",
    "__and__": "bitwise_and", "__or__": "bitwise_or",
    "__xor__": "bitwise_xor", "__eq__": "eq", "__ne__": "ne",
    "__lt__": "lt", "__le__": "le", "__gt__": "gt", "__ge__": "ge",
}
# torch's own instrumentation, not the program's work: the ops a
# torch.profiler.record_function range enters and leaves by
# (profiler::_record_function_enter_new, ..._exit)
_INSTRUMENTATION = ("profiler::",)
# caches of names and stages, cleared when this large
_CACHE_MAX = 1 << 16
# the shapes a name shows, of an op's arguments and of a list among them:
# past them whole shapes are left out, and the name says how many
# ("aten::cat ([2×3, 2×3, 2×3, 2×3, … 96 more])"), so that no name is
# cut inside a shape and one op's names stay few
SHAPES_SHOWN = 6
LIST_SHOWN = 4
MORE = "… {} more"

torch: Any = None                  # the module, from the first watch on


class _Settings:
    """What the hooks do now; replaced whole, read without the lock."""

    __slots__ = ("ops", "shapes", "modules", "gen")

    def __init__(self, ops: bool = False, shapes: bool = False,
                 modules: bool = False, gen: int = 0):
        self.ops, self.shapes, self.modules, self.gen = (ops, shapes,
                                                         modules, gen)


_on = _Settings()
# Guards the watches and the hooks' handles: profilers start and stop on
# any thread. Reentrant: the collector may run a dropped Profiler's
# unwatch (a weakref finalizer) on a thread that holds it.
_LOCK = threading.RLock()
# token -> (still wanted?, ops, shapes, modules, the state of the thread
# whose stack it put the mode on, if it has ops)
_watches: Dict[int, Tuple[Callable[[], bool], bool, bool, bool,
                          Optional["_ThreadState"]]] = {}
_tokens = itertools.count(1)
_gens = itertools.count(1)
_handles: List[Any] = []           # torch's RemovableHandles of our hooks
_errors = 0
_warned_gen = -1
# what the hooks did that no stage counts, in this process: the report
# charges their cost all the same (_Unwatch.counts)
TALLIED = ("torch_quiet_calls", "torch_carried_calls")
_tally = [0, 0]
_compiled = 0                      # module calls compiled without hooks
_compiled_names: List[str] = []    # their classes in this run, a few
_compiled_gen = -1                 # the run they are of
_warned_compiled_gen = -1
COMPILED = " (compiled)"
_OPTIMIZED = "OptimizedModule"     # torch.compile(module)'s class


def _never() -> bool:
    return False


# torch.compiler.is_dynamo_compiling once torch is here: True while
# dynamo traces (a constant there, so that the branch it guards is all
# the compiled code holds of a hook), False when that code runs
_compiling: Callable[[], bool] = _never


def check_options(torch_ops: Any, torch_modules: Any
                  ) -> Optional[Tuple[bool, bool, bool]]:
    """(ops, shapes, modules) from Profiler's torch_ops and torch_modules,
    None when both are off. TypeError or ValueError for a value that is
    none of those documented, RuntimeError when one is on and torch
    cannot be found."""
    if not isinstance(torch_modules, bool):
        raise TypeError(f"torch_modules must be True or False, got "
                        f"{torch_modules!r}")
    if isinstance(torch_ops, str):
        if torch_ops != SHAPES:
            raise ValueError(f"torch_ops must be False, True or "
                             f"{SHAPES!r}, got {torch_ops!r}")
    elif not isinstance(torch_ops, bool):
        raise TypeError(f"torch_ops must be False, True or {SHAPES!r}, "
                        f"got {torch_ops!r}")
    if not torch_ops and not torch_modules:
        return None
    if not torch_available():
        which = "torch_ops" if torch_ops else "torch_modules"
        raise RuntimeError(f"{which} records torch calls, but torch cannot "
                           f"be imported here")
    return bool(torch_ops), torch_ops == SHAPES, torch_modules


def torch_available() -> bool:
    """Whether torch is imported or can be (without importing it)."""
    if "torch" in sys.modules:
        return sys.modules["torch"] is not None
    try:
        return importlib.util.find_spec("torch") is not None
    except (ImportError, ValueError):
        return False


def errors() -> int:
    """Errors swallowed inside the hooks in this process so far."""
    return _errors


def tally() -> Dict[str, int]:
    """What the hooks did in this process so far that no stage counts
    (_Unwatch.counts says which, for one watch)."""
    return dict(zip(TALLIED, _tally))


def compiled() -> int:
    """nn.Module calls that torch.compile compiled while modules were
    recorded, in this process so far, counted each time dynamo traces
    them: the compiled code runs them untimed."""
    return _compiled


def _swallowed(error: BaseException) -> None:
    """An error inside a hook: counted, said once per run, never
    raised."""
    global _errors, _warned_gen
    _errors += 1
    if _warned_gen == _on.gen:
        return
    _warned_gen = _on.gen
    try:
        warnings.warn(f"aquaprof: an error inside its torch hooks was "
                      f"ignored ({type(error).__name__}: {error}); the "
                      f"program runs on, the torch stages may miss calls. "
                      f"Said once per run.", RuntimeWarning, stacklevel=2)
    except Exception:
        pass   # warnings as errors must not fail the program


# -------------------------------------------------------------- watches

def watch_torch(ops: bool, shapes: bool, modules: bool,
                live: Optional[Callable[[], bool]] = None
                ) -> Callable[[], None]:
    """Records torch ops (shapes in their names if asked) and module calls
    as stages until the returned function is called (once, on any
    thread), or until live() (when given) says False. Imports torch."""
    _load_torch()
    with _LOCK:
        token = next(_tokens)
        here = _thread_state(False) if ops else None
        _watches[token] = (live or _always, ops, shapes, modules, here)
        if here is not None:
            here.mode_users += 1
            _mode()       # made here, before a hook on another thread can
        _sync()
        if here is not None:
            _ensure_mode(here)
    return _Unwatch(token)


def _load_torch() -> None:
    """torch, imported here, and what the hooks need of it."""
    global torch, _compiling
    import torch as _torch
    torch = _torch
    compiler = getattr(torch, "compiler", None)
    # is_dynamo_compiling is the cheaper (20 ns a call against 100 ns)
    _compiling = getattr(compiler, "is_dynamo_compiling", None) or \
        getattr(compiler, "is_compiling", None) or _never
    _not_roots()


def _always() -> bool:
    return True


class _Unwatch:
    """Ends one watch; acts once, however often called (a watch whose
    owner stopped may have been dropped already by another's _sync).
    counts() says what the hooks did while it watched that no stage
    counts."""

    def __init__(self, token: int):
        self._token = token
        self._tally_from = tuple(_tally)
        self._tally_to: Optional[Tuple[int, ...]] = None

    def counts(self) -> Dict[str, int]:
        """{"torch_quiet_calls": torch calls the mode passed through
        without a stage (x.grad, x.shape, torch.no_grad's switch, a
        record_function range's ops), "torch_carried_calls": module calls
        whose hooks only carried the mode (torch_modules off)}, while this
        watch lasted (so far, if it still does)."""
        now = self._tally_to or tuple(_tally)
        return {key: now[i] - self._tally_from[i]
                for i, key in enumerate(TALLIED)}

    def __call__(self) -> None:
        if self._tally_to is None:
            self._tally_to = tuple(_tally)
        with _LOCK:
            _drop(self._token)
            _sync()
            # only the thread itself can take the mode off its stack
            st = _thread_state(False)
            if st.mode_here and st.mode_users <= 0:
                _remove_mode(st)


def _drop(token: int) -> None:
    """With _LOCK held: the watch ends; its thread's mode loses a user."""
    watch = _watches.pop(token, None)
    if watch is not None and watch[4] is not None:
        watch[4].mode_users -= 1


def _sync() -> None:
    """With _LOCK held: drops the watches no longer wanted, then sets what
    the hooks do and puts them in or takes them out."""
    global _on
    for token, watch in list(_watches.items()):
        if not watch[0]():
            _drop(token)
    wanted = list(_watches.values())
    ops = any(w[1] for w in wanted)
    shapes = any(w[2] for w in wanted)
    modules = any(w[3] for w in wanted)
    fresh = not _handles
    gen = next(_gens) if fresh else _on.gen
    # first what the hooks do, so that hooks an interrupt leaves in do
    # nothing; a later watch or unwatch takes them out
    _on = _Settings(ops, shapes, modules, gen)
    if (ops or modules) and fresh:
        from torch.nn.modules import module as nn_module
        _handles.append(nn_module.register_module_forward_pre_hook(_pre))
        _handles.append(nn_module.register_module_forward_hook(
            _post, always_call=True))
    elif not (ops or modules):
        while _handles:
            _handles.pop().remove()
    _engine_watch(modules)


def _forked() -> None:
    """In a forked child: nothing of ours left. The child is not the
    parent's run (a child records its own stages, without these: a
    DataLoader worker forked inside a forward must not record ops), and
    the lock may have been held by another thread at the fork."""
    global _LOCK
    _LOCK = threading.RLock()
    if torch is None or not (_watches or _handles):
        return
    try:
        _watches.clear()
        _sync()
        st = _thread_state(False)
        st.mode_users = 0
        if st.mode_here:
            _remove_mode(st)
        _tls.state = None
    except Exception as error:
        _swallowed(error)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


# ------------------------------------------------------------- threads

class _ThreadState:
    """One thread's: the module calls open (innermost last), the backward
    stages open and the autograd graph task they belong to, and our mode
    on its stack."""

    __slots__ = ("gen", "frames", "chain", "task", "mode_here",
                 "mode_users", "__weakref__")

    def __init__(self) -> None:
        self.gen = -1
        self.frames: List[_Frame] = []
        self.chain: Tuple[Any, ...] = ()
        self.task: Optional[int] = None
        self.mode_here = False
        self.mode_users = 0


_tls = threading.local()


def _thread_state(current: bool = True) -> _ThreadState:
    """This thread's state; with current, reset if an earlier run left
    it (its open stages ended with that run)."""
    st = getattr(_tls, "state", None)
    if st is None:
        st = _tls.state = _ThreadState()
    if current and st.gen != _on.gen:
        st.gen = _on.gen
        st.frames = []
        st.chain = ()
        st.task = None
    return st


# ----------------------------------------------------------------- ops

def _ensure_mode(st: _ThreadState) -> bool:
    """Puts our mode on this thread's stack, at its bottom (above a
    default-device mode), unless it is there. True if it put it."""
    mode = _mode()
    stack = [torch._C._get_function_stack_at(i)
             for i in range(torch._C._len_torch_function_stack())]
    if any(m is mode for m in stack):
        st.mode_here = True
        return False
    keep = 1 if stack and _is_device_mode(stack[0]) else 0
    if len(stack) == keep:
        torch._C._push_on_torch_function_stack(mode)
    else:
        _rebuild(stack[:keep] + [mode] + stack[keep:])
    st.mode_here = True
    return True


def _remove_mode(st: _ThreadState) -> None:
    """Takes our mode off this thread's stack, wherever it is."""
    st.mode_here = False
    mode = _mode()
    n = torch._C._len_torch_function_stack()
    if n == 1 and torch._C._get_function_stack_at(0) is mode:
        torch._C._pop_torch_function_stack()
        return
    stack = [torch._C._get_function_stack_at(i) for i in range(n)]
    if any(m is mode for m in stack):
        _rebuild([m for m in stack if m is not mode])


def _rebuild(stack: List[Any]) -> None:
    """This thread's mode stack made `stack` (bottom first)."""
    for _ in range(torch._C._len_torch_function_stack()):
        torch._C._pop_torch_function_stack()
    for m in stack:
        torch._C._push_on_torch_function_stack(m)


def _is_device_mode(mode: Any) -> bool:
    device = sys.modules.get("torch.utils._device")
    kind = getattr(device, "DeviceContext", None)
    return isinstance(kind, type) and isinstance(mode, kind)


@functools.lru_cache(maxsize=None)
def _mode() -> Any:
    """The one mode object, on every stack it is on."""
    from torch.overrides import TorchFunctionMode

    class AquaprofOps(TorchFunctionMode):
        """aquaprof's: each torch call a stage (torch_ops)."""

        def __torch_function__(self, func: Any, types: Any,
                               args: Any = (), kwargs: Any = None) -> Any:
            if kwargs is None:
                kwargs = {}
            on = _on
            # dynamo traces the mode into the program's graph: there it
            # is the call alone, as the module hooks are nothing
            if not on.ops or _compiling():
                return func(*args, **kwargs)
            try:
                stage = _op_stage(func, args, kwargs, on.shapes)
            except Exception as error:
                _swallowed(error)
                stage = None
            if stage is None:
                _tally[0] += 1
                return func(*args, **kwargs)
            stage.__enter__()
            try:
                result = func(*args, **kwargs)
            except BaseException as error:
                stage.__exit__(type(error), error, error.__traceback__)
                raise
            stage.__exit__(None, None, None)
            return result

    return AquaprofOps()


_names: Dict[Any, Optional[str]] = {}
_stages: Dict[str, Any] = {}


def _op_stage(func: Any, args: Any, kwargs: Any, shapes: bool) -> Any:
    """The stage of a call of func, None for one not recorded."""
    try:
        name = _names[func]
    except KeyError:
        if len(_names) >= _CACHE_MAX:
            _names.clear()
        name = _names[func] = _op_name(func)
    except TypeError:             # unhashable: named every time
        name = _op_name(func)
    if name is None:
        return None
    if shapes:
        name += _shapes(args, kwargs)
    return _stage(name)


def _op_name(func: Any) -> Optional[str]:
    qualified = getattr(func, "_qualified_op_name", None)     # torch.ops
    if qualified is None:
        qualified = getattr(getattr(func, "_schema", None), "name", None)
    if isinstance(qualified, str) and qualified:
        if qualified.startswith(_INSTRUMENTATION):
            return None
        return qualified.replace("/", "\u2215")
    name = getattr(func, "__name__", None)
    if not isinstance(name, str) or not name or name in _NOISE:
        return None
    return "aten::" + _OPERATORS.get(name, name).replace("/", "\u2215")


def _shapes(args: Any, kwargs: Any) -> str:
    """ (1×3×32×32, 8×3×3×3) for the tensors among the arguments, lists
    of them in brackets; empty when there is none."""
    parts = []
    for value in (*args, *kwargs.values()):
        text = _shape_text(value)
        if text is not None:
            parts.append(text)
    if not parts:
        return ""
    more = len(parts) - SHAPES_SHOWN
    return f" ({_whole_shapes(parts[:SHAPES_SHOWN], more)})"


def _shape_text(value: Any) -> Optional[str]:
    if isinstance(value, torch.Tensor):
        return "×".join(map(str, value.shape)) or "scalar"
    if isinstance(value, (list, tuple)) and value and \
            isinstance(value[0], torch.Tensor):
        # a long list (torch.cat of many) read only as far as shown
        shapes = [t for t in map(_shape_text, value[:LIST_SHOWN]) if t]
        return "[" + _whole_shapes(shapes, len(value) - LIST_SHOWN) + "]"
    return None


def _whole_shapes(shapes: List[str], more: int) -> str:
    """shapes, and how many more were left out, if any."""
    return ", ".join(shapes + [MORE.format(more)] if more > 0 else shapes)


def _stage(name: str) -> Any:
    stage = _stages.get(name)
    if stage is None:
        if len(_stages) >= _CACHE_MAX:
            _stages.clear()
        stage = _stages[name] = _core.stage(name)
    return stage


# ------------------------------------------------------------- modules

class _Frame:
    """One module call open on a thread."""

    __slots__ = ("module", "rel", "name", "stage", "pushed", "seq", "chain")

    def __init__(self, module: Any, rel: str, name: str, stage: Any,
                 pushed: bool, seq: int):
        self.module = module
        self.rel = rel            # attribute path from the outermost, or ""
        self.name = name          # the stage's name
        self.stage = stage        # None when modules are not recorded
        self.pushed = pushed      # it put our mode on this thread's stack
        self.seq = seq            # autograd's sequence number before, or -1
        self.chain: Optional[Tuple[Any, ...]] = None   # backward stages


def _pre(module: Any, args: Any) -> None:
    if _compiling():
        # dynamo would trace the stage's C calls and the thread's frames
        # into the program's graph (breaking it, or its tracking of the
        # module): the compiled code runs no hook, the call is counted
        # instead while dynamo traces it (comptime: nothing in the graph)
        try:
            torch._dynamo.comptime.comptime(_count_compiled)
        except Exception as error:
            _swallowed(error)
        return
    try:
        _enter_module(module, _on)
    except Exception as error:
        _swallowed(error)


def _count_compiled(ctx: Any) -> None:
    """Run by dynamo while it traces a module's pre-hook: one module call
    compiled without its stage."""
    global _compiled, _compiled_gen
    try:
        if not _on.modules:
            return
        _compiled += 1
        if _compiled_gen != _on.gen:
            _compiled_gen = _on.gen
            _compiled_names.clear()
        name = ctx.get_local("module").python_type().__name__
        if name not in _compiled_names and len(_compiled_names) < 3:
            _compiled_names.append(name)
        _say_compiled()
    except Exception as error:
        _swallowed(error)


def _not_roots() -> None:
    """Keeps torch.compile from compiling the hooks, and all they call, as
    frames of their own where code it runs uncompiled calls them
    (nn.Module's _call_impl, a torch file, under a compiled module or
    function): compiled they would do nothing, or fail on the hooks'
    C calls; run they time that module's call as one stage. Inside the
    frames it compiles, dynamo still inlines them (the compiling branch).
    torch's C side, there without importing torch._dynamo (1 s)."""
    frames: Any = getattr(getattr(torch._C, "_dynamo", None), "eval_frame",
                          None)
    strategy = getattr(frames, "_FrameExecStrategy", None)
    if strategy is None:
        return      # an older torch: there the hooks compile to nothing
    try:
        skip = strategy(frames._FrameAction.SKIP, frames._FrameAction.SKIP)
        for hook in (_pre, _post):
            frames.set_code_exec_strategy(hook.__code__, skip)
    except Exception as error:
        _swallowed(error)


def _say_compiled() -> None:
    """Once per run: compiled code hides the module calls inside it."""
    global _warned_compiled_gen
    if _warned_compiled_gen == _on.gen:
        return
    _warned_compiled_gen = _on.gen
    names = ", ".join(_compiled_names) if _compiled_gen == _on.gen else ""
    try:
        warnings.warn(f"aquaprof: code compiled by torch.compile ran while "
                      f"nn.Module calls were recorded"
                      f"{f' ({names})' if names else ''}: compiled code runs "
                      f"no module hooks, so the modules inside it are not "
                      f"timed one by one (counted in aquaprof.integrations."
                      f"torch_hooks.compiled()); their time is in the stage "
                      f"around them, a compiled module's call one stage "
                      f"'<name>{COMPILED}'. Said once per run.",
                      RuntimeWarning, stacklevel=2)
    except Exception:
        pass   # warnings as errors must not fail the program


def _enter_module(module: Any, on: _Settings) -> None:
    st = _thread_state()
    frames = st.frames
    if not on.modules:            # only carrying the mode to this thread
        _tally[1] += 1
        pushed = not frames and on.ops and not st.mode_here and \
            _ensure_mode(st)
        frames.append(_Frame(module, "", "", None, pushed, -1))
        return
    sub = None
    if not frames:
        if st.chain and torch._C._current_graph_task_id() == -1:
            _end_chain(st)        # a pass that ended on another thread
    else:
        parent = frames[-1]
        above = parent.module
        if type(above).__name__ == _OPTIMIZED:
            above = _orig(above) or above
            if above is module:
                return      # a compiled module's call of the one it wraps
        sub = _sub_name(above, module)
        if sub is not None and parent.rel:
            sub = f"{parent.rel}.{sub}"
    rel = sub or ""
    kind = type(module).__name__
    if kind == _OPTIMIZED or \
            module.__dict__.get("_compiled_call_impl") is not None:
        name = _compiled_name(module, sub)
    else:
        name = module_name(sub, kind)
    stage = _stage(name)
    seq = -1
    if torch.is_grad_enabled():
        seq = torch._C._autograd._get_sequence_nr()
    # last, so that nothing can fail between putting the mode on and
    # keeping the frame that takes it off
    pushed = not frames and on.ops and not st.mode_here and \
        _ensure_mode(st)
    frames.append(_Frame(module, rel, name, stage, pushed, seq))
    stage.__enter__()


def _orig(module: Any) -> Any:
    """The module an OptimizedModule (torch.compile(module)) wraps."""
    return module.__dict__.get("_modules", {}).get("_orig_mod")


def module_name(path: Optional[str], kind: str) -> str:
    """The stage name of a module call: its attribute path from the
    outermost module and its class ("features.0 (Conv2d)"), the path
    first so that names sort and read as the model's tree; the class
    alone for an outermost call ("SmallCNN")."""
    kind = kind.replace("/", "\u2215")
    if not path:
        return kind
    return path.replace("/", "\u2215") + f" ({kind})"


def _compiled_name(module: Any, sub: Optional[str]) -> str:
    """The stage name of a compiled module's call (torch.compile(module)
    or module.compile()): marked, since the modules inside it are not
    timed; named by the class it compiled."""
    _say_compiled()
    if type(module).__name__ == _OPTIMIZED:
        module = _orig(module) or module
    return module_name(sub, type(module).__name__) + COMPILED


# module -> {id(descendant): (weakref to it, its attribute path or None)}
_paths: "weakref.WeakKeyDictionary[Any, Dict[int, Tuple[Any, Optional[str]]]]" \
    = weakref.WeakKeyDictionary()


def _sub_name(parent: Any, module: Any) -> Optional[str]:
    """module's attribute path in parent ("0", "layers.3.attn"), None
    when it is not one of parent's modules."""
    known = _paths.get(parent)
    hit = known.get(id(module)) if known is not None else None
    if hit is not None and hit[0]() is module:
        return hit[1]
    # a module added since, or the first look: read parent's modules again
    known = {id(m): (weakref.ref(m), path)
             for path, m in parent.named_modules() if path}
    if id(module) not in known or known[id(module)][0]() is not module:
        known[id(module)] = (weakref.ref(module), None)
    _paths[parent] = known
    return known[id(module)][1]


def _post(module: Any, args: Any, output: Any) -> None:
    if _compiling():
        return
    try:
        _leave_module(module, output)
    except Exception as error:
        _swallowed(error)


def _leave_module(module: Any, output: Any) -> None:
    st = _thread_state()
    frames = st.frames
    i = len(frames) - 1
    while i >= 0 and frames[i].module is not module:
        i -= 1
    if i < 0:
        return        # its pre-hook did not run (another pre-hook raised)
    raised = _raised_in_forward()
    while len(frames) > i + 1:      # calls whose post-hooks never ran
        _leave_frame(st, frames.pop(), RuntimeError)
    frame = frames[i]
    if frame.seq >= 0 and raised is None and _on.modules:
        try:
            _claim_backward(frames, output)
        except Exception as error:      # the call's stage closes all the same
            _swallowed(error)
    frames.pop()
    _leave_frame(st, frame, raised)


def _raised_in_forward() -> Optional[type]:
    """The type of the exception the forward raised, None if it returned.
    torch calls our post-hook for a forward that raised inside the except
    clause of Module._call_impl, our caller."""
    error = sys.exc_info()[1]
    if error is None:
        return None
    tb = error.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(3):
        return type(error)
    return None


def _leave_frame(st: _ThreadState, frame: _Frame,
                 raised: Optional[type]) -> None:
    if frame.stage is not None:
        frame.stage.__exit__(raised, None, None)
    # a Profiler started inside the call may rely on it: then it stays
    if frame.pushed and st.mode_users <= 0:
        _remove_mode(st)


# ------------------------------------------------------------ backward

# (run, chain) -> the node pre-hook that opens chain's stages
_chain_hooks: Dict[Tuple[int, Tuple[Any, ...]], Callable[[Any], None]] = {}


def _claim_backward(frames: List[_Frame], output: Any) -> None:
    """Hooks the autograd nodes the innermost call of frames created and
    its sub-modules did not claim, reached back from its output."""
    low = frames[-1].seq
    high = torch._C._autograd._get_sequence_nr()
    if high <= low:
        return
    chain = _chain(frames)
    gen = _on.gen
    hook = _chain_hooks.get((gen, chain))
    if hook is None:
        if len(_chain_hooks) >= _CACHE_MAX:
            _chain_hooks.clear()
        hook = _chain_hooks[gen, chain] = _node_hook(chain, gen)
    with torch._C.DisableTorchFunction():
        todo = [t.grad_fn for t in _tensors(output, [], 0)]
        seen = set()
        # where this walk stops: the nodes made before the call. Each node
        # it claims keeps the list, so that an enclosing module's walk
        # goes from a sub-module's node straight on to them.
        stops: List[Any] = []
        while todo:
            node = todo.pop()
            if node is None or node in seen:
                continue
            seen.add(node)
            if not low <= node._sequence_nr() < high:
                stops.append(node)
                continue
            meta = node.metadata
            theirs = meta.get(_CLAIMED)
            if theirs is None:
                meta[_CLAIMED] = stops
                node.register_prehook(hook)
                todo.extend(n for n, _ in node.next_functions)
            else:
                todo.extend(theirs)


def _chain(frames: List[_Frame]) -> Tuple[Any, ...]:
    """The backward stages of the calls open, outermost first."""
    above: Tuple[Any, ...] = ()
    for frame in frames:
        if frame.chain is None:
            frame.chain = above + (_stage(frame.name + BACKWARD),)
        above = frame.chain
    return above


def _tensors(value: Any, out: List[Any], depth: int) -> List[Any]:
    if isinstance(value, torch.Tensor):
        out.append(value)
    elif depth < 4 and isinstance(value, (list, tuple)):
        for v in value:
            _tensors(v, out, depth + 1)
    elif depth < 4 and isinstance(value, dict):
        for v in value.values():
            _tensors(v, out, depth + 1)
    return out


def _node_hook(chain: Tuple[Any, ...], gen: int) -> Callable[[Any], None]:
    def before_node(grad_outputs: Any) -> None:
        if _on.gen == gen and _on.modules:
            try:
                _to_chain(chain)
            except Exception as error:
                _swallowed(error)
        return None
    return before_node


def _to_chain(chain: Tuple[Any, ...]) -> None:
    """The backward stages open on this thread made chain's."""
    st = _thread_state()
    task = torch._C._current_graph_task_id()
    if st.task != task:
        _end_chain(st)        # another pass's: ended, raised or nested
        st.task = task
        torch.autograd.Variable._execution_engine.queue_callback(
            functools.partial(_pass_ended, task))
    now = st.chain
    if now == chain:
        return
    common = 0
    for a, b in zip(now, chain):
        if a is not b:
            break
        common += 1
    for stage in reversed(now[common:]):
        stage.__exit__(None, None, None)
    st.chain = now[:common]
    for stage in chain[common:]:
        stage.__enter__()
    st.chain = chain


def _pass_ended(task: int) -> None:
    try:
        st = _thread_state()
        if st.task == task:
            _end_chain(st)
    except Exception as error:
        _swallowed(error)


def _end_chain(st: _ThreadState) -> None:
    chain, st.chain, st.task = st.chain, (), None
    for stage in reversed(chain):
        stage.__exit__(None, None, None)


class _Engine:
    """torch's autograd engine, as Python code reaches it
    (``Variable._execution_engine``), and the end of each backward pass
    it runs, returned or raised: there the thread's backward stages
    close, before any stage of the program's can close around them."""

    def __init__(self, engine: Any):
        self.engine = engine

    def run_backward(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.engine.run_backward(*args, **kwargs)
        finally:
            try:
                if _on.modules:
                    st = _thread_state()
                    if st.chain:
                        _end_chain(st)
            except Exception as error:
                _swallowed(error)

    def __getattr__(self, name: str) -> Any:
        # queue_callback, is_checkpoint_valid, ...: the engine's
        return getattr(self.engine, name)


def _engine_watch(on: bool) -> None:
    """With _LOCK held: our _Engine in torch's place, or out of it (when
    nobody replaced it since)."""
    owner = torch.autograd.variable.Variable
    current = owner.__dict__.get("_execution_engine")
    if on and current is not None and not isinstance(current, _Engine):
        owner._execution_engine = _Engine(current)
    elif not on and isinstance(current, _Engine):
        owner._execution_engine = current.engine


# --------------------------------------------------------- calibration

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
    (aquaprof.calibration charges it, aquaprof.analysis.overhead takes it
    out):

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
    aquaprof.calibration.calibrate."""
    _load_torch()
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
    setting comes back after."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return measure()
    finally:
        torch.set_num_threads(threads)


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
    from ..calibration import run_alone

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
    nn = torch.nn
    chain = nn.Sequential(*(layer for _ in range(CAL_LAYERS) for layer in (
        nn.Conv2d(2, 2, 3, padding=1), nn.ReLU(), nn.Linear(4, 4))))
    return chain, torch.ones(1, 2, 4, 4, requires_grad=True)


def _op_cost(shapes: bool, memory: bool, rounds: int) -> Dict[str, float]:
    """Ops: CAL_OPS rounds of MIX ops on small tensors; as many reads of
    x.grad; CAL_PASSES forwards without grad through the chain
    of layers, with ops recorded and modules not."""
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

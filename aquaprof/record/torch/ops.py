"""torch ops as stages (``Profiler(torch_ops=True)``): each torch call of
the program a stage under the open stage (``model/aten::conv2d``);
``torch_ops="shapes"`` with its input shapes in the name
(``aten::conv2d (1×3×32×32, 8×3×3×3, 8)``; past SHAPES_SHOWN arguments
or LIST_SHOWN tensors of a list, whole shapes left out and counted).

A ``TorchFunctionMode``, measured against the alternatives
(``benchmarks/bench_torch_hooks.py``, docs/benchmarks.md). Per torch
call on this project's 2-vCPU VM, with the stage recorded: 1.2 us for
the function mode against 3.0 us for a ``TorchDispatchMode``, which also
made a CNN's training step 1.34x slower (autograd's ops go through
Python), and 4.8 us for one ``torch.profiler.record_function`` range;
torch's RecordFunction callbacks, which torch.profiler uses (0.2 us an
op, in C++), can be added from C++ only, and torch.profiler's results
come after its run, not as stages. The function mode also sees what the
program called: ``aten::conv2d`` and ``aten::linear``, where the
dispatch mode sees what autograd decomposed them into
(``aten::convolution``, ``aten::t`` and ``aten::addmm``). The name is
``aten::`` and the function's name (a Tensor method's or operator's:
``x + y`` is ``aten::add``, ``x[0]`` is ``aten::__getitem__``); a
``torch.ops`` op keeps its own (``myns::op``).

- An op's stage is the whole call, inner ops included: torch takes the
  mode off its stack while the mode handles a call, so what the op calls
  inside (``F.relu`` calling ``torch.relu``, ``conv2d``'s convolution) is
  its own time, as the top-level rows of torch.profiler.
- Not recorded (one Python call each all the same, counted:
  state.tally()): attribute getters and setters (``x.shape``), ``size``,
  ``dim`` and the like, ``repr``, ``torch.no_grad``'s switch, and the
  ops by which torch's own record_function ranges begin and end
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
  with torch_modules off, modules.py): their ops outside any module are
  not seen. stop() on another thread than start() cannot reach the
  first one's stack: the mode stays there, passing calls through (about
  0.8 us a call) until a Profiler started on that thread takes it back.
"""
from __future__ import annotations

import functools
import sys
from typing import Any, Dict, List, Optional

from . import state
from .state import CACHE_MAX, ThreadState, stage, swallowed

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
# the shapes a name shows, of an op's arguments and of a list among them:
# past them whole shapes are left out, and the name says how many
# ("aten::cat ([2×3, 2×3, 2×3, 2×3, … 96 more])"), so that no name is
# cut inside a shape and one op's names stay few
SHAPES_SHOWN = 6
LIST_SHOWN = 4
MORE = "… {} more"


# ------------------------------------------------------------ the mode

def ensure_mode(st: ThreadState) -> bool:
    """Puts our mode on this thread's stack, at its bottom (above a
    default-device mode), unless it is there. True if it put it."""
    torch = state.torch
    ours = mode()
    stack = [torch._C._get_function_stack_at(i)
             for i in range(torch._C._len_torch_function_stack())]
    if any(m is ours for m in stack):
        st.mode_here = True
        return False
    keep = 1 if stack and _is_device_mode(stack[0]) else 0
    if len(stack) == keep:
        torch._C._push_on_torch_function_stack(ours)
    else:
        _rebuild(stack[:keep] + [ours] + stack[keep:])
    st.mode_here = True
    return True


def remove_mode(st: ThreadState) -> None:
    """Takes our mode off this thread's stack, wherever it is."""
    torch = state.torch
    st.mode_here = False
    ours = mode()
    n = torch._C._len_torch_function_stack()
    if n == 1 and torch._C._get_function_stack_at(0) is ours:
        torch._C._pop_torch_function_stack()
        return
    stack = [torch._C._get_function_stack_at(i) for i in range(n)]
    if any(m is ours for m in stack):
        _rebuild([m for m in stack if m is not ours])


def _rebuild(stack: List[Any]) -> None:
    """This thread's mode stack made `stack` (bottom first)."""
    torch = state.torch
    for _ in range(torch._C._len_torch_function_stack()):
        torch._C._pop_torch_function_stack()
    for m in stack:
        torch._C._push_on_torch_function_stack(m)


def _is_device_mode(mode: Any) -> bool:
    device = sys.modules.get("torch.utils._device")
    kind = getattr(device, "DeviceContext", None)
    return isinstance(kind, type) and isinstance(mode, kind)


@functools.lru_cache(maxsize=None)
def mode() -> Any:
    """The one mode object, on every stack it is on."""
    from torch.overrides import TorchFunctionMode

    class AquaprofOps(TorchFunctionMode):
        """aquaprof's: each torch call a stage (torch_ops)."""

        def __torch_function__(self, func: Any, types: Any,
                               args: Any = (), kwargs: Any = None) -> Any:
            if kwargs is None:
                kwargs = {}
            on = state.on
            # dynamo traces the mode into the program's graph: there it
            # is the call alone, as the module hooks are nothing
            if not on.ops or state.compiling():
                return func(*args, **kwargs)
            try:
                op = _op_stage(func, args, kwargs, on.shapes)
            except Exception as error:
                swallowed(error)
                op = None
            if op is None:
                state.tallied[0] += 1
                return func(*args, **kwargs)
            op.__enter__()
            try:
                result = func(*args, **kwargs)
            except BaseException as error:
                op.__exit__(type(error), error, error.__traceback__)
                raise
            op.__exit__(None, None, None)
            return result

    return AquaprofOps()


# ------------------------------------------------------------ the names

_names: Dict[Any, Optional[str]] = {}


def _op_stage(func: Any, args: Any, kwargs: Any, shapes: bool) -> Any:
    """The stage of a call of func, None for one not recorded."""
    try:
        name = _names[func]
    except KeyError:
        if len(_names) >= CACHE_MAX:
            _names.clear()
        name = _names[func] = _op_name(func)
    except TypeError:             # unhashable: named every time
        name = _op_name(func)
    if name is None:
        return None
    if shapes:
        name += _shapes(args, kwargs)
    return stage(name)


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
    tensor = state.torch.Tensor
    if isinstance(value, tensor):
        return "×".join(map(str, value.shape)) or "scalar"
    if isinstance(value, (list, tuple)) and value and \
            isinstance(value[0], tensor):
        # a long list (torch.cat of many) read only as far as shown
        shapes = [t for t in map(_shape_text, value[:LIST_SHOWN]) if t]
        return "[" + _whole_shapes(shapes, len(value) - LIST_SHOWN) + "]"
    return None


def _whole_shapes(shapes: List[str], more: int) -> str:
    """shapes, and how many more were left out, if any."""
    return ", ".join(shapes + [MORE.format(more)] if more > 0 else shapes)

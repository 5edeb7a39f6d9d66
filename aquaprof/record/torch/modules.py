"""nn.Module calls as stages (``Profiler(torch_modules=True)``): each call
a stage named by its attribute path and class
(``SmallCNN/features (Sequential)/features.0 (Conv2d)``), and where
autograd runs it, its backward (backward.py).

torch's global forward pre- and post-hooks (``always_call``, so that a
forward raising an Exception closes its stage, counted raised). The
outermost module call on a thread is named by its class (``SmallCNN``);
a module called inside another by its attribute path from that outermost
one and its class (``features.0 (Conv2d)``: the path first, so that
names read as the model's tree), the path looked up in the enclosing
module's ``named_modules()`` (cached per module, weakly); a module that
is none of the enclosing one's is named by its class, and its own
sub-modules from it. A forward interrupted by a BaseException that is
not an Exception (KeyboardInterrupt) skips torch's post-hooks: its
stages stay open until the enclosing stage closes or the run stops.
With torch_modules off and torch_ops on, the same hooks carry the op
mode (ops.py) to other threads than the one that started the Profiler,
for each outermost module call.

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
hooks as frames of their own, nor what they call (not_roots). Code
compiled before the start holds no hooks (torch does not guard compiled
code on global hooks): only such compiled-module calls show it.
"""
from __future__ import annotations

import sys
import warnings
import weakref
from typing import Any, Dict, List, Optional, Tuple

from . import backward, state
from .ops import ensure_mode, remove_mode
from .state import Settings, ThreadState, stage, swallowed, thread_state

COMPILED = " (compiled)"
_OPTIMIZED = "OptimizedModule"     # torch.compile(module)'s class

_compiled = 0                      # module calls compiled without hooks
_compiled_names: List[str] = []    # their classes in this run, a few
_compiled_gen = -1                 # the run they are of
_warned_compiled_gen = -1


def compiled() -> int:
    """nn.Module calls that torch.compile compiled while modules were
    recorded, in this process so far, counted each time dynamo traces
    them: the compiled code runs them untimed."""
    return _compiled


class Frame:
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


def pre_hook(module: Any, args: Any) -> None:
    """torch's global forward pre-hook: the call's stage opens."""
    if state.compiling():
        # dynamo would trace the stage's C calls and the thread's frames
        # into the program's graph (breaking it, or its tracking of the
        # module): the compiled code runs no hook, the call is counted
        # instead while dynamo traces it (comptime: nothing in the graph)
        try:
            state.torch._dynamo.comptime.comptime(_count_compiled)
        except Exception as error:
            swallowed(error)
        return
    try:
        _enter_module(module, state.on)
    except Exception as error:
        swallowed(error)


def _count_compiled(ctx: Any) -> None:
    """Run by dynamo while it traces a module's pre-hook: one module call
    compiled without its stage."""
    global _compiled, _compiled_gen
    try:
        on = state.on
        if not on.modules:
            return
        _compiled += 1
        if _compiled_gen != on.gen:
            _compiled_gen = on.gen
            _compiled_names.clear()
        name = ctx.get_local("module").python_type().__name__
        if name not in _compiled_names and len(_compiled_names) < 3:
            _compiled_names.append(name)
        _say_compiled()
    except Exception as error:
        swallowed(error)


def not_roots() -> None:
    """Keeps torch.compile from compiling the hooks, and all they call, as
    frames of their own where code it runs uncompiled calls them
    (nn.Module's _call_impl, a torch file, under a compiled module or
    function): compiled they would do nothing, or fail on the hooks'
    C calls; run they time that module's call as one stage. Inside the
    frames it compiles, dynamo still inlines them (the compiling branch).
    torch's C side, there without importing torch._dynamo (1 s)."""
    frames: Any = getattr(getattr(state.torch._C, "_dynamo", None),
                          "eval_frame", None)
    strategy = getattr(frames, "_FrameExecStrategy", None)
    if strategy is None:
        return      # an older torch: there the hooks compile to nothing
    try:
        skip = strategy(frames._FrameAction.SKIP, frames._FrameAction.SKIP)
        for hook in (pre_hook, post_hook):
            frames.set_code_exec_strategy(hook.__code__, skip)
    except Exception as error:
        swallowed(error)


def _say_compiled() -> None:
    """Once per run: compiled code hides the module calls inside it."""
    global _warned_compiled_gen
    gen = state.on.gen
    if _warned_compiled_gen == gen:
        return
    _warned_compiled_gen = gen
    names = ", ".join(_compiled_names) if _compiled_gen == gen else ""
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


def _enter_module(module: Any, on: Settings) -> None:
    torch = state.torch
    st = thread_state()
    frames = st.frames
    if not on.modules:            # only carrying the mode to this thread
        state.tallied[1] += 1
        pushed = not frames and on.ops and not st.mode_here and \
            ensure_mode(st)
        frames.append(Frame(module, "", "", None, pushed, -1))
        return
    sub = None
    if not frames:
        if st.chain and torch._C._current_graph_task_id() == -1:
            backward.end_chain(st)   # a pass that ended on another thread
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
    call = stage(name)
    seq = -1
    if torch.is_grad_enabled():
        seq = torch._C._autograd._get_sequence_nr()
    # last, so that nothing can fail between putting the mode on and
    # keeping the frame that takes it off
    pushed = not frames and on.ops and not st.mode_here and \
        ensure_mode(st)
    frames.append(Frame(module, rel, name, call, pushed, seq))
    call.__enter__()


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


def post_hook(module: Any, args: Any, output: Any) -> None:
    """torch's global forward hook (always_call): the call's stage
    closes, its autograd nodes claimed for its backward."""
    if state.compiling():
        return
    try:
        _leave_module(module, output)
    except Exception as error:
        swallowed(error)


def _leave_module(module: Any, output: Any) -> None:
    st = thread_state()
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
    if frame.seq >= 0 and raised is None and state.on.modules:
        try:
            backward.claim_backward(frames, output)
        except Exception as error:      # the call's stage closes all the same
            swallowed(error)
    frames.pop()
    _leave_frame(st, frame, raised)


def _raised_in_forward() -> Optional[type]:
    """The type of the exception the forward raised, None if it returned.
    torch calls our post-hook for a forward that raised inside the except
    clause of Module._call_impl, our hook's caller."""
    error = sys.exc_info()[1]
    if error is None:
        return None
    tb = error.__traceback__
    if tb is not None and tb.tb_frame is sys._getframe(3):
        return type(error)
    return None


def _leave_frame(st: ThreadState, frame: Frame,
                 raised: Optional[type]) -> None:
    if frame.stage is not None:
        frame.stage.__exit__(raised, None, None)
    # a Profiler started inside the call may rely on it: then it stays
    if frame.pushed and st.mode_users <= 0:
        remove_mode(st)

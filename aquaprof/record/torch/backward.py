"""Module backward passes as stages (``Profiler(torch_modules=True)``):
where autograd runs what a module call made, ``<name> (backward)``
(``SmallCNN (backward)/...``), nested as the module calls were.

Without touching the module's outputs (full backward hooks wrap them in
an identity Function, which breaks in-place use): the autograd nodes a
forward created are those numbered, on its thread, from the sequence
number before it to the one after it; its post-hook (modules.py) walks
the graph back from its outputs through them and puts a pre-hook on each
node its sub-modules did not claim first (claim_backward). When autograd
runs a node, its hook makes the open backward stages those of the node's
module and its enclosing ones (closing the others): consecutive nodes of
one module are one call of ``<name> (backward)``. The last ones close
when the backward pass ends, returned or raised, before any stage of the
program's around it: on the thread that ran it, which reaches torch's
engine through a stand-in while modules are recorded
(``Variable._execution_engine``, put back at stop(): engine_watch), and
on the thread the pass ends on (an autograd final callback). On a GPU,
autograd runs a device's nodes on a thread of its own, where these
stages are recorded (at that thread's top level); a device thread the
pass does not end on closes its own at its next backward node, so they
last too long there. Nested backward passes (reentrant checkpointing)
close the outer one's stages while they run: its next nodes open them
again, one more call. Modules that autograd runs in an order other than
the reverse of their forward calls show as more calls. Hooks put on a
graph during a run do nothing after it.
"""
from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Callable, Dict, List, Tuple

from . import state
from .state import CACHE_MAX, ThreadState, stage, swallowed, thread_state

if TYPE_CHECKING:
    from .modules import Frame

BACKWARD = " (backward)"
_CLAIMED = "aquaprof"        # key of a claimed autograd node's metadata

# (run, chain) -> the node pre-hook that opens chain's stages
_chain_hooks: Dict[Tuple[int, Tuple[Any, ...]], Callable[[Any], None]] = {}


def claim_backward(frames: List[Frame], output: Any) -> None:
    """Hooks the autograd nodes the innermost call of frames created and
    its sub-modules did not claim, reached back from its output."""
    torch = state.torch
    low = frames[-1].seq
    high = torch._C._autograd._get_sequence_nr()
    if high <= low:
        return
    chain = _chain(frames)
    gen = state.on.gen
    hook = _chain_hooks.get((gen, chain))
    if hook is None:
        if len(_chain_hooks) >= CACHE_MAX:
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


def _chain(frames: List[Frame]) -> Tuple[Any, ...]:
    """The backward stages of the calls open, outermost first."""
    above: Tuple[Any, ...] = ()
    for frame in frames:
        if frame.chain is None:
            frame.chain = above + (stage(frame.name + BACKWARD),)
        above = frame.chain
    return above


def _tensors(value: Any, out: List[Any], depth: int) -> List[Any]:
    if isinstance(value, state.torch.Tensor):
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
        on = state.on
        if on.gen == gen and on.modules:
            try:
                _to_chain(chain)
            except Exception as error:
                swallowed(error)
        return None
    return before_node


def _to_chain(chain: Tuple[Any, ...]) -> None:
    """The backward stages open on this thread made chain's."""
    torch = state.torch
    st = thread_state()
    task = torch._C._current_graph_task_id()
    if st.task != task:
        end_chain(st)         # another pass's: ended, raised or nested
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
    for open_ in reversed(now[common:]):
        open_.__exit__(None, None, None)
    st.chain = now[:common]
    for opening in chain[common:]:
        opening.__enter__()
    st.chain = chain


def _pass_ended(task: int) -> None:
    try:
        st = thread_state()
        if st.task == task:
            end_chain(st)
    except Exception as error:
        swallowed(error)


def end_chain(st: ThreadState) -> None:
    """The backward stages open on this thread closed."""
    chain, st.chain, st.task = st.chain, (), None
    for open_ in reversed(chain):
        open_.__exit__(None, None, None)


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
                if state.on.modules:
                    st = thread_state()
                    if st.chain:
                        end_chain(st)
            except Exception as error:
                swallowed(error)

    def __getattr__(self, name: str) -> Any:
        # queue_callback, is_checkpoint_valid, ...: the engine's
        return getattr(self.engine, name)


def engine_watch(on: bool) -> None:
    """With the switch's lock held: our _Engine in torch's place, or out
    of it (when nobody replaced it since)."""
    owner = state.torch.autograd.variable.Variable
    current = owner.__dict__.get("_execution_engine")
    if on and current is not None and not isinstance(current, _Engine):
        owner._execution_engine = _Engine(current)
    elif not on and isinstance(current, _Engine):
        owner._execution_engine = current.engine

"""Stages around functions that suspend: coroutine functions (``async
def``), async generators and generators, for ``@aquaprof.stage``.

A coroutine's stage covers its whole awaited run, from its first step to
its return, awaits included, as the task that awaits it sees it. A
generator's (sync or async) work happens in steps between which its
consumer runs, so each step (each value produced, and the end) is one call
of the stage: the stage measures the generator's own work, never its
consumer's.
"""
from __future__ import annotations

import functools
from typing import Any, Callable

from .. import _core

COROUTINE, ASYNC_GENERATOR, GENERATOR = 1, 2, 3


def wrap(func: Callable[..., Any], name: str, items: int,
         kind: int) -> Callable[..., Any]:
    """func wrapped so that its runs are calls of stage `name`."""
    stage = _core.stage(name, items=items)
    wrapper = {COROUTINE: _coroutine, ASYNC_GENERATOR: _async_generator,
               GENERATOR: _generator}[kind](func, stage)
    functools.update_wrapper(wrapper, func)
    wrapper.stage_name = name  # type: ignore[attr-defined]
    return wrapper


def is_wrapper(obj: Any) -> bool:
    """Whether obj is a wrapper that wrap() made."""
    return getattr(obj, "__code__", None) in _WRAPPER_CODES


# The wrappers hold what they call in one tuple, never in cells of their
# own: IPython's autoreload brings a wrapper up to date by taking the new
# one's closure cells, except those holding a callable (kept from the old
# one, stale).
def _coroutine(func: Callable[..., Any], stage: Any) -> Callable[..., Any]:
    target = (func, stage)
    async def staged(*args: Any, **kwargs: Any) -> Any:
        func, stage = target
        with stage:
            return await func(*args, **kwargs)
    return staged


def _async_generator(func: Callable[..., Any],
                     stage: Any) -> Callable[..., Any]:
    target = (func, stage)
    async def staged(*args: Any, **kwargs: Any) -> Any:
        func, stage = target
        agen = func(*args, **kwargs)
        sent: Any = None
        thrown: Any = None
        try:
            while True:
                with stage:
                    try:
                        if thrown is None:
                            item = await agen.asend(sent)
                        else:
                            exc, thrown = thrown, None
                            item = await agen.athrow(exc)
                    except StopAsyncIteration:
                        return
                try:
                    sent = yield item
                except GeneratorExit:
                    raise
                except BaseException as exc:  # passed on, as athrow asks
                    sent, thrown = None, exc
        finally:
            await agen.aclose()
    return staged


def _generator(func: Callable[..., Any], stage: Any) -> Callable[..., Any]:
    target = (func, stage)
    def staged(*args: Any, **kwargs: Any) -> Any:
        func, stage = target
        gen = func(*args, **kwargs)
        sent: Any = None
        thrown: Any = None
        try:
            while True:
                with stage:
                    try:
                        if thrown is None:
                            item = gen.send(sent)
                        else:
                            exc, thrown = thrown, None
                            item = gen.throw(exc)
                    except StopIteration as stop:
                        return stop.value
                try:
                    sent = yield item
                except GeneratorExit:
                    raise
                except BaseException as exc:  # passed on, as throw asks
                    sent, thrown = None, exc
        finally:
            gen.close()
    return staged


_WRAPPER_CODES = frozenset(make(len, None).__code__ for make in
                           (_coroutine, _async_generator, _generator))

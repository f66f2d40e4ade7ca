"""The hop back from a worker thread's run to the request waiting on the event loop.

A request's task awaits one loop-side future, which the worker thread settles with one
``call_soon_threadsafe``: the answer reaches the task in one step of the loop.
(``asyncio.wait`` over ``asyncio.wrap_future`` took two more: the wrapped future's
callbacks, then ``wait``'s own waiter, each scheduled for a later step.) The deadline and
the server's drain settle the same future with their errors, and drop the request if it
is still queued; a run already under way finishes in its thread, unanswered.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["wait_for_run"]

T = TypeVar("T")


async def wait_for_run(
    run: Future[T],
    timeout: float,
    abort: asyncio.Future[Any] | None,
    deadline_error: Callable[[], Exception],
    drain_error: Callable[[], Exception],
) -> T:
    """``run``'s result, awaited on the running loop.

    Raises ``deadline_error()`` after ``timeout`` seconds and ``drain_error()`` once
    ``abort`` is done (or when ``run`` was dropped unrun); either way ``run`` is cancelled,
    which drops it if it is still queued. Cancelling the awaiting task cancels ``run`` too.
    """
    loop = asyncio.get_running_loop()
    answer: asyncio.Future[T] = loop.create_future()

    def give_up(error: Callable[[], Exception]) -> None:
        if not answer.done():
            run.cancel()
            answer.set_exception(error())

    def settle() -> None:  # on the loop, once the run is done
        if answer.done():  # the deadline or the drain answered first
            return
        if run.cancelled():
            answer.set_exception(drain_error())
        elif (error := run.exception()) is not None:
            answer.set_exception(error)
        else:
            answer.set_result(run.result())

    def finished(_: Future[T]) -> None:  # in the thread that finished the run
        with contextlib.suppress(RuntimeError):  # a closed loop: the server is gone
            loop.call_soon_threadsafe(settle)

    timer = loop.call_later(timeout, give_up, deadline_error)
    on_abort = lambda _: give_up(drain_error)  # noqa: E731
    if abort is not None:
        abort.add_done_callback(on_abort)
    run.add_done_callback(finished)
    try:
        return await answer
    except asyncio.CancelledError:
        run.cancel()  # nobody waits for it any more
        raise
    finally:
        timer.cancel()
        if abort is not None:
            abort.remove_done_callback(on_abort)

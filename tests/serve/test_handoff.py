"""serve/handoff.py: a worker thread's run awaited on the event loop, with a deadline and
a drain, against a real thread pool whose one worker is kept busy to hold runs queued."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor

import pytest

from tvmrt.serve.handoff import wait_for_run


class Deadline(Exception):
    pass


class Drain(Exception):
    pass


def _wait(run, timeout=5.0, abort=None):  # type: ignore[no-untyped-def]
    return wait_for_run(run, timeout, abort, lambda: Deadline("late"), lambda: Drain("drained"))


def test_a_result_and_a_raised_error_reach_the_loop() -> None:
    def fails() -> None:
        raise ValueError("from the kernel")

    async def main() -> None:
        with ThreadPoolExecutor(1) as pool:
            assert await _wait(pool.submit(lambda: threading.current_thread().name)) != (
                threading.current_thread().name
            )
            with pytest.raises(ValueError, match="from the kernel"):
                await _wait(pool.submit(fails))

    asyncio.run(main())


def _busy_pool() -> tuple[ThreadPoolExecutor, threading.Event]:
    """A one-thread pool whose thread waits on the returned event: runs stay queued."""
    pool = ThreadPoolExecutor(1)
    gate = threading.Event()
    pool.submit(gate.wait, 10)
    return pool, gate


def test_the_deadline_answers_and_drops_a_queued_run() -> None:
    ran: list[int] = []

    async def main() -> None:
        pool, gate = _busy_pool()
        run = pool.submit(ran.append, 1)
        with pytest.raises(Deadline):
            await _wait(run, timeout=0.05)
        assert run.cancelled()
        gate.set()
        pool.shutdown(wait=True)

    asyncio.run(main())
    assert ran == []


def test_the_drain_answers_and_a_run_dropped_unrun_is_a_drain() -> None:
    async def main() -> None:
        pool, gate = _busy_pool()
        abort = asyncio.get_running_loop().create_future()
        run = pool.submit(int)
        waiting = asyncio.ensure_future(_wait(run, abort=abort))
        await asyncio.sleep(0.01)
        abort.set_result(None)
        with pytest.raises(Drain):
            await waiting
        assert run.cancelled()
        # dropped from outside (the model's cancel_queued at the end of the drain)
        dropped = pool.submit(int)
        waiting = asyncio.ensure_future(_wait(dropped))
        await asyncio.sleep(0.01)
        assert dropped.cancel()
        with pytest.raises(Drain):
            await waiting
        gate.set()
        pool.shutdown(wait=True)

    asyncio.run(main())


def test_cancelling_the_waiting_task_drops_its_queued_run() -> None:
    async def main() -> None:
        pool, gate = _busy_pool()
        run = pool.submit(int)
        waiting = asyncio.ensure_future(_wait(run))
        await asyncio.sleep(0.01)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        assert run.cancelled()
        gate.set()
        pool.shutdown(wait=True)

    asyncio.run(main())

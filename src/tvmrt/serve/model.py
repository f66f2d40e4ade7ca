"""A served model: K executors over one copy of the weights, behind a bounded queue.

Requests are admitted while fewer than ``K + max_queue`` are pending (waiting or running);
past that :class:`~tvmrt.serve.protocol.OverloadedError` (HTTP 503) is raised at once, so
the queue cannot grow without bound (the bytes a request holds before it gets here are
bounded by :class:`tvmrt.serve.limits.ServeLimits`). Each admitted request runs on the first free
executor in one of K worker threads; compiled kernels run without the GIL, so K executors
use K cores (a model whose runs take microseconds runs on the event loop when idle:
``infer_inline``). A request that waits past its timeout is dropped from the queue unrun;
one already running finishes (a kernel cannot be interrupted); its executor is reused.
"""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import replace
from typing import Any

import numpy as np

from tvmrt.artifact import ArtifactFiles, Executor, executor_from_graph, load_artifact
from tvmrt.artifact.output_names import output_aliases
from tvmrt.error import DeviceOutOfMemoryError, InvalidArgumentError, KernelError
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor import AotModule
from tvmrt.runtime.module import Module
from tvmrt.runtime.relax_vm import VirtualMachine as RelaxVirtualMachine
from tvmrt.runtime.vm import VirtualMachine
from tvmrt.serve.batching import BatchItem, choose_batch
from tvmrt.serve.dynamic import free_inner_sizes, input_specs, output_specs
from tvmrt.serve.handoff import wait_for_run
from tvmrt.serve.metrics import ModelMetrics
from tvmrt.serve.protocol import BadRequestError, DeadlineError, OverloadedError, TensorSpec

__all__ = ["ServedModel", "load_model", "model_from_graph", "platform_of", "serve_executors"]

_log = logging.getLogger("tvmrt.serve")
_INLINE_RUN = 100e-6  # seconds: shorter runs are done on the event loop (see infer_inline)


class ServedModel:
    """K executors of one model, a bounded queue and the model's metrics.

    Parameters
    ----------
    name
        The model name in URLs (``/v2/models/{name}``).
    executors
        K executors of the same model (:class:`tvmrt.artifact.Executor`); they should
        share their weights (``Executor.replicate``).
    inputs, outputs
        What the model takes and returns (names, shapes, protocol datatypes).
    max_queue
        Requests that may wait for an executor beyond the K running; more get a 503.
    timeout
        Seconds a request may take from admission to answer before a 504.
    batch_delay
        Seconds an executor waits for more queued requests to fill a batch (None: 0, run
        what is queued). Given, batching is required: a model that cannot batch raises.
    max_batch
        Dynamic batching (:mod:`tvmrt.serve.batching`). None (the default): on where safe,
        i.e. for a model compiled with batch B > 1 (every input and output has leading
        dimension B) whose rows the load-time check finds independent; requests then carry
        1..B rows, an executor takes queued requests up to B rows, pads the rest with
        zeros, runs once and splits the outputs back by request. 0 or 1: off. N: at most N
        rows per run (N <= B; raises if the model cannot batch). Never for a model with
        dynamic inputs (a Relay or Relax VM model), whose requests carry any batch
        themselves, nor for one whose outputs are known only once it has run (a VM's).
    device
        Where the executors run (the Triton config's instance kind); None: where the first
        executor's first output is.
    """

    def __init__(
        self,
        name: str,
        executors: Sequence[Executor],
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        max_queue: int = 64,
        timeout: float = 30.0,
        batch_delay: float | None = None,
        aliases: Mapping[str, int] | None = None,
        max_batch: int | None = None,
        device: Device | None = None,
    ) -> None:
        if not executors:
            raise InvalidArgumentError(f"model {name!r} needs at least one executor")
        if max_queue < 0 or timeout <= 0:
            raise InvalidArgumentError(
                f"max_queue must be >= 0 and timeout > 0, got {max_queue}, {timeout}"
            )
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        # every name a request may ask an output by -> its position (artifact/output_names.py)
        self.output_aliases = dict(aliases or {s.name: i for i, s in enumerate(self.outputs)})
        self.workers = len(executors)
        self.max_queue = max_queue
        self.timeout = timeout
        self.metrics = ModelMetrics(name)
        self.executors = list(executors)
        self.device = device
        # shapes come with requests, or the outputs are known only from an answer (a VM's)
        self.dynamic = any(s.dynamic for s in self.inputs) or not self.outputs
        self.platform = platform_of(executors[0])
        asked = batch_delay is not None or (max_batch is not None and max_batch > 1)
        if self.dynamic and asked:
            raise InvalidArgumentError(
                f"model {name!r} has dynamic inputs or outputs (a Relay or Relax VM model): "
                "each request sends its own batch, so server-side batching (batch_delay) is "
                "not offered"
            )
        if batch_delay is not None and batch_delay < 0:
            raise InvalidArgumentError(f"batch_delay must be >= 0 seconds, got {batch_delay}")
        self.batch = 0
        if not self.dynamic:
            self.batch = choose_batch(
                name, executors[0], self.inputs, self.outputs, max_batch, batch_delay is not None
            )
        if self.batch:
            self.inputs = [replace(t, max_batch=self.batch) for t in self.inputs]
            self.outputs = [replace(t, max_batch=self.batch) for t in self.outputs]
        self._batch_delay = batch_delay or 0.0
        self.batch_delay = self._batch_delay  # seconds; the Triton config reports it
        self._waiting: deque[BatchItem] = deque()
        self._arrived = threading.Condition()
        self._free: queue.SimpleQueue[Executor] = queue.SimpleQueue()
        for ex in executors:
            self._free.put(ex)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"tvmrt-{name}")
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False
        self._runs: deque[float] = deque(maxlen=8)  # recent runs' seconds (infer_inline)

    # -- metadata ----------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """The protocol's model metadata."""
        return {
            "name": self.name,
            "versions": ["1"],
            "platform": self.platform,
            "inputs": [s.metadata() for s in self.inputs],
            "outputs": [s.metadata() for s in self.outputs],
        }

    @property
    def pending(self) -> int:
        """Requests admitted and not yet finished (waiting or running)."""
        return self._pending

    def output_specs(self, arrays: Sequence[np.ndarray[Any, Any]]) -> list[TensorSpec]:
        """The specs of one answer's outputs (a dynamic model's come from the answer)."""
        return output_specs(arrays) if self.dynamic else self.outputs

    # -- running -----------------------------------------------------------------------
    def submit(self, arrays: Mapping[str, np.ndarray[Any, Any]]) -> Future[list[Any]]:
        """Admit a request; its future gives the outputs (numpy copies), in model order.

        Raises
        ------
        OverloadedError
            If ``K + max_queue`` requests are already pending, or the model is closing.
        """
        with self._lock:
            if self._closed:
                raise OverloadedError(f"model {self.name!r} is shutting down", retry_after=1)
            if self._pending >= self.workers * max(1, self.batch) + self.max_queue:
                raise OverloadedError(
                    f"model {self.name!r} is at capacity: {self.workers} running and "
                    f"{self.max_queue} queued; retry later",
                    retry_after=1,
                )
            self._pending += 1
        self.metrics.add_depth(1, 0)
        if self.batch:
            future: Future[list[Any]] = Future()
            future.add_done_callback(self._finished)
            with self._arrived:
                self._waiting.append(BatchItem(dict(arrays), future, time.perf_counter()))
                self._arrived.notify()
            self._pool.submit(self._run_batch)  # one drain per request; extra ones find none
            return future
        future = self._pool.submit(self._run, dict(arrays), time.perf_counter())
        future.add_done_callback(self._finished)
        return future

    def infer_sync(self, arrays: Mapping[str, np.ndarray[Any, Any]]) -> list[Any]:
        """Run one request and wait for it (raises :class:`DeadlineError` past the timeout)."""
        future = self.submit(arrays)
        try:
            return future.result(self.timeout)
        except TimeoutError:
            future.cancel()
            raise DeadlineError(
                f"model {self.name!r} did not answer within {self.timeout:g} s"
            ) from None

    async def infer(
        self, arrays: Mapping[str, np.ndarray[Any, Any]], abort: asyncio.Future[None] | None = None
    ) -> list[Any]:
        """:meth:`infer_sync` for an event loop (the loop is never blocked).

        ``abort`` done (the server's grace period ending) answers at once with
        :class:`OverloadedError`: a queued request is dropped unrun, a running one finishes
        in its thread unanswered.
        """
        outs = self.infer_inline(arrays)
        if outs is not None:
            return outs
        return await wait_for_run(
            self.submit(arrays),
            self.timeout,
            abort,
            lambda: DeadlineError(f"model {self.name!r} did not answer within {self.timeout:g} s"),
            lambda: OverloadedError(
                f"the server is shutting down: model {self.name!r} could not answer within "
                "the grace period",
                retry_after=1,
            ),
        )

    def set_memory_budget(self, total: int) -> None:
        """Bound what a Relay VM executor holds at once to ``total`` over the workers
        (``VMLimits.max_live_bytes``), so all requests together stay within ``total``."""
        for executor in self.executors:
            if isinstance(executor, VirtualMachine):
                executor.module.limits.max_live_bytes = max(1, total // self.workers)

    def runs_inline(self) -> bool:
        """Whether :meth:`infer_inline` would run a request now (read without the lock: the
        answer holds until the calling thread, the event loop, queues something)."""
        if self.batch or self.dynamic or not self._runs or self._closed or self._pending:
            return False
        return sorted(self._runs)[len(self._runs) // 2] < _INLINE_RUN  # the median recent run

    def infer_inline(self, arrays: Mapping[str, np.ndarray[Any, Any]]) -> list[Any] | None:
        """Run on the calling thread (the event loop) when nothing else is pending and this
        model's runs take under ``_INLINE_RUN`` seconds, about what the hop to a worker
        thread and back costs; else None (the caller queues the request)."""
        if not self.runs_inline():
            return None
        with self._lock:
            if self._closed or self._pending:
                return None
            self._pending += 1
        try:
            executor = self._free.get_nowait()  # all free: nothing was pending
        except queue.Empty:
            with self._lock:
                self._pending -= 1
            return None
        start = time.perf_counter()
        self.metrics.add_depth(0, 1)
        try:
            for name, arr in arrays.items():
                executor.set_input(name, arr)
            executor.run()
            return [executor.get_output(i).numpy() for i in range(len(self.outputs))]
        finally:
            self._free.put(executor)
            end = time.perf_counter()
            self._note_run(end - start)
            self.metrics.add_depth(0, -1)
            self.metrics.observe_execution(0.0, end - start)
            with self._lock:
                self._pending -= 1

    def _note_run(self, seconds: float) -> None:
        """Keep a run's duration among the recent ones that decide :meth:`infer_inline`."""
        self._runs.append(seconds)

    def _run(self, arrays: dict[str, np.ndarray[Any, Any]], admitted: float) -> list[Any]:
        executor = self._free.get()  # never blocks: one executor per worker thread
        start = time.perf_counter()
        self.metrics.add_depth(-1, 1)
        try:
            for name, arr in arrays.items():
                executor.set_input(name, arr)
            if not self.dynamic:
                executor.run()
                return [executor.get_output(i).numpy() for i in range(len(self.outputs))]
            try:
                executor.run()
            except KernelError as exc:  # unchecked sizes or dtypes a kernel refused
                raise BadRequestError(f"the inputs do not fit model {self.name!r}: {exc}") from exc
            except DeviceOutOfMemoryError as exc:  # past the per-request memory budget
                raise BadRequestError(
                    f"the request needs more memory than model {self.name!r} may use for one "
                    f"request: {exc}"
                ) from exc
            outs = [executor.get_output(i).numpy() for i in range(len(executor.outputs))]
            self.outputs = output_specs(outs)
            return outs
        finally:
            self._free.put(executor)
            end = time.perf_counter()
            self._note_run(end - start)
            self.metrics.add_depth(0, -1)
            self.metrics.observe_execution(start - admitted, end - start)

    # -- dynamic batching: an executor takes queued requests up to ``batch`` rows, pads
    # to the compiled batch, runs once and splits the outputs back by request
    def _take_batch(self) -> list[BatchItem]:
        """Queued requests filling up to ``batch`` rows, waiting up to the batch delay."""
        taken: list[BatchItem] = []
        rows = 0
        deadline = time.perf_counter() + self._batch_delay
        with self._arrived:
            while True:
                while self._waiting and rows + self._waiting[0].rows <= self.batch:
                    item = self._waiting.popleft()
                    if item.future.set_running_or_notify_cancel():  # False: timed out
                        taken.append(item)
                        rows += item.rows
                head_blocked = bool(self._waiting)  # the next request does not fit
                remaining = deadline - time.perf_counter()
                if not taken or rows == self.batch or head_blocked or remaining <= 0:
                    return taken
                self._arrived.wait(remaining)

    def _run_batch(self) -> None:
        executor = self._free.get()
        taken: list[BatchItem] = []
        start = time.perf_counter()
        try:
            taken = self._take_batch()
            if not taken:
                return
            start = time.perf_counter()
            self.metrics.add_depth(-len(taken), len(taken))
            total = sum(item.rows for item in taken)
            for spec in self.inputs:
                parts = [item.arrays[spec.name] for item in taken]
                if total < spec.shape[0]:  # the compiled batch (max_batch may be less)
                    pad = (spec.shape[0] - total, *spec.shape[1:])
                    parts.append(np.zeros(pad, parts[0].dtype))
                executor.set_input(spec.name, np.concatenate(parts))
            executor.run()
            outs = [executor.get_output(i).numpy() for i in range(len(self.outputs))]
            offset = 0
            for item in taken:
                item.future.set_result([o[offset : offset + item.rows] for o in outs])
                offset += item.rows
        except BaseException as exc:
            for item in taken:
                if not item.future.done():
                    item.future.set_exception(exc)
        finally:
            self._free.put(executor)
            if taken:
                self.metrics.add_depth(0, -len(taken))
                end = time.perf_counter()
                self.metrics.observe_execution(start - taken[0].admitted, end - start)

    def _finished(self, future: Future[list[Any]]) -> None:
        with self._lock:
            self._pending -= 1
        if future.cancelled():
            self.metrics.add_depth(-1, 0)

    def stop_admitting(self) -> None:
        """Refuse new requests (503); admitted ones go on."""
        with self._lock:
            self._closed = True

    def cancel_queued(self) -> None:
        """Refuse new requests and drop every queued one unrun; running ones finish."""
        self.stop_admitting()
        self._pool.shutdown(wait=False, cancel_futures=True)
        with self._arrived:
            for item in self._waiting:
                item.future.cancel()
            self._waiting.clear()

    def close(self, wait: bool = True) -> None:
        """Refuse new requests; with ``wait``, finish the admitted ones first (this blocks:
        call it off the event loop), else drop the queued ones unrun."""
        self.stop_admitting()
        if not wait:
            self.cancel_queued()
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


def platform_of(executor: Executor) -> str:
    """The executor a model runs on, as its metadata and Triton config name it."""
    if isinstance(executor, RelaxVirtualMachine):
        return "tvmrt_relax_vm"
    if isinstance(executor, VirtualMachine):
        return "tvmrt_relay_vm"
    if isinstance(executor, AotModule):
        return "tvmrt_aot_executor"
    return "tvmrt_graph_executor"


def serve_executors(
    name: str,
    executors: Sequence[Executor],
    max_queue: int = 64,
    timeout: float = 30.0,
    batch_delay: float | None = None,
    signature: Sequence[TensorSpec] = (),
    max_batch: int | None = None,
    device: Device | None = None,
) -> ServedModel:
    """Serve executors of one model; the first one's inputs and outputs are the model's.

    ``signature`` gives the datatype and shape (-1: any size) of inputs the executor does
    not know (a Relay VM function's; :mod:`tvmrt.serve.dynamic`).
    """
    if not executors:
        raise InvalidArgumentError(f"model {name!r} needs at least one executor")
    first = executors[0]
    relay_vm = platform_of(first) == "tvmrt_relay_vm"
    inputs = input_specs(name, first.inputs, signature, checks_inputs=not relay_vm)
    if relay_vm:
        for warning in free_inner_sizes(inputs):
            _log.warning("model %r: %s", name, warning)
    labels = first.output_labels()  # the one name of each output, as run and inspect show
    outputs = [
        replace(s, name=label)
        for s, label in zip(input_specs(name, first.outputs), labels, strict=True)
    ]
    aliases = output_aliases(labels, [t.name for t in first.outputs])
    return ServedModel(
        name,
        executors,
        inputs,
        outputs,
        max_queue,
        timeout,
        batch_delay,
        aliases,
        max_batch,
        device,
    )


def _replicated(first: Executor, workers: int) -> list[Executor]:
    if workers < 1:
        raise InvalidArgumentError(f"workers must be at least 1, got {workers}")
    return [first, *first.replicate(workers - 1)]


def load_model(
    name: str,
    files: ArtifactFiles,
    workers: int = 1,
    device: Device | None = None,
    max_queue: int = 64,
    timeout: float = 30.0,
    batch_delay: float | None = None,
    signature: Sequence[TensorSpec] = (),
    max_batch: int | None = None,
) -> ServedModel:
    """Load an artifact (from :func:`tvmrt.artifact.find_artifact`) as K executors.

    The first executor loads the params; the others are its replicas
    (:meth:`tvmrt.artifact.Executor.replicate`), so the weights are held once whatever K
    is. Every form :func:`tvmrt.artifact.load_artifact` loads is served (AOT builds and
    Relay and Relax VM executables too; ``signature`` as in :func:`serve_executors`).
    """
    if workers < 1:
        raise InvalidArgumentError(f"workers must be at least 1, got {workers}")
    loaded = load_artifact(files, device)
    executors = _replicated(loaded.executor, workers)
    return serve_executors(
        name,
        executors,
        max_queue,
        timeout,
        batch_delay,
        signature,
        max_batch,
        loaded.device,
    )


def model_from_graph(
    name: str,
    graph_json: str,
    lib: Module,
    params: bytes | None = None,
    workers: int = 1,
    device: Device | None = None,
    max_queue: int = 64,
    timeout: float = 30.0,
    batch_delay: float | None = None,
    max_batch: int | None = None,
) -> ServedModel:
    """Serve a graph JSON over a kernel module (a loaded library or a ``PyModule``)."""
    first = executor_from_graph(graph_json, lib, device, params)
    executors = _replicated(first, workers)
    return serve_executors(name, executors, max_queue, timeout, batch_delay, (), max_batch)


def default_workers() -> int:
    """One executor per core, at most 4 (kernels also use threads inside)."""
    return max(1, min(4, os.cpu_count() or 1))

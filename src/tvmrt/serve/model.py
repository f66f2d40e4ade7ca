"""A served model: K graph executors over one copy of the weights, behind a bounded queue.

Requests are admitted while fewer than ``K + max_queue`` are pending (waiting or running);
past that :class:`~tvmrt.serve.protocol.OverloadedError` (HTTP 503) is raised at once, so
memory stays bounded under any load. Each admitted request runs on the first free
executor in one of K worker threads; compiled kernels run without the GIL, so K executors
use K cores. A request that waits past its timeout is dropped from the queue unrun; one
already running finishes (a kernel cannot be interrupted) and its executor is reused.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from tvmrt.artifact import ArtifactFiles, load_artifact
from tvmrt.contrib.graph_executor import GraphModule, create
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.module import Module
from tvmrt.runtime.params import mapped_file
from tvmrt.serve.metrics import ModelMetrics
from tvmrt.serve.protocol import DeadlineError, OverloadedError, TensorSpec, datatype_of

__all__ = ["ServedModel", "load_model", "model_from_graph"]


class ServedModel:
    """K executors of one model, a bounded queue and the model's metrics.

    Parameters
    ----------
    name
        The model name in URLs (``/v2/models/{name}``).
    executors
        K executors of the same graph; they should share their weights (``share_params``).
    inputs, outputs
        What the model takes and returns (names, shapes, protocol datatypes).
    max_queue
        Requests that may wait for an executor beyond the K running; more get a 503.
    timeout
        Seconds a request may take from admission to answer before a 504.
    """

    def __init__(
        self,
        name: str,
        executors: Sequence[GraphModule],
        inputs: Sequence[TensorSpec],
        outputs: Sequence[TensorSpec],
        max_queue: int = 64,
        timeout: float = 30.0,
    ) -> None:
        if not executors:
            raise ValueError(f"model {name!r} needs at least one executor")
        if max_queue < 0 or timeout <= 0:
            raise ValueError(f"max_queue must be >= 0 and timeout > 0, got {max_queue}, {timeout}")
        self.name = name
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.workers = len(executors)
        self.max_queue = max_queue
        self.timeout = timeout
        self.metrics = ModelMetrics(name)
        self.executors = list(executors)
        self._free: queue.SimpleQueue[GraphModule] = queue.SimpleQueue()
        for ex in executors:
            self._free.put(ex)
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix=f"tvmrt-{name}")
        self._lock = threading.Lock()
        self._pending = 0
        self._closed = False

    # -- metadata ----------------------------------------------------------------------
    def metadata(self) -> dict[str, Any]:
        """The protocol's model metadata."""
        return {
            "name": self.name,
            "versions": ["1"],
            "platform": "tvmrt_graph_executor",
            "inputs": [s.metadata() for s in self.inputs],
            "outputs": [s.metadata() for s in self.outputs],
        }

    @property
    def pending(self) -> int:
        """Requests admitted and not yet finished (waiting or running)."""
        return self._pending

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
            if self._pending >= self.workers + self.max_queue:
                raise OverloadedError(
                    f"model {self.name!r} is at capacity: {self.workers} running and "
                    f"{self.max_queue} queued; retry later",
                    retry_after=1,
                )
            self._pending += 1
        self.metrics.add_depth(1, 0)
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

    async def infer(self, arrays: Mapping[str, np.ndarray[Any, Any]]) -> list[Any]:
        """:meth:`infer_sync` for an event loop (the loop is never blocked)."""
        future = self.submit(arrays)
        try:
            return await asyncio.wait_for(asyncio.wrap_future(future), self.timeout)
        except asyncio.TimeoutError:
            future.cancel()  # dropped unrun if still queued
            raise DeadlineError(
                f"model {self.name!r} did not answer within {self.timeout:g} s"
            ) from None

    def _run(self, arrays: dict[str, np.ndarray[Any, Any]], admitted: float) -> list[Any]:
        executor = self._free.get()  # never blocks: one executor per worker thread
        start = time.perf_counter()
        self.metrics.add_depth(-1, 1)
        try:
            for name, arr in arrays.items():
                executor.set_input(name, arr)
            executor.run()
            return [executor.get_output(i).numpy() for i in range(len(self.outputs))]
        finally:
            self._free.put(executor)
            end = time.perf_counter()
            self.metrics.add_depth(0, -1)
            self.metrics.observe_execution(start - admitted, end - start)

    def _finished(self, future: Future[list[Any]]) -> None:
        with self._lock:
            self._pending -= 1
        if future.cancelled():
            self.metrics.add_depth(-1, 0)

    def close(self, wait: bool = True) -> None:
        """Refuse new requests; with ``wait``, finish the admitted ones first."""
        with self._lock:
            self._closed = True
        self._pool.shutdown(wait=wait, cancel_futures=not wait)


def _output_specs(module: GraphModule) -> list[TensorSpec]:
    shapes, dtypes = module.get_output_info()
    return [TensorSpec(n, tuple(shapes[n]), datatype_of(dtypes[n])) for n in shapes]


def _specs(info: Mapping[str, tuple[tuple[int, ...], str]]) -> list[TensorSpec]:
    return [TensorSpec(n, tuple(shape), datatype_of(dt)) for n, (shape, dt) in info.items()]


def load_model(
    name: str,
    files: ArtifactFiles,
    workers: int = 1,
    device: Device | None = None,
    max_queue: int = 64,
    timeout: float = 30.0,
) -> ServedModel:
    """Load an artifact (from :func:`tvmrt.artifact.find_artifact`) as K executors.

    The first executor loads the params; the others share its arrays (``share_params``,
    or the factory's own param arrays for an exported factory library), so the weights
    are held once whatever K is.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    dev = device or cpu()
    first = load_artifact(files, dev)
    executors = [first.module]
    graph_json = files.graph.read_text() if files.graph is not None else None
    for _ in range(workers - 1):
        if graph_json is None:
            module = GraphModule(first.lib["default"](dev))
        else:
            module = create(graph_json, first.lib, dev)
        if files.params is not None:
            with mapped_file(files.params) as blob:
                module.share_params(first.module, blob)
        executors.append(module)
    return ServedModel(
        name,
        executors,
        _specs(first.user_inputs()),
        _output_specs(first.module),
        max_queue=max_queue,
        timeout=timeout,
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
) -> ServedModel:
    """Serve a graph JSON over a kernel module (a loaded library or a ``PyModule``)."""
    dev = device or cpu()
    executors = [create(graph_json, lib, dev) for _ in range(workers)]
    if params is not None:
        executors[0].load_params(params)
        for module in executors[1:]:
            module.share_params(executors[0], params)
    shapes, dtypes = executors[0].get_input_info()
    inputs = [TensorSpec(n, tuple(shapes[n]), datatype_of(dtypes[n])) for n in shapes]
    return ServedModel(name, executors, inputs, _output_specs(executors[0]), max_queue, timeout)


def default_workers() -> int:
    """One executor per core, at most 4 (kernels also use threads inside)."""
    return max(1, min(4, os.cpu_count() or 1))

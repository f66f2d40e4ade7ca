"""TVM's AOT executor as an :class:`~tvmrt.artifact.model.Executor`, and its whole-run profiler.

A thin adapter over :class:`~tvmrt.runtime.executor.AotModule`: inputs and outputs come
from the library's metadata (names, shapes, dtypes); weights are linked into the library
or bound by the factory, so none is set by the caller. Replicas are new executors from
the same factory (``factory["default"](dev)``), each with its own input and output arrays.
An executor on an RPC server is described by its packed functions instead (input names,
and the shapes and dtypes of its arrays; TVM's AOT executor names no outputs).
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import Collection, Sequence

from tvmrt.artifact.forwarding import ModuleForwarding
from tvmrt.artifact.model import Executor, GraphTiming, TensorInfo
from tvmrt.error import ModuleLoadError, UnsupportedError
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor import AotExecutor, AotExecutorFactory, AotModule
from tvmrt.runtime.executor.profile import AotProfiler
from tvmrt.runtime.module import Module
from tvmrt.runtime.profiling import Report

__all__ = ["AotExecutorAdapter", "AotProfilingAdapter", "create_aot_executor"]


def create_aot_executor(factory: Module, device: Device) -> Module:
    """``factory["default"](device)``, checked to be TVM's AOT executor (or a module of an
    RPC session, whose server made it).

    Raises
    ------
    ModuleLoadError
        If the factory made something else.
    """
    executor = factory["default"](device)
    if not isinstance(executor, AotExecutor) and getattr(executor, "type_key", "") != "rpc":
        raise ModuleLoadError(
            f"the AOT factory's default() made a {type(executor).__name__}, not an AotExecutor"
        )
    return executor  # type: ignore[no-any-return]


def _tensors(executor: Module, module: AotModule) -> tuple[list[TensorInfo], list[TensorInfo]]:
    """The inputs and outputs: from the local executor's metadata, else from its functions."""
    if isinstance(executor, AotExecutor):
        return (
            [TensorInfo(t.name, tuple(t.shape), str(t.dtype)) for t in executor.inputs],
            [TensorInfo(t.name, tuple(t.shape), str(t.dtype)) for t in executor.outputs],
        )
    inputs = []
    for i in range(module.get_num_inputs()):
        arr = module.get_input(i)
        inputs.append(TensorInfo(module.get_input_name(i), tuple(arr.shape), str(arr.dtype)))
    outputs = []
    for i in range(module.get_num_outputs()):
        arr = module.get_output(i)
        outputs.append(TensorInfo("", tuple(arr.shape), str(arr.dtype)))
    return inputs, outputs


class AotExecutorAdapter(ModuleForwarding):
    """An AOT build behind the :class:`~tvmrt.artifact.model.Executor` interface.

    Parameters
    ----------
    executor
        The AOT executor, ``factory["default"](dev)``.
    factory
        The loaded library (``AotExecutorFactory``) that makes more executors.
    device
        The device the executors run on (``cpu(0)``: TVM's AOT executor runs there only).
    bound
        The params the factory binds (None: the local factory's own).
    """

    def __init__(
        self,
        executor: Module,
        factory: Module,
        device: Device,
        bound: Collection[str] | None = None,
    ) -> None:
        self.aot_executor = executor
        self.module = AotModule(executor)
        self._factory = factory
        self._device = device
        if bound is None:
            bound = factory.params if isinstance(factory, AotExecutorFactory) else {}
        self.param_names = frozenset(bound)
        inputs, self._outputs = _tensors(executor, self.module)
        self._inputs = [t for t in inputs if t.name not in self.param_names]

    @property
    def inputs(self) -> Sequence[TensorInfo]:
        """The inputs of the model's metadata, less those the factory binds."""
        return self._inputs

    @property
    def outputs(self) -> Sequence[TensorInfo]:
        """The outputs of the model's metadata (their names may be empty)."""
        return self._outputs

    def output_labels(self) -> list[str]:
        """The metadata's output names, ``output_i`` where one is empty."""
        return [t.name or f"output_{i}" for i, t in enumerate(self._outputs)]

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """None: the weights are linked into the library or bound by its factory."""
        return []

    def replicate(self, count: int) -> list[Executor]:
        """``count`` new executors from the factory (the linked weights are shared)."""
        return [
            AotExecutorAdapter(
                create_aot_executor(self._factory, self._device),
                self._factory,
                self._device,
                self.param_names,
            )
            for _ in range(count)
        ]


class AotProfilingAdapter(AotExecutorAdapter):
    """An AOT build behind :class:`~tvmrt.artifact.model.ProfilingExecutor`: one row, the run.

    Parameters
    ----------
    executor, factory, device
        As :class:`AotExecutorAdapter`.
    dump_root
        Folder for the Chrome trace (created if missing).
    """

    def __init__(
        self, executor: AotExecutor, factory: Module, device: Device, dump_root: str
    ) -> None:
        super().__init__(executor, factory, device)
        self.profiler = AotProfiler(executor, dump_root)
        self._dump_root = dump_root

    @property
    def dump_path(self) -> str:
        """The folder holding the Chrome trace of the last :meth:`run_timed`."""
        return self._dump_root

    def run_timed(self, number: int, repeat: int) -> str:
        """Time the whole model (:meth:`AotProfiler.run`); returns its one-row table."""
        table = io.StringIO()
        with contextlib.redirect_stdout(table):
            self.profiler.run(number=number, repeat=repeat)
        return table.getvalue().rstrip("\n")

    def profile(self) -> Report:
        """TVM's ``Report`` with one call, the model's entry function."""
        return self.profiler.profile()

    def node_timing(self) -> GraphTiming | None:
        """None: an AOT build has no graph, so no per-node times."""
        return None

    def replicate(self, count: int) -> list[Executor]:
        """Not offered: a profiling executor times one executor; load without debug.

        Raises
        ------
        UnsupportedError
            Always.
        """
        raise UnsupportedError(
            "a debug (profiling) executor is not replicated: load the artifact without "
            "debug to run it on several executors"
        )

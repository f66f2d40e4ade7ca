"""The one executor interface tvmrt's tools use, met by TVM's executor faces themselves.

:class:`Executor` is what ``tvmrt run``, ``bench``, ``serve`` and the Ray deployment use,
whichever executor runs the model: the graph executor's ``GraphModule``, its debug
executor's ``GraphModuleDebug``, the AOT executor's :class:`~tvmrt.runtime.executor.AotModule`
or the Relay VM's ``VirtualMachine``, local or on an RPC server. Each face computes
tvmrt's extensions (``inputs``, ``outputs``, labels, weights, replicas) from what it can
fetch through its module's packed functions, so none looks into a local engine.
:class:`ProfilingExecutor` adds what ``tvmrt profile`` needs.

:class:`ModuleFace` is the part that the graph and AOT faces share: TVM's ``set_input`` /
``run`` / ``get_output`` calls over the executor module's packed functions.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from tvmrt.error import UnsupportedError
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Report

if TYPE_CHECKING:
    from tvmrt.runtime.graph_executor.graph import Graph
    from tvmrt.runtime.graph_executor.storage import StoragePlan

__all__ = [
    "Executor",
    "GraphTiming",
    "ModuleFace",
    "ProfilingExecutor",
    "TensorInfo",
    "not_replicated",
]


@dataclass(frozen=True)
class TensorInfo:
    """One input or output of a model: its name, shape and dtype (``"float32"``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str


@runtime_checkable
class Executor(Protocol):
    """One executor of a loaded model: set inputs by name, run, read outputs.

    ``set_input``, ``get_input``, ``get_input_index``, ``get_num_inputs``, ``run`` and
    ``get_output`` behave as on TVM's executor faces (``GraphModule``, ``AotModule``);
    ``inputs``, ``outputs``, ``output_labels``, ``weight_problems`` and ``replicate`` are
    tvmrt's.
    """

    @property
    def inputs(self) -> Sequence[TensorInfo]:
        """The inputs a caller sets, in model order (weights are not among them)."""
        ...

    @property
    def outputs(self) -> Sequence[TensorInfo]:
        """The outputs in ``get_output`` order, under the executor's own output names."""
        ...

    def output_labels(self) -> list[str]:
        """One unique label per output without ``:``, the same on screen and as ``.npz`` keys."""
        ...

    def set_input(self, key: int | str, value: object, /) -> None:
        """Copy ``value`` (numpy array, NDArray or DLPack tensor) into input ``key``."""
        ...

    def get_input(self, key: int | str, /) -> NDArray:
        """Input ``key`` (weights included): the executor's own array."""
        ...

    def get_input_index(self, name: str, /) -> int:
        """The index of input ``name`` among all inputs, weights included."""
        ...

    def get_num_inputs(self) -> int:
        """The number of inputs, weights included."""
        ...

    def run(self) -> None:
        """Run the model once on the inputs set."""
        ...

    def get_output(self, index: int, /) -> NDArray:
        """Output ``index``: the executor's own array, overwritten by the next ``run``."""
        ...

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """Why the weights do not match the model when ``given`` names are also set (or [])."""
        ...

    def replicate(self, count: int) -> Sequence[Executor]:
        """``count`` more executors of the same model, sharing this one's weights."""
        ...


@dataclass(frozen=True)
class GraphTiming:
    """Per-node times of a graph run by the debug executor (``tvmrt profile``).

    ``times[i]`` are the seconds of node ``i`` (one value per repeat).
    """

    graph: Graph
    plan: StoragePlan
    times: list[list[float]]


@runtime_checkable
class ProfilingExecutor(Executor, Protocol):
    """An :class:`Executor` that times what it runs (``load_artifact(..., debug=True)``)."""

    @property
    def dump_path(self) -> str:
        """The folder of the debug dump (graph, Chrome trace, tensors)."""
        ...

    def run_timed(self, number: int, repeat: int) -> str:
        """Time ``repeat`` measurements of ``number`` runs; returns the table as text."""
        ...

    def profile(self) -> Report:
        """Run once more and return TVM's profiling ``Report``."""
        ...

    def node_timing(self) -> GraphTiming | None:
        """Per-node times of the last :meth:`run_timed`, or None where there are no nodes.

        An AOT build has no graph: one generated function calls every kernel, so its
        timing is the whole run (the Chrome trace in :attr:`dump_path`).
        """
        ...


def not_replicated() -> UnsupportedError:
    """The error of ``replicate`` on a profiling face (one dump folder, one executor)."""
    return UnsupportedError(
        "a debug (profiling) executor is not replicated: load the artifact without "
        "debug to run it on several executors"
    )


class ModuleFace:
    """TVM's executor calls over an executor module's packed functions, looked up once.

    The graph executor's ``GraphModule`` and the AOT executor's ``AotModule`` share
    these; each says how a value is copied in (:meth:`_copy_input`) and which names it
    checks first (:meth:`_check_input_name`). Any module with TVM's functions works,
    a local engine or an executor on an RPC server.

    Attributes
    ----------
    module
        The underlying executor module; ``module[name]`` gives its packed functions.
    """

    def __init__(self, module: Module) -> None:
        self.module = module
        self._set_input = module["set_input"]
        self._run = module["run"]
        self._get_output = module["get_output"]
        self._get_input = module["get_input"]
        self._get_num_outputs = module["get_num_outputs"]
        self._get_input_index = module["get_input_index"]
        self._get_num_inputs = module["get_num_inputs"]
        # what checks an out argument before the module is called (the engine checks it
        # where this is None)
        self._out_check: Callable[[object, str], None] | None = None

    def _check_input_name(self, key: object) -> None:
        """Raise before anything is set if ``key`` names no input (the module checks)."""

    def _copy_input(self, key: int | str, value: object) -> None:
        self._set_input(key, value)

    def set_input(self, key: int | str | None = None, value: object = None, **params: Any) -> None:
        """Copy ``value`` into input ``key``, and each keyword argument into its input.

        The keyword inputs are copied largest first (TVM's order, which matters over RPC).

        Raises
        ------
        InputNotFoundError
            If ``key`` or a keyword names no input; nothing is set then.
        ArrayError
            If a value's shape (or dtype, for arrays that are not numpy) does not match.
        """
        if key is not None:
            self._check_input_name(key)
            self._copy_input(key, value)
        if params:
            for name in params:
                self._check_input_name(name)
            for name in sorted(params, key=lambda k: -_numel(params[k])):
                self._copy_input(name, params[name])

    def run(self, **input_dict: Any) -> None:
        """Set ``input_dict`` (if any) and run the model once."""
        if input_dict:
            self.set_input(**input_dict)
        self._run()

    def get_num_outputs(self) -> int:
        """The number of outputs."""
        return int(self._get_num_outputs())

    def get_num_inputs(self) -> int:
        """The number of inputs, weights included."""
        return int(self._get_num_inputs())

    def get_input_index(self, name: str) -> int:
        """The index of input ``name`` (-1, or an error on the AOT executor, if none)."""
        return int(self._get_input_index(name))

    def get_output(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """Output ``index``: an alias that the next ``run`` overwrites, or a copy into ``out``."""
        if out is not None:
            if self._out_check is not None:
                self._get_output(index)  # a bad key is refused first, as the engines do
                self._out_check(out, f"get_output({index!r})")
            self._get_output(index, out)
            return out
        return self._get_output(index)  # type: ignore[no-any-return]

    def __getitem__(self, key: str) -> Any:
        return self.module[key]


def _numel(value: object) -> int:
    shape = getattr(value, "shape", None)
    return int(np.prod(shape)) if shape is not None else int(np.size(value))  # type: ignore[arg-type]

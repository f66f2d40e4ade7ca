"""The one executor interface every loaded artifact offers, and the loaded model itself.

:class:`Executor` is what ``tvmrt run``, ``bench``, ``serve`` and the Ray deployment use,
whichever executor runs the model: the graph executor (:class:`GraphModule`), its debug
executor, or TVM's AOT executor (:class:`~tvmrt.runtime.executor.AotModule`). The adapters
that meet it are in :mod:`tvmrt.artifact.graph_executors` and
:mod:`tvmrt.artifact.aot_executors`; a Relay VM or a remote (RPC) module can meet it the
same way. :class:`ProfilingExecutor` adds what ``tvmrt profile`` needs.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.runtime.graph_executor.graph import Graph
from tvmrt.runtime.graph_executor.storage import StoragePlan
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Report

__all__ = ["Executor", "LoadedModel", "GraphTiming", "ProfilingExecutor", "TensorInfo"]


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

    def set_input(self, key: int | str, value: object) -> None:
        """Copy ``value`` (numpy array, NDArray or DLPack tensor) into input ``key``."""
        ...

    def get_input(self, key: int | str) -> NDArray:
        """Input ``key`` (weights included): the executor's own array."""
        ...

    def get_input_index(self, name: str) -> int:
        """The index of input ``name`` among all inputs, weights included."""
        ...

    def get_num_inputs(self) -> int:
        """The number of inputs, weights included."""
        ...

    def run(self) -> None:
        """Run the model once on the inputs set."""
        ...

    def get_output(self, index: int) -> NDArray:
        """Output ``index``: the executor's own array, overwritten by the next ``run``."""
        ...

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """Why the weights do not match the model when ``given`` names are also set (or [])."""
        ...

    def replicate(self, count: int) -> list[Executor]:
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


@dataclass
class LoadedModel:
    """A loaded artifact: its executor, the library it runs, and what came from where.

    Attributes
    ----------
    executor
        Runs the model; :meth:`replicate` makes more that share its weights.
    lib
        The loaded root module (factory or kernel library).
    files
        The artifact's files.
    form
        The artifact form's name (:mod:`tvmrt.artifact.forms`), e.g. ``"factory"``.
    param_names
        The names the params supplied (embedded, linked or from the params file).
    profiler
        The same executor as :class:`ProfilingExecutor` when loaded with ``debug=True``.
    """

    executor: Executor
    lib: Module
    files: ArtifactFiles
    form: str = ""
    param_names: frozenset[str] = field(default_factory=frozenset)
    profiler: ProfilingExecutor | None = None

    def user_inputs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Inputs that are not params: name → (shape, dtype)."""
        return {t.name: (t.shape, t.dtype) for t in self.executor.inputs}

    def output_names(self) -> list[str]:
        """One unique label per output, the same on screen and as ``.npz`` keys.

        Graph outputs are ``node_i``, TVM's output key ``node:i`` with ``_`` for ``:``
        (:mod:`tvmrt.artifact.output_names`); an AOT build's come from its metadata.
        """
        return self.executor.output_labels()

    def replicate(self, count: int) -> list[Executor]:
        """``count`` more executors sharing the weights (serving with K workers)."""
        return self.executor.replicate(count)

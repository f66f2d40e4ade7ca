"""The loaded model: the executor an artifact form made, its library and its files.

The executor is one of TVM's faces, which meet :class:`Executor` themselves
(:mod:`tvmrt.runtime.executor.protocol`): ``GraphModule``, ``GraphModuleDebug``,
``AotModule``, ``VirtualMachine`` or ``VirtualMachineProfiler``. The protocol's names are
re-exported here and from :mod:`tvmrt.artifact`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor.protocol import Executor, GraphTiming, ProfilingExecutor, TensorInfo
from tvmrt.runtime.module import Module

__all__ = ["Executor", "LoadedModel", "GraphTiming", "ProfilingExecutor", "TensorInfo"]


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
    device
        The device it runs on (set by :func:`~tvmrt.artifact.loading.load_artifact`); its
        ``sync`` waits for the runs queued there (a GPU's run returns before it finishes).
    """

    executor: Executor
    lib: Module
    files: ArtifactFiles
    form: str = ""
    param_names: frozenset[str] = field(default_factory=frozenset)
    profiler: ProfilingExecutor | None = None
    device: Device | None = None

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
        return list(self.executor.replicate(count))

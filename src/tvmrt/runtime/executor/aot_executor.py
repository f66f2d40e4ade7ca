"""``AotModule``: TVM's Python wrapper of an AOT executor (``tvm.runtime.executor``).

It is also a :class:`~tvmrt.runtime.executor.protocol.Executor` (tvmrt extension), and a
:class:`~tvmrt.runtime.executor.protocol.ProfilingExecutor` timing the whole run when made
with a ``dump_root``: inputs and outputs come from the executor's packed functions (names
from ``get_input_name``; output names from the metadata where the executor offers them,
``output_i`` otherwise); replicas are new executors from the factory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Collection
from typing import Any

import numpy as np

from tvmrt.error import ArrayError, UnsupportedError
from tvmrt.runtime.executor.profile import profile_whole_run, time_whole_run
from tvmrt.runtime.executor.protocol import ModuleFace, TensorInfo, not_replicated
from tvmrt.runtime.graph_executor.checks import check_out
from tvmrt.runtime.module import Module
from tvmrt.runtime.native_module import NativeModule
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiling import Report

__all__ = ["AotModule"]


class AotModule(ModuleFace):
    """Wraps the AOT executor module ``lib["default"](dev)`` (TVM's ``AotModule``).

    Parameters
    ----------
    module
        The ``AotExecutor`` module.
    weights
        Input names the factory bound (its params): not inputs a caller sets (tvmrt).
    make_module
        Makes a new executor module of the same build, e.g. ``lambda: lib["default"](dev)``
        (``replicate``; tvmrt). None: not replicated.
    dump_root
        Make this a profiling face (tvmrt): ``run_timed`` writes its Chrome trace here.

    Examples
    --------
    >>> # lib = tvmrt.runtime.load_module("deploy.so")   # built with Executor("aot")
    >>> # m = AotModule(lib["default"](tvmrt.cpu(0)))
    >>> # m.set_input("data", x); m.run(); y = m.get_output(0).numpy()
    """

    def __init__(
        self,
        module: Module,
        weights: Collection[str] = (),
        make_module: Callable[[], Module] | None = None,
        dump_root: str | None = None,
    ) -> None:
        super().__init__(module)
        self._native = isinstance(module, NativeModule)  # the C runtime's executor
        # its inputs' and outputs' NDArrays by key, made once (AOT never rebinds them)
        self._arrays: dict[tuple[str, int | str], NDArray] = {}
        # an out argument is an NDArray, writable, on either engine (the C executor would
        # write a read-only one; the Python engine raised numpy's words); a remote
        # executor's server checks its own
        if module.type_key != "rpc":
            self._out_check = check_out
        self._get_input_name = module["get_input_name"]
        self._weights = frozenset(weights)
        self._make_module = make_module
        self._dump_root = dump_root

    def _copy_input(self, key: int | str, value: object) -> None:
        if self._native and (type(value) is np.ndarray or isinstance(value, NDArray)):
            try:  # the C executor copies an array of the input's shape and dtype itself
                self._set_input(key, value)
                return
            except ArrayError:
                pass  # else numpy converts it, in the Python engine's words (copyfrom)
        self._get_input(key).copyfrom(value)

    def get_output(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """Output ``index`` (the executor's own array, which the next ``run`` overwrites), or
        a copy into ``out``."""
        if out is None and self._native:  # the C executor's arrays never change: kept
            found = self._arrays.get(("output", index))
            if found is None:
                found = self._arrays[("output", index)] = self._get_output(index)
            return found
        return super().get_output(index, out)

    def get_input(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """Input ``index`` (the executor's own array), or a copy into ``out``."""
        value: NDArray | None = self._arrays.get(("input", index)) if self._native else None
        if value is None:
            value = self._get_input(index)
            if self._native:
                self._arrays[("input", index)] = value
        if out is not None:
            if self._out_check is not None:
                self._out_check(out, f"get_input({index!r})")
            value.copyto(out)
            return out
        return value

    def get_input_name(self, index: int) -> str:
        """The name of input ``index``."""
        return str(self._get_input_name(index))

    def get_input_info(self) -> tuple[dict[str, tuple[int, ...]], dict[str, str]]:
        """``(shape_dict, dtype_dict)`` of the inputs."""
        shapes: dict[str, tuple[int, ...]] = {}
        dtypes: dict[str, str] = {}
        for i in range(self.get_num_inputs()):
            arr = self.get_input(i)
            name = self.get_input_name(i)
            shapes[name] = tuple(arr.shape)
            dtypes[name] = str(arr.dtype)
        return shapes, dtypes

    # -- tvmrt's Executor interface --------------------------------------------------------
    @property
    def inputs(self) -> list[TensorInfo]:
        """The inputs of the model's metadata, less those the factory binds."""
        shapes, dtypes = self.get_input_info()
        return [
            TensorInfo(n, tuple(int(d) for d in shapes[n]), dtypes[n])
            for n in shapes
            if n not in self._weights
        ]

    def _output_name(self, index: int) -> str:
        try:
            name = self.module["get_output_name"]  # tvmrt's executor has the metadata's
        except AttributeError:
            return ""  # an executor of TVM on an RPC server: no names
        return str(name(index))

    @property
    def outputs(self) -> list[TensorInfo]:
        """The outputs of the model's metadata (their names may be empty)."""
        infos = []
        for i in range(self.get_num_outputs()):
            arr = self.get_output(i)
            infos.append(TensorInfo(self._output_name(i), tuple(arr.shape), str(arr.dtype)))
        return infos

    def output_labels(self) -> list[str]:
        """The metadata's output names, ``output_i`` where one is empty."""
        return [t.name or f"output_{i}" for i, t in enumerate(self.outputs)]

    def weight_problems(self, given: Collection[str]) -> list[str]:
        """None: the weights are linked into the library or bound by its factory."""
        return []

    def replicate(self, count: int) -> list[AotModule]:
        """``count`` new executors from the factory (the linked weights are shared).

        Raises
        ------
        UnsupportedError
            If this face profiles (load without debug), or was made without a factory.
        """
        if self._dump_root is not None:
            raise not_replicated()
        make = self._make_module
        if make is None:
            raise UnsupportedError(
                "this AotModule cannot be replicated (it was made without its factory)"
            )
        return [AotModule(make(), self._weights, make) for _ in range(count)]

    # -- tvmrt's ProfilingExecutor interface: the whole run is one call ---------------------
    @property
    def entry_name(self) -> str:
        """The entry function timed (``tvmgen_default___tvm_main__``)."""
        try:
            model = str(self.module["get_model_name"]())
        except AttributeError:
            model = "tvmgen_default"  # TVM's default module name
        return f"{model}___tvm_main__"

    @property
    def dump_path(self) -> str:
        """The folder of the Chrome trace of the last :meth:`run_timed`."""
        if self._dump_root is None:
            self._dump_root = tempfile.mkdtemp(prefix="tvmrt_aot_profile_")
        return self._dump_root

    def run_timed(self, number: int, repeat: int) -> str:
        """Time ``repeat`` measurements of ``number`` runs; returns the one-row table."""
        return time_whole_run(self._run, self.entry_name, number, repeat, self.dump_path)

    def profile(self, **input_dict: Any) -> Report:
        """Run 3 times, then once more timed: TVM's ``Report`` with one call, the entry."""
        if input_dict:
            self.set_input(**input_dict)
        inputs = [self.get_input(i) for i in range(self.get_num_inputs())]
        outputs = [self.get_output(i) for i in range(self.get_num_outputs())]
        return profile_whole_run(self._run, self.entry_name, [*inputs, *outputs])

    def node_timing(self) -> None:
        """None: an AOT build has no graph, so no per-node times."""
        return None

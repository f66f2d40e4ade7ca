"""DLR 1.10's two TVM backends over tvmrt's executors: what its C API answers.

:class:`TVMBackend` is ``dlr_tvm.cc``'s ``TVMModel``: TVM's graph executor
(:func:`tvmrt.contrib.graph_executor.create`) over the ``.so``, graph JSON and ``.params``;
the inputs are the graph's inputs less the weights (the params' names), output names come
from the meta (none without one). :class:`RelayVMBackend` is ``dlr_relayvm.cc``'s
``RelayVMModel``: tvmrt's ``VirtualMachine`` over ``.ro`` + ``.so``; input names are
``main``'s parameters, input and output dtypes and shapes and output names come from the
mandatory meta, and output shapes from the last run.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from tvmrt.binfmt.files import (
    MAX_LIBRARY_BYTES,
    MAX_PARAMS_BYTES,
    PARAMS_MAGIC,
    check_regular,
    read_code,
    read_graph,
    read_regular,
)
from tvmrt.contrib import graph_executor
from tvmrt.dlr._files import ModelFiles
from tvmrt.error import DLRError, TVMError
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import load_module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.vm import Executable, VirtualMachine

__all__ = ["Backend", "RelayVMBackend", "TVMBackend"]


class Backend:
    """What every backend answers (DLR's ``DLRModel`` C++ class)."""

    name = ""
    input_names: list[str]
    input_types: list[str]
    weight_names: list[str]
    output_types: list[str]

    def __init__(self, meta: dict[str, Any] | None) -> None:
        self.meta = meta

    def output_name(self, index: int) -> str:
        """``Model.Outputs[index].name`` of the meta (DLR's ``GetOutputName``)."""
        if self.meta is None:
            raise DLRError("No metadata file was found!")
        try:
            name = self.meta["Model"]["Outputs"][index]["name"]
        except (KeyError, IndexError, TypeError):
            raise DLRError(
                f"Output node with index {index} was not found in metadata file!"
            ) from None
        return str(name)

    def set_input(self, name: str, data: np.ndarray[Any, Any]) -> None:
        raise NotImplementedError

    def run(self) -> None:
        raise NotImplementedError

    def num_outputs(self) -> int:
        raise NotImplementedError

    def output(self, index: int) -> NDArray:
        raise NotImplementedError

    def input_array(self, name: str) -> np.ndarray[Any, Any]:
        raise NotImplementedError


def _index(names: list[str], name: str) -> int:
    if name not in names:
        raise DLRError(f"{name} is not a valid input name.")
    return names.index(name)


class TVMBackend(Backend):
    """The graph executor over DLR's triple."""

    name = "tvm"

    def __init__(self, files: ModelFiles, meta: dict[str, Any] | None, dev: Device) -> None:
        super().__init__(meta)
        if not (files.model_json and files.model_lib and files.params):
            raise DLRError("Invalid TVM model artifact. Must have .so, .json, and .params files.")
        graph_json = read_graph(files.model_json, DLRError)
        params = read_regular(files.params, "params file", MAX_PARAMS_BYTES, DLRError, PARAMS_MAGIC)
        check_regular(files.model_lib, "the model library", MAX_LIBRARY_BYTES, DLRError)
        try:
            self._module = graph_executor.create(graph_json, load_module(files.model_lib), dev)
            self._module.load_params(params)
        except TVMError as exc:
            raise DLRError(str(exc)) from exc
        self.weight_names = sorted(self._module.weight_names)
        infos = self._module.inputs  # the graph's inputs less the bound weights
        self.input_names = [t.name for t in infos]
        self.input_types = [t.dtype for t in infos]
        self.output_types = [t.dtype for t in self._module.outputs]

    def set_input(self, name: str, data: np.ndarray[Any, Any]) -> None:
        index = self._module.get_input_index(name)
        if index < 0:
            raise DLRError(f"{name} is not a valid input name.")
        target = self._module.get_input(index)
        expected = math.prod(target.shape)
        if data.size != expected:
            raise DLRError(
                f"Mismatch found in input data size. Value read: {data.size}, Expected: {expected}"
            )
        self._module.set_input(name, data.reshape(target.shape))  # only the count is checked

    def input_array(self, name: str) -> np.ndarray[Any, Any]:
        return self._module.get_input(self._module.get_input_index(name)).numpy()

    def run(self) -> None:
        self._module.run()

    def num_outputs(self) -> int:
        return self._module.get_num_outputs()

    def output(self, index: int) -> NDArray:
        return self._module.get_output(index)


class RelayVMBackend(Backend):
    """The Relay VM over ``.ro`` + ``.so``, described by the mandatory meta."""

    name = "relayvm"

    def __init__(self, files: ModelFiles, meta: dict[str, Any] | None, dev: Device) -> None:
        super().__init__(meta)
        if not (files.model_lib and files.relay_executable and files.metadata):
            raise DLRError("Invalid RelayVM model artifact. Must have .so, .ro, and .meta files.")
        if meta is None:
            raise DLRError(f"{files.metadata} is not a JSON object (the RelayVM model's metadata)")
        code = read_code(files.relay_executable, DLRError)
        check_regular(files.model_lib, "the model library", MAX_LIBRARY_BYTES, DLRError)
        try:
            self._vm = VirtualMachine(Executable.load_exec(code, load_module(files.model_lib)), dev)
        except TVMError as exc:
            raise DLRError(str(exc)) from exc
        self.weight_names = []
        self.input_names = list(self._vm.main_params)
        try:
            inputs = meta["Model"]["Inputs"]
            self.input_types = [str(inputs[i]["dtype"]) for i in range(len(self.input_names))]
        except (KeyError, IndexError, TypeError) as exc:
            raise DLRError(f"Invalid or missing input metadata: {exc!r}") from None
        try:
            self._outputs = list(meta["Model"]["Outputs"])
            self.output_types = [str(o["dtype"]) for o in self._outputs]
        except (KeyError, TypeError):
            raise DLRError("No output metadata found.") from None
        self._given: dict[str, NDArray] = {}
        self._results: list[NDArray] = []

    def set_input(self, name: str, data: np.ndarray[Any, Any]) -> None:
        index = _index(self.input_names, name)
        self._given[name] = array(np.ascontiguousarray(data, dtype=self.input_types[index]))

    def input_array(self, name: str) -> np.ndarray[Any, Any]:
        _index(self.input_names, name)
        if name not in self._given:
            raise DLRError(f"input {name} has not been set")
        return self._given[name].numpy()

    def run(self) -> None:
        missing = [n for n in self.input_names if n not in self._given]
        if missing:
            raise DLRError(f"inputs {missing} of the RelayVM model are not set")
        try:
            result = self._vm.invoke("main", *(self._given[n] for n in self.input_names))
        except TVMError as exc:
            raise DLRError(str(exc)) from exc
        self._results = [result] if isinstance(result, NDArray) else list(result)

    def num_outputs(self) -> int:
        return len(self._outputs)

    def output(self, index: int) -> NDArray:
        if not self._results:
            raise DLRError("the RelayVM model has not run yet: its output shapes are unknown")
        if not 0 <= index < len(self._results):
            raise DLRError(f"output {index} does not exist: the model gave {len(self._results)}")
        return self._results[index]

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

import ctypes
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
from tvmrt.error import DeviceOutOfMemoryError, DLRError, TVMError
from tvmrt.runtime import kernel_services
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.module import load_module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.params import read_param_names
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


_MAX_NDIM = 32
_I64_MAX = (1 << 63) - 1


def _meta_list(meta: dict[str, Any], key: str) -> list[Any] | None:
    """``Model.<key>``, a list, or None."""
    model = meta.get("Model")
    found = model.get(key) if isinstance(model, dict) else None
    return found if isinstance(found, list) else None


def _meta_why(item: object) -> str:
    """What is wrong with a meta input or output (empty: nothing), as dlr_vm.c's meta_slot:
    a dtype string that is a data type, a shape list of at most 32 dimensions whose known
    sizes (ints >= 0; others are -1, any size) do not overflow int64 in bytes."""
    dtype = item.get("dtype") if isinstance(item, dict) else None
    shape = item.get("shape") if isinstance(item, dict) else None
    if not isinstance(dtype, str):
        return "no dtype string"
    if not isinstance(shape, list):
        return "no shape list"
    if len(shape) > _MAX_NDIM:
        return "a shape of more than 32 dimensions"
    try:
        nbytes = DataType(dtype).itemsize
    except TVMError:
        return "a dtype that is not a data type"
    for d in shape:
        if type(d) in (int, float) and d >= 1e18:  # 19 digits or more: no int64 size
            return "a shape whose size in bytes overflows int64"
        if type(d) is int and d >= 0:
            if d > 0 and nbytes > _I64_MAX // d:
                return "a shape whose size in bytes overflows int64"
            nbytes *= d
    return ""


_MAP_ORDER_ARGS: list[Any] = [
    ctypes.POINTER(ctypes.c_char_p),
    ctypes.c_size_t,
    ctypes.POINTER(ctypes.c_size_t),
    ctypes.POINTER(ctypes.c_size_t),
]


def weight_order(names: list[str]) -> list[str]:
    """The params' names in the order DLR 1.10 lists its weights: that of TVM v0.8's
    ``Map<String, NDArray>`` it reads the params file into (insertion order up to four names,
    then its hash table's slots), replayed by the C runtime (``runtime/map_order.c``), which
    libdlr uses too. A name given twice is listed once.

    Raises
    ------
    DLRError
        If a name holds a NUL character (C strings could not tell two such names apart).
    """
    if not names:
        return []
    for name in names:
        if "\0" in name:
            raise DLRError(f"param name {name!r} holds a NUL character")
    fn = kernel_services.native_library().tvmrt_map_order
    fn.restype, fn.argtypes = ctypes.c_int, _MAP_ORDER_ARGS
    c_names = (ctypes.c_char_p * len(names))(*(n.encode() for n in names))
    order = (ctypes.c_size_t * len(names))()
    kept = ctypes.c_size_t()
    if fn(c_names, len(names), order, ctypes.byref(kept)) != 0:
        raise DeviceOutOfMemoryError(f"cannot allocate the order of {len(names)} weights")
    return [names[order[i]] for i in range(kept.value)]


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
        self.weight_names = weight_order(read_param_names(params))
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
        inputs = _meta_list(meta, "Inputs")
        self.input_types = []
        for i, name in enumerate(self.input_names):
            why = "missing" if inputs is None or i >= len(inputs) else _meta_why(inputs[i])
            if why:
                listed = "no Model.Inputs list" if inputs is None else why
                raise DLRError(
                    f"Invalid or missing input metadata: Model.Inputs[{i}] (main's parameter "
                    f"'{name[:200]}'): {listed}"
                )
            self.input_types.append(str(inputs[i]["dtype"]))  # type: ignore[index]
        outputs = _meta_list(meta, "Outputs")
        if outputs is None:
            raise DLRError("No output metadata found.")
        for i, item in enumerate(outputs):
            named = isinstance(item, dict) and isinstance(item.get("name"), str)
            why = _meta_why(item) if named else "no name string"
            if why:
                raise DLRError(f"No output metadata found. (Model.Outputs[{i}]: {why})")
        self._outputs = outputs
        self.output_types = [str(o["dtype"]) for o in outputs]
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
        results = [result] if isinstance(result, NDArray) else list(result)
        if len(results) != len(self._outputs):
            raise DLRError(
                f"the model gave {len(results)} outputs but its metadata (Model.Outputs) "
                f"describes {len(self._outputs)}"
            )
        for i, (out, want) in enumerate(zip(results, self.output_types, strict=True)):
            if out.dtype != DataType(want):  # callers size their buffers by the meta's dtype
                name = str(self._outputs[i]["name"])[:200]
                raise DLRError(
                    f"output {i} ({name}) of the run is {out.dtype} but the metadata "
                    f"(Model.Outputs[{i}].dtype) says {want[:100]}"
                )
        self._results = results

    def num_outputs(self) -> int:
        return len(self._outputs)

    def output(self, index: int) -> NDArray:
        if not self._results:
            raise DLRError("the RelayVM model has not run yet: its output shapes are unknown")
        if not 0 <= index < len(self._results):
            raise DLRError(f"output {index} does not exist: the model gave {len(self._results)}")
        return self._results[index]

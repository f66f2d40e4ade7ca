"""``dlr.dlr_model``: ``DLRModelImpl`` and ``DLRError``, DLR 1.10's Python layer over its C API.

Each method behaves as DLR 1.10's (``python/dlr/dlr_model.py``): ``run`` takes one array
(the first input) or a dict by name and returns a list of arrays; a ``float32`` input
accepts any dtype (cast), another dtype must match exactly; only the element count of an
input is checked; outputs are read into arrays of the output dtype and reshaped to the
output shape; ``get_output_names`` comes from the meta (``[]`` without one). Where DLR
called ``libdlr.so`` (found beside the model or installed), this calls tvmrt's runtime:
no ``libdlr.so`` is ever loaded and nothing is sent anywhere (DLR's telemetry is absent).
The private members applications used anyway (``_set_input``, ``_run``, ``_get_output``,
``_get_output_shape``, ``_get_output_size_dim``, ``input_names``, ``output_shapes``,
``num_inputs``, ``num_outputs``, ``backend``) are kept.
"""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from tvmrt.dlr import _files
from tvmrt.dlr._backends import Backend, RelayVMBackend, TVMBackend
from tvmrt.dlr.metadata import VERSION
from tvmrt.error import DLRError, InvalidArgumentError, UnsupportedError
from tvmrt.runtime.device import device as make_device

__all__ = ["DLRError", "DLRModelImpl", "IDLRModel"]


class IDLRModel:
    """DLR's interface class (``dlr.api.IDLRModel``)."""

    def get_input_names(self) -> list[str]:
        raise NotImplementedError

    def get_input(self, name: str, shape: Any = None) -> np.ndarray[Any, Any]:
        raise NotImplementedError

    def get_output_names(self) -> list[str]:
        raise NotImplementedError

    def get_version(self) -> str:
        raise NotImplementedError

    def run(self, input_data: Any) -> list[np.ndarray[Any, Any]]:
        raise NotImplementedError


def _open(model_path: str, dev_type: str, dev_id: int) -> Backend:
    """DLR's ``CreateDLRModel``: the files, the backend, the meta's device check."""
    files = _files.find_files(model_path)
    backend = _files.backend_of(files, model_path)
    found = _files.model_files(files)
    meta = _files.read_meta(found.metadata)
    device_type = _files.DEVICE_TYPES[dev_type]  # KeyError for others, as DLR
    _files.validate_device(meta, device_type)
    if meta is not None and "DataTransform" in meta:
        raise UnsupportedError(
            f"{found.metadata!r} describes DataTransform (an AutoML model taking JSON "
            "input); tvmrt's DLR does not run the data transforms"
        )
    dev = make_device(device_type, dev_id)
    if backend == "tvm":
        return TVMBackend(found, meta, dev)
    return RelayVMBackend(found, meta, dev)


class DLRModelImpl(IDLRModel):
    """A Neo-compiled TVM model (DLR's ``DLRModelImpl``)."""

    def __init__(
        self,
        model_path: str,
        dev_type: str = "cpu",
        dev_id: int = 0,
        error_log_file: str | None = None,
        use_default_dlr: bool = False,
    ) -> None:
        if not os.path.exists(model_path):
            raise InvalidArgumentError(f"model_path {model_path} doesn't exist")
        if os.path.isdir(model_path):
            for file_name in os.listdir(model_path):
                if file_name.endswith(".tensorrt"):
                    raise DLRError("This model requires DLR release-1.1.0 to run.")
        self.model_path = model_path
        self.use_default_dlr = use_default_dlr  # there is only one runtime: tvmrt's
        self._backend = _open(model_path, dev_type, dev_id)
        self.backend = self._backend.name
        self.version = VERSION
        self.weight_names = list(self._backend.weight_names)
        self.num_weights = len(self.weight_names)
        self.input_names = list(self._backend.input_names)
        self.num_inputs = len(self.input_names)
        self.input_name_to_index = {n: i for i, n in enumerate(self.input_names)}
        self.input_dtypes = list(self._backend.input_types)
        self.output_dtypes = list(self._backend.output_types)
        self.num_outputs = self._backend.num_outputs()
        self.output_names: list[str] = []
        self.input_shapes: dict[str, np.ndarray[Any, Any]] = {}
        self.output_shapes: list[np.ndarray[Any, Any]] = []
        self.output_size_dim: list[tuple[int, int]] = []
        if self.backend != "relayvm":
            self._lazy_init_output_shape()

    def _lazy_init_output_shape(self) -> None:
        self.output_shapes = []
        self.output_size_dim = []
        for i in range(self.num_outputs):
            self.output_shapes.append(self._get_output_shape(i))

    def _get_output_size_dim(self, index: int) -> tuple[int, int]:
        shape = self._backend.output(index).shape
        size = -1 if any(d < 0 for d in shape) else int(np.prod(shape, dtype=np.int64))
        return size, len(shape)

    def _get_output_shape(self, index: int) -> np.ndarray[Any, Any]:
        size, dim = self._get_output_size_dim(index)
        if not self.output_size_dim:
            self.output_size_dim = [(0, 0)] * self.num_outputs
        self.output_size_dim[index] = (size, dim)
        return np.array(self._backend.output(index).shape, dtype=np.int64).reshape(dim)

    def get_input_names(self) -> list[str]:
        return self.input_names

    def has_metadata(self) -> bool:
        return self._backend.meta is not None

    def _fetch_output_names(self) -> None:
        self.output_names = []
        try:
            for i in range(self.num_outputs):
                self.output_names.append(self._backend.output_name(i))
        except DLRError:  # DLR: a backend without names (no meta) gives []
            self.output_names = []

    def get_output_names(self) -> list[str]:
        if not self.output_names:
            self._fetch_output_names()
        return self.output_names

    def get_input_dtypes(self) -> list[str]:
        if not self.input_dtypes:
            raise NotImplementedError
        return self.input_dtypes

    def get_output_dtypes(self) -> list[str]:
        if not self.output_dtypes:
            raise NotImplementedError
        return self.output_dtypes

    def _check_index(self, index: int, count: int) -> None:
        if not 0 <= index < count:
            raise DLRError(f"Index cannot be greater than {count - 1}")

    def get_input_name(self, index: int) -> str:
        self._check_index(index, self.num_inputs)
        return self.get_input_names()[index]

    def get_output_name(self, index: int) -> str:
        self._check_index(index, self.num_outputs)
        return self.get_output_names()[index]

    def get_input_dtype(self, index: int) -> str:
        self._check_index(index, self.num_inputs)
        return self.get_input_dtypes()[index]

    def get_output_dtype(self, index: int) -> str:
        self._check_index(index, self.num_outputs)
        return self.get_output_dtypes()[index]

    def get_version(self) -> str:
        return self.version

    def _get_input_index(self, name: str) -> int:
        index = self.input_name_to_index.get(name)
        if index is None:
            raise InvalidArgumentError(f"{name} is not a valid input name.")
        return index

    def _get_input_or_weight_dtype_by_name(self, name: str) -> str:
        if name in self.weight_names:
            return "float32"
        return self.get_input_dtype(self._get_input_index(name))

    def _set_input(self, name: str, data: Any) -> None:
        input_dtype = self._get_input_or_weight_dtype_by_name(name)
        data = np.asarray(data)
        if input_dtype != "float32" and data.dtype.name != input_dtype:
            raise InvalidArgumentError(
                f"input data with name {name} should have dtype {input_dtype} but "
                f"{data.dtype.name} is provided"
            )
        in_data = np.ascontiguousarray(data, dtype=input_dtype)  # float32: any dtype, cast
        self.input_shapes[name] = np.array(in_data.shape, dtype=np.int64)
        self._backend.set_input(name, in_data)

    def _run(self) -> None:
        self._backend.run()
        if self.backend == "relayvm":  # output shapes are known after a run
            self._lazy_init_output_shape()

    def _get_output(self, index: int) -> np.ndarray[Any, Any]:
        if index >= len(self.output_shapes) or index < 0:
            raise InvalidArgumentError(
                f"index is expected between 0 and len(output_shapes)-1, but got {index}"
            )
        output = self._backend.output(index).numpy()
        expected = np.dtype(self.get_output_dtype(index))
        if output.dtype != expected:
            raise DLRError(
                f"output {index} is {output.dtype} but the model describes it as {expected}"
            )
        return output.reshape(self.output_shapes[index])

    def run(self, input_values: Any) -> list[np.ndarray[Any, Any]]:
        """Run with one array (the first input) or a dict by name; the outputs as a list."""
        if isinstance(input_values, np.ndarray | np.generic):
            if self.input_names:
                self._set_input(self.input_names[0], input_values)
        elif isinstance(input_values, dict):
            for key, value in input_values.items():
                if (self.input_names and key not in self.input_names) and (
                    self.weight_names and key not in self.weight_names
                ):
                    raise InvalidArgumentError(f"{key} is not a valid input name.")
                self._set_input(key, value)
        else:
            raise InvalidArgumentError(
                "input_values must be of type dict (tvm model) or a np.ndarray/generic "
                "(representing treelite models)"
            )
        self._run()
        return [self._get_output(i) for i in range(self.num_outputs)]

    def get_input(self, name: str, shape: Any = None) -> np.ndarray[Any, Any]:
        """The current value of input ``name``, shaped as last set (or as ``shape``)."""
        if name not in self.input_shapes and shape is None:
            raise InvalidArgumentError(
                "Since set_input() was never called with "
                f"input {name}, we cannot infer its shape. "
                "Shape parameter should be explicitly specified"
            )
        dtype = self._get_input_or_weight_dtype_by_name(name)
        dims = tuple(int(d) for d in (self.input_shapes[name] if shape is None else shape))
        value: np.ndarray[Any, Any] = self._backend.input_array(name).astype(dtype, copy=False)
        return value.reshape(dims)

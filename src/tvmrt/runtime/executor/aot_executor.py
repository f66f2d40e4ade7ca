"""``AotModule``: TVM's Python wrapper of an AOT executor (``tvm.runtime.executor``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray

__all__ = ["AotModule"]


class AotModule:
    """Wraps the AOT executor module ``lib["default"](dev)`` (TVM's ``AotModule``).

    Parameters
    ----------
    module
        The ``AotExecutor`` module.

    Examples
    --------
    >>> # lib = tvmrt.runtime.load_module("deploy.so")   # built with Executor("aot")
    >>> # m = AotModule(lib["default"](tvmrt.cpu(0)))
    >>> # m.set_input("data", x); m.run(); y = m.get_output(0).numpy()
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
        self._get_input_name = module["get_input_name"]

    def set_input(self, key: int | str | None = None, value: Any = None, **params: Any) -> None:
        """Copy ``value`` into input ``key``, and each keyword argument into its input.

        Raises
        ------
        InputNotFoundError
            If there is no such input.
        """
        if key is not None:
            self._get_input(key).copyfrom(value)
        if params:
            order = sorted(params, key=lambda k: -int(np.prod(np.shape(params[k]))))
            for name in order:
                self._get_input(name).copyfrom(params[name])

    def run(self, **input_dict: Any) -> None:
        """Set the keyword inputs, then run the model once."""
        if input_dict:
            self.set_input(**input_dict)
        self._run()

    def get_num_outputs(self) -> int:
        """The number of outputs."""
        return int(self._get_num_outputs())

    def get_num_inputs(self) -> int:
        """The number of inputs."""
        return int(self._get_num_inputs())

    def get_input(self, index: int | str, out: NDArray | None = None) -> NDArray:
        """Input ``index`` (the executor's own array), or a copy into ``out``."""
        value: NDArray = self._get_input(index)
        if out is not None:
            value.copyto(out)
            return out
        return value

    def get_input_index(self, name: str) -> int:
        """The index of input ``name``.

        Raises
        ------
        InputNotFoundError
            If there is no such input (TVM's executor fails its check here too, despite its
            docstring's promise of -1).
        """
        return int(self._get_input_index(name))

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

    def get_output(self, index: int, out: NDArray | None = None) -> NDArray:
        """Output ``index`` (the executor's own array), or a copy into ``out``."""
        if out is not None:
            self._get_output(index, out)
            return out
        result: NDArray = self._get_output(index)
        return result

"""What TVM's two AOT executors share: owned input/output arrays and their packed functions.

:class:`AotIO` is the part of TVM's ``AotExecutor`` (v0.19 ``aot_executor.cc``) that does
not depend on how the model is called: one array per input and output, allocated once,
looked up by name or index, and the table of packed functions (``set_input``,
``get_output``, ``get_input_index``, ...). The host-driven AOT executor
(:mod:`~tvmrt.runtime.executor._aot`, a Relay ``.so``) and the MLF AOT executor
(:mod:`~tvmrt.runtime.executor._crt_aot`, microTVM C code compiled for the host) each add
``run`` and how they read their tensors.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, InputNotFoundError, InternalError
from tvmrt.runtime.device import Device
from tvmrt.runtime.executor.protocol import TensorInfo
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, empty
from tvmrt.runtime.packed_func import PackedFunc

__all__ = ["AotIO"]


class AotIO(Module):
    """TVM's ``AotExecutor`` functions over arrays the executor owns (inputs, then outputs).

    Parameters
    ----------
    inputs, outputs
        What the model's metadata says of its tensors.
    model_name
        ``tvmgen_default`` or the name the model was built with.
    device
        Where the arrays live (the CPU for both AOT executors).
    """

    def __init__(
        self,
        inputs: Sequence[TensorInfo],
        outputs: Sequence[TensorInfo],
        model_name: str,
        device: Device,
    ) -> None:
        super().__init__()
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        self.model_name = model_name
        self.device = device
        self._args: list[NDArray] = [
            empty(t.shape, t.dtype, device) for t in (*self.inputs, *self.outputs)
        ]

    @property
    def type_key(self) -> str:
        return "AotExecutor"

    def run(self) -> None:
        """Call the model once (each executor says how)."""
        raise NotImplementedError

    def input_index(self, key: int | str) -> int:
        """The index of input ``key`` (a name or an index)."""
        if isinstance(key, str):
            for i, info in enumerate(self.inputs):
                if info.name == key:
                    return i
            raise InputNotFoundError(
                f"Check failed: (false) is false: Invalid input name. (no input {key!r}; "
                f"inputs are {[t.name for t in self.inputs]})"
            )
        index = _integer(key, "input key must be a name or an index")
        if not 0 <= index < len(self.inputs):
            raise InputNotFoundError(f"input index {key} is out of range ({len(self.inputs)})")
        return index

    def input_index_of_name(self, name: object) -> int:
        """``get_input_index``: the index of the input named ``name`` (TVM takes only a name)."""
        if not isinstance(name, str):
            raise ArgumentTypeError("Input key is not a string")
        return self.input_index(name)

    def _output(self, index: int) -> NDArray:
        index = _integer(index, "output index must be an integer")
        if not 0 <= index < len(self.outputs):
            raise InputNotFoundError(
                f"output index {index} is out of range ({len(self.outputs)} outputs)"
            )
        return self._args[len(self.inputs) + int(index)]

    def output_name(self, index: int) -> str:
        """The metadata's name of output ``index`` (may be empty)."""
        self._output(index)  # checks the index
        return self.outputs[int(index)].name

    def input_array(self, key: int | str) -> NDArray:
        """The executor's own array of input ``key`` (``set_input`` copies into it)."""
        return self._args[self.input_index(key)]

    def get_output(self, index: int, out: NDArray | None = None) -> NDArray | None:
        """Output ``index`` (copied into ``out`` if given)."""
        if out is not None:
            self._output(index).copyto(out)
            return None
        return self._output(index)

    def _functions(self) -> dict[str, Callable[..., Any]]:
        """TVM's packed functions of the executor; a subclass may add its own."""
        return {
            "set_input": lambda key, value: self.input_array(key).copyfrom(value),
            "run": self.run,
            "get_output": self.get_output,
            "get_input": self.input_array,
            "get_num_outputs": lambda: len(self.outputs),
            "get_num_inputs": lambda: len(self.inputs),
            "get_input_index": self.input_index_of_name,
            "get_input_name": lambda i: self.inputs[self.input_index(int(i))].name,
            # tvmrt's: the metadata's output names and model name (a TVM server lacks them)
            "get_output_name": self.output_name,
            "get_model_name": lambda: self.model_name,
        }

    def _get_function(self, name: str) -> PackedFunc | None:
        func = self._functions().get(name)
        return None if func is None else PackedFunc(func, name)

    @staticmethod
    def _not_implemented(*args: Any) -> None:
        raise InternalError("Check failed: (false) is false: not implemented")


def _integer(key: object, words: str) -> int:
    """``key`` as an index (any integral value but bool), or ``words`` naming what it is."""
    if isinstance(key, bool) or not isinstance(key, int | np.integer):
        raise ArgumentTypeError(f"{words}, got {type(key).__name__} {key!r}")
    return int(key)

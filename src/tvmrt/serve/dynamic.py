"""Inputs and outputs of models whose shapes come with each request (Relay VM models).

A Relay VM executable records its functions' parameter names but not their types, so
what the v2 protocol's metadata can say about an input depends on what is known:

* a signature given by the operator (``tvmrt serve --input x:float32:-1,16``, or
  ``input_specs`` in :func:`tvmrt.serve.load_model`): its datatype and rank are checked,
  its fixed sizes too, and its ``-1`` dimensions are given by each request;
* otherwise any datatype and rank until the model has answered once; from then on the
  datatype and rank of that request's input (a Relay parameter's type has one dtype and
  rank), every dimension ``-1``.

Outputs are whatever the function returned: ``output_0``, ``output_1``, ... with the
datatype and rank of the last answer and every dimension ``-1`` (data-dependent shapes).
Every request's dynamic sizes are bounded by the body limit (:mod:`tvmrt.serve.protocol`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tvmrt.artifact import TensorInfo
from tvmrt.error import InvalidArgumentError
from tvmrt.serve.protocol import TensorSpec, datatype_of

__all__ = ["parse_signature", "input_specs", "learned_inputs", "output_specs"]


def parse_signature(text: str) -> TensorSpec:
    """``NAME:DTYPE:DIMS`` (``x:float32:-1,16``; ``x:int64:`` for a scalar) as a spec."""
    parts = text.rsplit(":", 2)
    if len(parts) != 3 or not parts[0]:
        raise InvalidArgumentError(
            f"input signature {text!r} must be NAME:DTYPE:DIMS, e.g. x:float32:-1,16"
        )
    name, dtype, dims = parts
    try:
        datatype = datatype_of(dtype)
        shape = tuple(int(d) for d in dims.split(",")) if dims else ()
    except ValueError:
        raise InvalidArgumentError(
            f"input signature {text!r}: DTYPE must be a numpy dtype and DIMS sizes or -1"
        ) from None
    if any(d < -1 for d in shape) or len(shape) > 32:
        raise InvalidArgumentError(
            f"input signature {text!r}: sizes must be >= 0 or -1, at most 32 of them"
        )
    return TensorSpec(name, shape, datatype)


def input_specs(
    name: str, infos: Sequence[TensorInfo], given: Sequence[TensorSpec] = ()
) -> list[TensorSpec]:
    """The served inputs: static ones from the executor, dynamic ones from ``given``."""
    by_name = {s.name: s for s in given}
    unknown = sorted(set(by_name) - {t.name for t in infos})
    if unknown:
        raise InvalidArgumentError(
            f"model {name!r} has no input(s) {unknown}; its inputs are {[t.name for t in infos]}"
        )
    specs = []
    for t in infos:
        if t.name in by_name:
            specs.append(by_name[t.name])
        elif t.dtype:
            specs.append(TensorSpec(t.name, tuple(t.shape), datatype_of(t.dtype)))
        else:  # shape and dtype come with the data (a Relay VM function)
            specs.append(TensorSpec(t.name, (), "", any_rank=True))
    return specs


def learned_inputs(
    specs: Sequence[TensorSpec], arrays: dict[str, np.ndarray[Any, Any]]
) -> list[TensorSpec]:
    """``specs`` with datatype and rank fixed by a request the model answered."""
    out = []
    for spec in specs:
        arr = arrays.get(spec.name)
        if (spec.any_rank or not spec.datatype) and arr is not None:
            shape = (-1,) * arr.ndim if spec.any_rank else spec.shape
            spec = TensorSpec(spec.name, shape, datatype_of(str(arr.dtype)))
        out.append(spec)
    return out


def output_specs(arrays: Sequence[np.ndarray[Any, Any]]) -> list[TensorSpec]:
    """``output_N`` specs for a dynamic model's answer: its datatypes, every size -1."""
    return [
        TensorSpec(f"output_{i}", (-1,) * a.ndim, datatype_of(str(a.dtype)))
        for i, a in enumerate(arrays)
    ]

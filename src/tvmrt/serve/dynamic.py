"""Inputs and outputs of models whose shapes come with each request (Relay VM models).

A Relay VM executable records its functions' parameter names but not their types, so
what the v2 protocol's metadata can say about an input depends on what is known:

* a signature given by the operator (``tvmrt serve --input x:float32:-1,16``, or
  ``input_specs`` in :func:`tvmrt.serve.load_model`): its datatype and rank are checked,
  its fixed sizes too, and its ``-1`` dimensions are given by each request;
* otherwise nothing: a Relay VM model is not served without a signature for each of its
  inputs. Its kernels check no sizes (a dense kernel built for ``(N, 16)`` reads 16
  values per row of whatever it is given), so a request of the wrong inner size would be
  answered from memory past its buffer; :func:`input_specs` refuses at load, naming the
  inputs and the flag. A signature that leaves an inner size free (``-1`` past the
  first dimension) is served with a warning: those sizes reach the kernels unchecked.

A Relax executable checks its own inputs (its ``match_cast`` builtins), so an input
whose type it does not record (a tuple or shape parameter) is served with any datatype
and rank until the model has answered once, then with the datatype and rank of that
request's input.

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
from tvmrt.serve.protocol import DATATYPES, TensorSpec, datatype_of

__all__ = [
    "parse_signature",
    "input_specs",
    "free_inner_sizes",
    "learned_inputs",
    "output_specs",
]


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
    name: str,
    infos: Sequence[TensorInfo],
    given: Sequence[TensorSpec] = (),
    checks_inputs: bool = True,
) -> list[TensorSpec]:
    """The served inputs: static ones from the executor, dynamic ones from ``given``.

    ``checks_inputs`` is False for an executor that checks nothing of what it is given (a
    Relay VM's): each input it does not type must then be in ``given``.
    """
    by_name = {s.name: s for s in given}
    unknown = sorted(set(by_name) - {t.name for t in infos})
    if unknown:
        raise InvalidArgumentError(
            f"model {name!r} has no input(s) {unknown}; its inputs are {[t.name for t in infos]}"
        )
    untyped = [t.name for t in infos if not t.dtype and t.name not in by_name]
    if untyped and not checks_inputs:
        flags = " ".join(f"--input {n}:DTYPE:DIMS" for n in untyped)
        raise InvalidArgumentError(
            f"model {name!r} is a Relay VM executable, which records no input types, and its "
            f"kernels check no sizes: a request of the wrong size would be answered from memory "
            f"past its buffer. Give the type of input(s) {untyped}: {flags} (e.g. "
            f"{untyped[0]}:float32:-1,16; -1: a size each request gives), or signature= in "
            "tvmrt.serve.load_model"
        )
    specs = []
    for t in infos:
        if t.name in by_name:
            specs.append(by_name[t.name])
        elif t.dtype:
            specs.append(TensorSpec(t.name, tuple(t.shape), datatype_of(t.dtype)))
        else:  # shape and dtype come with the data (a Relax tuple or shape parameter)
            specs.append(TensorSpec(t.name, (), "", any_rank=True))
    return specs


def free_inner_sizes(specs: Sequence[TensorSpec]) -> list[str]:
    """A warning for each input whose signature leaves a size past the first free (-1)."""
    out = []
    for s in specs:
        free = [i for i, d in enumerate(s.shape) if d == -1 and i > 0]
        if free:
            dims = ",".join("SIZE" if i in free else str(d) for i, d in enumerate(s.shape))
            out.append(
                f"input {s.name!r} leaves dimension(s) {free} of {list(s.shape)} free (-1): a "
                "Relay VM executable checks no sizes, so a request's sizes there reach the "
                f"kernels unchecked; if the model fixes them, give them: --input "
                f"{s.name}:{DATATYPES[s.datatype]}:{dims}"
            )
    return out


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

"""Inputs and outputs of models whose shapes come with each request (VM models).

A Relay VM executable records its functions' parameter names but not their types, and a
Relax executable built in compiled mode (``exec_mode="compiled"``) records none either;
the v2 protocol's metadata and Triton's config must give each input's datatype and shape:

* where the executable records them (a Relax bytecode build), they are served as it
  checks them, ``-1`` for a symbolic size;
* otherwise a signature given by the operator (``tvmrt serve --input x:float32:-1,16``,
  or ``signature=`` in :func:`tvmrt.serve.load_model`): its datatype and rank are checked,
  its fixed sizes too, and its ``-1`` dimensions are given by each request;
* without one the model is not served: :func:`input_specs` refuses at load, naming the
  inputs and the flag. A Relay VM's kernels check no sizes (a dense kernel built for
  ``(N, 16)`` reads 16 values per row of whatever it is given), so a request of the wrong
  inner size would be answered from memory past its buffer; a Relax VM checks its inputs
  itself, but the server would have no datatype to publish. A Relay VM signature that
  leaves an inner size free (``-1`` past the first dimension) is served with a warning:
  those sizes reach the kernels unchecked.

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
    """The served inputs: typed ones from the executor, the others from ``given``.

    ``checks_inputs`` is False for an executor that checks nothing of what it is given (a
    Relay VM's); it only changes the refusal's reason.
    """
    by_name = {s.name: s for s in given}
    unknown = sorted(set(by_name) - {t.name for t in infos})
    if unknown:
        raise InvalidArgumentError(
            f"model {name!r} has no input(s) {unknown}; its inputs are {[t.name for t in infos]}"
        )
    untyped = [t.name for t in infos if not t.dtype and t.name not in by_name]
    if untyped:
        flags = " ".join(f"--input {n}:DTYPE:DIMS" for n in untyped)
        why = (
            "is a Relay VM executable, which records no input types, and its kernels check "
            "no sizes: a request of the wrong size would be answered from memory past its "
            "buffer"
            if not checks_inputs
            else "records no type for some inputs (a Relax build in compiled mode, or a "
            "tuple or shape parameter): the server has no datatype and shape to publish "
            "and check"
        )
        raise InvalidArgumentError(
            f"model {name!r} {why}. Give the type of input(s) {untyped}: {flags} (e.g. "
            f"{untyped[0]}:float32:-1,16; -1: a size each request gives), or signature= in "
            "tvmrt.serve.load_model"
        )
    return [
        by_name[t.name]
        if t.name in by_name
        else TensorSpec(t.name, tuple(t.shape), datatype_of(t.dtype))
        for t in infos
    ]


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


def output_specs(arrays: Sequence[np.ndarray[Any, Any]]) -> list[TensorSpec]:
    """``output_N`` specs for a dynamic model's answer: its datatypes, every size -1."""
    return [
        TensorSpec(f"output_{i}", (-1,) * a.ndim, datatype_of(str(a.dtype)))
        for i, a in enumerate(arrays)
    ]

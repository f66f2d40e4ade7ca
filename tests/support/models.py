"""Small served models the serve tests share."""

from __future__ import annotations

import time
from typing import Any

from tvmrt.runtime.ndarray import NDArray
from tvmrt.serve import ServedModel, model_from_graph
from tvmrt.testing import GraphBuilder, numpy_op_library

__all__ = ["sleepy_model"]


def sleepy_model(**kw: Any) -> ServedModel:
    """x (2,): sleeps x[0] seconds, raises if x[1] < 0, returns x * 2."""

    def sleepy(a: NDArray, out: NDArray) -> None:
        v = a.numpy()
        if v[1] < 0:
            raise ValueError(f"kernel refuses negative input {v[1]}")
        time.sleep(float(v[0]))
        out.copyfrom(v * 2)

    b = GraphBuilder()
    x = b.input("x", (2,))
    (y,) = b.op("sleepy", "sleepy", [x], [(2,)])
    b.output(y)
    return model_from_graph("sleepy", b.to_json(), numpy_op_library(sleepy=sleepy), **kw)

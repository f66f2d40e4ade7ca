"""When a served model may batch requests dynamically, and the check that it is safe.

A TVM graph artifact has static shapes: a model compiled for batch 1 runs one request per
run, whatever the server does. A model compiled for batch B > 1 (every input and output
has leading dimension B) can run up to B stacked requests of fewer rows at once, but only
if every output row depends on its own input row alone and in the same way at every
position (no op mixes the batch: a reshape across it, a mean over it, a batch-wide
normalisation). The graph alone does not say that, so :func:`check_rows_independent` runs
the model before it is served: on B random rows, on the same rows rotated by one, and on
the first row alone with zero padding (what a lone request becomes). Batching is used only
when the outputs of the three runs agree bitwise row by row; then a request's answer is
the one it would get running alone, bit for bit. By default (nothing asked) a model is
batched only when every input and output has two or more dimensions: the elements of a
vector are not samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import numpy as np

from tvmrt.artifact import Executor
from tvmrt.error import InvalidArgumentError
from tvmrt.serve.protocol import DATATYPES, TensorSpec

__all__ = ["BatchItem", "compiled_batch", "check_rows_independent", "choose_batch"]


def compiled_batch(inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]) -> str | int:
    """The batch B > 1 every input and output starts with, or why there is none."""
    leading = {t.name: (t.shape[0] if t.shape else None) for t in (*inputs, *outputs)}
    sizes = set(leading.values())
    if len(sizes) != 1 or None in sizes or next(iter(sizes)) in (None, 0, 1):
        return f"every input and output needs the same leading (batch) dimension > 1, got {leading}"
    return int(next(iter(sizes)))  # type: ignore[arg-type]


def _random_rows(spec: TensorSpec, rng: np.random.Generator) -> np.ndarray[Any, Any]:
    dtype = DATATYPES[spec.datatype]
    shape = tuple(int(d) for d in spec.shape)
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    return rng.integers(0, 8, shape).astype(dtype)  # small: indices stay in range


def _run(executor: Executor, feeds: dict[str, np.ndarray[Any, Any]], count: int) -> list[Any]:
    for name, arr in feeds.items():
        executor.set_input(name, arr)
    executor.run()
    return [np.array(executor.get_output(i).numpy()) for i in range(count)]


def check_rows_independent(
    executor: Executor, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec]
) -> str | None:
    """None when every output row of ``executor`` follows from its input row alone (three
    runs agree bitwise, see the module docstring), else why not."""
    odd = [s.name for s in inputs if s.datatype not in DATATYPES]
    if odd:
        return f"input(s) {odd} have a datatype the check cannot fill"
    rng = np.random.default_rng(20261127)
    feeds = {s.name: _random_rows(s, rng) for s in inputs}
    try:
        base = _run(executor, feeds, len(outputs))
        rolled = _run(executor, {k: np.roll(v, 1, axis=0) for k, v in feeds.items()}, len(outputs))
        alone = {k: np.zeros_like(v) for k, v in feeds.items()}
        for k, v in feeds.items():
            alone[k][0] = v[0]
        first = _run(executor, alone, len(outputs))
    except Exception as exc:  # a model that cannot run random rows is not batched
        return f"a check run on random rows failed: {type(exc).__name__}: {exc}"
    for spec, b, r, f in zip(outputs, base, rolled, first, strict=True):
        if b.tobytes() != np.roll(r, -1, axis=0).tobytes():
            return f"output {spec.name!r} changes when the rows are reordered (rows mix)"
        if b[0].tobytes() != f[0].tobytes():
            return f"output {spec.name!r} of a row changes with the other rows' values"
    return None


def choose_batch(
    name: str,
    executor: Executor,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
    max_batch: int | None,
    required: bool,
) -> int:
    """Rows per run (0: no batching) for ``max_batch`` (None: the compiled batch).

    ``required`` (the caller asked for batching): a model that cannot batch raises
    :class:`InvalidArgumentError` naming why, instead of being served unbatched.
    """
    if max_batch is not None and max_batch < 0:
        raise InvalidArgumentError(f"max_batch must be >= 0, got {max_batch}")
    if max_batch is not None and max_batch <= 1:
        return 0  # asked for one request per run
    compiled = compiled_batch(inputs, outputs)
    why = compiled if isinstance(compiled, str) else None
    if why is None and max_batch is None and not required:
        flat = [t.name for t in (*inputs, *outputs) if len(t.shape) < 2]
        if flat:  # a vector's elements are not samples: batch only when asked
            why = f"{flat} have one dimension: no batch of samples"
    if why is None and max_batch is not None and max_batch > int(compiled):
        why = f"max_batch {max_batch} exceeds the compiled batch {compiled}"
    if why is None:
        why = check_rows_independent(executor, inputs, outputs)
    if why is None:
        return int(compiled) if max_batch is None else max_batch
    if required or max_batch is not None:
        raise InvalidArgumentError(f"model {name!r} cannot batch dynamically: {why}")
    return 0


@dataclass
class BatchItem:
    """A request waiting for dynamic batching."""

    arrays: dict[str, np.ndarray[Any, Any]]
    future: Future[list[Any]]
    admitted: float

    @property
    def rows(self) -> int:
        return int(next(iter(self.arrays.values())).shape[0])

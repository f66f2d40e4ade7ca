"""ONNX model in, fused Relax module out: the first half of :func:`tvmrt.compile`.

The ONNX frontend of today's TVM builds a Relax ``main``; legalizing, folding constants
and fusing turns it into one dataflow block of ``call_tir`` bindings, which is the old
``tvm_op`` graph. Symbolic input dimensions are fixed here, from
the caller's ``input_shapes``, because a graph-executor artifact has static shapes only.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import traceback
import warnings
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tvmrt.compiler._tvm import require_onnx, require_tvm
from tvmrt.error import (
    ArgumentTypeError,
    ArtifactNotFoundError,
    CompileError,
    InputShapeRequiredError,
    InvalidArgumentError,
)

__all__ = [
    "ModelInput",
    "load_onnx",
    "model_inputs",
    "model_output_names",
    "fix_input_shapes",
    "parse_input_shape",
    "import_onnx",
    "lower",
    "one_line",
]

ModelLike = Any  # onnx.ModelProto, or a path to an .onnx file

_ONNX_DTYPES = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64", 16: "bfloat16",
}  # fmt: skip
_ONNX_STRING = 8


@dataclass(frozen=True)
class ModelInput:
    """One graph input of an ONNX model: name, dtype and shape (``None`` where symbolic).

    Attributes
    ----------
    name
        The ONNX name, which is also the graph-executor input name.
    dtype
        Element type, e.g. ``"float32"``.
    shape
        One entry per dimension: an int, or the ``dim_param`` string (``"?"`` when the
        dimension has neither); ``None`` when the rank is unknown.
    """

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None

    @property
    def is_static(self) -> bool:
        """Whether every dimension is known."""
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)


def load_onnx(model: ModelLike) -> Any:
    """Return ``model`` as an ``onnx.ModelProto`` (reading it if it is a path).

    Raises
    ------
    FileNotFoundError
        If the path does not exist.
    ValueError
        If the file is not an ONNX model.
    TypeError
        If ``model`` is neither a path nor a ModelProto.
    """
    onnx = require_onnx()
    if isinstance(model, onnx.ModelProto):
        return model
    if not isinstance(model, str | os.PathLike):
        raise ArgumentTypeError(
            f"model must be an onnx.ModelProto or a path to an .onnx file, "
            f"got {type(model).__name__}"
        )
    path = os.fspath(model)
    if not os.path.isfile(path):
        raise ArtifactNotFoundError(f"model file {path!r} does not exist")
    try:
        proto = onnx.load(path)
    except Exception as exc:  # protobuf's DecodeError and friends
        raise InvalidArgumentError(f"cannot read {path!r} as an ONNX model: {exc}") from exc
    if not proto.graph.node and not proto.graph.output:
        raise InvalidArgumentError(f"cannot read {path!r} as an ONNX model: it has an empty graph")
    return proto


def model_inputs(proto: Any) -> list[ModelInput]:
    """The graph inputs of ``proto`` that are not initializers, in order.

    Raises
    ------
    CompileError
        If an input is not a tensor (a sequence, map or optional).
    """
    inits = {t.name for t in proto.graph.initializer}
    out = []
    for value in proto.graph.input:
        if value.name in inits:
            continue
        if value.type.WhichOneof("value") != "tensor_type":
            kind = value.type.WhichOneof("value") or "unknown"
            raise CompileError(
                f"input {value.name!r} is a {kind.replace('_type', '')}, not a tensor; a "
                "graph-executor artifact takes tensor inputs only"
            )
        ttype = value.type.tensor_type
        if ttype.elem_type == _ONNX_STRING:
            raise CompileError(
                f"input {value.name!r} is a tensor of strings; a graph-executor artifact "
                "computes on numeric tensors only"
            )
        dtype = _ONNX_DTYPES.get(ttype.elem_type, f"onnx type {ttype.elem_type}")
        shape: tuple[int | str, ...] | None = None
        if ttype.HasField("shape"):
            shape = tuple(
                d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                for d in ttype.shape.dim
            )
        out.append(ModelInput(value.name, dtype, shape))
    return out


def model_output_names(proto: Any) -> list[str]:
    """Names of the graph outputs of ``proto``, in order."""
    return [value.name for value in proto.graph.output]


def parse_input_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """Parse the CLI form ``name=1x3x224x224`` (also ``name=1,3,224,224``; ``name=`` is scalar).

    Raises
    ------
    ValueError
        If ``text`` is not of that form.
    """
    name, sep, dims = text.rpartition("=")
    ok = sep and name and re.fullmatch(r"(\d+([x,]\d+)*)?", dims.strip())
    if not ok:
        raise InvalidArgumentError(
            f"input shape {text!r} is not of the form NAME=D0xD1x... (e.g. x=1x3x224x224)"
        )
    return name, tuple(int(d) for d in re.split(r"[x,]", dims.strip()) if d)


def fix_input_shapes(
    inputs: Sequence[ModelInput], input_shapes: Mapping[str, Sequence[int]] | None
) -> dict[str, tuple[int, ...]]:
    """Static shapes of all inputs: the model's, with ``input_shapes`` applied.

    Raises
    ------
    ValueError
        If ``input_shapes`` names an unknown input, has a non-integer or negative
        dimension, or a rank that differs from the model's.
    CompileError
        If an input still has a symbolic dimension or an unknown rank.
    """
    given = dict(input_shapes or {})
    names = [i.name for i in inputs]
    for name in given:
        if name not in names:
            raise InvalidArgumentError(
                f"input_shapes names {name!r}, which is not a model input; inputs are {names}"
            )
    out: dict[str, tuple[int, ...]] = {}
    for inp in inputs:
        if inp.name in given:
            shape = given[inp.name]
            if isinstance(shape, str | bytes) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
            ):
                raise InvalidArgumentError(
                    f"input_shapes[{inp.name!r}] must be a sequence of ints >= 0, got {shape!r}"
                )
            if inp.shape is not None and len(inp.shape) != len(shape):
                raise InvalidArgumentError(
                    f"input_shapes[{inp.name!r}] = {tuple(shape)} has rank {len(shape)}, but the "
                    f"model's input {inp.name!r} has rank {len(inp.shape)} {list(inp.shape)}"
                )
            out[inp.name] = tuple(int(d) for d in shape)
        elif inp.is_static:
            assert inp.shape is not None
            out[inp.name] = tuple(int(d) for d in inp.shape)
        else:
            raise InputShapeRequiredError(_symbolic_input_message(inp))
    return out


def _symbolic_input_message(inp: ModelInput) -> str:
    if inp.shape is None:
        return (
            f"input {inp.name!r} has an unknown rank; a graph-executor artifact needs static "
            f"shapes: give its shape with input_shapes={{{inp.name!r}: (...)}} "
            f"(CLI: --input-shape {inp.name}=D0xD1x...)"
        )
    dims = [i for i, d in enumerate(inp.shape) if not isinstance(d, int)]
    example = "x".join(str(d) if isinstance(d, int) else "1" for d in inp.shape)
    shown = [d if isinstance(d, int) else str(d) for d in inp.shape]
    which = ", ".join(f"{i} ({inp.shape[i]!r})" for i in dims)
    return (
        f"input {inp.name!r} has symbolic dimension{'s' if len(dims) > 1 else ''} {which} in "
        f"shape {shown}; a graph-executor artifact needs static shapes: fix them with "
        f"input_shapes={{{inp.name!r}: ({example.replace('x', ', ')})}} "
        f"(CLI: --input-shape {inp.name}={example})"
    )


def import_onnx(proto: Any, shapes: Mapping[str, tuple[int, ...]]) -> Any:
    """Convert ``proto`` to a Relax IRModule with the given static input shapes.

    Raises
    ------
    CompileError
        If the ONNX frontend rejects the model (unsupported operator, bad attribute).
    """
    require_tvm()
    from tvm.relax.frontend.onnx import from_onnx

    printed = io.StringIO()
    try:
        # the frontend warns about every dynamic detail, and prints the failing operator
        with warnings.catch_warnings(), _frontend_fixes(), contextlib.redirect_stdout(printed):
            warnings.simplefilter("ignore")
            return from_onnx(proto, shape_dict={k: list(v) for k, v in shapes.items()})
    except Exception as exc:
        failed = re.search(r"Error converting operator (\S+)", printed.getvalue())
        where = f" (operator {failed.group(1).rstrip(',')})" if failed else ""
        raise CompileError(
            f"the ONNX frontend of TVM rejects the model{where}: {one_line(exc)}"
        ) from exc


@contextlib.contextmanager
def _frontend_fixes() -> Iterator[None]:
    """Correct known wrong conversions of TVM 0.27's ONNX frontend while it runs.

    * ``SequenceInsert`` with an explicit negative position inserts one place too far
      back (it computes ``len + pos + 1``; ONNX, like ``list.insert``, uses ``len + pos``),
      which gives wrong results (onnx backend test ``test_sequence_model3``). The
      position is made non-negative before the converter sees it.
    """
    from tvm import ir, relax
    from tvm.relax.frontend.onnx import onnx_frontend

    converter = onnx_frontend.SequenceInsert
    original = converter.__dict__["_impl_v11"]

    def fixed(cls: Any, bb: Any, inputs: Any, attr: Any, params: Any) -> Any:
        if len(inputs) == 3 and isinstance(inputs[2], ir.GenericConst):
            pos = int(inputs[2].value.numpy())
            if pos < 0:
                inputs = list(inputs)
                inputs[2] = relax.const(len(inputs[0]) + pos, "int64")
        return original.__func__(cls, bb, inputs, attr, params)

    converter._impl_v11 = classmethod(fixed)
    try:
        yield
    finally:
        converter._impl_v11 = original


def lower(mod: Any, target: Any) -> Any:
    """Legalize, fold constants and fuse: ``main`` becomes a list of ``call_tir`` bindings.

    Raises
    ------
    CompileError
        If a pass fails (an operator TVM cannot legalize for static shapes, ...).
    """
    tvm = require_tvm()
    from tvm import relax

    passes = tvm.transform.Sequential(
        [
            relax.transform.DecomposeOpsForInference(),
            relax.transform.LegalizeOps(),
            relax.transform.AnnotateTIROpPattern(),
            relax.transform.FoldConstant(),
            relax.transform.FuseOps(),
            relax.transform.FuseTIR(),
            relax.transform.DeadCodeElimination(),
        ]
    )
    try:
        with target, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return passes(mod)
    except Exception as exc:
        raise CompileError(
            f"lowering the Relax module failed{_legalizing(exc)}: {one_line(exc)}"
        ) from exc


def _legalizing(exc: BaseException) -> str:
    """`` in the legalization of <op>`` when the failure happened there."""
    cause: BaseException | None = exc
    while cause is not None:
        for frame in traceback.extract_tb(cause.__traceback__):
            if "legalize_ops" in frame.filename and frame.name.startswith("_"):
                op = frame.name.lstrip("_").replace("_", ".", 1)
                return f" in the legalization of the operator relax.{op}"
        cause = cause.__cause__ or cause.__context__
    return ""


def one_line(exc: BaseException) -> str:
    """The gist of a TVM error: its last non-empty line (TVM adds long tracebacks)."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    text = lines[-1] if lines else f"{type(exc).__name__} (an internal check of TVM failed)"
    return text if len(text) <= 500 else text[:497] + "..."

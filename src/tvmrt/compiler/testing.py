"""Small ONNX models built with ``onnx.helper``, for tests and benchmarks of :mod:`tvmrt.compiler`.

Each builder returns an ``onnx.ModelProto`` with random (seeded) weights. The families cover
what a graph-executor artifact must express: convolutions with batch norm and pooling, dense
layers, a residual block, a transformer encoder block with attention, several graph
outputs and a reshape that becomes a ``__nop``. Batch dimensions are symbolic (``"N"``)
where that is natural, so callers exercise ``input_shapes``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "MODELS",
    "INPUT_SHAPES",
    "cnn",
    "mlp",
    "residual",
    "transformer",
    "two_outputs",
    "reshape_chain",
    "random_inputs",
]

_OPSET = 17


def _helpers() -> tuple[Any, Any, Any]:
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as exc:  # pragma: no cover - the compile extra installs onnx
        raise ImportError(
            "tvmrt.compiler.testing needs onnx: pip install 'tvmrt[compile]' "
            "(from a checkout: pip install -e '.[compile]')"
        ) from exc
    return onnx, helper, numpy_helper


class _Builder:
    """Collects nodes and seeded initializers for one graph."""

    def __init__(self, seed: int) -> None:
        self.onnx, self.helper, self.numpy_helper = _helpers()
        self.rng = np.random.default_rng(seed)
        self.nodes: list[Any] = []
        self.inits: list[Any] = []
        self._count = 0

    def weight(self, shape: tuple[int, ...], scale: float = 0.2, offset: float = 0.0) -> str:
        name = f"w{len(self.inits)}"
        arr = (self.rng.standard_normal(shape) * scale + offset).astype(np.float32)
        self.inits.append(self.numpy_helper.from_array(arr, name))
        return name

    def const(self, arr: np.ndarray[Any, Any]) -> str:
        name = f"c{len(self.inits)}"
        self.inits.append(self.numpy_helper.from_array(arr, name))
        return name

    def op(self, op_type: str, inputs: list[str], n_out: int = 1, **attrs: Any) -> Any:
        self._count += 1
        outs = [f"{op_type.lower()}{self._count}_{i}" for i in range(n_out)]
        self.nodes.append(self.helper.make_node(op_type, inputs, outs, **attrs))
        return outs[0] if n_out == 1 else outs

    def conv_bn_relu(self, x: str, cin: int, cout: int, k: int = 3, relu: bool = True) -> str:
        y = self.op(
            "Conv", [x, self.weight((cout, cin, k, k)), self.weight((cout,))], pads=[k // 2] * 4
        )
        bn = [
            self.weight((cout,), 0.1, 1.0),  # scale
            self.weight((cout,), 0.1),  # bias
            self.weight((cout,), 0.1),  # mean
            self.const((self.rng.random(cout) + 0.5).astype(np.float32)),  # var > 0
        ]
        y = self.op("BatchNormalization", [y, *bn], epsilon=1e-5)
        return str(self.op("Relu", [y])) if relu else str(y)

    def dense(self, x: str, din: int, dout: int) -> str:
        y = self.op("MatMul", [x, self.weight((din, dout), 1.0 / np.sqrt(din))])
        return str(self.op("Add", [y, self.weight((dout,), 0.1)]))

    def layer_norm(self, x: str, dim: int) -> str:
        return str(
            self.op(
                "LayerNormalization",
                [x, self.weight((dim,), 0.1, 1.0), self.weight((dim,), 0.1)],
                axis=-1,
                epsilon=1e-5,
            )
        )

    def model(
        self,
        name: str,
        inputs: dict[str, list[int | str]],
        outputs: dict[str, str],
        output_shapes: dict[str, list[int | str]],
        extra_outputs: tuple[str, ...] | list[str] = (),
        int64_inputs: dict[str, list[int | str]] | None = None,
    ) -> Any:
        helper, f32 = self.helper, self.onnx.TensorProto.FLOAT
        # rename the producing tensors to the output names
        for node in self.nodes:
            for i, out in enumerate(node.output):
                for oname, tensor in outputs.items():
                    if out == tensor:
                        node.output[i] = oname
            for i, inp in enumerate(node.input):
                for oname, tensor in outputs.items():
                    if inp == tensor:
                        node.input[i] = oname
        graph = helper.make_graph(
            self.nodes,
            name,
            [helper.make_tensor_value_info(k, f32, v) for k, v in inputs.items()]
            + [
                helper.make_tensor_value_info(k, self.onnx.TensorProto.INT64, v)
                for k, v in (int64_inputs or {}).items()
            ],
            [
                helper.make_tensor_value_info(k, f32, output_shapes[k])
                for k in [*outputs, *extra_outputs]
            ],
            self.inits,
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)])
        model.ir_version = 8
        self.onnx.checker.check_model(model)
        return model


def cnn(seed: int = 0) -> Any:
    """Conv-BN-ReLU, max pool, Conv-BN-ReLU, average pool, flatten, Gemm, softmax.

    Input ``x``: ``N x 3 x 32 x 32`` (``N`` symbolic); output ``y``: ``N x 10``.
    """
    b = _Builder(seed)
    y = b.conv_bn_relu("x", 3, 8)
    y = b.op("MaxPool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = b.conv_bn_relu(y, 8, 16)
    y = b.op("AveragePool", [y], kernel_shape=[2, 2], strides=[2, 2])
    y = b.op("Flatten", [y])
    y = b.op("Gemm", [y, b.weight((10, 16 * 8 * 8), 0.05), b.weight((10,))], transB=1)
    y = b.op("Softmax", [y], axis=-1)
    return b.model("cnn", {"x": ["N", 3, 32, 32]}, {"y": y}, {"y": ["N", 10]})


def mlp(seed: int = 1) -> Any:
    """Gemm, ReLU, Gemm, tanh, MatMul + Add, softmax. Input ``x``: ``4 x 64``."""
    b = _Builder(seed)
    y = b.op("Gemm", ["x", b.weight((64, 128), 0.125), b.weight((128,))])
    y = b.op("Relu", [y])
    y = b.op("Gemm", [y, b.weight((64, 128), 0.09), b.weight((64,))], transB=1)
    y = b.op("Tanh", [y])
    y = b.dense(y, 64, 10)
    y = b.op("Softmax", [y], axis=-1)
    return b.model("mlp", {"x": [4, 64]}, {"y": y}, {"y": [4, 10]})


def residual(seed: int = 2) -> Any:
    """A ResNet basic block with a 1x1 projection shortcut. Input ``x``: ``1 x 16 x 16 x 16``."""
    b = _Builder(seed)
    y = b.conv_bn_relu("x", 16, 32)
    y = b.conv_bn_relu(y, 32, 32, relu=False)
    shortcut = b.conv_bn_relu("x", 16, 32, k=1, relu=False)
    y = b.op("Relu", [b.op("Add", [y, shortcut])])
    return b.model("residual", {"x": [1, 16, 16, 16]}, {"y": y}, {"y": [1, 32, 16, 16]})


def transformer(seed: int = 3, seq: int = 16, dim: int = 32, heads: int = 4) -> Any:
    """A pre-norm transformer encoder block: LayerNorm, multi-head attention, GELU MLP.

    Input ``x``: ``1 x seq x dim``. Attention is MatMul / Softmax with reshapes and
    transposes between heads; GELU is written with ``Erf``.
    """
    b = _Builder(seed)
    hd = dim // heads

    def split_heads(t: str) -> str:
        t = b.op("Reshape", [t, b.const(np.array([1, seq, heads, hd], np.int64))])
        return str(b.op("Transpose", [t], perm=[0, 2, 1, 3]))

    h = b.layer_norm("x", dim)
    q, k, v = (split_heads(b.dense(h, dim, dim)) for _ in range(3))
    kt = b.op("Transpose", [k], perm=[0, 1, 3, 2])
    scores = b.op("Mul", [b.op("MatMul", [q, kt]), b.const(np.array(hd**-0.5, np.float32))])
    attn = b.op("MatMul", [b.op("Softmax", [scores], axis=-1), v])
    attn = b.op("Transpose", [attn], perm=[0, 2, 1, 3])
    attn = b.op("Reshape", [attn, b.const(np.array([1, seq, dim], np.int64))])
    x1 = b.op("Add", ["x", b.dense(attn, dim, dim)])
    h = b.dense(b.layer_norm(x1, dim), dim, 4 * dim)
    erf = b.op("Erf", [b.op("Div", [h, b.const(np.array(np.sqrt(2.0), np.float32))])])
    gelu = b.op(
        "Mul",
        [
            b.op("Mul", [h, b.const(np.array(0.5, np.float32))]),
            b.op("Add", [erf, b.const(np.array(1.0, np.float32))]),
        ],
    )
    y = b.op("Add", [x1, b.dense(gelu, 4 * dim, dim)])
    return b.model("transformer", {"x": [1, seq, dim]}, {"y": y}, {"y": [1, seq, dim]})


def two_outputs(seed: int = 4) -> Any:
    """Conv-BN-ReLU, Split into two branches, two graph outputs.

    Input ``x``: ``1 x 3 x 16 x 16``; outputs ``feat`` (``1 x 8``, pooled) and
    ``mask`` (``1 x 8 x 16 x 16``, sigmoid).
    """
    b = _Builder(seed)
    y = b.conv_bn_relu("x", 3, 16)
    left, right = b.op("Split", [y, b.const(np.array([8, 8], np.int64))], n_out=2, axis=1)
    feat = b.op("Flatten", [b.op("GlobalAveragePool", [b.op("Add", [left, right])])])
    mask = b.op("Sigmoid", [b.op("Mul", [right, left])])
    return b.model(
        "two_outputs",
        {"x": [1, 3, 16, 16]},
        {"feat": feat, "mask": mask},
        {"feat": [1, 8], "mask": [1, 8, 16, 16]},
    )


def reshape_chain(seed: int = 5) -> Any:
    """MatMul, softmax, reshape, MatMul: the reshape of the softmax becomes a ``__nop``.

    Input ``x``: ``8 x 16``; output ``y``: ``2 x 5``.
    """
    b = _Builder(seed)
    y = b.op("Softmax", [b.op("MatMul", ["x", b.weight((16, 16))])], axis=-1)
    y = b.op("Reshape", [y, b.const(np.array([2, 64], np.int64))])
    y = b.op("MatMul", [y, b.weight((64, 5))])
    return b.model("reshape_chain", {"x": [8, 16]}, {"y": y}, {"y": [2, 5]})


MODELS: dict[str, Callable[[], Any]] = {
    "cnn": cnn,
    "mlp": mlp,
    "residual": residual,
    "transformer": transformer,
    "two_outputs": two_outputs,
    "reshape_chain": reshape_chain,
}
"""Builders by name."""

INPUT_SHAPES: dict[str, dict[str, tuple[int, ...]]] = {"cnn": {"x": (1, 3, 32, 32)}}
"""Shapes that fix each model's symbolic input dimensions (models not listed have none)."""


def random_inputs(
    model: Any, shapes: dict[str, tuple[int, ...]] | None = None, seed: int = 0
) -> dict[str, np.ndarray[Any, Any]]:
    """Seeded float32 inputs for ``model``'s graph inputs (``shapes`` fixes symbolic dims)."""
    rng = np.random.default_rng(seed)
    inits = {t.name for t in model.graph.initializer}
    out = {}
    for inp in model.graph.input:
        if inp.name in inits:
            continue
        if shapes and inp.name in shapes:
            shape = tuple(shapes[inp.name])
        else:
            shape = tuple(d.dim_value for d in inp.type.tensor_type.shape.dim)
        out[inp.name] = rng.standard_normal(shape).astype(np.float32)
    return out


# -- the ONNX backend conformance cases shipped in the onnx wheel ---------------------------

CONFORMANCE_SUITES = ("simple", "pytorch-converted", "pytorch-operator")
"""The suites of ``onnx/backend/test/data`` that the conformance test compiles."""


class BackendCase:
    """One case of ``onnx/backend/test/data/<suite>/<name>``: a model and its test data.

    Parameters
    ----------
    suite, name
        Where it lives.
    path
        Its folder (``model.onnx`` and ``test_data_set_0/``).
    """

    def __init__(self, suite: str, name: str, path: str) -> None:
        self.suite, self.name, self.path = suite, name, path

    @property
    def id(self) -> str:
        """``suite/name``."""
        return f"{self.suite}/{self.name}"

    @property
    def model(self) -> str:
        """Path of ``model.onnx``."""
        return f"{self.path}/model.onnx"

    def _load(self, prefix: str) -> list[Any]:
        import glob

        onnx, _, numpy_helper = _helpers()
        out = []
        files = glob.glob(f"{self.path}/test_data_set_0/{prefix}_*.pb")
        for file in sorted(files, key=lambda f: int(f.rsplit("_", 1)[1].split(".")[0])):
            tensor = onnx.TensorProto()
            with open(file, "rb") as f:
                data = f.read()
            try:
                tensor.ParseFromString(data)
                out.append((tensor.name, numpy_helper.to_array(tensor)))
            except Exception:  # a sequence or optional: not a tensor
                out.append(("", None))
        return out

    def inputs(self) -> list[tuple[str, Any]]:
        """``(name or "", array or None)`` per ``input_*.pb`` (``None``: not a tensor)."""
        return self._load("input")

    def outputs(self) -> list[tuple[str, Any]]:
        """``(name or "", array or None)`` per ``output_*.pb``."""
        return self._load("output")

    def input_shapes(self, input_names: list[str]) -> dict[str, tuple[int, ...]]:
        """Shapes of the test inputs by graph input name (positional when unnamed)."""
        shapes = {}
        for k, (name, arr) in enumerate(self.inputs()):
            if arr is None:
                continue
            key = name if name in input_names else (input_names[k] if k < len(input_names) else "")
            if key:
                shapes[key] = tuple(int(d) for d in arr.shape)
        return shapes


def backend_cases(suites: tuple[str, ...] = CONFORMANCE_SUITES) -> list[BackendCase]:
    """The cases of the onnx wheel's backend test data, sorted by suite and name."""
    import os

    onnx, _, _ = _helpers()
    root = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
    cases = []
    for suite in suites:
        folder = os.path.join(root, suite)
        for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
            path = os.path.join(folder, name)
            if os.path.isfile(os.path.join(path, "model.onnx")):
                cases.append(BackendCase(suite, name, path))
    return cases


def graph_input_names(model_path: str) -> list[str]:
    """Names of a model's graph inputs that are not initializers."""
    onnx, _, _ = _helpers()
    proto = onnx.load(model_path)
    inits = {t.name for t in proto.graph.initializer}
    return [v.name for v in proto.graph.input if v.name not in inits]


# -- models a static graph cannot express (tvmrt.compile refuses them) ----------------------


def control_flow(seed: int = 6) -> Any:
    """An ONNX ``If`` on a data-dependent condition: control flow."""
    b = _Builder(seed)
    helper, f32 = b.helper, b.onnx.TensorProto.FLOAT
    out = helper.make_tensor_value_info("y", f32, [4])
    then_g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "then", [], [out])
    else_g = helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "else", [], [out])
    cond = b.op("Greater", [b.op("ReduceSum", ["x"], keepdims=0), b.const(np.array(0, np.float32))])
    b.nodes.append(helper.make_node("If", [cond], ["y"], then_branch=then_g, else_branch=else_g))
    return b.model("control_flow", {"x": [4]}, {}, {"y": [4]}, extra_outputs=["y"])


def data_dependent_shape(seed: int = 7) -> Any:
    """``Expand`` to a shape given as an input tensor: the output shape depends on data."""
    b = _Builder(seed)
    b.nodes.append(b.helper.make_node("Expand", ["x", "shape"], ["y"]))
    return b.model(
        "data_dependent_shape",
        {"x": [1, 4]},
        {},
        {"y": [3, 4]},
        extra_outputs=["y"],
        int64_inputs={"shape": [2]},
    )

"""Relax ``main`` → classic graph JSON: nodes, arg_nodes, heads, node_row_ptr, attrs.

After fusion (:func:`tvmrt.compiler.frontend.lower`) ``main`` is a list of bindings

* ``R.call_tir(prim_func, (args...), out_ty=...)``, one ``tvm_op`` node each (tuple
  ``out_ty`` gives one node with several outputs);
* tuple construction, ``TupleGetItem`` and plain aliases, which only rename entries;

and returns a tensor or a tuple of tensors (the heads). Weights are constants in the
module; each distinct constant becomes a ``null`` node ``p0``, ``p1``, ... and an entry
of the params. A PrimFunc with a reshape pattern becomes a ``__nop`` whose output shares
its input's storage, as Relay emitted. Everything else a static graph cannot express is
refused with a :class:`~tvmrt.error.CompileError` naming the construct and the binding.

Input ``null`` nodes are named after the model's inputs and each kernel gets a ``hash``
attribute; the rest of the conventions (those of TVM's Relay code generator) are
:mod:`.graph_builder`'s, which builds the graph and writes it out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NoReturn

import numpy as np

from tvmrt.compiler._tvm import require_tvm
from tvmrt.compiler.graph_builder import Entry, GraphArtifact, GraphBuilder, Value, flatten
from tvmrt.error import CompileError, DataTypeError
from tvmrt.runtime.dtype import DataType

__all__ = ["GraphArtifact", "emit_graph"]

_PACKED_OPS = {
    "relax.call_dps_packed": "a packed-function call (call_dps_packed: an external library "
    "kernel such as sort/scan dispatch)",
    "relax.call_pure_packed": "a packed-function call (call_pure_packed, e.g. a VM builtin)",
    "relax.call_builtin_with_ctx": "a VM builtin call (call_builtin_with_ctx)",
    "relax.call_inplace_packed": "an in-place packed-function call (call_inplace_packed)",
}


class _Emitter:
    def __init__(self, mod: Any, input_names: Sequence[str] | None, output_names: Sequence[str]):
        tvm = require_tvm()
        from tvm import relax

        self.tvm, self.relax, self.ir = tvm, relax, tvm.ir
        self.mod = mod
        self.ops = {
            name: tvm.ir.Op.get(name)
            for name in ("relax.call_tir", "relax.call_tir_inplace", "relax.call_tir_with_grad")
        }
        self.graph = GraphBuilder(list(output_names))
        self.env: dict[Any, Value] = {}
        self.input_names = list(input_names) if input_names is not None else None

    # -- helpers ---------------------------------------------------------------------------
    def _tensor_type(self, ty: Any, what: str) -> tuple[tuple[int, ...], str]:
        """Static shape and dtype of a Relax TensorType, or a CompileError naming ``what``."""
        relax = self.relax
        if not isinstance(ty, relax.TensorType):
            raise CompileError(
                f"{what} has type {ty}, not a tensor; the graph executor passes tensors only"
            )
        shape_expr = ty.shape
        if shape_expr is None or not isinstance(shape_expr, relax.ShapeExpr):
            raise CompileError(
                f"{what} has a tensor of unknown shape ({ty}); a graph-executor artifact needs "
                "static shapes (fix dynamic input dimensions with input_shapes / --input-shape)"
            )
        dims = []
        for d in shape_expr.values:
            if not isinstance(d, self.tvm.tirx.IntImm):
                raise CompileError(
                    f"{what} has a symbolic shape {list(shape_expr.values)} (dimension {d}); a "
                    "graph-executor artifact needs static shapes (fix dynamic input dimensions "
                    "with input_shapes / --input-shape; shapes computed from data cannot be fixed)"
                )
            dims.append(int(d.value))
        dtype = str(ty.dtype)
        try:
            DataType(dtype)
        except DataTypeError:
            raise CompileError(
                f"{what} has dtype {dtype!r}, which the graph JSON of TVM v0.19 cannot name"
            ) from None
        return tuple(dims), dtype

    def _const(self, const: Any, what: str) -> Entry:
        value = const.value.numpy()
        if value.dtype == object:
            raise CompileError(f"{what} is a constant of unsupported dtype {const.value.dtype}")
        arr = np.array(value, order="C")  # ascontiguousarray would make scalars 1-d
        return self.graph.param(arr, str(const.value.dtype))

    def _value(self, expr: Any, what: str) -> Value:
        ir = self.ir
        if isinstance(expr, ir.GenericConst):
            return self._const(expr, what)
        if isinstance(expr, ir.Var):
            if expr not in self.env:
                raise CompileError(f"{what} uses {expr.name!r} before it is defined")
            return self.env[expr]
        if isinstance(expr, ir.Tuple):
            return [self._value(f, what) for f in expr.fields]
        if isinstance(expr, ir.TupleGetItem):
            tup = self._value(expr.tuple_value, what)
            index = int(expr.index)
            if not isinstance(tup, list) or not 0 <= index < len(tup):
                raise CompileError(
                    f"{what} takes item {index} of a value that is not a tuple of that size"
                )
            return tup[index]
        self._refuse(expr, what)

    def _refuse(self, expr: Any, what: str) -> NoReturn:
        ir, relax = self.ir, self.relax
        if isinstance(expr, relax.If):
            raise CompileError(
                f"{what} is control flow (relax.If, from an ONNX If/Loop); a graph-executor "
                "artifact is a static list of kernels and cannot branch"
            )
        if isinstance(expr, relax.SeqExpr):
            raise CompileError(f"{what} is a nested sequence expression (control flow)")
        if isinstance(expr, ir.Call):
            op = expr.op
            if isinstance(op, ir.Op):
                desc = _PACKED_OPS.get(op.name, f"a call of the Relax operator {op.name!r}")
                hint = ""
                if op.name in _PACKED_OPS:
                    hint = "; the graph executor can only call compiled TIR kernels"
                elif not op.name.startswith("relax.call_tir"):
                    hint = " that was not lowered to a TIR kernel"
                raise CompileError(f"{what} is {desc}{hint}")
            if isinstance(op, ir.GlobalVar):
                func = self.mod[op]
                kind = "PrimFunc" if isinstance(func, self.tvm.tirx.PrimFunc) else "Relax function"
                raise CompileError(
                    f"{what} calls the {kind} {op.name_hint!r} directly; the graph executor "
                    "runs one main function of call_tir kernels"
                )
            if isinstance(op, relax.ExternFunc):
                name = str(op.global_symbol)
                if name == "vm.builtin.tensor_to_shape":
                    raise CompileError(
                        f"{what} turns tensor data into a shape at run time "
                        f"({name}: a data-dependent shape, e.g. Expand, Reshape, Tile or "
                        "ConstantOfShape whose shape input is not a constant); a static graph "
                        "needs shapes known at compile time"
                    )
                raise CompileError(
                    f"{what} calls the packed function {name!r} (a Relax VM builtin or "
                    "external library call); the graph executor can only call compiled "
                    "TIR kernels"
                )
            raise CompileError(
                f"{what} calls {type(op).__name__} {op}, which the graph executor cannot run"
            )
        if isinstance(expr, relax.ShapeExpr):
            raise CompileError(
                f"{what} is a shape value ({expr}); the graph executor passes tensors only"
            )
        kind = type(expr).__name__
        raise CompileError(
            f"{what} is a {kind} ({str(expr)[:80]}), which a static graph cannot express"
        )

    # -- bindings --------------------------------------------------------------------------
    def _call_tir(self, var: Any, call: Any, what: str) -> Value:
        op = call.op
        if op.same_as(self.ops["relax.call_tir_inplace"]):
            raise CompileError(
                f"{what} is an in-place kernel call (call_tir_inplace of "
                f"{call.args[0].name_hint!r}); tvmrt.compile emits only out-of-place kernels"
            )
        gvar = call.args[0]
        if len(call.args) > 2:
            raise CompileError(
                f"{what} calls {gvar.name_hint!r} with symbolic shape arguments (call_tir with "
                "tir_vars); a graph-executor artifact needs static shapes"
            )
        func = self.mod[gvar]
        inputs: list[Entry] = []
        for k, arg in enumerate(call.args[1].fields):
            value = self._value(arg, f"{what}: argument {k} of {gvar.name_hint!r}")
            if not isinstance(value, Entry):
                raise CompileError(
                    f"{what}: argument {k} of {gvar.name_hint!r} is a tuple, not a tensor"
                )
            inputs.append(value)
        out_ty = call.ty_args[0]
        out_types = list(out_ty.fields) if isinstance(out_ty, self.relax.TupleType) else [out_ty]
        shapes = [
            self._tensor_type(t, f"{what}: output {i} of {gvar.name_hint!r}")
            for i, t in enumerate(out_types)
        ]
        n_params = len(func.params)
        if n_params != len(inputs) + len(shapes):
            raise CompileError(
                f"{what}: the PrimFunc {gvar.name_hint!r} takes {n_params} parameters, but the "
                f"call passes {len(inputs)} tensors and {len(shapes)} outputs (scalar parameters "
                "come from symbolic shapes, which a static graph cannot pass)"
            )
        node = self.graph.add_op(var.name, inputs, gvar.name_hint, shapes)
        node.reshape = (
            len(inputs) == 1
            and len(shapes) == 1
            and inputs[0].nbytes == node.outputs[0].nbytes
            and inputs[0].dtype == node.outputs[0].dtype
            and bool(self.relax.analysis.has_reshape_pattern(func))
        )
        h = int(self.tvm_ffi_hash(func)) & 0xFFFFFFFFFFFFFFFF
        node.attrs = {"hash": f"{h:016x}"}
        return (
            node.outputs[0] if not isinstance(out_ty, self.relax.TupleType) else list(node.outputs)
        )

    @staticmethod
    def tvm_ffi_hash(func: Any) -> int:
        import tvm_ffi

        return int(tvm_ffi.structural_hash(func))

    def _binding(self, binding: Any) -> None:
        relax, ir = self.relax, self.ir
        var = binding.var
        what = f"binding {var.name!r}"
        if isinstance(binding, relax.MatchCast):
            raise CompileError(
                f"{what} is a match_cast (a run-time shape check from dynamic shapes); a "
                "graph-executor artifact needs static shapes"
            )
        value = binding.value
        if isinstance(value, ir.Call) and isinstance(value.op, ir.Op) and value.op.name in self.ops:
            self.env[var] = self._call_tir(var, value, what)
        else:
            self.env[var] = self._value(value, what)

    def emit(self) -> GraphArtifact:
        main = self._main()
        params = list(main.params)
        names = self.input_names or [p.name for p in params]
        if len(names) != len(params):
            raise CompileError(
                f"the Relax main takes {len(params)} inputs, but the model has {len(names)} "
                f"({names}); keep weights as ONNX initializers, not graph inputs"
            )
        inputs = []
        for name, param in zip(names, params, strict=True):
            shape, dtype = self._tensor_type(param.ty, f"input {name!r}")
            entry = self.graph.null(name, shape, dtype)
            self.env[param] = entry
            inputs.append((name, shape, dtype))
        body = main.body
        if not isinstance(body, self.relax.SeqExpr):
            self._refuse(body, "the body of main")
        for block in body.blocks:
            for binding in block.bindings:
                self._binding(binding)
        result = self._value(body.body, "the result of main")
        heads = flatten(result)
        return self.graph.finish(heads, inputs)

    def _main(self) -> Any:
        relax = self.relax
        funcs = {gv.name_hint: f for gv, f in self.mod.functions_items()}
        if "main" not in funcs or not isinstance(funcs["main"], relax.Function):
            raise CompileError("the Relax module has no main function")
        others = sorted(
            n for n, f in funcs.items() if isinstance(f, relax.Function) and n != "main"
        )
        if others:
            raise CompileError(
                f"the Relax module has other Relax functions besides main ({', '.join(others)}); "
                "a graph-executor artifact runs one function of call_tir kernels"
            )
        return funcs["main"]


def emit_graph(
    mod: Any,
    input_names: Sequence[str] | None = None,
    output_names: Sequence[str] = (),
) -> GraphArtifact:
    """Turn the fused Relax module's ``main`` into a graph JSON and its params.

    Parameters
    ----------
    mod
        An IRModule after :func:`tvmrt.compiler.frontend.lower` (and tuning, if any).
    input_names
        Names for ``main``'s parameters (the ONNX input names, which the frontend may
        have sanitised); default: the Relax parameter names.
    output_names
        Names of the model outputs: a kernel node producing exactly one of them is named
        after it, so ``get_output_index(name)`` finds it.

    Returns
    -------
    GraphArtifact
        The graph, params and the names of the PrimFuncs to compile.

    Raises
    ------
    CompileError
        If ``main`` uses something a static graph executor cannot run: symbolic shapes,
        ``call_dps_packed``/``call_pure_packed``, control flow, calls of other functions,
        in-place kernels. The message names the construct and the binding.
    """
    return _Emitter(mod, input_names, output_names).emit()

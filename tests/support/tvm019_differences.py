"""Where tvmrt's Python surface differs from TVM v0.19's, each with the reason.

Keys are :func:`support.api_surface.compare`'s: ``name <path>``, ``method <TVM class>.<m>``,
``signature <TVM object>``. ``tests/compat/test_tvm019_surface.py`` fails when the comparison
finds a difference not listed here, or a listed one that is gone;
``scripts/gen_tvm_compat.py`` writes both lists into docs/tvm-compat.md.
"""

from __future__ import annotations

__all__ = ["DELIBERATE", "OPEN"]

_HANDLE = "the ctypes handle of TVM's C++ object; tvmrt's objects are Python objects"
_CTYPES = (
    "a ctypes helper of TVM's C API (tvm._ffi.base) that the module imports; tvmrt calls no libtvm"
)
_FFI = "a base class of TVM's C++ object FFI; tvmrt has no C++ object system"
_RELAX = "a part of TVM's compiler or Relax stack, not of the Relay-era runtime tvmrt serves"
_ENUM = (
    "an enum here (its members are the same ints); TVM's is a plain class of int constants "
    "that no one instantiates"
)
_FLOAT8 = (
    "TVM 0.19 numbers float8 e4m3/e5m2 6 and 7, numbers DLPack later gave to bool and another "
    "float8; tvmrt keeps one meaning per number (DataTypeCode.BOOL = 6, E4M3_FLOAT8 = 7, "
    "E5M2_FLOAT8 = 8) and converts at the edges"
)
_C_BUILT = "TVM builds it from a C++ handle only; tvmrt's constructor takes what it wraps"

DELIBERATE: dict[str, str] = {
    **{
        f"method tvm.{cls}.handle": _HANDLE
        for cls in (
            "runtime.container.ADT",
            "runtime.container.ShapeTuple",
            "runtime.module.Module",
            "runtime.ndarray.NDArray",
            "runtime.object.Object",
            "runtime.object_path.ObjectPath",
            "runtime.object_path.ObjectPathPair",
            "runtime.packed_func.PackedFunc",
            *(
                f"runtime.profiling.{c}"
                for c in (
                    "Count",
                    "Duration",
                    "Percent",
                    "Ratio",
                    "Report",
                    "DeviceWrapper",
                    "MetricCollector",
                )
            ),
        )
    },
    "method tvm.runtime.packed_func.PackedFunc.is_global": "TVM's flag for a C++ global function handle (not freed by Python)",
    **{
        f"name runtime.{path}": _CTYPES
        for path in (
            "module.c_str",
            "module.check_call",
            "ndarray.c_array",
            "ndarray.check_call",
            "object.c_str",
            "object.check_call",
            "packed_func.c_str",
            "packed_func.check_call",
        )
    },
    **{
        f"name runtime.{path}": _FFI
        for path in (
            "container.PyNativeObject",
            "object.PyNativeObject",
            "object.ObjectBase",
            "object.ObjectRValueRef",
            "ndarray.NDArrayBase",
            "packed_func.PackedFuncBase",
        )
    },
    "name runtime.vm.TVMByteArray": "the ctypes struct TVM passes bytes to C++ in; tvmrt passes Python bytes",
    "name runtime.container.getitem_helper": "TVM's indexing helper for C++ containers; tvmrt's containers are Python sequences",
    "name runtime.disco": _RELAX + " (Relax's distributed runtime)",
    "name runtime.script_printer": _RELAX + " (TVMScript printing of IR)",
    "name runtime.Scriptable": _RELAX
    + " (the base of IR nodes that print as TVMScript; tvmrt has no IR)",
    "name runtime.name_transforms": _RELAX + " (codegen's C name sanitizers)",
    "name runtime.support": _RELAX + " (a regex helper of TVM's pass infrastructure)",
    "method tvm._ffi.runtime_ctypes.DataType.CODE2STR": "a parsing table of TVM's ctypes DataType; tvmrt parses with its own (tvmrt.runtime.dtype)",
    "method tvm._ffi.runtime_ctypes.DataType.NUMPY2STR": "a parsing table of TVM's ctypes DataType; tvmrt parses with its own (tvmrt.runtime.dtype)",
    "method tvm._ffi.runtime_ctypes.DataType.STR2DTYPE": "a parsing table of TVM's ctypes DataType; tvmrt parses with its own (tvmrt.runtime.dtype)",
    "method tvm._ffi.runtime_ctypes.DataType.bits": "an attribute of every instance here (DataType is an interned str), a ctypes field in TVM; same values",
    "method tvm._ffi.runtime_ctypes.DataType.lanes": "an attribute of every instance here (DataType is an interned str), a ctypes field in TVM; same values",
    "method tvm._ffi.runtime_ctypes.DataType.type_code": "an attribute of every instance here (DataType is an interned str), a ctypes field in TVM; same values",
    "method tvm._ffi.runtime_ctypes.DataTypeCode.E4M3Float": _FLOAT8,
    "method tvm._ffi.runtime_ctypes.DataTypeCode.E5M2Float": _FLOAT8,
    "signature tvm._ffi.runtime_ctypes.DataTypeCode": _ENUM,
    "signature tvm._ffi.runtime_ctypes.DataType.itemsize": "a property here (tvmrt reads t.itemsize, as numpy's) whose int value is also callable, so TVM 0.19's t.itemsize() works too",
    "signature tvm.runtime.module.ModulePropertyMask": _ENUM,
    "signature tvm.contrib.graph_runtime.create": "TVM's takes *args, **kwargs and passes them to graph_executor.create, whose parameters tvmrt's names",
    "signature tvm.runtime.module.Module": _C_BUILT + " (a Module subclass)",
    "signature tvm.runtime.ndarray.NDArray": _C_BUILT + " (tvmrt.nd.array / empty make arrays)",
    "signature tvm.runtime.packed_func.PackedFunc": _C_BUILT + " (a Python callable and a name)",
    "signature tvm.runtime.object_path.ObjectPathPair": _C_BUILT + " (the two paths)",
}

# differences that are gaps, still to close
OPEN: dict[str, str] = {}

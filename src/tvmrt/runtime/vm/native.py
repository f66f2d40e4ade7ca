"""The Relay VM in C (``libtvmrt_runtime``) driven from Python through ctypes.

:class:`~tvmrt.runtime.vm.VirtualMachine` runs here when it can (docs/c_runtime.md, "The
Relay VM from Python"): the C runtime loads the executable from its file (``vm.so``, or
``code.ro``'s bytes and ``lib.so`` through ``runtime.Load_Executable``), and its
``VirtualMachine`` module's packed functions are called with ``TVMFuncCall``. Inputs go in
as ``DLTensor`` views of the arrays' memory (the C VM views an aligned compact one, as
TVM's ``NDArray::FromExternalDLTensor``, else copies it); tuples as C ADTs of copies.
Results come back copied into tvmrt NDArrays, a tuple as an :class:`ADT`.

The C runtime is tvmrt's one native library, which Python's engines use too: one thread
pool (:func:`tvmrt.runtime.kernel_services.set_num_threads` sizes it for both), one
workspace pool and one error slot per thread. The kernel libraries each side opens are
separate instances (Python loads its own from a private in-memory copy) with their own
context slots.
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from tvmrt.error import ArgumentTypeError, TVMError, UnsupportedError
from tvmrt.runtime._ctypes_api import ArgTypeCode, DLTensor, TVMByteArray
from tvmrt.runtime.container import ADT
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.loaders.needs import c_runtime_refusal
from tvmrt.runtime.module import Module, PyModule
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.vm.interpreter import VMLimits
from tvmrt.runtime.vm.native_lib import CFunc, Owned, dl_of, dtype_name, fail, runtime_library

__all__ = ["NativeVM", "library_refusal", "native_module", "native_source"]

_STR, _INT, _BYTES = ArgTypeCode.STR, ArgTypeCode.INT, ArgTypeCode.BYTES
_DLTENSOR, _NDARRAY = ArgTypeCode.DLTENSOR_HANDLE, ArgTypeCode.NDARRAY_HANDLE
_OBJECT, _MODULE = ArgTypeCode.OBJECT_HANDLE, ArgTypeCode.MODULE_HANDLE
_MACHINE_FUNCS: tuple[str, ...]
_MACHINE_FUNCS = ("init", "set_input", "set_one_input", "invoke", "invoke_stateful")
_MACHINE_FUNCS += ("get_output", "get_num_outputs", "get_input_index", "set_limits")
_MACHINE_FUNCS += ("invoke_return_to_device",)


_CPU = Device(1, 0)
_DTYPES: dict[tuple[int, int, int], tuple[DataType, str, int]] = {}


def _dtype_of(dt: Any) -> tuple[DataType, str, int]:
    """The DataType of a C array's dtype, numpy's type string and the item size."""
    key = (dt.code, dt.bits, dt.lanes)
    found = _DTYPES.get(key)
    if found is None:
        dtype = DataType(dtype_name(dt))
        found = _DTYPES[key] = (dtype, dtype.numpy_dtype.str, dtype.itemsize)
    return found


class _Memory:
    """A C array's memory as numpy sees it (``__array_interface__``); it holds the array
    (one reference, released when the last view of it goes)."""

    __slots__ = ("__array_interface__", "free", "handle")
    __array_interface__: dict[str, Any]

    def __init__(self, free: Any, handle: int) -> None:
        self.free, self.handle = free, handle

    def __del__(self) -> None:
        self.free(self.handle)


class NativeVM:
    """A ``VirtualMachine`` module of the C runtime over one executable file.

    Parameters
    ----------
    source
        ``("so", vm.so path)`` or ``("ro", code.ro bytes, lib.so path)``.
    init_args
        ``init``'s (device type, device id, allocator) triples.
    """

    def __init__(self, source: tuple[Any, ...], init_args: Sequence[int]) -> None:
        lib = self.lib = runtime_library()
        # what the C VM's inputs may view, per function and input (index, or the name
        # set_one_input was given): kept until replaced, at most two per input
        self._keep: dict[str, dict[object, list[object]]] = {}
        self._globals: dict[str, CFunc] = {}
        if source[0] == "so":
            exe = self._load_file(source[1])
        else:
            libmod = self._load_file(source[2])
            try:
                load = self._global("runtime.Load_Executable")
                code = bytes(source[1])
                buf = ctypes.create_string_buffer(code, len(code))
                ba = TVMByteArray(ctypes.addressof(buf), len(code))
                _, ret = load((_BYTES, ctypes.addressof(ba)), (_MODULE, libmod))
                exe = ret
            finally:
                lib.TVMModFree(ctypes.c_void_p(libmod))
        try:
            self._exe = exe
            self._vm = self._call_module(exe, "vm_load_executable")
        except TVMError:
            lib.TVMModFree(ctypes.c_void_p(exe))
            raise
        self.funcs = {name: self._get(self._vm, name) for name in _MACHINE_FUNCS}
        self.init(*init_args)
        self.set_limits(VMLimits())  # what the Python interpreter would take (same variables)

    def __del__(self) -> None:
        self.funcs = {}
        for attr in ("_vm", "_exe"):
            handle = getattr(self, attr, None)
            if handle:
                self.lib.TVMModFree(ctypes.c_void_p(handle))

    # -- loading ---------------------------------------------------------------------------
    def _load_file(self, path: str) -> int:
        out = ctypes.c_void_p()
        if self.lib.TVMModLoadFromFile(path.encode(), b"", ctypes.byref(out)) != 0:
            raise fail(self.lib, f"loading {path}")
        return int(out.value or 0)

    def _global(self, name: str) -> CFunc:
        found = self._globals.get(name)
        if found is None:
            out = ctypes.c_void_p()
            if self.lib.TVMFuncGetGlobal(name.encode(), ctypes.byref(out)) != 0 or not out.value:
                raise fail(self.lib, f"global function {name}")
            found = self._globals[name] = CFunc(self.lib, out.value, name)
        return found

    def _get(self, mod: int, name: str) -> CFunc:
        out = ctypes.c_void_p()
        rc = self.lib.TVMModGetFunction(ctypes.c_void_p(mod), name.encode(), 0, ctypes.byref(out))
        if rc != 0 or not out.value:
            raise fail(self.lib, f"module function {name}")
        return CFunc(self.lib, out.value, name)

    def _call_module(self, mod: int, name: str) -> int:
        return self._get(mod, name)()[1]

    # -- values ----------------------------------------------------------------------------
    def _arg(self, value: object, keep: list[object]) -> tuple[int, Any]:
        if isinstance(value, NDArray):  # its cached DLTensor (TVM's dtype codes, strides)
            keep.append(value)
            return _DLTENSOR, ctypes.addressof(value.dltensor())
        if isinstance(value, ADT):
            fields = [self._owned(f, keep) for f in value.fields]
            name = "runtime.ADT" if value.tag else "runtime.Tuple"
            head = [(_INT, value.tag)] if value.tag else []
            code, ret = self._global(name)(*head, *fields)
            handle = ctypes.c_void_p(ret)
            keep.append(Owned(self.lib, handle))
            return code, handle.value
        raise ArgumentTypeError(
            f"the C VM takes NDArray and ADT inputs, got {type(value).__name__}"
        )

    def _owned(self, value: object, keep: list[object]) -> tuple[int, Any]:
        """An ADT field: a C NDArray holding a copy, or a nested ADT."""
        if not isinstance(value, NDArray):
            return self._arg(value, keep)
        arr = np.require(value.numpy_view(), requirements="C")  # keeps 0-d
        dl, shape = dl_of(arr)
        out = ctypes.c_void_p()
        if (
            self.lib.TVMArrayAlloc(
                ctypes.addressof(shape),
                dl.ndim,
                dl.dtype.code,
                dl.dtype.bits,
                1,
                1,
                0,
                ctypes.byref(out),
            )
            != 0
        ):
            raise fail(self.lib, "TVMArrayAlloc")
        keep.append(Owned(self.lib, out, array_handle=True))
        if self.lib.TVMArrayCopyFromBytes(out, arr.ctypes.data, ctypes.c_size_t(arr.nbytes)):
            raise fail(self.lib, "TVMArrayCopyFromBytes")
        return _NDARRAY, out.value

    def result(self, code: int, ret: int) -> Any:
        """A returned NDArray or ADT handle as a tvmrt value (every handle is released).

        Walked with a worklist, not recursion: a result nested 10^5 deep (a list a loop
        built) converts as a shallow one does."""
        size_of = self._global("runtime.GetADTSize")
        tag_of = self._global("runtime.GetADTTag")
        field_of = self._global("runtime.GetADTFields")
        out: list[Any] = [None]
        work: list[tuple[int, int, list[Any], int]] = [(code, ret, out, 0)]
        made: list[tuple[int, list[Any], list[Any], int]] = []  # parents before children
        try:
            while work:
                code, ret, into, at = work.pop()
                if code == _NDARRAY:
                    into[at] = self._array(ret)
                    continue
                if code != _OBJECT:
                    raise ArgumentTypeError(
                        f"the C VM returned type code {code}, not an NDArray or an ADT"
                    )
                try:
                    _, size = size_of((_OBJECT, ret))
                    _, tag = tag_of((_OBJECT, ret))
                    fields: list[Any] = [None] * size
                    for i in range(size):
                        work.append((*field_of((_OBJECT, ret), (_INT, i)), fields, i))
                finally:
                    self.lib.TVMObjectFree(ctypes.c_void_p(ret))
                made.append((tag, fields, into, at))
        except BaseException:
            for code, ret, _, _ in work:  # the handles not yet converted
                if code == _NDARRAY:
                    self.lib.TVMArrayFree(ctypes.c_void_p(ret))
                elif code == _OBJECT:
                    self.lib.TVMObjectFree(ctypes.c_void_p(ret))
            raise
        for tag, fields, into, at in reversed(made):  # children first
            into[at] = ADT(tag, fields)
        return out[0]

    def _array(self, ret: int) -> NDArray:
        """A returned NDArray handle as a view of the C array, which it keeps alive."""
        dl = DLTensor.from_address(ret)
        shape = tuple(dl.shape[: dl.ndim])
        dtype, typestr, itemsize = _dtype_of(dl.dtype)
        memory = _Memory(self.lib.TVMArrayFree, ret)
        if math.prod(shape) * itemsize == 0 or not dl.data:
            return NDArray.from_host_memory(np.empty(shape, typestr), dtype, _CPU, memory)
        memory.__array_interface__ = {
            "data": (dl.data + dl.byte_offset, False),
            "shape": shape,
            "typestr": typestr,
            "version": 3,
        }
        view = np.asarray(memory)  # numpy views of it keep `memory` alive (no copy)
        return NDArray.from_host_memory(view, dtype, _CPU, memory)

    # -- the module's calls ----------------------------------------------------------------
    def init(self, *args: int) -> None:
        self.funcs["init"](*((_INT, int(v)) for v in args))

    def _hold(self, func_name: str, args: Sequence[object]) -> list[tuple[int, Any]]:
        """The C arguments for ``args``; what they view stays held (beside the old ones,
        until :meth:`_held` says the C VM took them all)."""
        held = self._keep.setdefault(func_name, {})
        values = []
        for i, a in enumerate(args):
            keep: list[object] = [*held.get(i, [])]
            values.append(self._arg(a, keep))
            held[i] = keep
        return values

    def _held(self, func_name: str, args: Sequence[object]) -> None:
        self._keep[func_name] = {i: [a] for i, a in enumerate(args)}

    def set_input(self, func_name: str, *args: object) -> None:
        values = self._hold(func_name, args)
        self.funcs["set_input"]((_STR, func_name.encode()), *values)
        self._held(func_name, args)

    def set_one_input(self, func_name: str, key: int | str, value: object) -> None:
        keep: list[object] = [value]
        k = (_STR, key.encode()) if isinstance(key, str) else (_INT, int(key))
        self.funcs["set_one_input"]((_STR, func_name.encode()), k, self._arg(value, keep))
        self._keep.setdefault(func_name, {})[key] = keep

    def set_limits(self, limits: VMLimits) -> None:
        """The C VM's bounds from ``limits`` (None: no limit)."""
        steps, alloc, live = limits.max_steps, limits.max_alloc_bytes, limits.max_live_bytes
        self.funcs["set_limits"](
            (_INT, int(limits.max_frames)),
            (_INT, 0 if steps is None else int(steps)),
            (_INT, -1 if alloc is None else int(alloc)),
            (_INT, -1 if live is None else int(live)),
        )

    def invoke_return_to_device(
        self, func_name: str, dev_type: int, dev_id: int, *args: object
    ) -> Any:
        """Set ``func_name``'s inputs and run it in one C call (the CPU only)."""
        values = self._hold(func_name, args)
        code, ret = self.funcs["invoke_return_to_device"](
            (_STR, func_name.encode()), (_INT, int(dev_type)), (_INT, int(dev_id)), *values
        )
        self._held(func_name, args)
        return self.result(code, ret)

    def invoke(self, func_name: str) -> Any:
        return self.result(*self.funcs["invoke"]((_STR, func_name.encode())))

    def invoke_stateful(self, func_name: str) -> None:
        self.funcs["invoke_stateful"]((_STR, func_name.encode()))

    def get_output(self, index: int) -> Any:
        return self.result(*self.funcs["get_output"]((_INT, int(index))))

    def get_num_outputs(self) -> int:
        return self.funcs["get_num_outputs"]()[1]

    def get_input_index(self, input_name: str, func_name: str) -> int:
        name, func = (_STR, input_name.encode()), (_STR, func_name.encode())
        return self.funcs["get_input_index"](name, func)[1]


def native_source(mod: Module) -> tuple[Any, ...] | None:
    """Where the C runtime can load ``mod`` (a ``VMExecutable``) from, or None.

    ``("so", path)`` for a ``vm.so`` read by ``load_module``; ``("ro", code, lib path)``
    for ``Executable.load_exec(code.ro bytes, load_module(lib.so))``.
    """
    if mod.source_file is not None:
        return ("so", mod.source_file)
    code = getattr(mod, "code_bytes", None)
    imports = mod.imported_modules
    if code is not None and imports and imports[0].source_file is not None:
        return ("ro", code, imports[0].source_file)
    return None


def library_refusal(source: tuple[Any, ...]) -> str:
    """Why the C runtime must not run the kernel library of ``source`` from Python ("" if
    it may): :func:`tvmrt.runtime.loaders.needs.c_runtime_refusal` of its path."""
    return c_runtime_refusal(source[1] if source[0] == "so" else source[2])


def native_module(source: tuple[Any, ...] | None, init_args: Sequence[int]) -> Module:
    """A ``VirtualMachine`` module (TVM's packed functions) running on the C VM."""
    if source is None:
        raise UnsupportedError("the executable was not loaded from a file")
    vm = NativeVM(source, init_args)

    return _NativeVMModule(
        vm,
        {
            "init": vm.init,
            "set_input": vm.set_input,
            "set_one_input": vm.set_one_input,
            "invoke": vm.invoke,
            "invoke_stateful": vm.invoke_stateful,
            "invoke_return_to_device": vm.invoke_return_to_device,
            "get_output": vm.get_output,
            "get_num_outputs": vm.get_num_outputs,
            "get_input_index": vm.get_input_index,
        },
        type_key="VirtualMachine",
    )


class _Limits(VMLimits):
    """:class:`VMLimits` whose changes reach the C VM (``tvmrt serve`` sets
    ``max_live_bytes`` per worker)."""

    def __init__(self, vm: NativeVM) -> None:
        object.__setattr__(self, "_vm", None)
        super().__init__()
        object.__setattr__(self, "_vm", vm)

    def __setattr__(self, name: str, value: object) -> None:
        object.__setattr__(self, name, value)
        vm = getattr(self, "_vm", None)
        if vm is not None:
            vm.set_limits(self)


class _NativeVMModule(PyModule):
    """The C VM's ``VirtualMachine`` module functions, with its :attr:`limits`."""

    def __init__(self, vm: NativeVM, functions: dict[str, Any], type_key: str) -> None:
        super().__init__(functions, type_key)
        self.vm = vm
        self.limits = _Limits(vm)

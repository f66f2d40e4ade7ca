"""TVM's Python faces over the C runtime: modules, functions and values of ``libtvmrt_runtime``.

An artifact the C runtime is the engine of (a Relax VM executable: ``load_module`` hands it
here) is a :class:`NativeModule`: its functions are the C runtime's packed functions, called
with ``TVMFuncCall`` (through the CPython glue's FastCall, ``_native/py_call.c``, which
converts the usual arguments and results in C), and what crosses the call is converted
once, at the boundary:

============================  =======================================================
Python                        C
============================  =======================================================
NDArray                        the C array it views (a result of the C runtime), or
                               that views it: a host array gets one at its first call
                               (``TVMArrayFromDLPack``, no copy; kept in its ``_c``);
                               else a ``DLTensor*`` (the C side copies it, as TVM
                               copies a tensor it did not make)
numpy array                    its memory, viewed (a writable C-contiguous one), else a
                               copy (:func:`tvmrt.runtime.ndarray.array`): the C side
                               reads it, and what it writes there is lost, so an output
                               is an NDArray (the graph face refuses a numpy ``out``)
int, float, bool, None, str    the same (``bool`` as an int)
DataType, Device               ``kTVMDataType``, ``kDLDevice``
ShapeTuple; tuple or list      ``runtime.ShapeTuple``; ``runtime.Array`` of the items
ADT (the Relay VM's)           ``runtime.Tuple`` / ``runtime.ADT`` of the fields (a field
                               C cannot view is copied)
NativeModule, NativeFunction   their handles
a Python callable              a function made with ``TVMFuncCreateFromCFunc``
============================  =======================================================

and back: a C array becomes an NDArray of it (its handle: shape, dtype and the numpy view
are read when first used, as TVM's NDArray is a handle; it keeps the array alive), a
shape a :class:`~tvmrt.runtime.object.ShapeTuple`, a tuple a
:class:`~tvmrt.runtime.container.Array`, a Relay VM ADT an
:class:`~tvmrt.runtime.container.ADT`, a string a :class:`~tvmrt.runtime.object.String`,
a closure or function a :class:`NativeFunction`. Errors come back as the ``tvmrt.error``
class the C side named (``"InvalidArgumentError: ..."``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from tvmrt import error as errors
from tvmrt.error import ArgumentTypeError, TVMError
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import ArgTypeCode, TVMByteArray, TVMValue
from tvmrt.runtime._dlpack import LEGACY, USED_LEGACY, capsule_pointer, rename_capsule
from tvmrt.runtime.container import ADT, Array
from tvmrt.runtime.device import Device
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray, array
from tvmrt.runtime.object import ShapeTuple, String
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.packed_values import extension_arg

__all__ = [
    "NativeFunction",
    "NativeModule",
    "load_file",
    "c_global",
    "has_global",
    "to_python",
]

_KIND = re.compile(r"^([A-Za-z]+Error): ")
_CODE = ArgTypeCode
# the value kinds of relax.h's rx_value (tvmrt.relax.kind)
_RX_STR, _RX_SHAPE, _RX_TENSOR, _RX_TUPLE, _RX_CLOSURE = 6, 7, 8, 9, 10
_RX_FUNC, _RX_STORAGE, _RX_MODULE, _RX_MAP = 11, 12, 13, 14
_RELAY_ADT = 15  # tvmrt.relax.kind of a Relay VM ADT (RX_KIND_RELAY_ADT)
# plain ints of the hot path's codes (an IntEnum member's lookup costs ~100 ns)
_INT, _FLOAT, _NULL, _STR = int(_CODE.INT), int(_CODE.FLOAT), int(_CODE.NULL), int(_CODE.STR)
_NDARRAY, _OBJECT = int(_CODE.NDARRAY_HANDLE), int(_CODE.OBJECT_HANDLE)

_lock = threading.Lock()
_declared: list[ctypes.CDLL] = []
_globals: dict[str, NativeFunction] = {}
_callbacks: list[Any] = []  # Python functions handed to C: kept alive with the process


def _nvrtc_defaults() -> None:
    """Point the C runtime at NVIDIA's NVRTC and libcu++ headers where the ``nvrtc`` extra
    installed them (a CUDA import holding CUDA C source is compiled with them), unless the
    environment names others (TVMRT_LIBNVRTC, TVMRT_CUDA_INCLUDE)."""
    spec = importlib.util.find_spec("nvidia")
    for root in (spec.submodule_search_locations or []) if spec else []:
        lib_dir = os.path.join(root, "cuda_nvrtc", "lib")
        try:  # os.listdir, not Path.glob: this runs in every process's first C call
            names = os.listdir(lib_dir)
        except OSError:
            names = []
        libs = sorted(
            n
            for n in names
            if n.startswith("libnvrtc.so.") and "alt" not in n and "builtins" not in n
        )
        if libs:
            os.environ.setdefault("TVMRT_LIBNVRTC", os.path.join(lib_dir, libs[-1]))
        include = os.path.join(root, "cuda_cccl", "include")
        if os.path.isdir(include):
            os.environ.setdefault("TVMRT_CUDA_INCLUDE", include)


def _lib() -> ctypes.CDLL:
    """The native library with the C API typed (once)."""
    if _declared:
        return _declared[0]
    with _lock:
        if not _declared:
            _nvrtc_defaults()
            lib = kernel_services.native_library()
            vp, out, i32 = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int
            lib.TVMGetLastError.restype = ctypes.c_char_p
            lib.TVMGetLastError.argtypes = []
            sigs: dict[str, list[Any]] = {
                "TVMFuncCall": [vp, vp, vp, i32, vp, vp],
                "TVMFuncFree": [vp],
                "TVMFuncGetGlobal": [ctypes.c_char_p, out],
                "TVMFuncCreateFromCFunc": [vp, vp, vp, out],
                "TVMModLoadFromFile": [ctypes.c_char_p, ctypes.c_char_p, out],
                "TVMModGetFunction": [vp, ctypes.c_char_p, i32, out],
                "TVMModFree": [vp],
                "TVMObjectFree": [vp],
                "TVMArrayFree": [vp],
                "TVMArrayFromDLPack": [vp, out],
                "TVMCFuncSetReturn": [vp, vp, vp, i32],
            }
            for name, argtypes in sigs.items():
                func = getattr(lib, name)
                func.argtypes = argtypes
                func.restype = ctypes.c_int
            _declared.append(lib)
    return _declared[0]


def fail(what: str = "") -> TVMError:
    """The C runtime's last error as the tvmrt.error class it names."""
    raw = _lib().TVMGetLastError() or b""
    msg = raw.decode("utf-8", "replace")
    match = _KIND.match(msg)
    cls: Any = getattr(errors, match.group(1), None) if match else None
    if not (isinstance(cls, type) and issubclass(cls, TVMError)):
        cls = TVMError
    text = msg[match.end() :] if match else msg
    return cls(f"{what}: {text}" if what else text)  # type: ignore[no-any-return]


def _handle(value: int, free: str) -> Any:
    """A reference to the C object at ``value``, released with the C API function ``free``
    (``TVMArrayFree`` ...) when Python drops it (the glue's Handle: freed from C, so also at
    interpreter exit)."""
    handle_type = _handle_type
    if not handle_type:
        handle_type.append(kernel_services.glue().Handle)
    return handle_type[0](value, _address(free))


_handle_type: list[Any] = []
_free_functions: dict[str, int | None] = {}  # C function addresses by name


# -- Python -> C ---------------------------------------------------------------------------


def _raise_last_error() -> None:
    raise fail()


_configured: list[bool] = []


def _make_fast_call(handle: int) -> Any:
    """The glue's FastCall of the C function at ``handle`` (py_call.c), the glue told once
    what results become."""
    glue = kernel_services.glue()
    if not _configured:
        with _lock:
            if not _configured:
                glue.configure(
                    *(_address(n) for n in ("TVMArrayFree", "TVMObjectFree", "TVMArrayFromDLPack")),
                    *(_address(name) for name in ("tvmrt_value_peek", "tvmrt_value_tuple_item")),
                    _CArray,
                    Array,
                    ShapeTuple,
                    String,
                    to_python,
                    _raise_last_error,
                )
                glue.configure_host_copy(np.empty, _HOST_DTYPES)
                _configured.append(True)
    return glue.make_fast_call(_address("TVMFuncCall"), handle)


def _address(name: str) -> int:
    """The address of the C runtime's function ``name``."""
    address = _free_functions.get(name)
    if address is None:
        address = _free_functions[name] = ctypes.cast(getattr(_lib(), name), ctypes.c_void_p).value
    return address or 0


def _host_twin(arr: NDArray) -> Any:
    """A C array viewing ``arr``'s host bytes (no copy; TVMArrayFromDLPack of numpy's own
    export, whose deleter lets go of the bytes when the C side does), or None where the C
    runtime cannot view them (not compact or not 64-byte aligned, bool, lanes)."""
    view = arr._np
    if view is None or view.dtype.kind not in "iuf" or arr.dtype.lanes != 1:
        return None
    if view.dtype.itemsize * 8 != arr.dtype.bits:  # sub-byte ints: a byte each in numpy
        return None
    try:
        capsule = view.__dlpack__()
    except BufferError:  # read-only
        return None
    out = ctypes.c_void_p()
    if _lib().TVMArrayFromDLPack(capsule_pointer(capsule, LEGACY), ctypes.byref(out)):
        return None  # the capsule still owns its tensor: its destructor frees it
    rename_capsule(capsule, USED_LEGACY)  # the C array owns it now
    return _handle(int(out.value or 0), "TVMArrayFree")


def _array_arg(arr: NDArray, keep: list[object]) -> tuple[int, int]:
    """An NDArray as C sees it: the C array it views, or that views it (made once and kept
    with the NDArray), else its DLTensor (the C side copies it)."""
    twin = arr._c
    if twin is None:
        twin = arr._c = _host_twin(arr) or False
    keep.append(arr)  # alive (and its twin) until the call returns
    if twin:  # a C array's own NDArray, or its host twin
        return _NDARRAY, twin.value  # type: ignore[attr-defined]
    dl = arr.dltensor()
    return _CODE.DLTENSOR_HANDLE, ctypes.addressof(dl)


def _to_c(value: object, keep: list[object]) -> tuple[int, Any]:
    """(type code, TVMValue field value) for one argument; what C reads stays in keep."""
    if isinstance(value, NDArray):
        return _array_arg(value, keep)
    if isinstance(value, np.ndarray):
        return _array_arg(array(value), keep)
    if value is None:
        return _CODE.NULL, None
    if isinstance(value, bool | int | np.integer):
        return _CODE.INT, int(value)
    if isinstance(value, float | np.floating):
        return _CODE.FLOAT, float(value)
    if isinstance(value, str):
        data = value.encode("utf-8")
        keep.append(data)
        return _CODE.STR, data
    if isinstance(value, bytes | bytearray | memoryview):  # read in place (params blobs)
        view = np.frombuffer(value, dtype=np.uint8)
        blob = TVMByteArray(view.ctypes.data if view.size else None, view.size)
        keep += (view, blob)
        return _CODE.BYTES, ctypes.addressof(blob)
    if isinstance(value, DataType):
        return _CODE.TVM_TYPE, value.type_code | (value.bits << 8) | (value.lanes << 16)
    if isinstance(value, Device):
        raw = (value.device_type & 0xFFFFFFFF) | ((value.device_id & 0xFFFFFFFF) << 32)
        return _CODE.DLDEVICE, raw
    if isinstance(value, NativeModule):
        keep.append(value)
        return _CODE.MODULE_HANDLE, value.handle.value
    if isinstance(value, NativeFunction):
        keep.append(value)
        return (
            _CODE.OBJECT_HANDLE if value.is_object else _CODE.PACKED_FUNC_HANDLE
        ), value.handle.value
    if isinstance(value, ShapeTuple):
        return _c_object(keep, "runtime.ShapeTuple", *value)
    if isinstance(value, ADT):  # a Relay VM ADT; its tensors are copied unless C views them
        if value.tag:
            return _c_object(keep, "runtime.ADT", value.tag, *value.fields)
        return _c_object(keep, "runtime.Tuple", *value.fields)
    if isinstance(value, Array | list | tuple):
        return _c_object(keep, "runtime.Array", *value)
    extension = extension_arg(value)
    if extension is not None:
        keep.append(value)
        return extension
    if callable(value):
        func = function_from_python(value)
        keep.append(func)
        return _CODE.PACKED_FUNC_HANDLE, func.handle.value
    raise ArgumentTypeError(
        f"cannot pass a {type(value).__name__} to the C runtime; expected an NDArray, numpy "
        "array, int, float, str, bytes, None, DataType, Device, ShapeTuple, tuple, ADT, module "
        "or function"
    )


def _c_object(keep: list[object], maker: str, *args: object) -> tuple[int, Any]:
    """The C object the global function ``maker`` makes of ``args`` as an argument (its
    handle kept in ``keep``, not turned into a Python value)."""
    _code, address = c_global(maker)._call_packed(args, maker)
    keep.append(_handle(address, "TVMObjectFree"))
    return _CODE.OBJECT_HANDLE, address


def _set_value(slot: TVMValue, code: int, v: Any) -> None:
    if code == _FLOAT:
        slot.v_float64 = v
    elif code == _STR:
        slot.v_str = v
    elif code in (_INT, _CODE.TVM_TYPE, _CODE.DLDEVICE):
        slot.v_int64 = v
    else:
        slot.v_handle = v


def _pack(args: Sequence[object]) -> tuple[Any, Any, list[object]]:
    n = len(args)
    values = (TVMValue * max(n, 1))()
    codes = (ctypes.c_int * max(n, 1))()
    keep: list[object] = []
    for i, arg in enumerate(args):
        code, v = _to_c(arg, keep)
        codes[i] = code
        _set_value(values[i], code, v)
    return values, codes, keep


# -- C -> Python ---------------------------------------------------------------------------


@functools.lru_cache(maxsize=256)
def _dtype_of(code: int, bits: int, lanes: int) -> tuple[DataType, np.dtype[Any]]:
    """The DataType of a C array's DLPack dtype, and its numpy dtype."""
    dtype = DataType("bool") if code == 6 and bits == 8 else DataType.from_code(code, bits, lanes)
    return dtype, dtype.numpy_dtype  # tvm-ffi's bool is (6, 8): kDLBool


@functools.lru_cache(maxsize=64)
def _device_of(device_type: int, device_id: int) -> Device:
    return Device(device_type, device_id)


# the numpy dtypes host_copy may make, by DLPack code | bits << 8 | lanes << 16 (whole bytes,
# one lane; filled as results of each dtype are first read)
_HOST_DTYPES: dict[int, np.dtype[Any]] = {}


class _CArray(NDArray):
    """An NDArray of a C array, read when first used: a result of the C runtime is a handle
    (as TVM's is), and its shape, dtype and numpy view are made the first time anything
    asks (they fill the NDArray's slots; an unset slot is what sends the read here). Passed
    back to C it is its handle again, never read."""

    __slots__ = ()

    def numpy(self) -> np.ndarray[Any, Any]:
        """A numpy copy of the data, copied straight from the C array's host memory (no
        view of it is made for ``get_output(i).numpy()``; one call of the glue once the
        dtype was seen)."""
        owner: Any = self._owner  # the glue's Handle (set: no __getattr__)
        out: np.ndarray[Any, Any] | None = owner.host_copy()
        if out is not None:
            return out
        _, _, shape, code, bits, lanes, device_type, _ = owner.array_info()
        _, np_dtype = _dtype_of(code, bits, lanes)
        if device_type != 1 or lanes != 1 or np_dtype.itemsize * 8 != bits:
            return super().numpy()  # device memory, lanes, sub-byte types: through a view
        _HOST_DTYPES[code | bits << 8 | lanes << 16] = np_dtype
        out = np.empty(shape, np_dtype)
        owner.copy_to(out)
        return out

    def __getattr__(self, name: str) -> Any:
        if name not in NDArray.__slots__ or name in ("_owner", "__weakref__"):
            return object.__getattribute__(self, name)  # Python's own AttributeError
        owner = object.__getattribute__(self, "_owner")
        _fill(self, owner)
        return object.__getattribute__(self, name)


def _fill(arr: NDArray, owner: Any) -> None:
    """Give ``arr`` (a _CArray) the slots of an NDArray viewing its C array (what
    ``NDArray.from_host_memory`` and ``from_storage`` would set)."""
    data, byte_offset, shape, code, bits, lanes, device_type, device_id = owner.array_info()
    dtype, np_dtype = _dtype_of(code, bits, lanes)
    device = _device_of(device_type, device_id)
    if device_type != 1:
        full = _device_array(data, byte_offset, shape, dtype, device, owner)
        for slot in _FILLED:
            object.__setattr__(arr, slot, object.__getattribute__(full, slot))
    else:
        if lanes > 1:
            shape = (*shape, lanes)
        if not data or math.prod(shape) == 0:
            view = np.empty(shape, np_dtype)
        else:
            owner.__array_interface__ = {
                "data": (data + byte_offset, False),
                "shape": shape,
                "typestr": np_dtype.str,
                "version": 3,
            }
            view = np.asarray(owner)
        arr._np, arr._dtype, arr._device, arr._byte_offset = view, dtype, device, 0
        arr._shape = view.shape[:-1] if lanes > 1 else view.shape
        arr._storage = arr._dl = None
    arr._c = owner  # passed back to C, it is this array again


_FILLED = tuple(s for s in NDArray.__slots__ if s not in ("__weakref__", "_owner", "_c"))


def _ndarray(address: int) -> NDArray:
    """The C array at address (a reference the caller gives us) as an NDArray of it."""
    arr = object.__new__(_CArray)
    arr._owner = arr._c = _handle(address, "TVMArrayFree")
    return arr


def _device_array(
    data: int, byte_offset: int, shape: tuple[int, ...], dtype: DataType, device: Device, owner: Any
) -> NDArray:
    """A C array in device memory as an NDArray over a Storage of its pointer."""
    from tvmrt.runtime.device_api import Storage, get_device_api

    nbytes = math.prod(shape) * dtype.itemsize
    storage = Storage(get_device_api(device), device, data, byte_offset + nbytes)
    storage.obj = owner  # the C array outlives every view of its storage
    return NDArray.from_storage(storage, byte_offset, shape, dtype)


def _object(address: int) -> Any:
    """A C object handle (a reference the caller gives us) as a Python value."""
    handle = _handle(address, "TVMObjectFree")
    kind = c_global("tvmrt.relax.kind")._call((_CODE.OBJECT_HANDLE, address))[1]
    if kind == _RX_SHAPE:
        size = c_global("runtime.GetShapeTupleSize")
        elem = c_global("runtime.GetShapeTupleElem")
        n = size._call((_CODE.OBJECT_HANDLE, address))[1]
        return ShapeTuple(
            [elem._call((_CODE.OBJECT_HANDLE, address), (_CODE.INT, i))[1] for i in range(n)]
        )
    if kind == _RX_STR:
        _code, raw = c_global("runtime.GetFFIString")._call((_CODE.OBJECT_HANDLE, address))
        return String(ctypes.string_at(raw).decode("utf-8", "replace"))
    if kind == _RX_TUPLE:
        count = c_global("runtime.ArraySize")._call((_CODE.OBJECT_HANDLE, address))[1]
        item = c_global("runtime.ArrayGetItem")
        return Array(
            [
                to_python(*item._call((_CODE.OBJECT_HANDLE, address), (_CODE.INT, i)))
                for i in range(count)
            ]
        )
    if kind == _RELAY_ADT:
        return _relay_adt(handle, address)
    if kind == _RX_MAP:  # TVM's Map (a graph executor's get_input_info): a dict, in order
        flat = to_python(*c_global("runtime.MapItems")._call((_CODE.OBJECT_HANDLE, address)))
        return {str(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}
    return NativeFunction(
        handle, "closure" if kind == _RX_CLOSURE else f"object {kind}", is_object=True
    )


def _relay_adt(handle: Any, address: int) -> ADT:
    """A Relay VM ADT (whose fields are tensors and ADTs) as an :class:`ADT`, its tensors
    NDArrays of the C arrays. Walked with a worklist, not recursion: one nested 10^5 deep (a
    list a loop built) converts as a shallow one does."""
    size, tag, field = (c_global(f"runtime.GetADT{n}") for n in ("Size", "Tag", "Fields"))
    top: list[Any] = [None]
    work: list[tuple[Any, int, list[Any], int]] = [(handle, address, top, 0)]
    made: list[tuple[int, list[Any], list[Any], int]] = []  # parents before children
    while work:
        _owner, at, into, slot = work.pop()  # _owner: the reference, freed when dropped
        fields: list[Any] = [None] * size._call((_OBJECT, at))[1]
        for i in range(len(fields)):
            code, raw = field._call((_OBJECT, at), (_INT, i))
            if code == _NDARRAY:
                fields[i] = _ndarray(raw)
            else:  # GetADTFields gives tensors and ADTs only
                work.append((_handle(raw, "TVMObjectFree"), raw, fields, i))
        made.append((tag._call((_OBJECT, at))[1], fields, into, slot))
    for adt_tag, fields, into, slot in reversed(made):  # children first
        into[slot] = ADT(adt_tag, fields)
    return top[0]  # type: ignore[no-any-return]


def to_python(code: int, raw: int) -> Any:
    """A C return value (type code, raw 64 bits) as a Python value; a handle's reference is
    taken."""
    if code == _NDARRAY:  # the common result first
        return _ndarray(raw)
    if code == _INT:
        return raw
    if code == _CODE.FLOAT:
        return ctypes.c_double.from_buffer(ctypes.c_int64(raw)).value
    if code == _CODE.NULL:
        return None
    if code == _CODE.STR:
        return String(ctypes.string_at(raw).decode("utf-8", "replace"))
    if code == _CODE.HANDLE:
        return raw
    if code == _CODE.BYTES:  # a TVMByteArray the callee keeps until its next call
        array = TVMByteArray.from_address(raw)
        return ctypes.string_at(array.data, array.size) if array.size else b""
    if code == _OBJECT:
        return _object(raw)
    if code == _CODE.MODULE_HANDLE:
        return NativeModule(_handle(raw, "TVMModFree"))
    if code == _CODE.PACKED_FUNC_HANDLE:
        return NativeFunction(_handle(raw, "TVMFuncFree"), "function")
    if code == _CODE.TVM_TYPE:
        return DataType.from_code(raw & 0xFF, (raw >> 8) & 0xFF, (raw >> 16) & 0xFFFF)
    raise ArgumentTypeError(f"the C runtime returned a value of type code {code}")


# -- functions and modules -------------------------------------------------------------------


class NativeFunction(PackedFunc):
    """A packed function of the C runtime (or a closure: ``is_object``), called from Python.

    A call goes through the glue's FastCall (its arguments converted in C, the GIL released
    while it runs); one it cannot convert (strings, shapes, tuples, callables, arrays the C
    runtime cannot view) is converted here and called through ctypes."""

    __slots__ = ("_fast", "handle", "is_object")

    def __init__(self, handle: Any, name: str, is_object: bool = False) -> None:
        super().__init__(self._invoke, name)
        self.handle = handle
        self.is_object = is_object
        self._fast: Any = None

    @property
    def native_handle(self) -> int | None:
        """The C function's handle (None for a closure): compiled code that looks this
        function up (``TVMBackendGetFuncFromEnv``) calls it with ``TVMFuncCall`` directly."""
        return None if self.is_object else int(self.handle.value)

    def _call(self, *args: tuple[int, Any]) -> tuple[int, int]:
        """A raw call: (type code, value) arguments, the raw (code, 64 bits) result."""
        n = len(args)
        values = (TVMValue * max(n, 1))()
        codes = (ctypes.c_int * max(n, 1))()
        for i, (code, v) in enumerate(args):
            codes[i] = code
            if code == _CODE.INT:
                values[i].v_int64 = v
            else:
                values[i].v_handle = v
        ret, ret_code = TVMValue(), ctypes.c_int(_CODE.NULL)
        if _lib().TVMFuncCall(
            self.handle.value, values, codes, n, ctypes.byref(ret), ctypes.byref(ret_code)
        ):
            raise fail(self.name)
        return ret_code.value, int(ret.v_int64 or 0)

    def __call__(self, *args: Any) -> Any:
        fast = self._fast
        if fast is None:
            if self.is_object:
                raise ArgumentTypeError(
                    f"a {self.name} of the C runtime is called through its VM (invoke_closure)"
                )
            fast = self._fast = _make_fast_call(self.handle.value)
        result = fast(*args)
        if result is NotImplemented:  # an argument FastCall does not take
            return self._invoke_unprepared(args)
        if type(result) is tuple:
            return to_python(*result)
        return result

    def _invoke(self, *args: Any) -> Any:
        return self(*args)

    def _invoke_unprepared(self, args: Sequence[object]) -> Any:
        return to_python(*self._call_packed(args))

    def _call_packed(self, args: Sequence[object], what: str = "") -> tuple[int, int]:
        """A call with ``args`` converted here (:func:`_to_c`): the raw (code, 64 bits)
        result, not yet a Python value; an error is prefixed with ``what``, if any."""
        values, codes, keep = _pack(args)
        ret, ret_code = TVMValue(), ctypes.c_int(_CODE.NULL)
        rc = _lib().TVMFuncCall(
            self.handle.value, values, codes, len(args), ctypes.byref(ret), ctypes.byref(ret_code)
        )
        del keep
        if rc:
            raise fail(what)
        return ret_code.value, int(ret.v_int64 or 0)

    def __repr__(self) -> str:
        return f"NativeFunction({self.name!r})"


class NativeModule(Module):
    """A module of the C runtime (``load_module`` of a file the C runtime runs)."""

    def __init__(self, handle: Any, source_file: str | None = None) -> None:
        super().__init__()
        self.handle = handle
        self.source_file = source_file
        self._type_key: str | None = None
        self._cache: dict[str, NativeFunction] = {}

    @property
    def type_key(self) -> str:
        if self._type_key is None:
            _code, raw = c_global("runtime.ModuleGetTypeKey")._call(
                (_CODE.MODULE_HANDLE, self.handle.value)
            )
            self._type_key = ctypes.string_at(raw).decode()
        return self._type_key

    @property
    def imported_modules(self) -> list[Module]:
        size = c_global("runtime.ModuleImportsSize")._call(
            (_CODE.MODULE_HANDLE, self.handle.value)
        )[1]
        get = c_global("runtime.ModuleGetImport")
        mods: list[Module] = []
        for i in range(size):
            _code, raw = get._call((_CODE.MODULE_HANDLE, self.handle.value), (_CODE.INT, i))
            mods.append(NativeModule(_handle(raw, "TVMModFree")))
        return mods

    def import_module(self, module: Module) -> None:
        raise ArgumentTypeError(
            "a module of the C runtime imports only modules of the C runtime (its file's)"
        )

    def _get_function(self, name: str) -> PackedFunc | None:
        found = self._cache.get(name)
        if found is not None:
            return found
        out = ctypes.c_void_p()
        if _lib().TVMModGetFunction(self.handle.value, name.encode(), 0, ctypes.byref(out)):
            raise fail(name)
        if not out.value:
            return None
        func = NativeFunction(_handle(out.value, "TVMFuncFree"), name)
        self._cache[name] = func
        return func

    def find_function(self, name: str, query_imports: bool = False) -> PackedFunc | None:
        func = self._get_function(name)
        if func is not None or not query_imports:
            return func
        for module in self.imported_modules:
            found = module.find_function(name, True)
            if found is not None:
                return found
        return None


def c_global(name: str) -> NativeFunction:
    """The C runtime's global function ``name`` (FunctionNotFoundError if it has none)."""
    found = _globals.get(name)
    if found is None:
        out = ctypes.c_void_p()
        if _lib().TVMFuncGetGlobal(name.encode(), ctypes.byref(out)):
            raise fail(name)
        if not out.value:
            raise errors.GlobalFunctionNotFoundError(
                f"the C runtime has no global function {name!r}"
            )
        found = _globals.setdefault(name, NativeFunction(_handle(out.value, "TVMFuncFree"), name))
    return found


def has_global(name: str) -> bool:
    """Whether the C runtime has a global function ``name`` (its own, or one registered)."""
    try:
        c_global(name)
    except errors.GlobalFunctionNotFoundError:
        return False
    return True


def load_file(path: str, shown: str | None = None) -> NativeModule:
    """The C runtime's ``TVMModLoadFromFile`` of ``path`` (checked by Python's loaders first)."""
    out = ctypes.c_void_p()
    if _lib().TVMModLoadFromFile(path.encode(), b"so", ctypes.byref(out)):
        raise fail(f"cannot load {shown or path!r}")
    return NativeModule(_handle(int(out.value or 0), "TVMModFree"), shown or path)


def load_fresh(path: str, shown: str | None = None) -> NativeModule:
    """The C runtime's module of the shared library at ``path`` as its bytes are now
    (``TVMModLoadFromMemory``: a memfd of its own, as Python's loader does). ``dlopen`` knows a
    library by its path, so a library written over an earlier one at that path (a second
    model uploaded to an RPC server under the same name) would come back as the first."""
    from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, read_regular

    data = read_regular(path, "the library", MAX_LIBRARY_BYTES, errors.ModuleLoadError)
    out = ctypes.c_void_p()
    if _lib().TVMModLoadFromMemory(
        ctypes.c_char_p(data), ctypes.c_size_t(len(data)), b"so", ctypes.byref(out)
    ):
        raise fail(f"cannot load {shown or path!r}")
    return NativeModule(_handle(int(out.value or 0), "TVMModFree"), shown or path)


# -- Python functions handed to C ----------------------------------------------------------

_Finalizer = ctypes.CFUNCTYPE(None, ctypes.c_void_p)
_CFunc = ctypes.CFUNCTYPE(
    ctypes.c_int,
    ctypes.POINTER(TVMValue),
    ctypes.POINTER(ctypes.c_int),
    ctypes.c_int,
    ctypes.c_void_p,
    ctypes.c_void_p,
)


def function_from_python(func: Callable[..., Any]) -> NativeFunction:
    """A C function (``TVMFuncCreateFromCFunc``) that calls ``func`` with Python values."""

    def call(args: Any, codes: Any, n: int, ret: int, resource: int) -> int:
        try:
            values = [_borrowed(codes[i], args[i]) for i in range(n)]
            result = func(*values)
            if result is not None:
                r_values, r_codes, keep = _pack([result])
                _callbacks.append(keep)  # lives until the C side has copied it
                del _callbacks[:-64]
                if _lib().TVMCFuncSetReturn(ret, r_values, r_codes, 1):
                    raise fail()
            return 0
        except Exception as exc:  # a callback must not raise into C
            _lib().TVMAPISetLastError(f"{type(exc).__name__}: {exc}".encode("utf-8", "replace"))
            return -1

    cfunc = _CFunc(call)
    _callbacks.append(cfunc)
    out = ctypes.c_void_p()
    if _lib().TVMFuncCreateFromCFunc(
        ctypes.cast(cfunc, ctypes.c_void_p), None, None, ctypes.byref(out)
    ):
        raise fail("TVMFuncCreateFromCFunc")
    return NativeFunction(
        _handle(int(out.value or 0), "TVMFuncFree"), getattr(func, "__name__", "python")
    )


def _borrowed(code: int, value: TVMValue) -> Any:
    """An argument C lends a Python function (objects are retained for Python's copy)."""
    if code in (_CODE.INT, _CODE.UINT):
        return int(value.v_int64)
    if code == _CODE.FLOAT:
        return float(value.v_float64)
    if code == _CODE.NULL:
        return None
    if code == _CODE.STR:
        return String((value.v_str or b"").decode("utf-8", "replace"))
    if code == _CODE.HANDLE:
        return value.v_handle
    if code == _CODE.TVM_TYPE:
        raw = value.v_int64 & 0xFFFFFFFF
        return DataType.from_code(raw & 0xFF, (raw >> 8) & 0xFF, raw >> 16)
    if code in (
        _CODE.NDARRAY_HANDLE,
        _CODE.OBJECT_HANDLE,
        _CODE.MODULE_HANDLE,
        _CODE.PACKED_FUNC_HANDLE,
    ):
        retain = c_global("tvmrt.retain")
        retain._call((code, value.v_handle))
        return to_python(code, int(value.v_handle or 0))
    if code == _CODE.DLTENSOR_HANDLE:
        from tvmrt.runtime.packed_values import ndarray_from_dltensor

        view = ndarray_from_dltensor(value.v_handle)
        return array(view.numpy(), device=view.device)
    raise ArgumentTypeError(f"a C function passed Python a value of type code {code}")

"""``NativeFunc``: a global function implemented in C inside tvmrt's native backend.

The functions live in ``src/tvmrt/_native/sort.c``. Their handle is the address of an entry
of the native table; ``TVMBackendGetFuncFromEnv`` hands that address to kernels
(``tvmrt.runtime.kernel_callbacks``), and ``TVMFuncCall`` calls it without entering Python. A
call from Python packs the arguments with TVM's legacy ABI and goes through the same
``TVMFuncCall``.
"""

from __future__ import annotations

import ctypes
from typing import Any

from tvmrt.error import InvalidArgumentError, UnsupportedError
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import TVMFuncCallType, TVMValue
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.packed_values import from_tvm_value, pack_args

__all__ = ["NativeFunc"]

_Lookup = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_char_p)


class NativeFunc(PackedFunc):
    """The native function ``name`` of tvmrt's backend library.

    Raises
    ------
    UnsupportedError
        If the backend library has no function of that name.
    """

    __slots__ = ("_call_c", "native_handle")

    def __init__(self, name: str) -> None:
        lib = kernel_services.native_library()
        handle = _Lookup(("tvmrt_native_function", lib))(name.encode("utf-8"))
        if not handle:
            raise UnsupportedError(f"tvmrt's native backend has no function {name!r}")
        self.native_handle: int = int(handle)
        self._call_c = TVMFuncCallType(("TVMFuncCall", lib))
        super().__init__(self._invoke, name)

    def __call__(self, *args: Any) -> Any:
        return self._invoke(*args)

    def _invoke(self, *args: Any) -> Any:
        values, codes, keep = pack_args(args)
        ret, ret_code = TVMValue(), ctypes.c_int(4)
        kernel_services.clear_last_error()
        rc = self._call_c(
            self.native_handle, values, codes, len(args), ctypes.byref(ret), ctypes.byref(ret_code)
        )
        del keep
        if rc != 0:
            raise InvalidArgumentError(kernel_services.take_last_error() or f"{self.name} failed")
        return from_tvm_value(ret, ret_code.value)

"""The function environment's answers are kept per handle while the module lives.

Host code calls its kernels through ``TVMFuncCall`` on every run; ``kernel_callbacks``
resolves a handle's name once when the answer comes from an import or the registry, looks a
function of the module itself up on each call (a kept answer would keep the module, and its
library, alive), and drops kept answers when the module goes. The callbacks are driven here
as the native backend drives them, with C values made by ctypes.
"""

from __future__ import annotations

import ctypes
import gc

from tvmrt.runtime import kernel_callbacks
from tvmrt.runtime._ctypes_api import TVMValue
from tvmrt.runtime.packed_func import PackedFunc


class Source:
    """A module context: `own` functions, then `imported` ones (query_imports), counted."""

    def __init__(self) -> None:
        self.own = {"self_fn": PackedFunc(lambda x: x + 1, "self_fn")}
        self.imported = {"kernel": PackedFunc(lambda x: x * 2, "kernel")}
        self.queries: list[tuple[str, bool]] = []

    def find_function(self, name: str, query_imports: bool = False) -> PackedFunc | None:
        self.queries.append((name, query_imports))
        if name in self.own:
            return self.own[name]
        return self.imported.get(name) if query_imports else None


def handle_of(token: int, name: str) -> int:
    out = (ctypes.c_void_p * 1)()
    assert kernel_callbacks._get_func_from_env(token, name.encode(), out) == 0
    return int(out[0] or 0)


def call(handle: int, x: int) -> int:
    args = (TVMValue * 1)()
    args[0].v_int64 = x
    codes = (ctypes.c_int * 1)(0)
    ret = (TVMValue * 1)()
    ret_code = (ctypes.c_int * 1)(0)
    assert kernel_callbacks._func_call(handle, args, codes, 1, ret, ret_code) == 0
    return int(ret[0].v_int64)


def test_an_imported_function_is_resolved_once_per_handle() -> None:
    source = Source()
    token = kernel_callbacks.register_module_context(source)
    handle = handle_of(token, "kernel")
    source.queries.clear()
    assert [call(handle, i) for i in range(50)] == [2 * i for i in range(50)]
    assert len(source.queries) <= 2  # the first call only (own, then imports)


def test_a_function_of_the_module_itself_is_not_kept() -> None:
    source = Source()
    token = kernel_callbacks.register_module_context(source)
    handle = handle_of(token, "self_fn")
    source.queries.clear()
    assert [call(handle, i) for i in range(5)] == [i + 1 for i in range(5)]
    assert len(source.queries) == 5  # looked up on each call
    assert handle not in kernel_callbacks._resolved


def test_kept_answers_go_with_the_module() -> None:
    source = Source()
    token = kernel_callbacks.register_module_context(source)
    handle = handle_of(token, "kernel")
    assert call(handle, 3) == 6
    assert kernel_callbacks._resolved[handle].name == "kernel"
    del source
    gc.collect()
    assert handle not in kernel_callbacks._resolved
    assert token not in kernel_callbacks._modules

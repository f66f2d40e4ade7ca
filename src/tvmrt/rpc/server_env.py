"""The functions a TVM client calls by name on the server, over one private work folder.

``tvm.rpc.server.upload/download/remove/listdir/workpath/load_module/
download_linked_module/ModuleGetFunction/ImportModule``, ``runtime.RPCTimeEvaluator``,
the ``cache_flush_cpu_non_first_arg`` preprocessor and TVM's ``runtime.GetShapeTupleSize`` /
``GetShapeTupleElem`` (a Relax VM's shape results stay on the server as objects: the client
reads them so); every other name is looked up in
tvmrt's global registry (``tvm.graph_executor.create``, ``tvm.contrib.random.*``, ...).
A file name that would leave the work folder (absolute, ``..``, a symlink out) is refused.
"""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, read_regular
from tvmrt.error import (
    ArgumentTypeError,
    FunctionNotFoundError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    ModuleLoadError,
)
from tvmrt.runtime.benchmark import time_evaluate
from tvmrt.runtime.device import Device
from tvmrt.runtime.module import Module, load_module
from tvmrt.runtime.object import ShapeTuple
from tvmrt.runtime.packed_func import PackedFunc
from tvmrt.runtime.registry import get_global_func

__all__ = ["ServerEnv", "cache_flush_cpu_non_first_arg"]

_FLUSH_BYTES = 64 << 20  # more than the last-level cache of any board tvmrt targets
_flush_buffer: np.ndarray | None = None


def cache_flush_cpu_non_first_arg(*args: Any) -> None:
    """TVM's ``cache_flush_cpu_non_first_arg``: evict the kernel's inputs from the caches.

    TVM flushes the cache lines of every argument but the first (the output); tvmrt
    streams a 64 MiB buffer through the caches, which evicts them all.
    """
    global _flush_buffer
    if _flush_buffer is None:
        _flush_buffer = np.zeros(_FLUSH_BYTES // 8, dtype=np.int64)
    _flush_buffer += 1


def _shape(value: object, func: str) -> ShapeTuple:
    if not isinstance(value, ShapeTuple):
        raise ArgumentTypeError(f"{func} takes a ShapeTuple, got {type(value).__name__}")
    return value


def shape_tuple_size(shape: object) -> int:
    """TVM's ``runtime.GetShapeTupleSize``: the number of dimensions of a shape."""
    return len(_shape(shape, "runtime.GetShapeTupleSize"))


def shape_tuple_elem(shape: object, index: object) -> int:
    """TVM's ``runtime.GetShapeTupleElem``: dimension ``index`` of a shape."""
    dims = _shape(shape, "runtime.GetShapeTupleElem")
    if not isinstance(index, int) or not 0 <= index < len(dims):
        raise IndexOutOfRangeError(
            f"runtime.GetShapeTupleElem: index {index!r} of a shape of {len(dims)} dimensions"
        )
    return int(dims[index])


class ServerEnv:
    """The by-name functions of one session, rooted at ``workdir``."""

    def __init__(self, workdir: Path, max_bytes: int | None = None) -> None:
        self.workdir = workdir.resolve()
        self.max_bytes = max_bytes
        self.functions: dict[str, Callable[..., Any]] = {
            "tvm.rpc.server.upload": self.upload,
            "tvm.rpc.server.download": self.download,
            "tvm.rpc.server.remove": self.remove,
            "tvm.rpc.server.listdir": self.listdir,
            "tvm.rpc.server.workpath": self.workpath,
            "tvm.rpc.server.load_module": self.load_module,
            "tvm.rpc.server.download_linked_module": self.download_linked_module,
            "tvm.rpc.server.ModuleGetFunction": self.module_get_function,
            "tvm.rpc.server.ImportModule": self.import_module,
            "runtime.RPCTimeEvaluator": self.time_evaluator,
            "cache_flush_cpu_non_first_arg": cache_flush_cpu_non_first_arg,
            "runtime.GetShapeTupleSize": shape_tuple_size,
            "runtime.GetShapeTupleElem": shape_tuple_elem,
        }

    def lookup(self, name: str) -> Callable[..., Any] | None:
        """The function ``name``, or ``None`` (the client then sees a null handle)."""
        found = self.functions.get(name)
        if found is not None:
            return found
        return get_global_func(name, allow_missing=True)

    # -- files ------------------------------------------------------------------------
    def path(self, name: str) -> Path:
        """``name`` inside the work folder, refusing any name that leaves it."""
        if not isinstance(name, str) or "\0" in name:
            raise InvalidArgumentError(f"remote file name {name!r}: expected a relative path")
        candidate = (self.workdir / (name or ".")).resolve()
        if candidate != self.workdir and self.workdir not in candidate.parents:
            raise InvalidArgumentError(
                f"remote file name {name!r} leaves the server's work folder: refused"
            )
        return candidate

    def workpath(self, name: str) -> str:
        return str(self.path(name))

    def upload(self, name: str, data: bytes) -> None:
        target = self.path(name)
        if self.max_bytes is not None:
            held = sum(
                f.stat().st_size for f in self.workdir.rglob("*") if f.is_file() and f != target
            )
            if held + len(data) > self.max_bytes:
                raise InvalidArgumentError(
                    f"upload of {name!r} ({len(data)} bytes): the session's folder holds "
                    f"{held} bytes and may hold {self.max_bytes} (--max-workdir-mb)"
                )
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)

    def download(self, name: str) -> bytes:
        # a regular file within the library bound: a FIFO in the folder never blocks the server
        return read_regular(self.path(name), "download", MAX_LIBRARY_BYTES, InvalidArgumentError)

    def remove(self, name: str) -> None:
        """TVM's ``RemoveFile`` (``std::remove``): a file, or an empty folder; a missing
        name is not an error (MetaSchedule removes files that may not exist)."""
        target = self.path(name)
        if target == self.workdir:
            return
        with contextlib.suppress(FileNotFoundError):
            if target.is_dir():
                with contextlib.suppress(OSError):
                    target.rmdir()  # only when empty, as std::remove
            else:
                target.unlink()

    def listdir(self, name: str = ".") -> str:
        # TVM's C++ RPC app: every entry followed by ","
        return "".join(f"{entry}," for entry in sorted(os.listdir(self.path(name or "."))))

    def load_module(self, name: str, *_legacy: Any) -> Module:
        # hhb-tvm 3.2.3 sends (name, fmt, ...): the extra arguments are ignored
        return load_module(self.path(name))

    def download_linked_module(self, name: str) -> bytes:
        from tvmrt.runtime.loaders.link import link_archive, link_object

        path = self.path(name)
        if path.suffix == ".tar":
            return link_archive(str(path)).read_bytes()
        if path.suffix == ".o":
            return link_object(str(path)).read_bytes()
        if path.suffix in (".so", ".dylib"):
            return read_regular(path, "the library", MAX_LIBRARY_BYTES, ModuleLoadError)
        raise ModuleLoadError(f"download_linked_module: do not know how to link {name!r}")

    # -- modules ----------------------------------------------------------------------
    @staticmethod
    def module_get_function(mod: Module, name: str, query_imports: object = False) -> Any:
        return mod.find_function(name, bool(query_imports))

    @staticmethod
    def import_module(mod: Module, dep: Module) -> None:
        mod.import_module(dep)

    def time_evaluator(
        self,
        mod: Module | None,
        name: str,
        dev_type: int,
        dev_id: int,
        number: int,
        repeat: int,
        min_repeat_ms: int,
        limit_zero_time_iterations: int,
        cooldown_interval_ms: int,
        repeats_to_cooldown: int,
        cache_flush_bytes: int = 0,
        f_preproc_name: str = "",
    ) -> PackedFunc:
        """TVM's ``runtime.RPCTimeEvaluator``: a function returning float64 seconds per
        repeat, packed as bytes (``mod`` None: ``name`` is a global function)."""
        if mod is None:
            named = self.lookup(name)
            if named is None:
                raise FunctionNotFoundError(f"RPCTimeEvaluator: no global function {name!r}")
            func = named
        else:
            found = mod.find_function(name, True)
            if found is None:
                raise FunctionNotFoundError(f"Cannot find {name} in the module or its imports")
            func = found
        preproc: Callable[..., Any] | None = None
        if f_preproc_name == "cache_flush_cpu_non_first_arg":
            preproc = cache_flush_cpu_non_first_arg
        elif f_preproc_name:
            preproc = get_global_func(f_preproc_name)
        evaluate = time_evaluate(
            func,
            Device(dev_type, dev_id),
            number,
            repeat,
            min_repeat_ms,
            limit_zero_time_iterations,
            cooldown_interval_ms,
            repeats_to_cooldown,
            cache_flush_bytes,
            preproc,
        )

        def timed(*args: Any) -> bytes:
            results = evaluate(*args).results
            return struct.pack(f"<{len(results)}d", *results)

        return PackedFunc(timed, f"time_evaluator({name})")

"""Device kernels, backend-neutral: TVM's ``FunctionInfo`` table and launch convention.

Every TVM device module (OpenCL, CUDA, Vulkan, Metal...) saves the same table: per kernel,
its argument types and its *launch-parameter tags*. Compiled host code calls a kernel
with its arguments (buffers as data handles, then scalars) followed by one integer per
tag: ``blockIdx.x`` is a grid extent, ``threadIdx.y`` a block extent, and a final
``tir.use_dyn_shared_memory`` tag means one more value, the dynamic shared memory size.
A repeated tag overwrites the extent it names (the last value wins); a zero or negative
extent leaves it at 1, as in TVM's ``LaunchParamConfig``.

A backend module subclasses :class:`DeviceKernel` and implements
:meth:`DeviceKernel.launch`; parsing, argument checks and the grid/block computation
live here.
"""

from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass
from typing import Any

from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import KernelError, ModuleLoadError
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import Storage, get_device_api
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.kernel_services import native_library, set_last_error
from tvmrt.runtime.packed_func import PackedFunc

__all__ = [
    "DYN_SHARED_MEMORY_TAG",
    "FunctionInfo",
    "check_kernel_limits",
    "LaunchConfig",
    "WorkLoad",
    "DeviceKernel",
    "read_function_table",
    "read_kernel_table",
    "install_device_workspace",
]

DYN_SHARED_MEMORY_TAG = "tir.use_dyn_shared_memory"
# TVM >= 0.24 spells the tags ``tirx.``; launch-flag tags (>= 0.21) carry no value
_DYN_TAGS = frozenset({DYN_SHARED_MEMORY_TAG, "tirx.use_dyn_shared_memory"})
FLAG_TAGS = frozenset(
    f"{p}.{f}" for p in ("tir", "tirx") for f in
    ("use_programtic_dependent_launch", "use_cooperative_launch")
)  # fmt: skip
_RANKS = {"blockIdx": 0, "threadIdx": 1}
# what a kernel table may hold, as the C runtime (kernel_table.c) allows
MAX_KERNEL_ARGS = 1024
MAX_VALUED_TAGS = 16
_DIMS = {"x": 0, "y": 1, "z": 2}


@dataclass(frozen=True)
class FunctionInfo:
    """One kernel's entry in a device module: name, argument dtypes, launch-param tags."""

    name: str
    arg_types: tuple[DataType, ...]
    launch_param_tags: tuple[str, ...]
    arg_extra_tags: tuple[int, ...] = ()  # TVM >= 0.21: per argument, 1 = a TMA tensor map

    @property
    def handle_args(self) -> tuple[bool, ...]:
        """Per argument, whether it is a buffer (``handle``) rather than a scalar."""
        return tuple(t.type_code == 3 for t in self.arg_types)


def check_kernel_limits(key: str, num_args: int, tags: tuple[str, ...] | list[str]) -> None:
    """A kernel's arguments and valued launch tags within the C runtime's limits (and the
    tags ones TVM knows); ModuleLoadError naming the kernel otherwise."""
    if num_args > MAX_KERNEL_ARGS:
        raise ModuleLoadError(
            f"kernel '{key}' has {num_args} arguments (at most {MAX_KERNEL_ARGS})"
        )
    if sum(_tag_slot(tag, key) >= 0 for tag in tags) > MAX_VALUED_TAGS:
        raise ModuleLoadError(
            f"kernel '{key}' has more than {MAX_VALUED_TAGS} launch param tags that take a "
            "value (TVM writes at most six: blockIdx.x/y/z, threadIdx.x/y/z)"
        )


def _read_info(reader: ByteReader, key: str, extra_tags: bool) -> FunctionInfo:
    name = reader.string(f"FunctionInfo name of {key!r}")
    n = reader.count(f"number of argument types of {key!r}", 4)
    check_kernel_limits(key, n, ())
    types = []
    for i in range(n):
        code, bits, lanes = reader.u8("type code"), reader.u8("bits"), reader.u16("lanes")
        try:
            types.append(DataType.from_code(code, bits, lanes))
        except (ValueError, TypeError) as exc:
            raise reader.fail(f"kernel {key!r}: argument {i} has an invalid dtype: {exc}") from None
    tags = tuple(reader.strings(f"launch param tags of {key!r}"))
    check_kernel_limits(key, n, tags)
    extra: tuple[int, ...] = ()
    if extra_tags:
        at = reader.offset
        m = reader.count(f"number of argument extra tags of {key!r}", 4)
        if m != n:
            raise reader.fail(f"kernel {key!r} has {n} arguments but {m} extra tags", at)
        extra = tuple(reader.i32("argument extra tag") for _ in range(m))
        if any(t not in (0, 1) for t in extra):
            raise reader.fail(f"kernel {key!r}: unknown argument extra tag in {extra}", at)
    return FunctionInfo(name or key, tuple(types), tags, extra)


def read_function_table(reader: ByteReader, extra_tags: bool = False) -> dict[str, FunctionInfo]:
    """Read TVM's ``unordered_map<string, FunctionInfo>`` (dmlc stream layout); TVM >= 0.21
    adds ``vec<i32> arg_extra_tags`` to each entry (``extra_tags``)."""
    n = reader.count("number of kernels", 8 * 4)
    table: dict[str, FunctionInfo] = {}
    for i in range(n):
        key = reader.string(f"kernel name {i}")
        table[key] = _read_info(reader, key, extra_tags)
    return table


def read_kernel_table(reader: ByteReader, what: str) -> tuple[dict[str, FunctionInfo], bool]:
    """A device module's kernel table (CUDA's, OpenCL's) in TVM >= 0.21's layout if the bytes
    hold it, else the older one; and whether it was the newer. ``what`` names the module.

    When neither reads, the error is the one of the layout that read further (the other
    misread a field as a length), a short read named as the module's (as the C runtime).
    """
    at = reader.offset
    try:
        return read_function_table(reader, extra_tags=True), True
    except ModuleLoadError as exc:
        # kept without its traceback: a frame holding the exception that holds the frame
        # is a cycle, and it would keep the callers' frames (their open files) alive
        first, reached = exc.with_traceback(None), reader.offset
    reader.offset = at
    try:
        return read_function_table(reader), False
    except ModuleLoadError as exc:
        chosen = first if reached > reader.offset else exc.with_traceback(None)
    text, prefix = str(chosen), f"{reader.what}: "
    if not text.startswith(prefix):
        raise chosen from None  # a kernel's own check
    raise ModuleLoadError(f"{what}: kernel table: {text[len(prefix) :]}") from None


def _tag_slot(tag: str, kernel: str) -> int:
    """Work-size slot of a launch tag: 0-2 grid x/y/z, 3-5 block x/y/z; -1: dyn. shmem;
    -2: a launch flag (no value)."""
    if tag in _DYN_TAGS:
        return -1
    if tag in FLAG_TAGS:
        return -2
    rank, _, dim = tag.partition(".")
    if rank not in _RANKS or dim not in _DIMS:
        raise ModuleLoadError(
            f"kernel {kernel!r}: launch param tag {tag!r} is not blockIdx.x/y/z, "
            f"threadIdx.x/y/z or {DYN_SHARED_MEMORY_TAG}"
        )
    return _RANKS[rank] * 3 + _DIMS[dim]


@dataclass(frozen=True)
class WorkLoad:
    """Grid and block extents of one launch, and its dynamic shared memory in bytes."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dyn_shared_memory: int
    work_dim: int

    @property
    def global_size(self) -> tuple[int, ...]:
        """Total work items per used dimension (OpenCL's global work size)."""
        return tuple(g * b for g, b in zip(self.grid, self.block, strict=True))[: self.work_dim]

    @property
    def local_size(self) -> tuple[int, ...]:
        """Block extents per used dimension (OpenCL's local work size)."""
        return self.block[: self.work_dim]


@dataclass(frozen=True)
class LaunchConfig:
    """How to read a launch's extents from the trailing arguments of a kernel call."""

    num_args: int
    slots: tuple[int, ...]
    dyn_shared_memory: bool
    work_dim: int
    flags: frozenset[str] = frozenset()

    @classmethod
    def from_info(cls, info: FunctionInfo, kernel: str) -> LaunchConfig:
        """The launch convention of ``info`` (TVM's ``LaunchParamConfig::Init``)."""
        slots = []
        dyn = False
        valued = [t for t in info.launch_param_tags if t not in FLAG_TAGS]
        for i, tag in enumerate(valued):
            slot = _tag_slot(tag, kernel)
            if slot < 0:
                if i != len(valued) - 1:
                    raise ModuleLoadError(
                        f"kernel {kernel!r}: {DYN_SHARED_MEMORY_TAG} must be the last tag"
                    )
                dyn = True
            else:
                slots.append(slot)
        used = {s % 3 for s in slots}
        work_dim = max(used) + 1 if used else 1
        flags = frozenset(t.partition(".")[2] for t in info.launch_param_tags if t in FLAG_TAGS)
        return cls(len(info.arg_types), tuple(slots), dyn, work_dim, flags)

    @property
    def num_launch_args(self) -> int:
        """Trailing integer arguments a call carries."""
        return len(self.slots) + int(self.dyn_shared_memory)

    def extract(self, values: tuple[Any, ...]) -> WorkLoad:
        """The work load from the launch arguments (``values`` after the kernel arguments)."""
        size = [1] * 6
        for slot, value in zip(self.slots, values, strict=False):
            if int(value) > 0:
                size[slot] = int(value)
        dyn = int(values[len(self.slots)]) if self.dyn_shared_memory else 0
        return WorkLoad(
            (size[0], size[1], size[2]), (size[3], size[4], size[5]), dyn, self.work_dim
        )


class DeviceKernel(PackedFunc):
    """A device kernel called by host code: checks arguments, computes the launch, runs it.

    Subclasses implement :meth:`launch` for their device API.
    """

    __slots__ = ("config", "info")

    def __init__(self, info: FunctionInfo, name: str) -> None:
        super().__init__(self._call, name)
        self.info = info
        self.config = LaunchConfig.from_info(info, name)

    def _call(self, *args: Any) -> None:
        cfg = self.config
        expected = cfg.num_args + cfg.num_launch_args
        if len(args) != expected:
            raise KernelError(
                f"kernel {self.name!r} takes {cfg.num_args} arguments and "
                f"{cfg.num_launch_args} launch parameters, got {len(args)} values"
            )
        self.launch(args[: cfg.num_args], cfg.extract(args[cfg.num_args :]))

    def launch(self, args: tuple[Any, ...], work: WorkLoad) -> None:
        """Enqueue the kernel on ``args`` (handles and scalars) with ``work``'s extents."""
        raise NotImplementedError


# -- device workspace: TVMBackendAllocWorkspace for device types other than the CPU -----------

_AllocCallback = ctypes.CFUNCTYPE(ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint64)
_FreeCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_workspaces: dict[int, Storage] = {}  # handle -> storage, while host code holds it
_installed: list[Any] = []
_install_lock = threading.Lock()


def _alloc_workspace(device_type: int, device_id: int, nbytes: int) -> int | None:
    try:
        dev = Device(device_type, device_id)
        storage = get_device_api(dev).alloc_workspace(dev, int(nbytes))
        _workspaces[storage.handle] = storage
        return storage.handle
    except BaseException as exc:  # a ctypes callback must not raise: report it to the kernel
        set_last_error(f"TVMBackendAllocWorkspace: {type(exc).__name__}: {exc}")
        return None


def _free_workspace(device_type: int, device_id: int, ptr: int | None) -> int:
    storage = _workspaces.pop(ptr or 0, None)
    if storage is None:
        set_last_error(
            f"TVMBackendFreeWorkspace: {ptr or 0:#x} is not workspace of device type "
            f"{device_type} allocated by TVMBackendAllocWorkspace"
        )
        return -1
    storage.api.free_workspace(storage)
    return 0


def install_device_workspace() -> None:
    """Serve ``TVMBackendAllocWorkspace`` on non-CPU devices from their backends (once)."""
    with _install_lock:
        if _installed:
            return
        lib = native_library()
        alloc, free = _AllocCallback(_alloc_workspace), _FreeCallback(_free_workspace)
        _installed.extend([alloc, free])  # callbacks must outlive every kernel library
        lib.tvmrt_set_device_workspace_callbacks.restype = None
        lib.tvmrt_set_device_workspace_callbacks.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        lib.tvmrt_set_device_workspace_callbacks(
            ctypes.cast(alloc, ctypes.c_void_p), ctypes.cast(free, ctypes.c_void_p)
        )

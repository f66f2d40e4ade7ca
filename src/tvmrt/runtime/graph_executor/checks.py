"""Checks shared by the executor's entry points: keys, external arrays, copies out.

One message per situation: an unknown input name, an index out of range, a key of the
wrong type, an array that cannot stand in for an entry, an ``out=`` array of another
shape or dtype. Every error names the item and says what was expected.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tvmrt.error import ArgumentTypeError, ArrayError, InputIndexError, InputNotFoundError
from tvmrt.runtime.device import Device
from tvmrt.runtime.device_api import ALLOC_ALIGNMENT
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.ndarray import NDArray

__all__ = [
    "preview",
    "unknown_input",
    "unknown_output",
    "check_index",
    "external_problem",
    "is_read_only",
    "copy_out",
]


def preview(names: Sequence[str], limit: int = 10) -> str:
    """``['a', 'b', ... (n in all)]`` for error messages."""
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f", ... ({len(names)} in all)" if len(names) > limit else ""
    return f"[{shown}{more}]"


def unknown_input(key: object, names: Sequence[str]) -> InputNotFoundError:
    """The error for an input name the graph does not have."""
    return InputNotFoundError(f"graph has no input {key!r}; inputs are {preview(names)}")


def unknown_output(key: object, names: Sequence[str]) -> InputNotFoundError:
    """The error for an output name the graph does not have."""
    return InputNotFoundError(f"graph has no output {key!r}; outputs are {preview(names)}")


def check_index(what: str, key: object, count: int) -> int:
    """``key`` as an index into ``count`` inputs or outputs (``what``), or a clear error."""
    if isinstance(key, bool) or not isinstance(key, int | np.integer):
        raise ArgumentTypeError(
            f"{what} key must be a name or an index, got {type(key).__name__} {key!r}"
        )
    if not 0 <= key < count:
        plural = "" if count == 1 else "s"
        raise InputIndexError(
            f"{what} index {key} is out of range: the graph has {count} {what}{plural}"
        )
    return int(key)


def is_read_only(arr: NDArray) -> bool:
    """Whether ``arr``'s host memory was handed over as read-only (DLPack flag, numpy flag).

    Device memory has no such flag: it is writable by the device's kernels.
    """
    view = arr.host_view
    return view is not None and not view.flags.writeable


READ_ONLY_WRITTEN = (
    "the array is read-only (a read-only mapping, immutable bytes or writeable=False), but "
    "kernels write this entry; pass writable memory"
)


def external_problem(
    arr: NDArray,
    shape: tuple[int, ...],
    dtype: DataType,
    device: Device,
    written: bool,
) -> str | None:
    """Why ``arr`` cannot be used in place of an entry, or None if it can.

    ``written``: a kernel writes the entry, so read-only memory is refused (writing
    it would crash on a read-only mapping or change bytes its owner believes immutable);
    that is checked first, as the face checks it before the C executor checks the rest.
    """
    if written and is_read_only(arr):
        return READ_ONLY_WRITTEN
    if arr.shape != shape or arr.dtype != dtype:
        return (
            f"expected shape {shape} and dtype {dtype}, got shape {arr.shape} and dtype {arr.dtype}"
        )
    if arr.device != device:
        return f"expected an array on {device}, got one on {arr.device}"
    if not arr.is_contiguous:
        return "the array is not contiguous (kernels need dense row-major data)"
    if arr.data_ptr % ALLOC_ALIGNMENT:
        return (
            f"data at {arr.data_ptr:#x} is not {ALLOC_ALIGNMENT}-byte aligned, which "
            "compiled kernels require; use set_input (it copies) or allocate with "
            "tvmrt.runtime.empty (TVMArrayAlloc from C)"
        )
    return None


def check_out(out: object, what: str) -> None:
    """Refuse an ``out`` argument of ``what`` (``get_output(0)``) that is no NDArray or is
    read-only: the C executor checks its shape and dtype, but cannot see either."""
    if not isinstance(out, NDArray):
        raise ArgumentTypeError(f"{what}: out must be an NDArray, got {type(out).__name__}")
    if is_read_only(out):
        raise ArrayError(f"{what}: out is read-only")


def copy_out(src: NDArray, out: NDArray, what: str) -> None:
    """Copy ``src`` into ``out``, which must have the same shape and dtype (no reinterpreting)."""
    check_out(out, what)
    if out.shape != src.shape or out.dtype != src.dtype:
        raise ArrayError(
            f"{what}: out has shape {out.shape} and dtype {out.dtype}, expected shape "
            f"{src.shape} and dtype {src.dtype}"
        )
    src.copyto(out)

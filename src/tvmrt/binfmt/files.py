"""Reading an artifact's files: regular files only, size-checked before a byte is read.

Every reader of a model file (graph JSON, params, ``compiled.meta``, an MLF folder's
files, libraries, Relay VM ``code.ro``) opens it through :func:`read_regular` (or
:func:`open_regular`), the twin of the C runtime's ``tvmrt_read_regular``
(``_native/runtime/files.c``): the file is opened without blocking (a FIFO named
``compiled.so`` never hangs the reader), ``fstat`` on the opened descriptor must show a
regular file, and its size is checked against the bound of its kind before it is read, so
a 3 GiB file where a 16 MiB one belongs costs nothing. Both sides use the same bounds and
words (docs/c_runtime.md, "Limits on input").
"""

from __future__ import annotations

import os
import stat
import struct
from dataclasses import dataclass
from typing import BinaryIO

from tvmrt.error import GraphFormatError, ModuleLoadError, ParamsFormatError, TVMError

__all__ = [
    "MAX_CODE_BYTES",
    "MAX_GRAPH_JSON_BYTES",
    "MAX_LIBRARY_BYTES",
    "MAX_META_BYTES",
    "MAX_PARAMS_BYTES",
    "PARAMS_LIST_MAGIC",
    "PARAMS_MAGIC",
    "VM_BYTECODE_MAGIC",
    "VM_CODE_MAGIC",
    "Magic",
    "check_regular",
    "file_identity",
    "open_regular",
    "read_code",
    "read_graph",
    "read_regular",
]

MAX_META_BYTES = 16 << 20  # DLR's compiled.meta, an MLF metadata.json: a few KiB in practice
MAX_GRAPH_JSON_BYTES = 1 << 30  # 4,194,304 nodes (the graph's limit) fit in well under it
MAX_LIBRARY_BYTES = 2 << 30  # a shared library (code + embedded params), an MLF folder's code
MAX_PARAMS_BYTES = 16 << 30  # a params file; its magic is checked before the rest is read
MAX_CODE_BYTES = 16 << 30  # a Relay VM code.ro (constants included)


def _what_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def open_regular(
    path: str | os.PathLike[str],
    what: str,
    limit: int,
    error: type[TVMError],
    shown: str | None = None,
) -> tuple[BinaryIO, int]:
    """The open file at ``path`` and its size: a regular file of at most ``limit`` bytes.

    ``what`` names the file in errors ("the model library"), with ``shown`` (default: the
    path). Nothing is read.

    Raises
    ------
    error
        If it cannot be opened, is not a regular file (a FIFO, device, socket or folder),
        or is larger than ``limit``.
    """
    shown = os.fspath(path) if shown is None else shown
    try:
        fd = os.open(os.fspath(path), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise error(f"cannot open {what} {shown}: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise error(
                f"{what} {shown} is not a regular file ({_what_kind(st.st_mode)}); expected a file"
            )
        if st.st_size > limit:
            raise error(
                f"{what} {shown} is {st.st_size} bytes, over the limit of {limit} bytes "
                "for it; expected a smaller file"
            )
        os.set_blocking(fd, True)
        handle = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    return handle, st.st_size


def check_regular(
    path: str | os.PathLike[str],
    what: str,
    limit: int,
    error: type[TVMError],
    shown: str | None = None,
) -> int:
    """The size of ``path``, a regular file within ``limit`` (:func:`open_regular`)."""
    handle, size = open_regular(path, what, limit, error, shown)
    handle.close()
    return size


@dataclass(frozen=True)
class Magic:
    """A file kind's first bytes (at most 16), checked before the rest is read."""

    data: bytes
    error: type[TVMError]
    format: str  # what such a file is, for the message ("a TVM params blob")


# the u64 each file starts with, little-endian (as the C runtime's rt.h has them)
PARAMS_LIST_MAGIC = 0xF7E58D4F05049CB7  # kTVMNDArrayListMagic, src/runtime/file_utils.h
VM_BYTECODE_MAGIC = 0xD225DE2F4214151D  # kTVMVMBytecodeMagic, src/runtime/vm/serialize_utils.h
PARAMS_MAGIC = Magic(struct.pack("<Q", PARAMS_LIST_MAGIC), ParamsFormatError, "a TVM params blob")
VM_CODE_MAGIC = Magic(
    struct.pack("<Q", VM_BYTECODE_MAGIC), ModuleLoadError, "a Relay VM executable"
)


def read_regular(
    path: str | os.PathLike[str],
    what: str,
    limit: int,
    error: type[TVMError],
    magic: Magic | None = None,
    shown: str | None = None,
) -> bytes:
    """The bytes of the regular file at ``path`` (see :func:`open_regular`).

    With ``magic``, the file's first bytes are checked before the rest is read.

    Raises
    ------
    error
        As :func:`open_regular`, or when the file cannot be read.
    """
    shown = os.fspath(path) if shown is None else shown
    handle, size = open_regular(path, what, limit, error, shown)
    with handle:
        try:
            head = handle.read(len(magic.data)) if magic else b""
            wrong = magic is not None and head != magic.data
            data = None if wrong else head + handle.read(size - len(head))
        except OSError as exc:
            raise error(f"cannot read {what} {shown}: {exc.strerror}") from None
    if data is None:
        assert magic is not None
        raise magic.error(
            f"{what} {shown} does not start with the magic {magic.data.hex()} of "
            f"{magic.format} (it starts with {head.hex() or 'nothing'}); expected "
            f"{magic.format}"
        )
    return data  # a file that shrank meanwhile gives what is there


def read_graph(path: str | os.PathLike[str], error: type[TVMError] = GraphFormatError) -> str:
    """A graph JSON file's text (at most :data:`MAX_GRAPH_JSON_BYTES`, UTF-8)."""
    data = read_regular(path, "graph file", MAX_GRAPH_JSON_BYTES, error)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(
            f"graph file {os.fspath(path)} is not UTF-8 text ({exc.reason} at byte "
            f"{exc.start}); expected graph JSON"
        ) from None


def read_code(path: str | os.PathLike[str], error: type[TVMError] = ModuleLoadError) -> bytes:
    """A Relay VM ``code.ro`` (at most :data:`MAX_CODE_BYTES`, its magic checked first)."""
    return read_regular(path, "Relay VM code", MAX_CODE_BYTES, error, VM_CODE_MAGIC)


def file_identity(path: str) -> tuple[int, int, int, int]:
    """The file at ``path`` as it is now: device, inode, size and mtime (a file rewritten
    or replaced since an earlier look has another identity)."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

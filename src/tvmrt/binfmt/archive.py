"""Reading ``export_library`` archives safely: every member in memory, within bounds.

TVM writes plain ustar members with short names, optionally gzip-compressed. An archive is
read with bounds on what a real export can be: extended headers are size-checked before
tarfile reads them, sparse members, links and unsafe paths are refused, and a compressed
archive may expand only so far (a decompression bomb is refused, not unpacked). Members
are returned as ``(name, bytes)``; nothing is written under a name from the archive.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import lzma
import os
import tarfile
import zlib
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import Any, cast

from tvmrt.binfmt.files import open_regular
from tvmrt.error import ModuleLoadError

__all__ = ["MAX_MEMBERS", "member_files", "member_names", "read_members"]

MAX_MEMBERS = 1024
MAX_MEMBER_BYTES = 1 << 30
MAX_TOTAL_BYTES = 2 << 30
# What an export_library archive can plausibly be: TVM writes plain ustar members with
# short names; a header beyond these bounds is refused before tarfile reads its payload.
MAX_LONG_NAME_BYTES = 4096  # GNU long name / long link: a path, at most PATH_MAX
MAX_PAX_HEADER_BYTES = 1 << 16
# A compressed archive may expand to this many times its size plus the slack: object code
# and float weights compress 1.1-4x; beyond, the file is a decompression bomb.
MAX_EXPANSION = 16
# the archive file itself: its members' bound, plus every member's headers and names
MAX_ARCHIVE_BYTES = MAX_TOTAL_BYTES + MAX_MEMBERS * (
    3 * 512 + MAX_PAX_HEADER_BYTES + MAX_LONG_NAME_BYTES
)
EXPANSION_SLACK_BYTES = 64 << 20
_GNU_HEADERS = (tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK)
_PAX_HEADERS = (tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE)
_COMPRESSIONS = {b"\x1f\x8b": "gzip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz"}


class _BoundedTarInfo(tarfile.TarInfo):
    """A TarInfo whose extended headers are size-checked before tarfile reads them."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        what = f"header {self.name!r} at byte {self.offset}"
        if self.type in _GNU_HEADERS and self.size > MAX_LONG_NAME_BYTES:
            raise _ArchiveLimit(
                f"its GNU long-name {what} is {self.size} bytes (a path is at most "
                f"{MAX_LONG_NAME_BYTES})"
            )
        if self.type in _PAX_HEADERS and self.size > MAX_PAX_HEADER_BYTES:
            raise _ArchiveLimit(
                f"its pax {what} is {self.size} bytes (tvmrt reads at most "
                f"{MAX_PAX_HEADER_BYTES}; TVM writes none)"
            )
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise _ArchiveLimit(f"member {self.name!r} is a sparse file (TVM writes none)")
        proc: Any = super()._proc_member  # type: ignore[misc]
        return cast(tarfile.TarInfo, proc(tarfile_))

    def _proc_gnusparse_00(self, member: tarfile.TarInfo, *args: object) -> None:
        raise _ArchiveLimit(f"member {member.name!r} is a sparse file (TVM writes none)")

    _proc_gnusparse_01 = _proc_gnusparse_10 = _proc_gnusparse_00


class _ArchiveLimit(ModuleLoadError):
    """Raised inside tarfile; read_members adds the archive's name."""


class _BoundedStream:
    """A decompressed stream that refuses to go past ``limit`` bytes (read or seek)."""

    def __init__(self, stream: Any, limit: int, why: str, raw: Any) -> None:
        self._stream = stream
        self._raw = raw
        self.limit = limit
        self._why = why

    def exceeded(self) -> _ArchiveLimit:
        return _ArchiveLimit(f"it expands to more than {self.limit} bytes {self._why}")

    def read(self, size: int = -1) -> bytes:
        left = self.limit - self._stream.tell()
        if 0 <= size <= left:
            return cast(bytes, self._stream.read(size))
        data = cast(bytes, self._stream.read(max(left, 0)))
        if self._stream.read(1):
            raise self.exceeded()
        return data

    def seek(self, offset: int, whence: int = 0) -> int:
        target = offset if whence == 0 else self._stream.tell() + offset if whence == 1 else -1
        if target < 0 or target > self.limit:
            raise self.exceeded()
        return cast(int, self._stream.seek(target))

    def tell(self) -> int:
        return cast(int, self._stream.tell())

    def close(self) -> None:
        self._stream.close()
        self._raw.close()


def _open_bounded(path: str) -> Any:
    """The archive's tar stream: the file, or its bounded decompression."""
    # closed by the caller, through the stream; a FIFO or a device is refused, never read
    raw, _ = open_regular(path, "archive", MAX_ARCHIVE_BYTES, ModuleLoadError)
    head = raw.read(6)
    raw.seek(0)
    kind = next((k for magic, k in _COMPRESSIONS.items() if head.startswith(magic)), None)
    if kind is None:
        return raw
    size = os.fstat(raw.fileno()).st_size
    stream: Any
    if kind == "gzip":
        stream = gzip.GzipFile(fileobj=raw, mode="rb")
    else:
        stream = bz2.BZ2File(raw) if kind == "bzip2" else lzma.LZMAFile(raw)  # noqa: SIM115
    limit = MAX_EXPANSION * size + EXPANSION_SLACK_BYTES
    why = (
        f"when decompressed ({kind}, {size} bytes; tvmrt accepts {MAX_EXPANSION} times the "
        f"compressed size plus {EXPANSION_SLACK_BYTES >> 20} MiB, more than an export "
        "plausibly holds)"
    )
    return _BoundedStream(stream, limit, why, raw)


@contextlib.contextmanager
def _bounded_archive(path: str) -> Iterator[tuple[tarfile.TarFile, Any]]:
    """The archive opened with the bounds above, as ``(tarfile, stream)``; every failure
    inside the ``with`` block, a bound or a corrupt header, becomes a ModuleLoadError."""
    stream = None
    try:
        stream = _open_bounded(path)
        with tarfile.open(fileobj=stream, mode="r:", tarinfo=_BoundedTarInfo) as archive:
            yield archive, stream
    except _ArchiveLimit as exc:
        raise ModuleLoadError(f"cannot load {path!r}: {exc}") from None
    except (tarfile.TarError, EOFError, OSError, zlib.error, lzma.LZMAError) as exc:
        if isinstance(exc, ModuleLoadError):
            raise
        raise ModuleLoadError(f"cannot load {path!r}: not a readable tar archive: {exc}") from exc
    finally:
        if stream is not None:
            stream.close()


def member_names(path: str, limit: int = MAX_MEMBERS) -> list[str]:
    """Names of the archive's first ``limit`` files (``./`` stripped), reading no data.

    The same bounds as :func:`read_members` apply to the headers and the decompression,
    so sniffing a hostile archive stays as cheap as loading it.

    Raises
    ------
    ModuleLoadError
        If the archive is unreadable or breaks a bound.
    """
    names: list[str] = []
    with _bounded_archive(path) as (archive, _):
        for member in archive:
            if len(names) >= limit:
                break
            if member.isdir():
                continue
            name = member.name
            while name.startswith("./"):
                name = name[2:]
            names.append(name)
    return names


def read_members(path: str) -> list[tuple[str, bytes]]:
    """``(name, bytes)`` of every regular file in the archive, checked and size-limited.

    Extended headers (GNU long names, pax) are bounded before they are read, sparse members
    are refused, and a compressed archive may expand to at most :data:`MAX_EXPANSION`
    times its size plus :data:`EXPANSION_SLACK_BYTES`: what an export can plausibly be.
    """
    members: list[tuple[str, bytes]] = []
    total = 0
    with _bounded_archive(path) as (archive, stream):
        for index, member in enumerate(archive):
            if index >= MAX_MEMBERS:
                raise ModuleLoadError(
                    f"cannot load {path!r}: the archive has more than {MAX_MEMBERS} members"
                )
            if member.isdir():
                continue
            if not member.isreg():
                raise ModuleLoadError(
                    f"cannot load {path!r}: member {member.name!r} is a link or special "
                    "file; only regular files are accepted"
                )
            if member.sparse is not None:
                raise ModuleLoadError(
                    f"cannot load {path!r}: member {member.name!r} is a sparse file "
                    "(TVM writes none)"
                )
            parts = PurePosixPath(member.name).parts
            if member.name.startswith("/") or ".." in parts:
                raise ModuleLoadError(
                    f"cannot load {path!r}: member {member.name!r} has an unsafe path"
                )
            if member.size > MAX_MEMBER_BYTES or total + member.size > MAX_TOTAL_BYTES:
                raise ModuleLoadError(
                    f"cannot load {path!r}: member {member.name!r} ({member.size} bytes) "
                    "exceeds the archive size limits"
                )
            if isinstance(stream, _BoundedStream) and (
                member.offset_data + member.size > stream.limit
            ):
                raise stream.exceeded()
            member_stream = archive.extractfile(member)
            if member_stream is None:
                continue
            data = member_stream.read(member.size + 1)
            if len(data) != member.size:
                raise ModuleLoadError(f"cannot load {path!r}: member {member.name!r} is truncated")
            total += len(data)
            members.append((member.name, data))
    if not members:
        raise ModuleLoadError(f"cannot load {path!r}: the archive holds no object files")
    return members


def member_files(path: str) -> dict[str, bytes]:
    """:func:`read_members` as a mapping, names without a leading ``./`` (how TVM's
    packages name their files)."""
    out = {}
    for name, data in read_members(path):
        while name.startswith("./"):
            name = name[2:]
        out[name] = data
    return out

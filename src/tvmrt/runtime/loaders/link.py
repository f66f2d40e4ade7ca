"""The link step: turn ``export_library`` archives, objects and C sources into a library.

TVM can export a model as a ``.tar`` of object files (``lib0.o``, ``devc.o`` holding the
module blob), of an object plus C source (``devc.c``: the blob as a C array, the seed's
system-module flow), as C sources only (``target="c"``), or as one ``.o``. Like TVM, tvmrt
compiles sources with the system C++ compiler against its own minimal TVM headers
(``tvmrt/include``), links everything into a shared library with the system C compiler
(``$CC``, else ``cc``, ``gcc`` or ``clang``; ``-shared -fPIC``) and returns its path: the
dispatcher then loads it like any library. Each object is checked to be an ELF object file
for this machine first.

Linked libraries are cached in ``$TVMRT_CACHE_DIR`` (default ``~/.cache/tvmrt``), keyed by
the sha256 of the input file, and written with an atomic rename, so concurrent processes
are safe and a second load links nothing. A cache entry's name also carries the sha256 of
its own bytes, checked on every use: a truncated or altered entry is deleted and relinked.

Archive members are read into memory with size limits and written under generated names:
paths in the archive are never used, and links or devices are refused.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import lzma
import os
import shlex
import shutil
import subprocess
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import Any, cast

from tvmrt.error import ModuleLoadError
from tvmrt.runtime.loaders.binary import (
    BinaryInfo,
    check_host_compatible,
    identify_bytes,
    with_article,
)

__all__ = [
    "cache_dir",
    "find_compiler",
    "read_members",
    "check_object",
    "link_objects",
    "include_dir",
    "find_cxx_compiler",
    "compile_source",
    "build_objects",
    "link_archive",
    "link_object",
]

MAX_MEMBERS = 1024
MAX_MEMBER_BYTES = 1 << 30
MAX_TOTAL_BYTES = 2 << 30
_RECIPE = "tvmrt-link-v1"  # part of the cache key: bump when the link command changes
_LINK_TIMEOUT_S = 600
_CONTENT_DIGEST_CHARS = 32  # sha256 of a cached library, in its name: checked on every use


def cache_dir() -> Path:
    """Where linked libraries are cached: ``$TVMRT_CACHE_DIR``, else ``~/.cache/tvmrt``."""
    configured = os.environ.get("TVMRT_CACHE_DIR", "").strip()
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME", "").strip()
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "tvmrt"


def find_compiler() -> list[str] | None:
    """The C compiler command: ``$CC`` (may carry flags), else ``cc``, ``gcc`` or ``clang``."""
    configured = os.environ.get("CC", "").strip()
    if configured:
        command = shlex.split(configured)
        if command and shutil.which(command[0]):
            return command
        return None
    for name in ("cc", "gcc", "clang"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


def _sha256(path: Path) -> str:
    digest = hashlib.sha256(_RECIPE.encode())
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def check_object(data: bytes, name: str, source: str) -> None:
    """Raise ModuleLoadError unless member ``name`` of ``source`` is an object for this host."""
    info: BinaryInfo = identify_bytes(data[:4096])
    if info.format == "elf":
        check_host_compatible(info, source, "object file")
        return
    raise ModuleLoadError(
        f"cannot load {source!r}: member {name!r} is not an object file (it is "
        f"{with_article(info.describe())})"
    )


# What an export_library archive can plausibly be: TVM writes plain ustar members with
# short names; a header beyond these bounds is refused before tarfile reads its payload.
MAX_LONG_NAME_BYTES = 4096  # GNU long name / long link: a path, at most PATH_MAX
MAX_PAX_HEADER_BYTES = 1 << 16
# A compressed archive may expand to this many times its size plus the slack: object code
# and float weights compress 1.1-4x; beyond, the file is a decompression bomb.
MAX_EXPANSION = 16
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
    raw = open(path, "rb")  # noqa: SIM115 (closed by the caller, through the stream)
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


def link_objects(objects: list[tuple[str, bytes]], key: str, source: str) -> Path:
    """Link object files into a cached shared library and return its path.

    Parameters
    ----------
    objects
        ``(name, bytes)`` of each object file (names only label messages).
    key
        Cache key (hex digest of the input).
    source
        The input file, for messages.

    Raises
    ------
    ModuleLoadError
        If no compiler is found, the cache is not writable, or linking fails.
    """
    directory = cache_dir() / "linked"
    cached = _cached_library(directory, key)
    if cached is not None:
        return cached
    compiler = find_compiler()
    if compiler is None:
        raise ModuleLoadError(
            f"cannot load {source!r}: it holds object files that must be linked into a shared "
            "library, and no C compiler was found; install gcc or clang, or set $CC"
        )
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise ModuleLoadError(
            f"cannot load {source!r}: cannot create the cache folder {str(directory)!r} "
            f"({exc.strerror}); set $TVMRT_CACHE_DIR to a writable folder"
        ) from exc
    with tempfile.TemporaryDirectory(prefix="tvmrt-link-") as work:
        inputs = []
        for i, (_, data) in enumerate(objects):
            obj = Path(work) / f"member{i}.o"
            obj.write_bytes(data)
            inputs.append(str(obj))
        fd, partial = tempfile.mkstemp(dir=directory, prefix=f".{key}.", suffix=".tmp")
        os.close(fd)
        command = [*compiler, "-shared", "-fPIC", "-o", partial, *inputs, "-lm"]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=_LINK_TIMEOUT_S, check=False
            )
            if result.returncode != 0:
                output = (result.stderr or result.stdout).strip()[-2000:]
                raise ModuleLoadError(
                    f"cannot load {source!r}: linking its object files failed "
                    f"({shlex.join(command[:1])} exited with {result.returncode}): {output}"
                )
            os.chmod(partial, 0o755)
            target = directory / f"{key}.{_content_digest(Path(partial))}.so"
            os.replace(partial, target)
        except (OSError, subprocess.SubprocessError) as exc:
            raise ModuleLoadError(f"cannot load {source!r}: linking failed: {exc}") from exc
        finally:
            if os.path.exists(partial):
                os.unlink(partial)
    return target


_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx")
_COMPILE_RECIPE = "tvmrt-compile-v1"  # part of the object cache key
_COMPILE_FLAGS = ("-c", "-fPIC", "-O2", "-fno-exceptions")


def _content_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()[:_CONTENT_DIGEST_CHARS]


def _cached_library(directory: Path, key: str) -> Path | None:
    """The cache entry ``<key>.<content digest>.so`` whose bytes still match its name.

    An entry that does not (truncated, overwritten, half-written by a crashed process) is
    deleted, so that the caller links the archive again.
    """
    try:
        candidates = sorted(directory.glob(f"{key}.*.so"))
    except OSError:
        return None
    for candidate in candidates:
        expected = candidate.name[len(key) + 1 : -len(".so")]
        try:
            if _content_digest(candidate) == expected:
                return candidate
        except OSError:
            pass
        with contextlib.suppress(OSError):
            candidate.unlink()
    return None


def include_dir() -> Path:
    """tvmrt's own minimal TVM C headers (``tvm/runtime/c_runtime_api.h``, ...)."""
    return Path(__file__).resolve().parent.parent.parent / "include"


def find_cxx_compiler() -> list[str] | None:
    """The C++ compiler: ``$CXX`` (may carry flags), else ``c++``, ``g++`` or ``clang++``.

    TVM compiles its C exports with a C++ compiler: the ``devc.c`` of a system-lib export
    registers the blob from a dynamic initializer, which C does not allow.
    """
    configured = os.environ.get("CXX", "").strip()
    if configured:
        command = shlex.split(configured)
        return command if command and shutil.which(command[0]) else None
    for name in ("c++", "g++", "clang++"):
        found = shutil.which(name)
        if found:
            return [found]
    return None


def is_source(name: str) -> bool:
    """Whether an archive member is C/C++ source (a ``target="c"`` export or ``devc.c``)."""
    return PurePosixPath(name).suffix in _SOURCE_SUFFIXES


def compile_source(data: bytes, name: str, source: str) -> bytes:
    """Compile one C/C++ source against tvmrt's TVM headers; return the object file's bytes.

    Objects are cached in ``cache_dir()/compiled`` by the sha256 of the source and recipe.

    Raises
    ------
    ModuleLoadError
        If no C++ compiler is found or the source does not compile.
    """
    compiler = find_cxx_compiler()
    if compiler is None:
        raise ModuleLoadError(
            f"cannot load {source!r}: member {name!r} is C source that must be compiled, and "
            "no C++ compiler was found; install g++ or clang, or set $CXX"
        )
    digest = hashlib.sha256(_COMPILE_RECIPE.encode() + b"\0" + " ".join(compiler).encode())
    digest.update(b"\0" + data)
    directory = cache_dir() / "compiled"
    target = directory / f"{digest.hexdigest()}.o"
    if target.is_file():
        return target.read_bytes()
    suffix = PurePosixPath(name).suffix
    with tempfile.TemporaryDirectory(prefix="tvmrt-cc-") as work:
        src = Path(work) / f"source{suffix}"
        src.write_bytes(data)
        obj = Path(work) / "source.o"
        command = [*compiler, *_COMPILE_FLAGS, f"-I{include_dir()}", "-o", str(obj), str(src)]
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=_LINK_TIMEOUT_S, check=False
            )
        except (OSError, subprocess.SubprocessError) as exc:
            raise ModuleLoadError(
                f"cannot load {source!r}: compiling {name!r} failed: {exc}"
            ) from exc
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()[-2000:]
            raise ModuleLoadError(
                f"cannot load {source!r}: compiling member {name!r} with tvmrt's TVM headers "
                f"failed ({shlex.join(command[:1])} exited with {result.returncode}): {output}"
            )
        compiled = obj.read_bytes()
    try:
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        fd, partial = tempfile.mkstemp(dir=directory, prefix=".obj.", suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(compiled)
        os.replace(partial, target)
    except OSError:
        pass  # the cache is an optimisation: compile again next time
    return compiled


def build_objects(members: list[tuple[str, bytes]], source: str) -> list[tuple[str, bytes]]:
    """Check each member is an object for this host, compiling C/C++ sources first."""
    objects = []
    for name, data in members:
        if is_source(name):
            objects.append((name, compile_source(data, name, source)))
        else:
            check_object(data, name, source)
            objects.append((name, data))
    return objects


def link_archive(path: str) -> Path:
    """Link an ``export_library`` tar (objects and C sources) into a cached shared library."""
    objects = build_objects(read_members(path), path)
    return link_objects(objects, _sha256(Path(path)), path)


def link_object(path: str) -> Path:
    """Link a single object file into a cached shared library."""
    data = Path(path).read_bytes()
    check_object(data, Path(path).name, path)
    return link_objects([(Path(path).name, data)], _sha256(Path(path)), path)

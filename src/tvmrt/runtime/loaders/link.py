"""The link step: turn ``export_library`` archives, objects and C sources into a library.

TVM can export a model as a ``.tar`` of object files (``lib0.o``, ``devc.o`` holding the
module blob), of an object plus C source (``devc.c``: the blob as a C array, the seed's
system-module flow), as C sources only (``target="c"``), or as one ``.o``. Like TVM, tvmrt
compiles sources with the system C++ compiler against its own minimal TVM headers
(``tvmrt/include``), links everything into a shared library with the system C compiler
(``$CC``, else ``cc``, ``gcc`` or ``clang``; ``-shared -fPIC``) and returns its path: the
dispatcher then loads it like any library. Each object is checked to be an ELF object file
for this machine first.

Linked libraries and compiled objects are cached in ``$TVMRT_CACHE_DIR`` (default
``~/.cache/tvmrt``; :mod:`.cache`), keyed by the sha256 of the input, and written with an
atomic rename, so concurrent processes are safe and a second load links nothing. A cache
entry's name also carries the sha256 of its own bytes, checked on every use: a truncated
or altered entry is deleted and rebuilt. A failed write leaves no temporary file.

Archive members are read into memory with size limits (:mod:`tvmrt.binfmt.archive`) and
written under generated names: paths in the archive are never used, and links or devices
are refused.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from tvmrt.binfmt.archive import MAX_MEMBERS, member_names, read_members
from tvmrt.binfmt.binary import (
    BinaryInfo,
    check_host_compatible,
    identify_bytes,
    with_article,
)
from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, open_regular, read_regular
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.loaders.cache import (
    cache_dir,
    find_entry,
    publish,
    read_entry,
    temp_entry,
    write_entry,
)
from tvmrt.runtime.loaders.memory import compiler_env, scratch_or_default

__all__ = [
    "MAX_MEMBERS",
    "cache_dir",
    "find_compiler",
    "member_names",
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

_RECIPE = "tvmrt-link-v1"  # part of the cache key: bump when the link command changes
_LINK_TIMEOUT_S = 600


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


def missing_compiler() -> str:
    """Why :func:`find_compiler` found none, naming ``$CC`` when it is set."""
    configured = os.environ.get("CC", "").strip()
    if configured:
        command = shlex.split(configured)
        return (
            f"$CC names {command[0] if command else configured!r}, which is not an executable "
            "(nor a program on PATH); fix $CC, or unset it to use cc, gcc or clang"
        )
    return "no C compiler was found; install gcc or clang, or set $CC (cc, gcc, clang: not on PATH)"


def _sha256(path: Path, what: str) -> str:
    digest = hashlib.sha256(_RECIPE.encode())
    handle, _ = open_regular(path, what, MAX_LIBRARY_BYTES, ModuleLoadError)
    with handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
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
    cached = find_entry(directory, key, ".so")
    if cached is not None:
        return cached
    compiler = find_compiler()
    if compiler is None:
        raise ModuleLoadError(
            f"cannot load {source!r}: it holds object files that must be linked into a shared "
            f"library, and {missing_compiler()}"
        )
    try:
        partial = temp_entry(directory, key)
    except OSError as exc:
        raise ModuleLoadError(
            f"cannot load {source!r}: cannot write to the cache folder {str(directory)!r} "
            f"({exc.strerror}); set $TVMRT_CACHE_DIR to a writable folder"
        ) from exc
    try:
        with tempfile.TemporaryDirectory(prefix="tvmrt-link-", dir=scratch_or_default()) as work:
            inputs = []
            for i, (_, data) in enumerate(objects):
                obj = Path(work) / f"member{i}.o"
                obj.write_bytes(data)
                inputs.append(str(obj))
            command = [*compiler, "-shared", "-fPIC", "-o", str(partial), *inputs, "-lm"]
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=_LINK_TIMEOUT_S,
                check=False,
                env=compiler_env(),
            )
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()[-2000:]
            raise ModuleLoadError(
                f"cannot load {source!r}: linking its object files failed "
                f"({shlex.join(command[:1])} exited with {result.returncode}): {output}"
            )
        return publish(partial, directory, key, ".so", 0o755)
    except (OSError, subprocess.SubprocessError) as exc:
        if isinstance(exc, ModuleLoadError):
            raise
        raise ModuleLoadError(
            f"cannot load {source!r}: linking into the cache folder {str(directory)!r} "
            f"failed: {exc}"
        ) from exc
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()


_SOURCE_SUFFIXES = (".c", ".cc", ".cpp", ".cxx")
_COMPILE_RECIPE = "tvmrt-compile-v1"  # part of the object cache key
_COMPILE_FLAGS = ("-c", "-fPIC", "-O2", "-fno-exceptions")


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


def toolchain_key(compiler: list[str], flags: list[str] | tuple[str, ...]) -> bytes:
    """What a compile depends on besides its sources, for a cache key: tvmrt's version, the
    compiler (its command, and what ``--version`` says of the program it runs), the flags,
    and every header of tvmrt's include folder (passed with ``-I``), by content."""
    from tvmrt._version import __version__

    parts = [__version__, "\0".join(compiler), _compiler_identity(tuple(compiler)), *flags]
    digest = hashlib.sha256("\0".join(parts).encode())
    root = include_dir()
    for header in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(header.relative_to(root).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(header.read_bytes()).digest())
    return digest.digest()


@functools.lru_cache(maxsize=8)
def _compiler_identity(compiler: tuple[str, ...]) -> str:
    """``compiler --version`` (first lines), with the program's path, size and time: a
    different compiler behind the same name gives another key."""
    program = shutil.which(compiler[0]) or compiler[0]
    try:
        info = os.stat(program)
        stamp = f"{os.path.realpath(program)}:{info.st_size}:{info.st_mtime_ns}"
        out = subprocess.run(
            [*compiler, "--version"], capture_output=True, text=True, timeout=30, check=False
        ).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return f"{program}: {exc}"
    return stamp + "\0" + "\n".join(out.splitlines()[:2])


def is_source(name: str) -> bool:
    """Whether an archive member is C/C++ source (a ``target="c"`` export or ``devc.c``)."""
    return PurePosixPath(name).suffix in _SOURCE_SUFFIXES


def compile_source(data: bytes, name: str, source: str) -> bytes:
    """Compile one C/C++ source against tvmrt's TVM headers; return the object file's bytes.

    Objects are cached in ``cache_dir()/compiled``, named by the sha256 of the source,
    recipe and compiler and by the sha256 of the object, checked on every use
    (:mod:`.cache`).

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
    digest = hashlib.sha256(_COMPILE_RECIPE.encode() + b"\0")
    digest.update(toolchain_key(compiler, _COMPILE_FLAGS))
    digest.update(b"\0" + data)
    directory = cache_dir() / "compiled"
    key = digest.hexdigest()
    cached = read_entry(directory, key, ".o")
    if cached is not None:
        return cached
    suffix = PurePosixPath(name).suffix
    with tempfile.TemporaryDirectory(prefix="tvmrt-cc-", dir=scratch_or_default()) as work:
        src = Path(work) / f"source{suffix}"
        src.write_bytes(data)
        obj = Path(work) / "source.o"
        command = [*compiler, *_COMPILE_FLAGS, f"-I{include_dir()}", "-o", str(obj), str(src)]
        try:
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=_LINK_TIMEOUT_S,
                check=False,
                env=compiler_env(),
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
    with contextlib.suppress(OSError):  # the cache is an optimisation: compile again next time
        write_entry(directory, key, ".o", compiled)
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
    key = _sha256(Path(path), "the library archive")  # a regular file within its bound
    return link_objects(build_objects(read_members(path), path), key, path)


def link_object(path: str) -> Path:
    """Link a single object file into a cached shared library."""
    data = read_regular(path, "the object file", MAX_LIBRARY_BYTES, ModuleLoadError)
    check_object(data, Path(path).name, path)
    key = hashlib.sha256(_RECIPE.encode() + data).hexdigest()  # as _sha256 of the file
    return link_objects([(Path(path).name, data)], key, path)

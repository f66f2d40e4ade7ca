"""Models held in memory: loaded without a plaintext file on a disk-backed path.

Users keep models encrypted, or inside a bundle, and decrypt them into memory; TVM needs a
file path for every kernel library (apache/tvm#16944). ``load_module(data)`` puts the bytes
in a memfd (anonymous memory, never on a disk) and hands its ``/proc/self/fd`` path to the
one loader of the form (:func:`~tvmrt.runtime.loaders.dispatch.load`), so a library held in
memory is checked and loaded exactly as the same file would be. What a form needs written
while it loads (the objects of a ``.tar`` or ``.o`` export to link, C sources to compile,
an MLF package's build) goes to a private folder on a memory-backed file system
(``/dev/shm``, tmpfs), removed when the load ends; tvmrt's on-disk cache
(``$TVMRT_CACHE_DIR``) is neither read nor written for it.

Not possible this way: a kernel library that ``dlopen``s its own dependencies by path
(they must be files), and, on a system without ``memfd_create`` (anything but Linux),
loading from memory at all. A ``.tar``/``.o`` export held in memory needs ``/dev/shm`` on
tmpfs, as the C compiler reads and writes files there.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from tvmrt.binfmt.files import MAX_LIBRARY_BYTES
from tvmrt.error import ModuleLoadError

__all__ = [
    "MEMORY_PATHS",
    "SHOWN",
    "compiler_env",
    "held_in_memory",
    "in_memory",
    "memory_file",
    "scratch",
    "scratch_or_default",
    "session",
]

SHOWN = "<model in memory>"  # how messages name a module loaded from bytes
MEMORY_PATHS = "/proc/self/fd/"  # where a memory_file's path starts: taken as it is
_SHM = Path("/dev/shm")

# while a model held in memory loads: [its private scratch folder, once made]
_session: ContextVar[list[Path | None] | None] = ContextVar("tvmrt_memory_load", default=None)


def in_memory() -> bool:
    """Whether the load running in this context is of a model held in memory."""
    return _session.get() is not None


def _memory_backed(path: Path) -> bool:
    """Whether ``path`` is a mount point of tmpfs (RAM, not a disk)."""
    try:
        with open("/proc/mounts", encoding="utf-8") as mounts:
            return any(
                line.split()[1:3] == [str(path), "tmpfs"]
                for line in mounts
                if len(line.split()) >= 3
            )
    except OSError:
        return False


def scratch() -> Path:
    """The private folder (mode 0700, on tmpfs) a model held in memory may write to while it
    loads; made on first use, removed when the load ends.

    Raises
    ------
    ModuleLoadError
        If no memory-backed folder exists here (the form needs files written: a ``.tar``
        or ``.o`` export to link, C sources to compile).
    """
    session = _session.get()
    assert session is not None, "scratch() outside held_in_memory()"
    folder = session[0]
    if folder is None:
        if not _memory_backed(_SHM):
            raise ModuleLoadError(
                f"cannot load {SHOWN}: this form must be linked or compiled, which writes "
                "files, and this machine has no memory-backed folder (/dev/shm on tmpfs) to "
                "keep them off the disk; load a shared library (.so) from memory, or the "
                "file from a path"
            )
        folder = session[0] = Path(tempfile.mkdtemp(prefix="tvmrt-memory-", dir=_SHM))
    return folder


def scratch_or_default() -> str | None:
    """``dir=`` for a temporary folder: the scratch folder while a model held in memory
    loads, else None (the system's temporary folder)."""
    return str(scratch()) if in_memory() else None


def compiler_env() -> dict[str, str] | None:
    """The environment for a compiler the load runs: while a model held in memory loads,
    its temporary files (``TMPDIR``: gcc's assembly, collect2's lists) go to the scratch
    folder too; else None (the process's own environment)."""
    if not in_memory():
        return None
    return {**os.environ, "TMPDIR": str(scratch())}


@contextlib.contextmanager
def session() -> Iterator[None]:
    """A load of a model held in memory: inside it :func:`in_memory` is True, and its
    scratch folder (if one was needed) is removed when it ends."""
    if in_memory():  # nested (load_artifact's files, then load_module of its library)
        yield
        return
    token = _session.set([None])
    try:
        yield
    finally:
        folder = (_session.get() or [None])[0]
        _session.reset(token)
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)


@contextlib.contextmanager
def memory_file(
    data: bytes | bytearray | memoryview, limit: int = MAX_LIBRARY_BYTES
) -> Iterator[str]:
    """A path that reads as ``data`` (``/proc/self/fd/N`` of a memfd) while the block runs.

    Raises
    ------
    ModuleLoadError
        If ``data`` is larger than ``limit``, or this system has no memfd.
    """
    view = memoryview(data).cast("B")
    if view.nbytes > limit:
        raise ModuleLoadError(
            f"{SHOWN} is {view.nbytes} bytes, over the limit of {limit} bytes for it"
        )
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is None or not os.path.isdir("/proc/self/fd"):
        raise ModuleLoadError(
            f"cannot load {SHOWN}: loading from memory needs memfd_create and /proc (Linux); "
            "write the model to a file and load it from its path"
        )
    fd = memfd_create("tvmrt-model", getattr(os, "MFD_CLOEXEC", 0))
    try:
        written = 0
        while written < view.nbytes:
            written += os.write(fd, view[written:])
        yield f"{MEMORY_PATHS}{fd}"
    finally:
        os.close(fd)


@contextlib.contextmanager
def held_in_memory(data: bytes | bytearray | memoryview) -> Iterator[str]:
    """:func:`memory_file` of ``data`` inside a :func:`session`."""
    with session(), memory_file(data) as path:
        yield path

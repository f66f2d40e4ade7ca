"""tvmrt's on-disk cache: where it lives, and entries that are checked on every use.

The loaders keep three kinds of entries under :func:`cache_dir`: ``linked/`` (shared
libraries linked from ``export_library`` archives, :mod:`.link`), ``compiled/`` (objects
compiled from C sources, :mod:`.link`) and ``packages/`` (libraries unpacked from tvmc
packages, :mod:`.packages`). Every entry is named ``<key>.<digest><suffix>``: ``key`` is
the sha256 of everything that made it (input bytes, recipe, compiler), ``digest`` the
sha256 of the entry's own bytes (first 32 hex digits). :func:`find_entry` re-hashes the
entry on every use and deletes one whose bytes no longer match its name (truncated by a
full disk, altered, half-written by a crashed process), so the caller builds it again
instead of trusting it. :func:`write_entry` and :func:`publish` write through a temporary
file in the same folder, renamed into place only when complete; on any failure
(``ENOSPC`` included) the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from tvmrt.binfmt.files import MAX_LIBRARY_BYTES, open_regular, read_regular
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.loaders.memory import in_memory, scratch

__all__ = [
    "cache_dir",
    "content_digest",
    "find_entry",
    "read_entry",
    "write_entry",
    "publish",
    "temp_entry",
]

DIGEST_CHARS = 32
_CHUNK = 1 << 20


def cache_dir() -> Path:
    """The cache folder: ``$TVMRT_CACHE_DIR``, else ``$XDG_CACHE_HOME/tvmrt``, else
    ``~/.cache/tvmrt``; while a model held in memory loads, a folder in its private
    scratch on tmpfs (:mod:`.memory`: nothing of it reaches the disk, or outlives the load).

    Raises
    ------
    ModuleLoadError
        If the folder cannot be worked out: a ``~user`` of no known user in
        ``$TVMRT_CACHE_DIR`` or ``$XDG_CACHE_HOME``, or no home folder at all. The message
        names the variable to set.
    """
    if in_memory():
        return scratch() / "cache"
    for variable in ("TVMRT_CACHE_DIR", "XDG_CACHE_HOME"):
        configured = os.environ.get(variable, "").strip()
        if not configured:
            continue
        try:
            base = Path(configured).expanduser()
        except (RuntimeError, KeyError, OSError) as exc:
            raise ModuleLoadError(
                f"${variable}={configured!r} names no usable folder: its '~' cannot be "
                f"expanded ({exc}); set $TVMRT_CACHE_DIR to a folder path"
            ) from None
        return base if variable == "TVMRT_CACHE_DIR" else base / "tvmrt"
    try:
        home = Path.home()
    except (RuntimeError, KeyError, OSError) as exc:
        raise ModuleLoadError(
            f"tvmrt's cache folder defaults to ~/.cache/tvmrt, but this process has no home "
            f"folder ({exc}); set $TVMRT_CACHE_DIR to a writable folder"
        ) from None
    return home / ".cache" / "tvmrt"


def content_digest(path: Path) -> str:
    """The first :data:`DIGEST_CHARS` hex digits of the sha256 of ``path``'s bytes.

    Raises :class:`ModuleLoadError` (an ``OSError``) unless ``path`` is a regular file of at
    most :data:`~tvmrt.binfmt.files.MAX_LIBRARY_BYTES`: a FIFO put in the cache never blocks.
    """
    digest = hashlib.sha256()
    handle, _ = open_regular(path, "cache entry", MAX_LIBRARY_BYTES, ModuleLoadError)
    with handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()[:DIGEST_CHARS]


def find_entry(directory: Path, key: str, suffix: str) -> Path | None:
    """The entry ``<key>.<digest><suffix>`` whose bytes still hash to ``digest``, or None.

    Entries of this key that do not match (or cannot be read) are deleted, so the caller
    builds the entry again.
    """
    try:
        candidates = sorted(directory.glob(f"{key}.*{suffix}"))
    except OSError:
        return None
    for candidate in candidates:
        expected = candidate.name[len(key) + 1 : len(candidate.name) - len(suffix)]
        try:
            if len(expected) == DIGEST_CHARS and content_digest(candidate) == expected:
                return candidate
        except OSError:
            pass
        with contextlib.suppress(OSError):
            candidate.unlink()
    return None


def read_entry(directory: Path, key: str, suffix: str) -> bytes | None:
    """The bytes of the entry of ``key``, checked after reading (no later change can
    slip in between check and use), or None if there is no intact entry."""
    found = find_entry(directory, key, suffix)
    if found is None:
        return None
    try:
        data = read_regular(found, "cache entry", MAX_LIBRARY_BYTES, ModuleLoadError)
    except ModuleLoadError:
        return None
    if hashlib.sha256(data).hexdigest()[:DIGEST_CHARS] != found.name[len(key) + 1 :][:DIGEST_CHARS]:
        with contextlib.suppress(OSError):
            found.unlink()
        return None
    return data


def temp_entry(directory: Path, key: str) -> Path:
    """A new empty temporary file in ``directory`` (hidden: ``find_entry`` never sees it).

    Raises OSError if the folder cannot be created or written.
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, partial = tempfile.mkstemp(dir=directory, prefix=f".{key[:16]}.", suffix=".tmp")
    os.close(fd)
    return Path(partial)


def publish(partial: Path, directory: Path, key: str, suffix: str, mode: int = 0o644) -> Path:
    """Rename the finished temporary file ``partial`` to its entry name; return that path.

    ``partial`` is removed if anything fails (the error, an OSError, is raised).
    """
    try:
        os.chmod(partial, mode)
        target = directory / f"{key}.{content_digest(partial)}{suffix}"
        os.replace(partial, target)
    finally:
        with contextlib.suppress(OSError):
            partial.unlink()
    return target


def write_entry(directory: Path, key: str, suffix: str, data: bytes, mode: int = 0o644) -> Path:
    """Write ``data`` as the entry of ``key`` (atomically); return its path.

    Raises OSError (a full disk, a read-only folder) after removing the temporary file:
    nothing half-written stays behind.
    """
    partial = temp_entry(directory, key)
    try:
        fd = os.open(partial, os.O_WRONLY)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view[:_CHUNK])
                view = view[written:]
        finally:
            os.close(fd)
    except BaseException:
        with contextlib.suppress(OSError):
            partial.unlink()
        raise
    return publish(partial, directory, key, suffix, mode)

"""Reading ``.npz`` files member by member: names and headers first, arrays on demand.

``np.load`` of an ``.npz`` only lists its members; this module reads a member's ``.npy``
header (shape, dtype) without decompressing its data, so a member no one asked for, or one
of the wrong shape, costs a few hundred bytes whatever its size.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.error import UsageError

__all__ = ["NpzReader", "npz_member"]


class NpzReader:
    """An open ``.npz``: ``keys``, ``header(key)`` and ``array(key)``; use as a context."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        try:
            self._zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile) as exc:
            raise UsageError(f"cannot read {self.path!r} as a .npz file: {exc}") from None
        self._members = {
            n.removesuffix(".npy"): n for n in self._zip.namelist() if n.endswith(".npy")
        }

    def __enter__(self) -> NpzReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self._zip.close()

    @property
    def keys(self) -> list[str]:
        """The array names, in file order."""
        return list(self._members)

    def header(self, key: str) -> tuple[tuple[int, ...], np.dtype[Any]]:
        """Shape and dtype of member ``key``, from its header alone."""
        try:
            with self._zip.open(self._members[key]) as f:
                version = np.lib.format.read_magic(f)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(f)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(f)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise UsageError(f"{self.path!r}: member {key!r} is not a .npy array: {exc}") from None
        return tuple(int(d) for d in shape), np.dtype(dtype)

    def array(self, key: str) -> np.ndarray[Any, Any]:
        """Member ``key``, read and decompressed now (object arrays are refused)."""
        try:
            with self._zip.open(self._members[key]) as f:
                arr = np.lib.format.read_array(f, allow_pickle=False)
        except (OSError, ValueError, zipfile.BadZipFile) as exc:
            raise UsageError(f"{self.path!r}: cannot read member {key!r}: {exc}") from None
        return np.asarray(arr)


def npz_member(file: str, default: str) -> tuple[Path, str] | None:
    """``(path, member)`` for ``FILE.npz:MEMBER``, or ``(path, default)`` for a plain
    ``FILE.npz``; None when ``file`` names no .npz."""
    path = Path(file)
    if path.is_file():
        return (path, default) if zipfile.is_zipfile(path) else None
    head, colon, member = file.rpartition(":")
    if colon and member and Path(head).is_file() and zipfile.is_zipfile(head):
        return Path(head), member
    return None

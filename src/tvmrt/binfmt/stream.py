"""Bounds-checked reading and writing of dmlc streams (TVM's binary serialisation).

Integers are little-endian with natural widths; a string is ``u64 length + bytes``; a
vector is ``u64 count + elements``. Every read checks the remaining length first, so
a corrupt size field raises an error instead of reading past the end or allocating
more memory than the input holds.
"""

from __future__ import annotations

import struct
from typing import Any

from tvmrt.error import TVMError

__all__ = ["ByteReader", "ByteWriter"]

_U64 = struct.Struct("<Q")
_I64 = struct.Struct("<q")
_I32 = struct.Struct("<i")
_U16 = struct.Struct("<H")


class ByteReader:
    """Sequential reader over a bytes-like object that raises ``error`` on any overrun.

    Parameters
    ----------
    data
        The bytes to read (not copied: a memoryview is kept).
    what
        Name of the thing being read, used in messages (``"params blob"``).
    error
        Exception class for malformed input (a :class:`TVMError` subclass).
    """

    __slots__ = ("_view", "error", "offset", "what")

    def __init__(
        self, data: bytes | bytearray | memoryview, what: str, error: type[TVMError]
    ) -> None:
        self._view = memoryview(data).cast("B")
        self.offset = 0
        self.what = what
        self.error = error

    @property
    def size(self) -> int:
        """Total number of bytes."""
        return len(self._view)

    @property
    def remaining(self) -> int:
        """Bytes not read yet."""
        return len(self._view) - self.offset

    def fail(self, message: str, offset: int | None = None) -> TVMError:
        """An error of this reader's class about ``message`` at ``offset`` (default: here)."""
        at = self.offset if offset is None else offset
        return self.error(f"{self.what}: {message} at byte offset {at}")

    def _need(self, n: int, field: str) -> int:
        start = self.offset
        if n < 0 or n > self.remaining:
            raise self.fail(
                f"truncated: {field} needs {n} bytes but only {self.remaining} remain", start
            )
        self.offset = start + n
        return start

    def _unpack(self, fmt: struct.Struct, field: str) -> Any:
        start = self._need(fmt.size, field)
        return fmt.unpack_from(self._view, start)[0]

    def u64(self, field: str = "u64") -> int:
        """Read an unsigned 64-bit integer."""
        return int(self._unpack(_U64, field))

    def i64(self, field: str = "i64") -> int:
        """Read a signed 64-bit integer."""
        return int(self._unpack(_I64, field))

    def i32(self, field: str = "i32") -> int:
        """Read a signed 32-bit integer."""
        return int(self._unpack(_I32, field))

    def u16(self, field: str = "u16") -> int:
        """Read an unsigned 16-bit integer."""
        return int(self._unpack(_U16, field))

    def u8(self, field: str = "u8") -> int:
        """Read one byte."""
        start = self._need(1, field)
        return int(self._view[start])

    def raw(self, n: int, field: str = "bytes") -> memoryview:
        """Read ``n`` bytes, returned as a zero-copy memoryview."""
        start = self._need(n, field)
        return self._view[start : start + n]

    def string(self, field: str = "string") -> str:
        """Read a ``u64 length + bytes`` string, decoded as UTF-8 (invalid bytes escaped)."""
        return bytes(self.blob(field)).decode("utf-8", errors="surrogateescape")

    def blob(self, field: str = "bytes") -> memoryview:
        """Read a ``u64 length + bytes`` byte string."""
        at = self.offset
        n = self.u64(f"length of {field}")
        if n > self.remaining:
            raise self.fail(f"{field} claims {n} bytes but only {self.remaining} remain", at)
        return self.raw(n, field)

    def count(self, field: str, min_item_size: int) -> int:
        """Read a ``u64`` element count and check the input can hold that many elements."""
        at = self.offset
        n = self.u64(field)
        if min_item_size > 0 and n > self.remaining // min_item_size:
            raise self.fail(
                f"{field} is {n}, but only {self.remaining} bytes remain for its items", at
            )
        return n

    def strings(self, field: str = "strings") -> list[str]:
        """Read a ``vector<string>``."""
        n = self.count(f"number of {field}", 8)
        return [self.string(f"{field}[{i}]") for i in range(n)]

    def u64s(self, field: str = "u64 vector") -> list[int]:
        """Read a ``vector<u64>``."""
        n = self.count(f"length of {field}", 8)
        start = self._need(8 * n, field)
        return list(struct.unpack_from(f"<{n}Q", self._view, start))


class ByteWriter:
    """Appends dmlc-stream values to a growing ``bytearray`` (:attr:`buffer`)."""

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = bytearray()

    def u64(self, value: int) -> None:
        """Append an unsigned 64-bit integer."""
        self.buffer += _U64.pack(value)

    def i64(self, value: int) -> None:
        """Append a signed 64-bit integer."""
        self.buffer += _I64.pack(value)

    def i32(self, value: int) -> None:
        """Append a signed 32-bit integer."""
        self.buffer += _I32.pack(value)

    def u16(self, value: int) -> None:
        """Append an unsigned 16-bit integer."""
        self.buffer += _U16.pack(value)

    def u8(self, value: int) -> None:
        """Append one byte."""
        self.buffer.append(value)

    def raw(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes as they are."""
        self.buffer += data

    def string(self, text: str | bytes) -> None:
        """Append a ``u64 length + bytes`` string (text is UTF-8 encoded)."""
        data = text.encode("utf-8", errors="surrogateescape") if isinstance(text, str) else text
        self.u64(len(data))
        self.buffer += data

    def strings(self, items: list[str]) -> None:
        """Append a ``vector<string>``."""
        self.u64(len(items))
        for item in items:
            self.string(item)

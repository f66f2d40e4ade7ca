"""Read a large JSON document one array element at a time, without its whole object tree.

``json.loads`` of a graph JSON builds every node as a dict of fresh strings and lists,
about ten times the file's size, before any of it is checked. :class:`JsonCursor` walks
the text instead: the caller asks for the keys of an object, the elements of an array,
or one value (decoded by the C decoder's ``raw_decode`` at the cursor), so each node or
table row is decoded, converted to its compact form and dropped before the next one
(:mod:`tvmrt.runtime.graph_executor.graph` uses it for ``nodes`` and the ``attrs``
tables). Syntax errors are ``json.JSONDecodeError`` with the same wording and position
``json.loads`` gives.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

__all__ = ["JsonCursor"]

_WHITESPACE = re.compile(r"[ \t\n\r]*")
_DECODER = json.JSONDecoder()


class JsonCursor:
    """A position in a JSON text; every method first skips whitespace."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def _skip(self) -> str:
        match = _WHITESPACE.match(self.text, self.pos)
        self.pos = match.end() if match else self.pos
        return self.text[self.pos : self.pos + 1]

    def _error(self, message: str) -> json.JSONDecodeError:
        return json.JSONDecodeError(message, self.text, self.pos)

    def peek(self) -> str:
        """The next non-blank character ('' at the end)."""
        return self._skip()

    def value(self) -> Any:
        """Decode the value at the cursor and move past it."""
        self._skip()
        try:
            obj, self.pos = _DECODER.raw_decode(self.text, self.pos)
        except StopIteration:  # pragma: no cover - raw_decode raises JSONDecodeError
            raise self._error("Expecting value") from None
        return obj

    def members(self) -> Iterator[str]:
        """Iterate over an object's keys; the caller must consume each key's value."""
        if self._skip() != "{":
            raise self._error("Expecting value")
        self.pos += 1
        if self._skip() == "}":
            self.pos += 1
            return
        while True:
            if self._skip() != '"':
                raise self._error("Expecting property name enclosed in double quotes")
            key = self.value()
            if self._skip() != ":":
                raise self._error("Expecting ':' delimiter")
            self.pos += 1
            yield key
            nxt = self._skip()
            self.pos += 1
            if nxt == "}":
                return
            if nxt != ",":
                self.pos -= 1
                raise self._error("Expecting ',' delimiter")

    def elements(self) -> Iterator[None]:
        """Iterate over an array; the caller must consume each element at every step."""
        if self._skip() != "[":
            raise self._error("Expecting value")
        self.pos += 1
        if self._skip() == "]":
            self.pos += 1
            return
        while True:
            yield None
            nxt = self._skip()
            self.pos += 1
            if nxt == "]":
                return
            if nxt != ",":
                self.pos -= 1
                raise self._error("Expecting ',' delimiter")

    def values(self) -> Iterator[Any]:
        """The decoded elements of the array at the cursor, one at a time."""
        for _ in self.elements():
            yield self.value()

    def end(self) -> None:
        """Require nothing but whitespace after the document."""
        if self._skip():
            raise self._error("Extra data")

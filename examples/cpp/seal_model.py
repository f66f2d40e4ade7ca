"""Seal a graph model for memory_model.c: ``python seal_model.py LIB GRAPH PARAMS KEY OUT``.

OUT is "TVMRTSEAL1", then the library, the graph JSON and the params, each as a
little-endian u64 length and its bytes, everything after the magic XOR-ed with KEY
repeated: a stand-in for a real cipher (it protects nothing), so the example needs no
crypto library. Python only, no tvmrt.
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path

MAGIC = b"TVMRTSEAL1"


def seal(parts: list[bytes], key: bytes) -> bytes:
    """The sealed bundle of ``parts`` under ``key``."""
    plain = b"".join(struct.pack("<Q", len(p)) + p for p in parts)
    stream = (key * (len(plain) // len(key) + 1))[: len(plain)]
    return MAGIC + bytes(a ^ b for a, b in zip(plain, stream, strict=True))


def main(argv: list[str]) -> int:
    if len(argv) != 6 or not argv[4]:
        print(__doc__.splitlines()[0], file=sys.stderr)
        return 2
    lib, graph, params, key, out = argv[1:]
    parts = [Path(p).read_bytes() for p in (lib, graph, params)]
    Path(out).write_bytes(seal(parts, key.encode()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

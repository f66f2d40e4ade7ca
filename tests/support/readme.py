"""The README's runnable blocks: every fenced ``sh``, ``bash`` or ``python`` block, in order.

A block preceded (on the line directly above its fence) by
``<!-- readme-test: skip (REASON) -->`` is listed with that reason and not run.

    python tests/support/readme.py [README.md]     # prints each block and whether it runs
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RUNNABLE", "Block", "blocks", "fences"]

RUNNABLE = ("sh", "bash", "python")
_FENCE = re.compile(r"^```(\S*)\s*$")
_SKIP = re.compile(r"^<!-- readme-test: skip \((.+)\) -->\s*$")


@dataclass(frozen=True)
class Block:
    """One fenced block of the README."""

    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    skip: str | None  # the reason, where a skip comment sits directly above the fence


def fences(text: str) -> list[Block]:
    """Every fenced block, whatever its language (``""`` for a bare fence)."""
    lines = text.splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        opened = _FENCE.match(lines[i])
        if not opened:
            i += 1
            continue
        end = i + 1
        while end < len(lines) and lines[end].rstrip() != "```":
            end += 1
        if end == len(lines):
            raise ValueError(f"README line {i + 1}: the fence is never closed")
        skip = _SKIP.match(lines[i - 1]) if i > 0 else None
        code = "\n".join(lines[i + 1 : end]) + "\n"
        out.append(Block(opened.group(1), code, i + 1, skip.group(1) if skip else None))
        i = end + 1
    return out


def blocks(text: str) -> list[Block]:
    """The runnable blocks (sh, bash, python), skipped ones included, in order."""
    return [b for b in fences(text) if b.lang in RUNNABLE]


if __name__ == "__main__":
    path = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parents[2] / "README.md")
    for block in blocks(path.read_text()):
        state = f"skipped ({block.skip})" if block.skip else "runs"
        print(f"--- line {block.line}, {block.lang}, {state}\n{block.code}", end="")

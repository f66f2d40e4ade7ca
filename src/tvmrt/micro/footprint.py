"""Flash and RAM of a firmware image, split by part, read from the GNU linker's map.

Every input section the linker placed in ``.text``, ``.rodata``, ``.ARM.exidx``, ``.data``
or ``.bss`` is attributed by the object it came from (:mod:`.firmware` compiles each part
into its own folder) and by its name:

========================  ===========================================================
part                      what
========================  ===========================================================
``model kernels``         the package's code (C compiled here, or its objects; a graph
                          package's plan: its tensor descriptors and calls)
``model params``          its constants (linked params, ``.rodata.tvm``; the kernels'
                          strings and literal pools count to the kernels)
``model workspace``       its statically planned pools (USMP: ``.bss``)
``tvmrt runtime``         tvmrt's micro runtime and the board's platform port
``platform workspace``    the port's static workspace (models without USMP)
``board start-up``        vectors, reset, faults, semihosting
``harness``               the generated ``main.c`` and its input/output buffers
``libc/libgcc``           what newlib and libgcc give (memcpy, soft-float, libm)
========================  ===========================================================

Flash is ``.text + .rodata + .data`` (the initial values of ``.data`` are stored there),
RAM ``.data + .bss``; the stack is reported by the run (its high-water mark).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["PARTS", "Footprint", "read_map"]

PARTS = (
    "model kernels",
    "model params",
    "model workspace",
    "tvmrt runtime",
    "platform workspace",
    "board start-up",
    "harness",
    "libc/libgcc",
)
_KINDS = ("text", "rodata", "data", "bss")
_OUTPUT = {".text": "text", ".ARM.exidx": "text", ".ARM.extab": "text", ".rodata": "rodata"}
_OUTPUT[".data"] = "data"
_OUTPUT[".bss"] = "bss"
_OUTPUT_LINE = re.compile(r"^(\.\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)")
_INPUT = re.compile(r"^ (\S+)\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")
_FILL = re.compile(r"^ \*fill\*\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)")
_ADDRESS_ONLY = re.compile(r"^\s+0x([0-9a-fA-F]+)\s+0x([0-9a-fA-F]+)\s+(\S.*)$")


@dataclass
class Footprint:
    """Bytes per part and kind (``text``, ``rodata``, ``data``, ``bss``)."""

    parts: dict[str, dict[str, int]] = field(
        default_factory=lambda: {p: dict.fromkeys(_KINDS, 0) for p in PARTS}
    )

    def flash(self, part: str) -> int:
        row = self.parts[part]
        return row["text"] + row["rodata"] + row["data"]

    def ram(self, part: str) -> int:
        row = self.parts[part]
        return row["data"] + row["bss"]

    @property
    def total_flash(self) -> int:
        return sum(self.flash(p) for p in PARTS)

    @property
    def total_ram(self) -> int:
        return sum(self.ram(p) for p in PARTS)

    def table(self, stack_used: int | None = None, stack_reserved: int | None = None) -> str:
        """The flash/RAM table, one line a part, with totals."""
        lines = [f"{'part':<20} {'flash':>9} {'RAM':>9}   (text rodata data bss)"]
        for part in PARTS:
            row = self.parts[part]
            if not any(row.values()):
                continue
            detail = " ".join(str(row[k]) for k in _KINDS)
            lines.append(f"{part:<20} {self.flash(part):>9} {self.ram(part):>9}   ({detail})")
        ram = self.total_ram
        if stack_used is not None:
            reserved = f" of {stack_reserved} reserved" if stack_reserved else ""
            lines.append(
                f"{'stack (high water)':<20} {'':>9} {stack_used:>9}   (measured{reserved})"
            )
            ram += stack_used
        lines.append(f"{'total':<20} {self.total_flash:>9} {ram:>9}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, dict[str, int]]:
        return {p: dict(row) for p, row in self.parts.items()}


def _part(section: str, obj: str, work: str) -> str:
    where = obj.split(work, 1)[1].lstrip("/").split("/", 1)[0] if work in obj else ""
    if where == "model":
        if "tvmrt_entry" in section or "tvmrt_shape" in section:  # a graph plan's tensors
            return "model kernels"
        if ".str" in section or ".cst" in section:  # the kernels' messages and literals
            return "model kernels"
        if section.startswith((".rodata", ".data")):
            return "model params"
        if section.startswith(".bss") or section == "COMMON":
            return "model workspace"
        return "model kernels"
    if where == "runtime":
        if "tvmrt_workspace_memory" in section:
            return "platform workspace"
        return "tvmrt runtime"
    if where == "board":
        return "board start-up"
    if where == "harness":
        return "harness"
    return "libc/libgcc"


def read_map(text: str, work: Path, object_strings: int = 0) -> Footprint:
    """The footprint of the map ``text`` of a firmware built in ``work``.

    ``object_strings``: bytes of the model's objects' ``.rodata`` that are not named
    constants (an llvm object keeps its kernels' messages in the one ``.rodata`` its params
    are in); they count to the kernels.

    An input section's bytes are the distance to the next one's address (or to the end of
    its output section): merged string sections list their size before merging, and
    alignment padding (``*fill*``) counts to the part before it, so the parts add up to the
    output sections exactly.
    """
    footprint = Footprint()
    root = str(work)
    # per output section: (kind, end address, [(address, listed size, part)])
    sections: list[tuple[str, int, list[tuple[int, int, str]]]] = []
    entries: list[tuple[int, int, str]] | None = None
    pending: str | None = None
    started = False
    for line in text.splitlines():
        if not started:
            started = line.startswith("Linker script and memory map")
            continue
        if line[:1] not in ("", " "):  # an output section (or the end of the memory map)
            head = _OUTPUT_LINE.match(line)
            kind = _OUTPUT.get(line.split()[0]) if line.split() else None
            entries, pending = None, None
            if head is not None and kind is not None:
                entries = []
                end = int(head.group(2), 16) + int(head.group(3), 16)
                sections.append((kind, end, entries))
            continue
        if entries is None:
            continue
        fill = _FILL.match(line)
        if fill is not None:
            part = entries[-1][2] if entries else "libc/libgcc"
            entries.append((int(fill.group(1), 16), int(fill.group(2), 16), part))
            continue
        found = _INPUT.match(line)
        if found is not None:
            section, address = found.group(1), int(found.group(2), 16)
            size, obj = int(found.group(3), 16), found.group(4)
        elif pending is not None and (only := _ADDRESS_ONLY.match(line)) is not None:
            section, address = pending, int(only.group(1), 16)
            size, obj = int(only.group(2), 16), only.group(3)
        else:
            stripped = line.strip()
            # a long section name stands alone; its address and size follow on the next line
            pending = stripped if re.fullmatch(r"\.\S+|COMMON", stripped) else None
            continue
        pending = None
        if size:
            entries.append((address, size, _part(section, obj.strip(), root)))
    for kind, end, placed in sections:
        for i, (address, size, part) in enumerate(placed):
            following = placed[i + 1][0] if i + 1 < len(placed) else end
            footprint.parts[part][kind] += max(0, min(size, following - address))
    moved = min(object_strings, footprint.parts["model params"]["rodata"])
    footprint.parts["model params"]["rodata"] -= moved
    footprint.parts["model kernels"]["rodata"] += moved
    return footprint

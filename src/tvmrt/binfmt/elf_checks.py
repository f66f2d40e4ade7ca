"""Every check of what ``ld.so`` trusts in a library, in the order the loader relies on them.

:mod:`.elf_load` reads the program headers and checks the segments, :mod:`.elf_dynamic`
the dynamic section, :mod:`.elf_tables` (with :mod:`.elf_symbols`) the relocation, symbol
and hash tables, and that the section headers tvmrt reads describe the bytes the loader
maps.
"""

from __future__ import annotations

from tvmrt.binfmt import elf_dynamic, elf_tables
from tvmrt.binfmt.binary import ElfFile
from tvmrt.binfmt.elf_load import LoadImage, check_segments

__all__ = ["check_loadable"]


def check_loadable(elf: ElfFile) -> LoadImage:
    """Check everything ``ld.so`` trusts when it maps and relocates ``elf``; return its image.

    Raises
    ------
    ModuleLoadError
        Naming the file, the field (``PT_LOAD[1].p_filesz``, ``DT_PLTGOT``, ...) and what
        was expected, if the loader could crash, fail an assertion, or map other bytes
        than the ones tvmrt read.
    """
    image = LoadImage(elf)
    check_segments(image)
    elf_tables.check_sections_mapped(image)
    dynamic = elf_dynamic.read_dynamic(image)
    elf_dynamic.check_dynamic(image, dynamic)
    elf_tables.check_tables(image, dynamic)
    return image

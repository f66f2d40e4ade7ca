"""Built-in module loaders, registered as ``runtime.module.loadfile_<kind>`` on import.

* ``so`` (also ``.dll``/``.dylib`` names): kernel libraries, :mod:`.library` (legacy,
  TVM <= 0.20) and :mod:`.ffi` (tvm-ffi, TVM >= 0.21)
* ``tar`` and ``o``: ``export_library`` archives and objects, linked first, :mod:`.link`

:mod:`.binary` identifies files and reads ELF symbols without loading them;
:mod:`.blob` parses the module blob (``__tvm_dev_mblob``) a library carries.
"""

from __future__ import annotations

from tvmrt.runtime.loaders import binary, blob, ffi, library, link
from tvmrt.runtime.loaders.ffi import FFIKernelFunc, FFILibraryModule
from tvmrt.runtime.loaders.library import LegacyPackedFunc, LibraryModule

__all__ = [
    "binary",
    "blob",
    "ffi",
    "library",
    "link",
    "FFIKernelFunc",
    "FFILibraryModule",
    "LegacyPackedFunc",
    "LibraryModule",
]

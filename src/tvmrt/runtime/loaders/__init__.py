"""Built-in module loaders; :mod:`.dispatch` says which kinds of file exist and who loads each.

* :mod:`.dispatch`: sniffs a file once and hands it to exactly one leaf below; serves
  ``runtime.module.loadfile_<kind>`` for ``so``, ``tar``, ``o``, ... and
  ``runtime.ModuleLoadFromFile`` (``load_module``), all listed in
  :mod:`tvmrt.runtime.builtins`.
* leaves: :mod:`.library` (legacy ABI, TVM <= 0.20, system-lib builds included),
  :mod:`.ffi` (tvm-ffi ABI, TVM >= 0.21; its kernels are called by :mod:`.ffi_call`),
  :mod:`.packages` (Model Library Format, tvmc); :mod:`.link` is the link/compile step
  for objects, archives and C sources; :mod:`.systemlib` is ``system_lib()``;
  :mod:`.opencl` holds OpenCL device code, :mod:`.cuda` CUDA device code (its images
  read by :mod:`.cuda_image`).
* shared pieces: :mod:`.blob` (the module blob), :mod:`._dso` (what every ``dlopen``-ed
  library shares); packed-call values are :mod:`tvmrt.runtime.packed_values`. Reading the
  files themselves (ELF/PE/Mach-O, what the symbols mean for TVM, export archives within
  bounds) is :mod:`tvmrt.binfmt`, beneath the runtime.
"""

from __future__ import annotations

from tvmrt.runtime.loaders import blob, dispatch, ffi, library, link, packages
from tvmrt.runtime.loaders.ffi import FFIKernelFunc, FFILibraryModule
from tvmrt.runtime.loaders.library import LegacyPackedFunc, LibraryModule

__all__ = [
    "blob",
    "dispatch",
    "ffi",
    "library",
    "link",
    "packages",
    "FFIKernelFunc",
    "FFILibraryModule",
    "LegacyPackedFunc",
    "LibraryModule",
]

"""Build configuration that pyproject.toml cannot express: the native backend library.

``tvmrt._native_backend`` is a small C library (``src/tvmrt/_native/backend.c``) with the
services compiled kernels call back into: workspace allocation, the parallel thread pool
and the error slot. Python loads it with ctypes (see ``tvmrt.runtime._backend``); the
module-init function only makes it importable. ``sort.c`` adds the runtime functions
that TOPI's CPU sort kernels call by name (``tvm.contrib.sort.*``); ``isa.c`` scans x86-64
code for the instruction sets it uses (before a library is loaded). It uses Python's limited API, so one
build serves every CPython version.
"""

from __future__ import annotations

import sys

from setuptools import Extension, setup

# The source is C99 + pthreads; no -std flag, so newer Python headers get the compiler's default.
_CFLAGS = ["-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"]
_LIBS = ["pthread"] if sys.platform.startswith("linux") else []

native_backend = Extension(
    "tvmrt._native_backend",
    sources=[
        "src/tvmrt/_native/backend.c",
        "src/tvmrt/_native/sort.c",
        "src/tvmrt/_native/sort_args.c",
        "src/tvmrt/_native/isa.c",
    ],
    include_dirs=["src/tvmrt/_native", "src/tvmrt/include"],
    depends=[
        "src/tvmrt/_native/native.h",
        "src/tvmrt/_native/sort_args.h",
        "src/tvmrt/_native/glibc_floor.h",
    ],
    extra_compile_args=_CFLAGS,
    libraries=_LIBS,
    define_macros=[("Py_LIMITED_API", "0x030A0000")],
    py_limited_api=True,
    optional=sys.platform == "win32",  # no pthreads there: install without kernel support
)

# Tag wheels abi3 (one wheel per platform for every CPython >= 3.10).
setup(ext_modules=[native_backend], options={"bdist_wheel": {"py_limited_api": "cp310"}})

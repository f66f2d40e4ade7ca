"""Build configuration that pyproject.toml cannot express: the native backend library.

``tvmrt._native_backend`` is a small C library (``src/tvmrt/_native/backend.c``) with the
services compiled kernels call back into: workspace allocation, the parallel thread pool
and the error slot. Python loads it with ctypes (see ``tvmrt.runtime._backend``); the
module-init function only makes it importable. ``sort.c`` adds the runtime functions
that TOPI's CPU sort kernels call by name (``tvm.contrib.sort.*``); ``isa.c`` scans x86-64
code for the instruction sets it uses (before a library is loaded). It uses Python's limited
API, so one build serves every CPython version.

The same build also makes ``libtvmrt_runtime.so`` and ``libtvmrt_runtime.a`` (the C runtime
for C and C++ applications: ``services.c`` shared with the extension, ``sort.c``, and
``_native/runtime/*.c``; no Python inside) and ships them as package data in ``tvmrt/lib/``,
beside the headers in ``tvmrt/include/``. ``make native`` builds the same two files into
``build/native/`` from a checkout.
"""

from __future__ import annotations

import os
import sys
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

# The source is C99 + pthreads; no -std flag, so newer Python headers get the compiler's default.
_CFLAGS = ["-O2", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-unused-parameter"]
_LIBS = ["pthread"] if sys.platform.startswith("linux") else []

# the backend services kernels call: compiled into the extension and into libtvmrt_runtime
SERVICES = [
    f"src/tvmrt/_native/{name}.c"
    for name in ("services", "workspace", "thread_pool", "func_env", "system_lib", "measure")
]

native_backend = Extension(
    "tvmrt._native_backend",
    sources=[
        "src/tvmrt/_native/backend.c",
        *SERVICES,
        "src/tvmrt/_native/sort.c",
        "src/tvmrt/_native/sort_args.c",
        "src/tvmrt/_native/isa.c",
    ],
    include_dirs=["src/tvmrt/_native", "src/tvmrt/include"],
    depends=[
        "src/tvmrt/_native/native.h",
        "src/tvmrt/_native/services.h",
        "src/tvmrt/_native/sort_args.h",
        "src/tvmrt/_native/glibc_floor.h",
    ],
    extra_compile_args=_CFLAGS,
    libraries=_LIBS,
    define_macros=[("Py_LIMITED_API", "0x030A0000")],
    py_limited_api=True,
    optional=sys.platform == "win32",  # no pthreads there: install without kernel support
)

RUNTIME_SOURCES = [
    *SERVICES,
    "src/tvmrt/_native/sort.c",
    "src/tvmrt/_native/sort_args.c",
    *sorted(glob("src/tvmrt/_native/runtime/*.c")),
]
RUNTIME_CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-fPIC", "-fvisibility=hidden", "-Wall"]
RUNTIME_CFLAGS += ["-Wextra", "-Wno-unused-parameter"]


class BuildWithRuntime(build_ext):
    """build_ext, then libtvmrt_runtime.{so,a} into tvmrt/lib (of the build or, in place, of
    the source tree)."""

    def run(self) -> None:
        super().run()
        if not sys.platform.startswith("linux"):
            return  # the C runtime is built and tested on Linux
        base = "src" if self.inplace else self.build_lib
        out = os.path.join(base, "tvmrt", "lib")
        os.makedirs(out, exist_ok=True)
        objects = self.compiler.compile(
            RUNTIME_SOURCES,
            output_dir=os.path.join(self.build_temp, "tvmrt_runtime"),
            include_dirs=["src/tvmrt/_native", "src/tvmrt/include"],
            extra_postargs=RUNTIME_CFLAGS,
        )
        self.compiler.link_shared_object(
            objects,
            "libtvmrt_runtime.so",
            output_dir=out,
            libraries=["dl", "pthread", "m"],
            extra_postargs=["-Wl,-soname,libtvmrt_runtime.so"],
        )
        self.compiler.create_static_lib(objects, "tvmrt_runtime", output_dir=out)


# Tag wheels abi3 (one wheel per platform for every CPython >= 3.10).
setup(
    ext_modules=[native_backend],
    cmdclass={"build_ext": BuildWithRuntime},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)

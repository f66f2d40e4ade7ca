"""Build configuration that pyproject.toml cannot express: tvmrt's native code.

tvmrt has one native library, ``tvmrt/lib/libtvmrt_runtime.so`` (and ``.a``): the backend
services compiled kernels call back into (workspace memory, the thread pool, the error slot,
the system-library table), the CUDA launcher, the runtime functions kernels call by name
(``sort.c``) and the C runtime (``_native/runtime/*.c``); no Python inside. Python loads it
with ctypes (``tvmrt.runtime.kernel_services``), C and C++ programs link it, and a process
holds one copy of it whichever way it came. ``libdlr.so`` is the same objects plus DLR's C
API (``dlr.h``), for DLR programs. ``make native`` builds the same files into
``build/native/`` from a checkout.

``tvmrt._native_backend`` is the CPython glue over it: the prepared kernel and packed calls
(``backend.c``), which call into the library through addresses Python hands them and link
nothing of it. It uses Python's limited API, so one build serves every CPython version, and
makes the wheel a platform (abi3) wheel. Which file goes into which library is written once,
in ``src/tvmrt/_native/sources.txt``; every file compiles as C11.
"""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
from glob import glob

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.errors import CompileError

NATIVE = "src/tvmrt/_native"
# one language level for every C file of both libraries: C11 (pthreads, GNU extensions)
_CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O2", "-fvisibility=hidden", "-Wall", "-Wextra"]
_CFLAGS += ["-Wno-unused-parameter"]
_INCLUDE = [NATIVE, "src/tvmrt/include"]


def native_sources(library: str) -> list[str]:
    """The sources of `library` ("extension", "runtime" or "dlr") in _native/sources.txt, the list
    the Makefile reads too."""
    with open(os.path.join(NATIVE, "sources.txt"), encoding="utf-8") as f:
        rows = [line.split() for line in f if line.strip() and not line.startswith("#")]
    return [f"{NATIVE}/{row[0]}" for row in rows if library in row[1:]]


native_backend = Extension(
    "tvmrt._native_backend",
    sources=native_sources("extension"),
    include_dirs=_INCLUDE,
    depends=["setup.py", f"{NATIVE}/sources.txt", *sorted(glob(f"{NATIVE}/*.h"))],
    extra_compile_args=_CFLAGS,
    define_macros=[("Py_LIMITED_API", "0x030A0000")],
    py_limited_api=True,
    # the glue calls only Python's C API, so the linker (--as-needed) would record no libc;
    # auditwheel reads the wheel's glibc from its extension's libc and refuses one without
    extra_link_args=["-Wl,--no-as-needed", "-lc"] if sys.platform.startswith("linux") else [],
    optional=sys.platform == "win32",  # no pthreads there: install without kernel support
)

RUNTIME_SOURCES = native_sources("runtime")
DLR_SOURCES = native_sources("dlr")
RUNTIME_CFLAGS = [*_CFLAGS, "-fPIC"]


def _soname(name: str) -> list[str]:
    """The linker flags that name a shared library (macOS: its install name) and, on ELF,
    bind its calls of its own exported functions to itself: a TVM loaded into the same
    process first (RTLD_GLOBAL) exports some of the same names (TVMFuncCall,
    TVMBackendAllocWorkspace, ...), and the runtime must not call those (macOS's two-level
    namespace never does)."""
    if sys.platform == "darwin":
        return [f"-Wl,-install_name,@rpath/{name}"]
    return [f"-Wl,-soname,{name}", "-Wl,-Bsymbolic-functions"]


def _check_toolchain(compiler: object) -> None:
    """Say what is missing before the first compile fails with setuptools' bare error."""
    command = getattr(compiler, "compiler_so", None)
    if not command:
        return  # not a Unix-style compiler (MSVC): let setuptools find its own
    cc = command[0]
    if shutil.which(cc) is None:
        raise CompileError(
            f"tvmrt builds a small C library (src/tvmrt/_native: the kernel services and the "
            f"C runtime) and needs a C compiler: {cc!r} (from $CC, or Python's build "
            "configuration) was not found. Install one (Debian/Ubuntu: apt-get install gcc; "
            "Fedora/RHEL: dnf install gcc; Alpine: apk add gcc musl-dev) or set $CC to one"
        )
    header = os.path.join(sysconfig.get_paths()["include"], "Python.h")
    if not os.path.isfile(header):
        raise CompileError(
            f"tvmrt builds a C extension and needs Python's headers: {header} is missing. "
            "Install them (Debian/Ubuntu: apt-get install python3-dev; Fedora/RHEL: dnf "
            "install python3-devel)"
        )


class BuildWithRuntime(build_ext):
    """build_ext, then libtvmrt_runtime.{so,a} into tvmrt/lib (of the build or, in place, of
    the source tree)."""

    def build_extensions(self) -> None:
        _check_toolchain(self.compiler)
        super().build_extensions()

    def run(self) -> None:
        super().run()
        if sys.platform == "win32":
            return  # no pthreads: the package installs without kernel support
        base = "src" if self.inplace else self.build_lib
        out = os.path.join(base, "tvmrt", "lib")
        os.makedirs(out, exist_ok=True)
        objects = self.compiler.compile(
            RUNTIME_SOURCES,
            output_dir=os.path.join(self.build_temp, "tvmrt_runtime"),
            include_dirs=_INCLUDE,
            extra_postargs=RUNTIME_CFLAGS,
        )
        self.compiler.link_shared_object(
            objects,
            "libtvmrt_runtime.so",
            output_dir=out,
            libraries=["dl", "pthread", "m"],
            extra_postargs=_soname("libtvmrt_runtime.so"),
        )
        self.compiler.create_static_lib(objects, "tvmrt_runtime", output_dir=out)
        dlr_objects = self.compiler.compile(
            DLR_SOURCES,
            output_dir=os.path.join(self.build_temp, "tvmrt_runtime"),
            include_dirs=_INCLUDE,
            extra_postargs=RUNTIME_CFLAGS,
        )
        self.compiler.link_shared_object(
            [*objects, *dlr_objects],
            "libdlr.so",
            output_dir=out,
            libraries=["dl", "pthread", "m"],
            extra_postargs=_soname("libdlr.so"),
        )


# Tag wheels abi3 (one wheel per platform for every CPython >= 3.10).
setup(
    ext_modules=[native_backend],
    cmdclass={"build_ext": BuildWithRuntime},
    options={"bdist_wheel": {"py_limited_api": "cp310"}},
)

"""What a kernel library needs from the runtime and the machine, checked before it runs.

Two things a library's kernels take for granted that ``dlopen`` does not check:

- **Runtime functions looked up by name.** A ``call_packed`` extern (TOPI's CPU sort and
  top-k, ``-libs=cblas`` dense, ...) asks ``TVMBackendGetFuncFromEnv`` for a function the
  first time the kernel runs. LLVM-built libraries keep each name's handle in a local
  symbol ``.tvm_func.<name>`` (``.symtab``); the name itself is a string constant, which
  is what C-target (and stripped) libraries leave, so strings of ``.rodata`` that start
  with ``tvm.contrib.`` count too. :func:`lookup_names` reads both.
- **Instruction sets** (:mod:`.isa`): AVX-512 code on a CPU without it dies with SIGILL.

:func:`check_cpu` runs before the library is loaded and :func:`check_functions` once its
modules are assembled (a name is provided when the library, its imports or the global
registry has it, exactly where ``TVMBackendGetFuncFromEnv`` looks), so ``load_module``
fails with one message naming every missing function before any kernel runs. A
function registered with ``register_func`` must therefore be registered before the
library is loaded. :func:`c_runtime_refusal` says whether the C runtime may run a
library's kernels from Python (the engines ask it). :func:`describe` gives ``tvmrt
inspect`` the same facts without loading anything. tvm-ffi libraries (TVM >= 0.21) are
not checked for functions: tvmrt gives their lookups no functions at all
(``src/tvmrt/_native/backend.c``).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tvmrt.binfmt.abi import scan_tvm_symbols
from tvmrt.binfmt.binary import ElfFile
from tvmrt.binfmt.files import file_identity
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.contrib.catalog import unsupported_reason
from tvmrt.runtime.loaders import isa
from tvmrt.runtime.module import Module

__all__ = [
    "DEVICE_PROVIDED",
    "lookup_names",
    "check_cpu",
    "check_functions",
    "c_runtime_refusal",
    "describe",
    "functions_text",
]

CACHE_PREFIX = ".tvm_func."
_RODATA_NAME = re.compile(rb"\x00(tvm\.contrib\.[A-Za-z0-9_.]{1,200})(?=\x00)")
# runtime functions (the global registry); other names are kernels of imported modules
_RUNTIME_PREFIXES = ("tvm.", "runtime.", "__tvm")


# the state of a kernel name that a device module the library carries may define
DEVICE_PROVIDED = "provided by a device module"


def lookup_names(elf: ElfFile) -> list[str]:
    """The function names a library's kernels look up by name, sorted."""
    names: set[str] = set()
    for dynamic in (False, True):
        for symbol in elf.symbols(dynamic=dynamic):
            if symbol.name.startswith(CACHE_PREFIX) and len(symbol.name) > len(CACHE_PREFIX):
                names.add(symbol.name[len(CACHE_PREFIX) :])
    for section in elf.sections:
        if section.name.startswith(".rodata") and section.type != 8:
            data = b"\x00" + elf.data[section.offset : section.offset + section.size]
            names.update(m.decode("ascii") for m in _RODATA_NAME.findall(data))
    return sorted(names)


def _why_missing(name: str) -> str:
    reason = unsupported_reason(name)
    if reason is not None:
        return f"{name!r} ({reason})"
    return f"{name!r} (not in the library, its imports or the global registry)"


def c_runtime_refusal(path: str, loaded: Module | None = None) -> str:
    """Why the C runtime must not run the kernels of the library at ``path`` from Python
    ("" if it may). ``loaded``: the module the Python loader made of that file, whose
    dynamic symbols are not read again while the file is the one it loaded.

    * A library that imports ``TVM*`` functions by name (C-target kernels, a system
      library's registration) binds them in the process's global scope (the C runtime opens
      kernels ``RTLD_LAZY``; Python's loader, which loaded it first, made tvmrt's names
      global for it). It is handed to the C runtime only when every one of those names is
      tvmrt's own there (:func:`~tvmrt.runtime.kernel_services.binds_globally`): a TVM
      runtime loaded before tvmrt answers for its names instead, and the tvm-ffi error
      functions tvmrt exports only under ``tvmrt_`` names (the Python loader writes them
      into the library's own entries).

    Kernels that call a function by name the C runtime lacks (``TVMBackendGetFuncFromEnv``
    of one registered in Python: ``tvm.contrib.cblas.matmul``, an application's
    ``register_func``) run there too: the C runtime asks Python's registry for it, as TVM's
    one registry answers both (``src/tvmrt/_native/func_env.c``).
    """
    from tvmrt.runtime.kernel_services import binds_globally

    known = loaded._file_symbols if loaded is not None else None
    try:
        if known is not None and known[0] == file_identity(path):
            symbols = known[1]
        else:
            elf = ElfFile(Path(path).read_bytes(), path)
            symbols = scan_tvm_symbols(elf.symbols(dynamic=True))
    except (OSError, TVMError) as exc:
        return f"its kernel library cannot be read: {exc}"
    imported = [n for n in symbols.undefined if n.startswith("TVM")]
    if symbols.system_lib and SYSTEM_LIB_REGISTER not in imported:
        imported.append(SYSTEM_LIB_REGISTER)
    foreign = [n for n in imported if not binds_globally(n)]
    if foreign:
        return (
            f"its kernel library imports {', '.join(foreign[:3])} by name, which the "
            "process's global scope does not bind to tvmrt's runtime (a TVM runtime loaded "
            "first answers, or tvmrt exports no such name: only the Python loader binds it)"
        )
    return ""


SYSTEM_LIB_REGISTER = "TVMBackendRegisterSystemLibSymbol"


def check_cpu(elf: ElfFile, shown: str) -> None:
    """Refuse a library whose code uses instructions this CPU lacks.

    Raises
    ------
    ModuleLoadError
        Naming the missing CPU features (and the ``-mcpu`` the build recorded, if any).
    """
    found = isa.code_features(elf)
    missing = isa.missing_features(found)
    if missing:
        raise ModuleLoadError(f"cannot load {shown!r}: {_cpu_text(found, missing, elf)}")


def _cpu_text(found: isa.CodeFeatures, missing: list[str], elf: ElfFile) -> str:
    what = (
        f"{found.evex} AVX-512 (EVEX) instructions, the first at {found.first_evex}"
        if "avx512f" in missing
        else f"{found.vex} AVX (VEX) instructions"
    )
    mcpu = isa.mcpu_hint(elf.data)
    built = f", built for -mcpu={mcpu}" if mcpu else ""
    return (
        f"its code uses CPU features this CPU lacks: {', '.join(missing)} ({what}{built}); "
        "running it would kill the process with SIGILL. Rebuild it for this CPU (e.g. "
        "-mcpu=native on this machine) or run it on one that has them"
    )


def check_functions(library: Module, elf: ElfFile, shown: str) -> None:
    """Refuse a library whose kernels look up functions nobody provides.

    ``library`` is the kernel library's own module with its imports attached.

    Raises
    ------
    ModuleLoadError
        Naming each missing function and, for one TVM's runtime had, what it needs.
    """
    from tvmrt.runtime.registry import get_global_func

    missing = [
        name
        for name in lookup_names(elf)
        if library.find_function(name, True) is None
        and get_global_func(name, allow_missing=True) is None
    ]
    if missing:
        raise ModuleLoadError(f"cannot load {shown!r}: {functions_text(missing)}")


_SHOWN = 5
_DEVICE_KERNEL = re.compile(r"_kernel\d*$")


def functions_text(missing: list[str]) -> str:
    """The problem a library whose kernels look up the ``missing`` names has."""
    # TVM names a device kernel <function>_kernel (<function>_kernel0 before 0.9)
    kernels = [n for n in missing if _DEVICE_KERNEL.search(n)]
    runtime = [n for n in missing if n not in kernels]
    parts = []
    if kernels:  # a host module calling device kernels that are not there
        more = f" and {len(kernels) - _SHOWN} more" if len(kernels) > _SHOWN else ""
        parts.append(
            f"it is the host part of a device build (OpenCL, CUDA, ...) without its device "
            f"code: {len(kernels)} device kernel(s) it launches are in no module it carries "
            f"({', '.join(repr(k) for k in kernels[:_SHOWN])}{more}); export the whole "
            "module with export_library (saving the host module alone, lib.save('x.o'), "
            "drops the device code)"
        )
    if runtime:
        parts.append(
            "its kernels call runtime functions that are not provided: "
            + "; ".join(_why_missing(n) for n in runtime)
            + " (a function of your own must be registered with register_func before loading)"
        )
    return "; ".join(parts)


def describe(
    elf: ElfFile, exported: set[str], has_device_modules: bool, problems: list[str]
) -> dict[str, Any]:
    """``tvmrt inspect``'s report of what a library needs; appends problems to ``problems``.

    Without loading anything, a name counts as provided when the library exports it, when
    tvmrt's global registry has it, or (for a kernel name, not a runtime function) when the
    library carries device modules that may define it.
    """
    from tvmrt.runtime.registry import get_global_func

    functions: dict[str, str] = {}
    for name in lookup_names(elf):
        if name in exported or get_global_func(name, allow_missing=True) is not None:
            functions[name] = "provided"
        elif has_device_modules and not name.startswith(_RUNTIME_PREFIXES):
            functions[name] = DEVICE_PROVIDED
        else:
            functions[name] = "missing"
    missing = [n for n, state in functions.items() if state == "missing"]
    if missing:
        problems.append(functions_text(missing))
    found = isa.code_features(elf)
    lacking = isa.missing_features(found)
    if lacking:
        problems.append(_cpu_text(found, lacking, elf))
    cpu = {"uses": list(found.features), "evex": found.evex, "vex": found.vex}
    if lacking:
        cpu["missing_here"] = lacking
    return {"functions": functions, "cpu": cpu}

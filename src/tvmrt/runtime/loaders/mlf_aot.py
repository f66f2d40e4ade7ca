"""Model Library Format AOT packages (microTVM's export), compiled for this host.

An MLF package built with the AOT executor (``tvmc compile --runtime=crt``,
``export_model_library_format`` of an ``Executor("aot")`` build) holds plain C:
``codegen/host/src/<model>_lib*.c`` (the kernels, the entry function and, with params
linked or unified static memory planning, the constants and workspace pools as static
arrays), ``codegen/host/include/tvmgen_<model>.h`` (the ``c`` interface's structs),
``metadata.json`` (names, dtypes and byte sizes of inputs and outputs, workspace sizes),
``src/<model>.relay`` (the Relay source: input shapes) and ``parameters/<model>.params``.
It is a tar or the unpacked folder a microTVM project holds (loaded through its
``metadata.json``).

:func:`describe` reads what the package says (nothing is compiled);
:func:`compile_package` compiles its sources once with the host C compiler together with
the CRT's C (``runtime/crt/``: ``crt_backend.c``, the functions generated code calls,
the same file a microcontroller's firmware compiles, and ``host_port.c``, the platform
port of this host: heap workspace, ``TVMPlatformAbort`` returning an error, the guarded
calls of the entry) into a shared library linked ``-Bsymbolic``, cached in
``cache_dir()/mlf`` and checked on every use (:mod:`.cache`); :func:`load_mlf_aot`
returns the executor factory over it (the global ``tvm.crt_aot_factory.create``, so this
leaf imports no engine).

The entry function is read from the source: ``tvmgen_<model>_run(struct
tvmgen_<model>_inputs*, struct tvmgen_<model>_outputs*)`` (``c`` interface, TVM >= 0.9),
or the packed signature ``(args, type_codes, num_args, out_value, out_type_code,
resource_handle)`` of ``tvmgen_<model>_run`` (``packed`` interface) or of TVM 0.8's
``tvmgen_<model>_run_model``.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import subprocess
import tempfile
from pathlib import Path, PurePosixPath

from tvmrt.binfmt import archive
from tvmrt.binfmt.files import MAX_META_BYTES, check_regular, read_regular
from tvmrt.error import ModuleLoadError
from tvmrt.runtime.loaders import cache, link, memory
from tvmrt.runtime.loaders.mlf_aot_package import CrtTensor, MlfAotPackage, describe
from tvmrt.runtime.module import Module
from tvmrt.runtime.registry import get_global_func

__all__ = [
    "CrtTensor",
    "MlfAotPackage",
    "compile_package",
    "describe",
    "is_aot_package",
    "is_mlf_folder",
    "load_mlf_aot",
    "read_package",
]

_RECIPE = "tvmrt-mlf-aot-v2"
CRT_DIR = Path(__file__).resolve().parent.parent / "crt"
# the CRT's sources the host library compiles with the package's (part of the cache key)
CRT_SOURCES = ("crt_backend.c", "host_port.c")
_COMPILE_TIMEOUT_S = 600
_MAX_FOLDER_FILES = archive.MAX_MEMBERS
_MAX_FOLDER_BYTES = archive.MAX_TOTAL_BYTES
_FOLDER_PARTS = (  # what a tar of the package holds too
    *("codegen/host/src/", "codegen/host/include/", "codegen/host/lib/", "src/"),
    *("parameters/", "executor-config/graph/"),
)


def is_mlf_folder(path: str | Path) -> bool:
    """Whether ``path`` is an unpacked MLF package's ``metadata.json`` (or its folder)."""
    root = Path(path)
    if root.name == "metadata.json":
        root = root.parent
    return (root / "metadata.json").is_file() and (root / "codegen" / "host").is_dir()


def read_package(path: str, shown: str) -> dict[str, bytes]:
    """The package's files by their path inside it: a tar's members, or the folder's
    ``metadata.json``, host code and Relay source (``path`` names its ``metadata.json``).

    Raises
    ------
    ModuleLoadError
        If the tar is unreadable, or the folder holds more than a package can hold.
    """
    if not (Path(path).name == "metadata.json" or Path(path).is_dir()):
        return archive.member_files(path)
    root = Path(path).parent if Path(path).name == "metadata.json" else Path(path)
    meta = read_regular(root / "metadata.json", "MLF metadata", MAX_META_BYTES, ModuleLoadError)
    files: dict[str, bytes] = {"metadata.json": meta}
    total = 0
    for part in _FOLDER_PARTS:
        folder = root / part
        if not folder.is_dir():
            continue
        for file in sorted(folder.iterdir()):
            if not file.is_file() or file.is_symlink():
                continue
            if len(files) >= _MAX_FOLDER_FILES:
                raise ModuleLoadError(f"cannot load {shown!r}: {part} holds too many files")
            if total + check_regular(file, "MLF file", _MAX_FOLDER_BYTES, ModuleLoadError) > (
                _MAX_FOLDER_BYTES
            ):
                raise ModuleLoadError(
                    f"cannot load {shown!r}: its host code is over {_MAX_FOLDER_BYTES} bytes"
                )
            data = read_regular(file, "MLF file", _MAX_FOLDER_BYTES - total, ModuleLoadError)
            total += len(data)
            files[part + file.name] = data
    return files


# the flags of the host library's compile, all in its cache key (with the compiler, tvmrt's
# version and headers: link.toolchain_key)
_FLAGS = (
    *("-std=gnu11", "-O2", "-fPIC", "-shared", "-Wl,-Bsymbolic"),
    "-DTVMRT_CRT_ERROR_BYTES=1024",  # the host has room for TVM's longest messages
)


def compile_package(package: MlfAotPackage) -> Path:
    """The cached host library of ``package``'s C code and the CRT platform.

    Raises
    ------
    ModuleLoadError
        If no C compiler is found, the cache is not writable, or compiling fails (the
        message has the compiler's last lines).
    """
    shown = package.shown
    compiler = link.find_compiler()
    if compiler is None:
        raise ModuleLoadError(
            f"cannot load {shown!r}: an MLF AOT package is C code compiled for this host when "
            "loaded, and no C compiler was found; install gcc or clang, or set $CC"
        )
    digest = hashlib.sha256(_RECIPE.encode())
    for name in CRT_SOURCES:
        digest.update(name.encode() + b"\0" + (CRT_DIR / name).read_bytes())
    digest.update(link.toolchain_key(compiler, _FLAGS))
    for name, data in (*package.sources, *package.headers):
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    key = digest.hexdigest()
    directory = cache.cache_dir() / "mlf"
    found = cache.find_entry(directory, key, ".so")
    if found is not None:
        return found
    try:
        partial = cache.temp_entry(directory, key)
    except OSError as exc:
        raise ModuleLoadError(
            f"cannot load {shown!r}: cannot write to the cache folder {str(directory)!r} "
            f"({exc.strerror}); set $TVMRT_CACHE_DIR to a writable folder"
        ) from exc
    try:
        with tempfile.TemporaryDirectory(
            prefix="tvmrt-mlf-", dir=memory.scratch_or_default()
        ) as work:
            include = Path(work) / "include"
            include.mkdir()
            for name, data in package.headers:  # their own names: the code includes them
                base = PurePosixPath(name).name
                if re.fullmatch(r"[\w.-]+\.h", base):
                    (include / base).write_bytes(data)
            inputs = []
            (Path(work) / "codegen" / "host" / "src").mkdir(parents=True)
            for i, (name, data) in enumerate(package.sources):
                base = PurePosixPath(name).name  # the member's own name: the compiler's
                if not re.fullmatch(r"[\w.-]+\.(c|cc|cpp)", base):  # messages name it
                    base = f"source{i}.c"
                relative = f"codegen/host/src/{base}"
                if relative in inputs:  # two members of one name in different folders
                    relative = f"codegen/host/src/{i}-{base}"
                (Path(work) / relative).write_bytes(data)
                inputs.append(relative)
            command = [
                *compiler,
                *_FLAGS,
                "-I",
                str(include),
                "-I",
                str(link.include_dir()),
                "-o",
                str(partial),
                *inputs,
                *(str(CRT_DIR / name) for name in CRT_SOURCES),
                "-lm",
            ]
            result = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=_COMPILE_TIMEOUT_S,
                check=False,
                cwd=work,
                env=memory.compiler_env(),
            )
        if result.returncode != 0:
            output = (result.stderr or result.stdout).strip()[-2000:]
            raise ModuleLoadError(
                f"cannot load {shown!r}: compiling its C code for this host failed "
                f"({compiler[0]} exited with {result.returncode}): {output}"
            )
        return cache.publish(partial, directory, key, ".so", 0o755)
    except (OSError, subprocess.SubprocessError) as exc:
        if isinstance(exc, ModuleLoadError):
            raise
        raise ModuleLoadError(f"cannot load {shown!r}: compiling its C code failed: {exc}") from exc
    finally:  # published (renamed) or failed: no half-written file stays
        with contextlib.suppress(OSError):
            partial.unlink()


def is_aot_package(path: str, shown: str) -> bool:
    """Whether the package's ``metadata.json`` records the AOT executor (or no executor)."""
    executors = describe(read_package(path, shown), shown).executors
    return "aot" in executors or not executors


def load_mlf_aot(path: str, shown: str) -> Module:
    """Compile (once) and load an MLF AOT package: the executor factory over its code.

    Raises
    ------
    ModuleLoadError
        If something keeps it from running here (:attr:`MlfAotPackage.blockers`, all of
        them named), or compiling fails.
    """
    package = describe(read_package(path, shown), shown)
    if package.blockers:
        raise ModuleLoadError("; ".join(package.blockers))
    library = compile_package(package)
    create = get_global_func("tvm.crt_aot_factory.create")  # the engine's constructor
    factory = create(str(library), package.to_json())
    assert isinstance(factory, Module)
    return factory

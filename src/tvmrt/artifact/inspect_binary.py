"""What a library file holds, read without loading it: symbols, module blob, archive members.

Shared by the artifact forms (:mod:`tvmrt.artifact.forms`) for ``tvmrt inspect``: the
symbols of a library or of each archive member (whatever machine they were built for),
the module blob (also a ``devc.c``'s byte array), and the members of MLF tars and tvmc
packages. Nothing from the artifact executes.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tvmrt.artifact.devices import DEVICE_MODULE_KINDS, device_code_problem
from tvmrt.artifact.report import LibraryNeeds, LibraryReport
from tvmrt.binfmt import abi, binary, elf_checks
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.graph_executor import GraphExecutorFactory
from tvmrt.runtime.loaders import needs
from tvmrt.runtime.loaders.dispatch import FileKind, Sniffed
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray

__all__ = [
    "Found",
    "archive_members",
    "describe_library",
    "inspect_code",
    "inspect_elf",
    "inspect_library_code",
]


@dataclass
class Found:
    """What inspection found so far.

    Attributes
    ----------
    library
        The report's ``library`` section.
    exported
        Kernel names the code exports (None: not known before compiling C sources).
    graph_json, params
        The graph and weights the artifact carries (embedded factory or package members).
    embedded
        The modules of the library's module blob (factories, device code).
    aot
        Whether it is an AOT build (no graph expected).
    graph_expected
        False for an executable that takes no graph (a Relax VM's): a graph JSON is not
        looked for.
    """

    library: LibraryReport
    exported: set[str] | None = None
    graph_json: str | None = None
    params: dict[str, NDArray] = field(default_factory=dict)
    embedded: list[Module] = field(default_factory=list)
    aot: bool = False
    graph_expected: bool = True


def describe_library(path: Path, sniffed: Sniffed | None, problems: list[str]) -> Found:
    """The form, kind and machine of a library file as the loader's dispatcher sniffed it."""
    from tvmrt.binfmt import binary

    if sniffed is None:
        info = binary.identify(path)
        return Found(LibraryReport(kind=info.describe(), machine=info.machine))
    info = sniffed.info
    if sniffed.reason:
        problems.append(sniffed.reason)
    return Found(
        LibraryReport(
            form=sniffed.form,
            form_text=sniffed.description,
            kind=info.describe(),
            machine=info.machine,
        )
    )


def inspect_library_code(
    path: Path, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    """Symbols and blob of a library file: one ELF file, or an object / export tar's members."""
    if sniffed is None:
        return
    if sniffed.form.is_linked:
        _inspect_objects(path, sniffed.form, found, problems)
    elif sniffed.info.format == "elf":  # a shared library, whatever machine it is for
        inspect_elf(Path(path).read_bytes(), str(path), sniffed.info.kind, found, problems)


def inspect_elf(data: bytes, shown: str, kind: str, found: Found, problems: list[str]) -> None:
    """Symbols and the embedded factory of one ELF file (library or object, any machine)."""
    try:
        elf = binary.ElfFile(data, shown)
        symbols = elf.symbols(dynamic=kind == "shared library")
        tvm = abi.scan_tvm_symbols(symbols)
    except ModuleLoadError as exc:
        problems.append(str(exc))
        return
    if kind == "shared library":  # what ld.so trusts, checked as the loader checks it
        try:
            elf_checks.check_loadable(elf)
        except ModuleLoadError as exc:
            problems.append(str(exc))
    lib = found.library
    if tvm.abi != "none" or lib.abi is None:
        lib.abi = tvm.abi
    if tvm.system_lib:
        lib.system_lib = True
    if tvm.linked_params:
        lib.linked_params = "TVM 0.7/0.8 _lookup_linked_param"
    found.exported = (found.exported or set()) | set(tvm.functions)
    lib.functions = len(found.exported)
    if tvm.blob_symbol:
        _read_factory(elf, symbols, tvm.blob_symbol, shown, found, problems)
    if tvm.abi == "legacy":  # runtime functions its kernels look up, CPU features it uses
        try:
            described = needs.describe(
                elf, set(tvm.functions), lib.device_code is not None, problems
            )
            lib.needs = LibraryNeeds.from_dict(described)
        except TVMError as exc:  # a corrupt .symtab
            problems.append(str(exc))


def _read_factory(
    elf: Any, symbols: list[Any], blob_symbol: str, shown: str, found: Found, problems: list[str]
) -> None:
    """The modules in a library's module blob (either layout): a factory, device code."""
    from tvmrt.runtime.loaders.blob import parse_module_blob
    from tvmrt.runtime.loaders.ffi import parse_library_bin

    defined = {s.name: s for s in symbols if s.defined}
    try:
        blob = elf.read_sized_blob(defined[blob_symbol])
        what = f"{blob_symbol} of {shown!r}"
        if blob_symbol == "__tvm_ffi__library_bin":
            modules: list[Any] = parse_library_bin(blob, what).entries
        else:
            modules = parse_module_blob(blob, what).modules
    except TVMError as exc:
        problems.append(str(exc))
        return
    found.embedded.extend(m for m in modules if m is not None)
    for module in modules:
        if isinstance(module, GraphExecutorFactory) and found.graph_json is None:
            found.graph_json = module.graph_json
            found.params.update(module.params)
            found.library.embedded = "graph executor factory (graph JSON and params)"
        elif getattr(module, "type_key", None) in DEVICE_MODULE_KINDS:
            kind = module.type_key
            table = getattr(module, "table", {})
            image = getattr(module, "image", None)  # CUDA: PTX ISA version, SM targets
            what = f"{kind!r} module" + (
                f", {len(table)} kernel(s), {module.format}: {image.summary()}" if image else ""
            )
            found.library.device_code = (
                f"{DEVICE_MODULE_KINDS[kind]} kernels ({what}): run it with --device {kind}"
            )
            problem = device_code_problem(kind, image, f"{shown}: {kind!r} module")
            if problem is not None:
                problems.append(problem)


def _inspect_objects(path: Path, form: FileKind, found: Found, problems: list[str]) -> None:
    from tvmrt.runtime.loaders import link

    if form is FileKind.OBJECT:
        members = [(path.name, path.read_bytes())]
    else:
        try:
            members = link.read_members(str(path))
        except ModuleLoadError as exc:
            problems.append(str(exc))
            return
    inspect_code(members, str(path), found, problems)
    found.library.members = [name for name, _ in members]


def inspect_code(
    members: list[tuple[str, bytes]], shown: str, found: Found, problems: list[str]
) -> None:
    """Objects (any machine: their symbols are read anyway) and C sources of an archive."""
    from tvmrt.binfmt import binary
    from tvmrt.runtime.loaders import link

    machines = set()
    sources = []
    for name, data in members:
        if link.is_source(name):
            sources.append(name)
            _blob_from_c_source(data, f"{shown}:{name}", found, problems)
            continue
        info = binary.identify_bytes(data[:4096])
        machines.add(info.machine)
        try:
            binary.check_host_compatible(info, f"{shown}:{name}", "object file")
        except ModuleLoadError as exc:
            problems.append(str(exc))
        if info.format == "elf":
            inspect_elf(data, f"{shown}:{name}", "object file", found, problems)
    found.library.machine = ", ".join(sorted(m for m in machines if m))
    if sources:
        found.library.c_sources = sources
        if found.library.abi is None:
            found.library.abi = "legacy"
        if link.find_cxx_compiler() is None:
            problems.append(
                f"{shown!r} holds C sources ({', '.join(sources)}) that are compiled when it "
                "is loaded, and no C++ compiler was found"
            )
        found.exported = None  # kernels in C sources are not known before compiling
    if link.find_compiler() is None:
        problems.append(
            f"loading it links object files with a C compiler: {link.missing_compiler()}"
        )


_C_BLOB = re.compile(
    rb"(__tvm_dev_mblob|__tvm_ffi__library_bin)\[\d+\]\s*=\s*\{([0-9a-fA-Fx,\s]*)\}"
)


def _blob_from_c_source(data: bytes, shown: str, found: Found, problems: list[str]) -> None:
    """The module blob a ``devc.c`` (TVM's C packer) holds as a byte array, parsed."""
    from tvmrt.runtime.loaders.blob import parse_module_blob
    from tvmrt.runtime.loaders.ffi import parse_library_bin

    match = _C_BLOB.search(data)
    if match is None:
        return
    symbol = match.group(1).decode()
    try:
        blob = bytes(int(tok, 16) for tok in match.group(2).split(b",") if tok.strip())
        what = f"{symbol} in {shown!r}"
        if symbol == "__tvm_ffi__library_bin":  # tvm-ffi's layout (a tvm-ffi factory)
            modules: list[Any] = parse_library_bin(blob, what).entries
        else:
            modules = parse_module_blob(blob, what).modules
    except (ValueError, TVMError) as exc:
        problems.append(f"{shown!r}: its {symbol} array is unreadable: {exc}")
        return
    found.embedded.extend(m for m in modules if m is not None)
    for module in modules:
        if isinstance(module, GraphExecutorFactory) and found.graph_json is None:
            found.graph_json = module.graph_json
            found.params.update(module.params)
            found.library.embedded = "graph executor factory (graph JSON and params, in C source)"


def archive_members(path: Path, problems: list[str]) -> dict[str, bytes] | None:
    """The members of a tar by name (``./`` stripped), or None (the problem is recorded)."""
    from tvmrt.runtime.loaders import link

    try:
        raw = link.read_members(str(path))
    except ModuleLoadError as exc:
        problems.append(str(exc))
        return None
    out = {}
    for name, data in raw:
        while name.startswith("./"):
            name = name[2:]
        out[name] = data
    return out

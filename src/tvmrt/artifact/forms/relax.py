"""A Relax VM executable: ``relax.build`` / ``tvm.compile`` exported as one ``model.so``.

Claimed when the library's module blob has a Relax executable at its root
(``relax.Executable``, TVM 0.16-0.19; ``relax.VMExecutable`` from 0.20: the dispatcher's
``FileKind.RELAX_VM``), alone or in a folder. The executor is TVM's face
:class:`~tvmrt.runtime.relax_vm.VirtualMachine` over the C runtime's Relax VM, on the
requested device (with the CPU as its host); ``main``'s parameters are the inputs, the
result's tensors (a tuple flattened) the outputs. With ``debug`` it is the face's
profiling subclass, timing every call the VM makes. It runs on a device of an RPC
session too: the server loads the file, and the face drives the remote VM module's
packed functions.

Inspection reads the library's symbols and blob here, and the executable through the C
runtime in a child process (:mod:`tvmrt.artifact.relax_probe`): functions and their
parameters, what provides each name of the function table, and whether a VM of it can
be made here.
"""

from __future__ import annotations

import re
from typing import Any

from tvmrt.artifact.devices import DEVICE_MODULE_KINDS
from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.inspect_binary import Found, inspect_library_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.artifact.relax_probe import probe
from tvmrt.artifact.report import RelaxCallee, RelaxFunction, RelaxReport, RelaxTensor
from tvmrt.binfmt.abi import RELAX_KINDS
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders.dispatch import FileKind, Sniffed
from tvmrt.runtime.loaders.needs import functions_text
from tvmrt.runtime.module import Module
from tvmrt.runtime.native_module import has_global
from tvmrt.runtime.relax_profiler import RelaxVMProfiler
from tvmrt.runtime.relax_vm import VirtualMachine

__all__ = ["FORM", "describe_executable"]

_NOT_TAKEN = "a Relax VM executable carries its own code and constants"


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return sniffed is not None and sniffed.form is FileKind.RELAX_VM


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    files = request.files
    for role, given in (("graph JSON", files.graph), ("params file", files.params)):
        if given is not None:
            raise ModuleLoadError(
                f"{files.lib.name!r} is a Relax VM executable: {_NOT_TAKEN}, so it takes no "
                f"{role} ({str(given)!r}); drop --graph/--params"
            )
    if request.debug:
        profiler = RelaxVMProfiler(lib, request.device, dump_root=request.dump_root)
        return LoadedModel(profiler, lib, files, "relax", frozenset(), profiler)
    return LoadedModel(VirtualMachine(lib, request.device), lib, files, "relax")


# -- inspection ------------------------------------------------------------------------------

_ANNOTATION = re.compile(r"annotation=R\.Tensor\(\(([^)]*)\)")


def _symbols(sig: dict[str, Any]) -> dict[str, str] | None:
    """The names of the symbolic dimensions (-1) in a signature's annotation, by index."""
    shape = sig.get("shape")
    found = _ANNOTATION.search(str(sig.get("annotation", "")))
    if shape is None or found is None or -1 not in shape:
        return None
    dims = [d.strip() for d in found.group(1).split(",") if d.strip()]
    if len(dims) != len(shape):
        return None
    named = {str(i): dims[i] for i, d in enumerate(shape) if d == -1 and not dims[i].isdigit()}
    return named or None


def _tensor(sig: dict[str, Any], name: str | None = None) -> RelaxTensor:
    shape = sig.get("shape")
    if shape is None and "ndim" in sig and int(sig["ndim"]) >= 0:
        shape = [-1] * int(sig["ndim"])
    kind = str(sig.get("kind", "any"))
    if kind == "any" and shape is not None:
        kind = "tensor"  # a result whose shape is matched, its dtype not checked
    return RelaxTensor(
        kind=kind,
        name=name,
        shape=None if shape is None else [int(d) for d in shape],
        dtype=sig.get("dtype"),
        symbols=_symbols(sig),
    )


def describe_executable(described: dict[str, Any], devices: list[str]) -> RelaxReport:
    """The report section of what :func:`tvmrt.runtime.relax_vm.describe` answered."""
    functions: list[RelaxFunction] = []
    builtins: list[RelaxCallee] = []
    kernels: list[RelaxCallee] = []
    for fn in described["functions"]:
        if fn["kind"] == "packed":
            callee = RelaxCallee(fn["name"], fn["provided_by"], fn.get("family"))
            (kernels if callee.provided_by == "kernel" else builtins).append(callee)
            continue
        sigs = fn.get("signature") or [{} for _ in fn["params"]]
        functions.append(
            RelaxFunction(
                name=fn["name"],
                kind=fn["kind"],
                params=[_tensor(s, str(p)) for p, s in zip(fn["params"], sigs, strict=True)],
                returns=_tensor(fn.get("returns") or {}),
                registers=int(fn["registers"]),
                instructions=int(fn["instructions"]),
            )
        )
    compiled = any(f.kind == "vm_tir" for f in functions)
    return RelaxReport(
        module_kind=described["kind"],
        era=described["era"],
        magic=described["magic"],
        version=described["version"],
        exec_mode="compiled" if compiled else "bytecode",
        functions=functions,
        builtins=builtins,
        kernels=kernels,
        constants=int(described["constants"]),
        tensor_constants=int(described["tensor_constants"]),
        tensor_constant_bytes=int(described["tensor_constant_bytes"]),
        devices=devices,
    )


def _blob_kinds(sniffed: Sniffed) -> list[str]:
    """The module kinds in a tvm-ffi ``__tvm_ffi__library_bin`` (TVM >= 0.22), read from
    their headers only (a module tvmrt cannot load is listed too); [] for other layouts."""
    from tvmrt.binfmt.stream import ByteReader

    facts = sniffed.facts
    if facts is None or facts.elf is None or facts.symbols is None:
        return []
    if facts.symbols.blob_symbol != "__tvm_ffi__library_bin":
        return []
    symbol = next(
        (s for s in facts.dynsym if s.name == "__tvm_ffi__library_bin" and s.defined), None
    )
    if symbol is None:
        return []
    try:
        blob = facts.elf.read_sized_blob(symbol)
        reader = ByteReader(blob[8:], "library binary", ModuleLoadError)
        indptr = reader.u64s("import tree indptr")
        reader.u64s("import tree child indices")
        kinds = []
        for index in range(len(indptr) - 1):
            kind = reader.string(f"kind of module {index}")
            kinds.append(kind)
            if kind != "_lib":
                reader.blob(f"bytes of module {index}")
        return kinds
    except TVMError:
        return []  # the blob's reader (inspect_library_code) reports what is wrong with it


def _devices(kinds: list[str]) -> list[str]:
    """CPU (the VM and its host kernels), then each device whose kernels the library has."""
    return [
        "CPU",
        *dict.fromkeys(DEVICE_MODULE_KINDS[k] for k in kinds if k in DEVICE_MODULE_KINDS),
    ]


def _runtime_functions(found: Found, problems: list[str]) -> list[str]:
    """The C runtime runs the executable, so what its compiled code looks up by name (the
    VM's builtins, in compiled mode) is provided where the C runtime has it: those names
    are marked so and the problem naming them is rewritten for the rest."""
    needs = found.library.needs
    if needs is None:
        return problems
    missing = [name for name, state in needs.functions.items() if state == "missing"]
    provided = [name for name in missing if has_global(name)]
    if not provided:
        return problems
    for name in provided:
        needs.functions[name] = "provided"
    rest = [name for name in missing if name not in provided]
    kept = [p for p in problems if not p.startswith(_NOT_PROVIDED)]
    return [*kept, functions_text(rest)] if rest else kept


_NOT_PROVIDED = "its kernels call runtime functions that are not provided"


def _problems(report: RelaxReport, refused: str | None) -> list[str]:
    """What stops a VM of it here: what the VM refused to resolve."""
    return [] if refused is None else [f"tvmrt's Relax VM refuses it: {refused}"]


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    found_here: list[str] = []
    inspect_library_code(files.lib, sniffed, found, found_here)
    # Python's blob reader has no loader for the executable (the C runtime reads it)
    in_library = [
        p for p in found_here if not any(f"imports a {k!r} module" in p for k in RELAX_KINDS)
    ]
    in_library = _runtime_functions(found, in_library)
    problems.extend(in_library)
    found.graph_expected = False
    found.library.form_text = "Relax VM executable (relax.build / tvm.compile, export_library)"
    for role, given in (("graph JSON", files.graph), ("params file", files.params)):
        if given is not None:
            problems.append(f"{_NOT_TAKEN}: the {role} {str(given)!r} is not used (drop it)")
    kinds = [m.type_key for m in found.embedded if isinstance(m, Module)]
    kinds += _blob_kinds(sniffed) if sniffed is not None else []
    devices = [k for k in kinds if k in DEVICE_MODULE_KINDS]
    if devices and found.library.device_code is None:  # a module its blob reader refused
        found.library.device_code = (
            f"{DEVICE_MODULE_KINDS[devices[0]]} kernels ({devices[0]!r} module, which tvmrt "
            "cannot load: see below)"
        )
    answer = probe(files.lib)
    if "error" in answer:
        if not in_library:  # else the reason it cannot be loaded is among those already
            problems.append(str(answer["error"]))
        return
    kinds += list(answer.get("imports", []))
    report = describe_executable(answer["describe"], _devices(kinds))
    found.library.relax = report
    problems.extend(_problems(report, answer.get("refused")))


FORM = ArtifactForm(
    "relax",
    "Relax VM executable (relax.build / tvm.compile, exported as one library)",
    _claims,
    _load,
    _inspect,
    remote=True,
)

"""A Relay VM executable: ``code.ro`` + ``lib.so`` (``Executable.save``), or one ``vm.so``.

The two-file form is claimed when the files name a ``code.ro``; ``vm.so`` is a library
whose module blob holds a ``VMExecutable``, which the factory form hands here (as it does
an AOT build). A late-bound executable takes its constants from the params file. The
executor is TVM's face :class:`~tvmrt.runtime.vm.VirtualMachine`; inspection lists the
functions, their arities, the opcodes used and the constants, running nothing.
"""

from __future__ import annotations

from collections import Counter

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest, remote_refusal
from tvmrt.artifact.inspect_binary import Found, inspect_library_code
from tvmrt.artifact.model import LoadedModel
from tvmrt.artifact.report import (
    RelayVMConstant,
    RelayVMConstants,
    RelayVMFunction,
    RelayVMReport,
)
from tvmrt.binfmt.files import read_code
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders.dispatch import Sniffed
from tvmrt.runtime.module import Module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.profiler_vm import VirtualMachineProfiler
from tvmrt.runtime.vm import VirtualMachine
from tvmrt.runtime.vm.executable import VMExecutable, load_executable
from tvmrt.runtime.vm.format import ExecutableData, read_executable
from tvmrt.runtime.vm.opcodes import OPCODE_NAMES

__all__ = ["FORM", "is_vm_executable", "describe_embedded"]


def is_vm_executable(type_key: str) -> bool:
    """Whether a loaded root module of this type key is a Relay VM executable (``vm.so``)."""
    return type_key == "VMExecutable"


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return files.code is not None


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    files = request.files
    if request.remote is not None:  # a vm.so handed over by the factory form
        raise remote_refusal(FORM, request.device)
    if is_vm_executable(lib.type_key):
        exe: Module = lib
    elif files.code is not None:
        exe = load_executable(read_code(files.code), lib)
    else:
        raise ModuleLoadError(f"{files.lib}: neither a vm.so nor given with a code.ro")
    loaded: frozenset[str] = frozenset()
    if isinstance(exe, VMExecutable) and exe.late_bound_names():
        if files.params is None:
            raise ModuleLoadError(
                f"the executable's constants {', '.join(exe.late_bound_names())} are late-bound: "
                "give their params file (move_late_bound_consts wrote it) with --params"
            )
        loaded = frozenset(exe.late_bound_names())
        exe.load_late_bound_consts(str(files.params))
    if request.debug:
        profiler = VirtualMachineProfiler(exe, request.device, dump_root=request.dump_root)
        return LoadedModel(profiler, lib, files, "relay_vm", loaded, profiler)
    return LoadedModel(VirtualMachine(exe, request.device), lib, files, "relay_vm", loaded)


def describe_executable(data: ExecutableData) -> RelayVMReport:
    """Functions, arities, opcodes used and constants of an executable (nothing runs)."""
    opcodes: Counter[str] = Counter()
    functions = []
    for func in data.functions:
        opcodes.update(OPCODE_NAMES[ins[0]] for ins in func.instructions)
        functions.append(
            RelayVMFunction(
                name=func.name,
                params=list(func.params),
                arity=len(func.params),
                registers=func.register_file_size,
                instructions=len(func.instructions),
            )
        )
    constants = [
        RelayVMConstant(shape=list(c.shape), dtype=str(c.dtype), bytes=c.nbytes)
        if isinstance(c, NDArray)
        else RelayVMConstant(late_bound=c)
        for c in data.constants
    ]
    return RelayVMReport(
        version=data.version,
        functions=functions,
        opcodes=dict(sorted(opcodes.items())),
        kernels=list(data.primitive_names),
        constants=RelayVMConstants(
            count=len(constants),
            bytes=sum(c.bytes or 0 for c in constants),
            late_bound=[c.late_bound for c in constants if c.late_bound is not None],
            items=constants,
        ),
        virtual_devices=[list(d) for d in data.virtual_devices],
    )


def describe_embedded(found: Found, problems: list[str]) -> None:
    """Describe a ``VMExecutable`` of the module blob (``vm.so``), if there is one."""
    for module in found.embedded:
        if isinstance(module, VMExecutable):
            _describe(found, module.data, problems)
            return


def _describe(found: Found, data: ExecutableData, problems: list[str]) -> None:
    found.library.form_text = f"{found.library.form_text or ''}: Relay VM executable"
    found.library.relay_vm = describe_executable(data)
    if found.exported is not None:
        missing = sorted(set(data.primitive_names) - found.exported)
        if missing:
            problems.append(f"the library lacks the VM's kernels {', '.join(missing)}")


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    inspect_library_code(files.lib, sniffed, found, problems)
    if files.code is None:
        describe_embedded(found, problems)
        return
    try:
        data = read_executable(read_code(files.code), str(files.code))
        VMExecutable(data, str(files.code))  # checks every operand; runs nothing
    except (TVMError, OSError) as exc:
        problems.append(str(exc))
        return
    _describe(found, data, problems)


FORM = ArtifactForm(
    "relay_vm",
    "Relay VM executable (code.ro + lib.so, or vm.so)",
    _claims,
    _load,
    _inspect,
)

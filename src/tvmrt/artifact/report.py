"""The ``tvmrt inspect`` report as typed data; ``--json`` prints :meth:`InspectionReport.to_json`.

Every section is a dataclass; its JSON form (:meth:`Section.to_dict`) lists the fields in
their declared order, leaving out the optional ones that are unset (``omitted``). The
library section is the exception: it lists its facts in the order inspection found them,
since the forms add to it in their own order (an AOT build's ``embedded`` comes after the
runtime functions it ``needs``, a factory's before), and the JSON keeps that order.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any, ClassVar

from tvmrt.runtime.loaders.dispatch import FileKind

__all__ = [
    "CpuNeeds",
    "GraphReport",
    "HostReport",
    "InspectionReport",
    "LibraryNeeds",
    "LibraryReport",
    "MlfReport",
    "ParamsReport",
    "RelayVMConstant",
    "RelayVMConstants",
    "RelayVMFunction",
    "RelayVMReport",
    "RelaxCallee",
    "RelaxFunction",
    "RelaxReport",
    "RelaxTensor",
    "Section",
    "StorageReport",
    "TensorReport",
]


def _plain(value: Any) -> Any:
    """``value`` as JSON-ready data: sections become dicts, containers are walked."""
    if isinstance(value, Section):
        return value.to_dict()
    if isinstance(value, FileKind):
        return value.value
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


class Section:
    """A part of the report; its fields named in ``omitted`` are left out while None."""

    omitted: ClassVar[frozenset[str]] = frozenset()

    def to_dict(self) -> dict[str, Any]:
        """The JSON-ready form of this section."""
        out = {}
        for f in fields(self):  # type: ignore[arg-type]
            value = getattr(self, f.name)
            if value is None and f.name in self.omitted:
                continue
            out[f.name] = _plain(value)
        return out


@dataclass
class TensorReport(Section):
    """A graph input or output."""

    name: str
    shape: list[int]
    dtype: str


@dataclass
class StorageReport(Section):
    """The graph's planned memory."""

    pools: int
    bytes: int
    bytes_without_reuse: int
    planned_by: str


@dataclass
class GraphReport(Section):
    """Inputs, outputs, nodes, kernels and storage plan of the graph."""

    inputs: list[TensorReport]
    outputs: list[TensorReport]
    nodes: int
    operators: int
    kernels: list[str]
    params_in_graph: int
    storage: StorageReport | None  # None: the graph's storage plan is refused
    devices: list[int]


@dataclass
class ParamsReport(Section):
    """How many weights the artifact carries, their size, and the subnormal floats among
    them (:mod:`tvmrt.artifact.subnormals`; the field is there only when some are)."""

    omitted: ClassVar[frozenset[str]] = frozenset({"subnormals", "subnormal_note"})
    count: int
    bytes: int
    subnormals: int | None = None
    subnormal_note: str | None = None


@dataclass
class HostReport(Section):
    """The machine the report checks against."""

    machine: str
    os: str


@dataclass
class CpuNeeds(Section):
    """CPU features the library's x86-64 code uses (``missing_here``: what this CPU lacks)."""

    omitted: ClassVar[frozenset[str]] = frozenset({"missing_here"})

    uses: list[str]
    evex: int
    vex: int
    missing_here: list[str] | None = None


@dataclass
class LibraryNeeds(Section):
    """What a legacy library's kernels look up by name (name -> state) and the CPU they use."""

    functions: dict[str, str]
    cpu: CpuNeeds

    @classmethod
    def from_dict(cls, needs: dict[str, Any]) -> LibraryNeeds:
        """From :func:`tvmrt.runtime.loaders.needs.describe`'s answer."""
        return cls(dict(needs["functions"]), CpuNeeds(**needs["cpu"]))


@dataclass
class MlfReport(Section):
    """What a Model Library Format ``metadata.json`` says."""

    version: Any  # as the file has it
    model: str
    executors: list[str]
    targets: list[str]


@dataclass
class RelayVMFunction(Section):
    """One function of a Relay VM executable."""

    name: str
    params: list[str]
    arity: int
    registers: int
    instructions: int


@dataclass
class RelayVMConstant(Section):
    """A constant: a tensor (shape, dtype, bytes) or the name of a late-bound one."""

    omitted: ClassVar[frozenset[str]] = frozenset({"shape", "dtype", "bytes", "late_bound"})

    shape: list[int] | None = None
    dtype: str | None = None
    bytes: int | None = None
    late_bound: str | None = None


@dataclass
class RelayVMConstants(Section):
    """The constants of a Relay VM executable."""

    count: int
    bytes: int
    late_bound: list[str]
    items: list[RelayVMConstant]


@dataclass
class RelayVMReport(Section):
    """Functions, opcodes used, kernels and constants of a Relay VM executable."""

    version: str
    functions: list[RelayVMFunction]
    opcodes: dict[str, int]
    kernels: list[str]
    constants: RelayVMConstants
    virtual_devices: list[list[int | str]]  # (device type, id, memory scope)


@dataclass
class RelaxTensor(Section):
    """A parameter or the result of a Relax VM function, as the executable's checks say.

    ``shape`` has -1 where a dimension is symbolic; ``symbols`` names those dimensions
    (index -> the symbol of the function's annotation, ``{"0": "n"}``) where it names them.
    """

    omitted: ClassVar[frozenset[str]] = frozenset({"name", "shape", "dtype", "symbols"})

    kind: str  # "tensor", "tuple", "shape", "prim" or "any" (not checked)
    name: str | None = None
    shape: list[int] | None = None
    dtype: str | None = None
    symbols: dict[str, str] | None = None


@dataclass
class RelaxFunction(Section):
    """One VM function of a Relax executable (``vm``: bytecode; ``vm_tir``: compiled mode)."""

    name: str
    kind: str
    params: list[RelaxTensor]
    returns: RelaxTensor
    registers: int
    instructions: int


@dataclass
class RelaxCallee(Section):
    """A name of the executable's function table that the VM calls, and what provides it:
    ``kernel`` (the library), ``builtin`` (tvmrt's Relax VM), ``registered``, ``runtime``,
    ``refused`` (a family tvmrt does not run, named) or ``missing``."""

    omitted: ClassVar[frozenset[str]] = frozenset({"family"})

    name: str
    provided_by: str
    family: str | None = None


@dataclass
class RelaxReport(Section):
    """A Relax VM executable (``relax.build`` / ``tvm.compile``, ``export_library``), as the
    C runtime's reader describes it (:func:`tvmrt.runtime.relax_vm.describe`)."""

    module_kind: str  # relax.Executable (TVM 0.16-0.19) or relax.VMExecutable
    era: str
    magic: str
    version: str
    exec_mode: str  # "bytecode", or "compiled" when a function is vm_tir
    functions: list[RelaxFunction]
    builtins: list[RelaxCallee]  # the function table less the kernels
    kernels: list[RelaxCallee]
    constants: int
    tensor_constants: int
    tensor_constant_bytes: int
    devices: list[str]  # what its kernels are for: CPU, then CUDA for a cuda import...


@dataclass
class LibraryReport(Section):
    """The library: its form as the loader's dispatcher sees it, and what its code holds.

    Unset facts (None) are left out of the JSON; the others appear in the order they were
    first set. ``extra`` holds facts a form adds of its own (after the others).
    """

    form: FileKind | None = None  # serialized as its value (``legacy-so``...)
    form_text: str | None = None
    kind: str | None = None
    machine: str | None = None
    mlf: MlfReport | None = None
    abi: str | None = None
    system_lib: bool | None = None
    linked_params: str | None = None
    functions: int | None = None
    embedded: str | None = None
    device_code: str | None = None
    needs: LibraryNeeds | None = None
    c_sources: list[str] | None = None
    relay_vm: RelayVMReport | None = None
    relax: RelaxReport | None = None
    members: list[str] | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    _order: list[str] = field(default_factory=list, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        self._order = [
            f.name for f in fields(self) if f.name in _FACTS and getattr(self, f.name) is not None
        ]

    def __setattr__(self, name: str, value: Any) -> None:
        order = self.__dict__.get("_order")  # None while __init__ runs
        if name in _FACTS and value is not None and order is not None and name not in order:
            order.append(name)
        object.__setattr__(self, name, value)

    def to_dict(self) -> dict[str, Any]:
        out = {name: _plain(getattr(self, name)) for name in self._order}
        out = {name: value for name, value in out.items() if value is not None}
        out.update(_plain(self.extra))
        return out


_FACTS = frozenset(f.name for f in fields(LibraryReport)) - {"extra", "_order"}


@dataclass
class InspectionReport(Section):
    """What an artifact is and whether it can run here (``runnable``: no ``problems``)."""

    omitted: ClassVar[frozenset[str]] = frozenset({"graph"})

    files: dict[str, str]
    form: str  # the artifact form (tvmrt.artifact.forms)
    library: LibraryReport
    graph: GraphReport | None  # None: no graph (AOT, Relay VM) or an unreadable one
    params: ParamsReport
    host: HostReport
    problems: list[str]
    runnable: bool

    def to_json(self) -> str:
        """What ``tvmrt inspect --json`` prints."""
        return json.dumps(self.to_dict(), indent=2)

"""``tvmrt inspect``'s static reading of an artifact: nothing from the artifact executes.

The form comes from the loader's own dispatcher (:func:`tvmrt.runtime.loaders.dispatch.sniff`);
then, per form, the symbols of the library or of each archive member (whatever machine
they were built for), the module blob (also a ``devc.c``'s byte array), the graph JSON and
the params of MLF tars and tvmc packages are read and checked.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tvmrt.artifact import DEVICE_MODULE_KINDS, ArtifactFiles
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.graph_executor import GraphExecutorFactory
from tvmrt.runtime.graph_executor.graph import Graph, parse_graph
from tvmrt.runtime.graph_executor.roles import runnability_problems
from tvmrt.runtime.graph_executor.storage import plan_storage
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.params import load_param_dict

__all__ = ["inspect_files"]


def inspect_files(files: ArtifactFiles) -> dict[str, Any]:
    """Describe an artifact without executing any of its code.

    Returns a JSON-ready dict: the library (its form as the loader's dispatcher sees it,
    architecture, TVM ABI, kernels it exports), the graph (inputs, outputs, nodes, kernels,
    storage plan), the params (count, bytes), and ``problems``: everything that would stop
    it from running here (``runnable`` is true only when there is none).
    """
    from tvmrt.runtime.loaders import binary

    problems: list[str] = []
    report: dict[str, Any] = {"files": {k: str(v) for k, v in vars(files).items() if v}}
    found = _inspect_library(files.lib, problems)
    report["library"] = found.out
    graph_json = files.graph.read_text() if files.graph else found.graph_json
    params: dict[str, NDArray] = dict(found.params)
    if files.params is not None:
        try:
            params.update(load_param_dict(files.params.read_bytes()))
        except TVMError as exc:
            problems.append(str(exc))
    if graph_json is None:
        if not found.aot:
            problems.append("no graph JSON: the library carries none and none was given")
    else:
        try:
            graph = parse_graph(graph_json)
            report["graph"] = _describe_graph(graph, params, found.exported, problems)
        except TVMError as exc:
            problems.append(str(exc))
    report["params"] = {
        "count": len(params),
        "bytes": sum(a.nbytes for a in params.values()),
    }
    report["host"] = {"machine": binary.host_machine(), "os": binary.host_os()}
    report["problems"] = problems
    report["runnable"] = not problems
    return report


@dataclass
class _Found:
    out: dict[str, Any]
    exported: set[str] | None = None
    graph_json: str | None = None
    params: dict[str, NDArray] = field(default_factory=dict)
    aot: bool = False


def _inspect_library(path: Path, problems: list[str]) -> _Found:
    from tvmrt.runtime.loaders import binary, dispatch

    try:
        sniffed = dispatch.sniff(str(path))
    except ModuleLoadError as exc:
        info = binary.identify(path)
        problems.append(str(exc))
        return _Found({"kind": info.describe(), "machine": info.machine})
    info = sniffed.info
    found = _Found(
        {
            "form": sniffed.form,
            "form_text": sniffed.description,
            "kind": info.describe(),
            "machine": info.machine,
        }
    )
    if sniffed.reason:
        problems.append(sniffed.reason)
    if sniffed.form in ("legacy-so", "system-lib-so", "tvm-ffi-so", "not-tvm", "foreign"):
        if info.format == "elf":
            _inspect_elf(Path(path).read_bytes(), str(path), info.kind, found, problems)
    elif sniffed.form in ("object", "export-tar"):
        _inspect_objects(path, sniffed.form, found, problems)
    elif sniffed.form == "mlf":
        _inspect_mlf(path, found, problems)
    elif sniffed.form == "tvmc":
        _inspect_tvmc(path, found, problems)
    return found


def _inspect_elf(data: bytes, shown: str, kind: str, found: _Found, problems: list[str]) -> None:
    """Symbols and the embedded factory of one ELF file (library or object, any machine)."""
    from tvmrt.runtime.loaders import abi, binary

    try:
        elf = binary.ElfFile(data, shown)
        symbols = elf.symbols(dynamic=kind == "shared library")
        tvm = abi.scan_tvm_symbols(symbols)
    except ModuleLoadError as exc:
        problems.append(str(exc))
        return
    out = found.out
    if tvm.abi != "none" or "abi" not in out:
        out["abi"] = tvm.abi
    if tvm.system_lib:
        out["system_lib"] = True
    if tvm.linked_params:
        out["linked_params"] = "TVM 0.7/0.8 _lookup_linked_param"
    found.exported = (found.exported or set()) | set(tvm.functions)
    out["functions"] = len(found.exported)
    if tvm.blob_symbol:
        _read_factory(elf, symbols, tvm.blob_symbol, shown, found, problems)
    if tvm.abi == "legacy":  # runtime functions its kernels look up, CPU features it uses
        from tvmrt.runtime.loaders import needs

        try:
            out["needs"] = needs.describe(elf, set(tvm.functions), "device_code" in out, problems)
        except TVMError as exc:  # a corrupt .symtab
            problems.append(str(exc))


def _read_factory(
    elf: Any, symbols: list[Any], blob_symbol: str, shown: str, found: _Found, problems: list[str]
) -> None:
    """The factory in a library's module blob (either layout): graph, params, or AOT."""
    from tvmrt.runtime.executor import AotExecutorFactory
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
    for module in modules:
        if isinstance(module, GraphExecutorFactory) and found.graph_json is None:
            found.graph_json = module.graph_json
            found.params.update(module.params)
            found.out["embedded"] = "graph executor factory (graph JSON and params)"
        elif getattr(module, "type_key", None) in DEVICE_MODULE_KINDS:
            kind = module.type_key
            found.out["device_code"] = (
                f"{DEVICE_MODULE_KINDS[kind]} kernels ({kind!r} module): run it with "
                f"--device {kind}"
            )
        elif isinstance(module, AotExecutorFactory):
            found.aot = True
            found.out["form_text"] = f"{found.out.get('form_text', '')}: AOT executor build"
            found.params.update(module.params)
            found.out["embedded"] = (
                "AOT executor factory (no graph: the inputs and outputs are described by "
                "the library's get_c_metadata, read when it is loaded)"
            )


def _inspect_objects(path: Path, form: str, found: _Found, problems: list[str]) -> None:
    from tvmrt.runtime.loaders import link

    if form == "object":
        members = [(path.name, path.read_bytes())]
    else:
        try:
            members = link.read_members(str(path))
        except ModuleLoadError as exc:
            problems.append(str(exc))
            return
    _inspect_code(members, str(path), found, problems)
    found.out["members"] = [name for name, _ in members]


def _inspect_code(
    members: list[tuple[str, bytes]], shown: str, found: _Found, problems: list[str]
) -> None:
    """Objects (any machine: their symbols are read anyway) and C sources of an archive."""
    from tvmrt.runtime.loaders import binary, link

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
            _inspect_elf(data, f"{shown}:{name}", "object file", found, problems)
    found.out["machine"] = ", ".join(sorted(m for m in machines if m))
    if sources:
        found.out["c_sources"] = sources
        found.out["abi"] = found.out.get("abi", "legacy")
        if link.find_cxx_compiler() is None:
            problems.append(
                f"{shown!r} holds C sources ({', '.join(sources)}) that are compiled when it "
                "is loaded, and no C++ compiler was found"
            )
        found.exported = None  # kernels in C sources are not known before compiling
    if link.find_compiler() is None:
        problems.append("loading it links object files with a C compiler, and none was found")


_C_BLOB = re.compile(rb"__tvm_dev_mblob\[\d+\]\s*=\s*\{([0-9a-fA-Fx,\s]*)\}")


def _blob_from_c_source(data: bytes, shown: str, found: _Found, problems: list[str]) -> None:
    """The module blob a ``devc.c`` (TVM's C packer) holds as a byte array, parsed."""
    from tvmrt.runtime.loaders.blob import parse_module_blob

    match = _C_BLOB.search(data)
    if match is None:
        return
    try:
        blob = bytes(int(tok, 16) for tok in match.group(1).split(b",") if tok.strip())
        modules = parse_module_blob(blob, f"__tvm_dev_mblob in {shown!r}").modules
    except (ValueError, TVMError) as exc:
        problems.append(f"{shown!r}: its __tvm_dev_mblob array is unreadable: {exc}")
        return
    for module in modules:
        if isinstance(module, GraphExecutorFactory) and found.graph_json is None:
            found.graph_json = module.graph_json
            found.params.update(module.params)
            found.out["embedded"] = "graph executor factory (graph JSON and params, in C source)"


def _members(path: Path, problems: list[str]) -> dict[str, bytes] | None:
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


def _inspect_mlf(path: Path, found: _Found, problems: list[str]) -> None:
    from tvmrt.runtime.loaders import packages

    members = _members(path, problems)
    if members is None:
        return
    try:
        summary = packages.mlf_summary(members.get("metadata.json", b"{}"), str(path))
    except ModuleLoadError as exc:
        problems.append(str(exc))
        return
    found.out["mlf"] = summary
    model = summary["model"]
    if "graph" not in summary["executors"]:
        problems.append(
            f"{str(path)!r} is a Model Library Format tar built for the "
            f"{', '.join(summary['executors']) or 'unknown'} executor; tvmrt runs MLF "
            "graph-executor builds only (AOT builds target microTVM's C runtime)"
        )
    code = [(n, d) for n, d in sorted(members.items()) if n.startswith("codegen/host/")]
    if not code:
        problems.append(f"{str(path)!r} holds no host code under codegen/host/")
    _inspect_code(code, str(path), found, problems)
    graph = members.get(f"executor-config/graph/{model}.graph")
    if graph is not None:
        found.graph_json = graph.decode("utf-8", errors="replace")
    params = members.get(f"parameters/{model}.params")
    if params is not None:
        try:
            found.params.update(load_param_dict(params))
        except TVMError as exc:
            problems.append(str(exc))
    found.out["members"] = sorted(members)


def _inspect_tvmc(path: Path, found: _Found, problems: list[str]) -> None:
    from tvmrt.runtime.loaders import binary

    members = _members(path, problems)
    if members is None:
        return
    if "mod.so" in members:
        data = members["mod.so"]
        info = binary.identify_bytes(data[:4096])
        found.out["kind"] = f"tvmc package; mod.so: {info.describe()}"
        found.out["machine"] = info.machine
        try:
            binary.check_host_compatible(info, f"{path}:mod.so", "shared library")
        except ModuleLoadError as exc:
            problems.append(str(exc))
        if info.format == "elf":
            _inspect_elf(data, f"{path}:mod.so", info.kind, found, problems)
    elif "mod.tar" not in members:
        problems.append(f"{str(path)!r} is a tvmc package without mod.so or mod.tar")
    if "mod.json" in members:
        found.graph_json = members["mod.json"].decode("utf-8", errors="replace")
    if "mod.params" in members:
        try:
            found.params.update(load_param_dict(members["mod.params"]))
        except TVMError as exc:
            problems.append(str(exc))
    found.out["members"] = sorted(members)


def _describe_graph(
    graph: Graph, params: dict[str, NDArray], exported: set[str] | None, problems: list[str]
) -> dict[str, Any]:
    ops = [n for n in graph.nodes if n.is_op]
    kernels = sorted({n.func_name for n in ops} - {"__nop", "__copy"})
    if exported is not None:
        missing = [k for k in kernels if k not in exported and f"__tvm_ffi_{k}" not in exported]
        if missing:
            shown = ", ".join(missing[:5])
            problems.append(f"the library lacks {len(missing)} kernel(s) the graph calls: {shown}")
    inputs: list[dict[str, Any]] = []
    weights: list[dict[str, Any]] = []
    for nid in graph.arg_nodes:
        eid = graph.entry_id(nid)
        entry = {
            "name": graph.nodes[nid].name,
            "shape": list(graph.shapes[eid]),
            "dtype": str(graph.dltypes[eid]),
        }
        (weights if entry["name"] in params else inputs).append(entry)
    outputs = []
    for h in graph.heads:
        eid = graph.entry_id(h.node_id, h.index)
        outputs.append(
            {
                "name": f"{graph.nodes[h.node_id].name}:{h.index}",
                "shape": list(graph.shapes[eid]),
                "dtype": str(graph.dltypes[eid]),
            }
        )
    device_types = graph.device_types or (1,)
    plan = plan_storage(graph, device_types[0])
    problems.extend(runnability_problems(graph, plan, params))  # weights, memory
    naive = sum(graph.entry_nbytes(e) for e in range(graph.num_entries))
    return {
        "inputs": inputs,
        "outputs": outputs,
        "nodes": len(graph.nodes),
        "operators": len(ops),
        "kernels": kernels,
        "params_in_graph": len(weights),
        "storage": {
            "pools": plan.num_pools,
            "bytes": plan.total_bytes,
            "bytes_without_reuse": naive,
            "planned_by": "graph" if graph.storage_ids is not None else "tvmrt (liveness)",
        },
        "devices": sorted(set(device_types)),
    }

"""Graph-executor artifacts on disk: find their files, load them, inspect them statically.

An artifact is one of

* a folder holding a graph JSON, a kernel library and (usually) a params file, the
  layout of TVM's ``deploy_graph.json`` / ``deploy_lib.so`` / ``deploy_param.params``
  or tvmrt's ``deploy.json`` / ``deploy.so`` / ``deploy.params``;
* one exported factory library (``.so``/``.tar``) whose module blob carries the graph
  and the params (``lib["default"](dev)``);
* explicit files (``graph=``, ``lib=``, ``params=``).

:func:`inspect_artifact` reads headers, symbol tables, the graph and the params without
loading the library, so nothing from the artifact executes.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tvmrt.contrib.graph_executor import GraphExecutorFactory, GraphModule, create
from tvmrt.contrib.graph_executor.graph import Graph, parse_graph
from tvmrt.contrib.graph_executor.storage import plan_storage
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.module import Module, load_module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.params import load_param_dict, mapped_file, read_param_names

__all__ = ["ArtifactFiles", "LoadedModel", "find_artifact", "load_artifact", "inspect_artifact"]

_LIB_SUFFIXES = (".so", ".tar", ".dll", ".dylib", ".o")
_PREFERRED_STEMS = ("deploy", "mod", "model")


@dataclass(frozen=True)
class ArtifactFiles:
    """The files of one artifact (``graph``/``params`` are None for a factory library)."""

    lib: Path
    graph: Path | None = None
    params: Path | None = None


def _pick(candidates: list[Path], what: str, folder: Path, flag: str) -> Path | None:
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    preferred = [p for p in candidates if any(s in p.stem.lower() for s in _PREFERRED_STEMS)]
    if len(preferred) == 1:
        return preferred[0]
    names = ", ".join(sorted(p.name for p in candidates))
    raise ModuleLoadError(
        f"folder {str(folder)!r} has several {what} files ({names}); pick one with {flag}"
    )


def find_artifact(
    path: str | os.PathLike[str] | None = None,
    graph: str | os.PathLike[str] | None = None,
    lib: str | os.PathLike[str] | None = None,
    params: str | os.PathLike[str] | None = None,
) -> ArtifactFiles:
    """Resolve the files of an artifact; explicit ``graph``/``lib``/``params`` win.

    Raises
    ------
    FileNotFoundError
        If a named file or folder does not exist.
    ModuleLoadError
        If the folder has no kernel library, or several candidates for one role.
    """
    found_graph = Path(graph) if graph else None
    found_lib = Path(lib) if lib else None
    found_params = Path(params) if params else None
    if path is not None:
        root = Path(path)
        if not root.exists():
            raise FileNotFoundError(f"artifact {str(root)!r} does not exist")
        if root.is_dir():
            files = [p for p in sorted(root.iterdir()) if p.is_file()]
            if found_lib is None:
                libs = [p for p in files if p.suffix in _LIB_SUFFIXES]
                found_lib = _pick(libs, "kernel library", root, "--lib")
            if found_graph is None:
                graphs = [
                    p
                    for p in files
                    if p.suffix in (".json", ".graph") and not p.name.endswith("summary.json")
                ]
                found_graph = _pick(graphs, "graph JSON", root, "--graph")
            if found_params is None:
                found_params = _pick(
                    [p for p in files if p.suffix == ".params"], "params", root, "--params"
                )
        elif found_lib is None:
            found_lib = root
        else:
            raise ModuleLoadError(f"artifact {str(root)!r} is a file and --lib was given too")
    if found_lib is None:
        where = f" in {str(path)!r}" if path is not None else ""
        raise ModuleLoadError(
            f"no kernel library found{where}: expected a {'/'.join(_LIB_SUFFIXES)} file "
            "(or pass --lib)"
        )
    for role, file in (("library", found_lib), ("graph", found_graph), ("params", found_params)):
        if file is not None and not file.is_file():
            raise FileNotFoundError(f"{role} file {str(file)!r} does not exist")
    return ArtifactFiles(found_lib, found_graph, found_params)


@dataclass
class LoadedModel:
    """A loaded artifact: the executor, its library and what came from where."""

    module: GraphModule
    lib: Module
    files: ArtifactFiles
    param_names: frozenset[str] = field(default_factory=frozenset)

    def user_inputs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Inputs that are not params: name → (shape, dtype)."""
        executor = self.module.executor
        graph = executor.graph
        out = {}
        for nid in graph.arg_nodes:
            name = graph.nodes[nid].name
            if name in self.param_names:
                continue
            eid = graph.entry_id(nid)
            out[name] = (graph.shapes[eid], str(graph.dltypes[eid]))
        return out

    def output_names(self) -> list[str]:
        """One label per output (``"node:i"``)."""
        graph = self.module.executor.graph
        return [f"{graph.nodes[h.node_id].name}:{h.index}" for h in graph.heads]


def load_artifact(
    files: ArtifactFiles,
    device: Device | None = None,
    debug: bool = False,
    dump_root: str | None = None,
) -> LoadedModel:
    """Load the library (this runs its code), create the executor and load the params.

    Parameters
    ----------
    files
        From :func:`find_artifact`.
    device
        Where to run (default ``cpu(0)``).
    debug
        Create a debug executor (:class:`~tvmrt.contrib.debugger.debug_executor.GraphModuleDebug`).
    dump_root
        The debug executor's dump folder (default: a new temporary folder).

    Raises
    ------
    ModuleLoadError
        If a factory library is expected but the library carries no graph.
    """
    dev = device or cpu()
    # a device run keeps the CPU as the second device, for graph nodes placed on the host
    devs = [dev] if dev.device_type == cpu().device_type else [dev, cpu()]
    lib = load_module(files.lib)
    names: set[str] = set()
    if files.graph is not None:
        graph_json = files.graph.read_text()
    elif lib.type_key in ("GraphExecutorFactory", "GraphRuntimeFactory"):
        graph_json = lib["get_graph_json"]()
        embedded: dict[str, NDArray] = lib["get_graph_params"]()
        names.update(embedded)
    else:
        raise ModuleLoadError(
            f"library {str(files.lib)!r} carries no graph (its root module is "
            f"{lib.type_key!r}, not a GraphExecutorFactory); pass the graph JSON too"
        )
    module: GraphModule
    if debug:
        from tvmrt.contrib.debugger import debug_executor

        module = debug_executor.create(graph_json, lib, devs, dump_root=dump_root)
    elif files.graph is None:
        module = GraphModule(lib["default"](*devs))
    else:
        module = create(graph_json, lib, devs)
    if files.params is not None:
        with mapped_file(files.params) as data:  # mapped once, copied once into the inputs
            module.load_params(data)
            names.update(read_param_names(data))
    return LoadedModel(module, lib, files, frozenset(names))


# -- static inspection ------------------------------------------------------------------


def inspect_artifact(files: ArtifactFiles) -> dict[str, Any]:
    """Describe an artifact without executing any of its code.

    Returns a JSON-ready dict: the library (format, architecture, TVM ABI, kernels it
    exports), the graph (inputs, outputs, nodes, kernels, storage plan), the params
    (count, bytes), and ``problems``: everything that would stop it from running here.
    """
    from tvmrt.runtime.loaders import binary

    problems: list[str] = []
    report: dict[str, Any] = {"files": {k: str(v) for k, v in vars(files).items() if v}}
    lib_info, exported, factory = _inspect_library(files.lib, problems)
    report["library"] = lib_info
    graph_json = files.graph.read_text() if files.graph else None
    params: dict[str, NDArray] = {}
    if factory is not None:
        graph_json = graph_json or factory.graph_json
        params.update(factory.params)
        report["library"]["embedded"] = "graph executor factory (graph JSON and params)"
    if files.params is not None:
        try:
            params.update(load_param_dict(files.params.read_bytes()))
        except TVMError as exc:
            problems.append(str(exc))
    if graph_json is None:
        problems.append("no graph JSON: the library carries none and none was given")
    else:
        try:
            report["graph"] = _describe_graph(parse_graph(graph_json), params, exported, problems)
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


def _inspect_library(
    path: Path, problems: list[str]
) -> tuple[dict[str, Any], set[str] | None, Any]:
    from tvmrt.runtime.loaders import binary

    info = binary.identify(path)
    out: dict[str, Any] = {"kind": info.describe(), "machine": info.machine}
    exported: set[str] | None = None
    factory = None
    try:
        expected = (
            "object file" if info.format == "tar" or path.suffix == ".o" else "shared library"
        )
        if info.format != "tar":
            binary.check_host_compatible(info, str(path), expected)
    except ModuleLoadError as exc:
        problems.append(str(exc))
    if info.format == "elf":
        try:
            elf = binary.ElfFile.from_path(path)
            symbols = elf.symbols(dynamic=info.kind == "shared library")
            tvm = binary.scan_tvm_symbols(symbols)
            out["abi"] = tvm.abi
            out["functions"] = len(tvm.functions)
            exported = set(tvm.functions)
            if tvm.abi == "none":
                problems.append(f"{str(path)!r} is not a TVM module (no TVM symbols)")
            factory = _read_factory(elf, symbols, str(path), problems)
        except ModuleLoadError as exc:
            problems.append(str(exc))
    elif info.format == "tar":
        exported, factory = _inspect_tar(path, out, problems)
    return out, exported, factory


def _read_factory(elf: Any, symbols: list[Any], shown: str, problems: list[str]) -> Any:
    """The GraphExecutorFactory embedded in a library's module blob (either layout), or None."""
    from tvmrt.runtime.loaders.blob import parse_module_blob
    from tvmrt.runtime.loaders.ffi import parse_library_bin

    defined = {s.name: s for s in symbols if s.defined}
    try:
        if "__tvm_dev_mblob" in defined:
            blob = elf.read_sized_blob(defined["__tvm_dev_mblob"])
            modules: list[Any] = parse_module_blob(blob, f"__tvm_dev_mblob of {shown!r}").modules
        elif "__tvm_ffi__library_bin" in defined:
            blob = elf.read_sized_blob(defined["__tvm_ffi__library_bin"])
            modules = parse_library_bin(blob, f"__tvm_ffi__library_bin of {shown!r}").entries
        else:
            return None
    except TVMError as exc:
        problems.append(str(exc))
        return None
    return next((m for m in modules if isinstance(m, GraphExecutorFactory)), None)


def _inspect_tar(
    path: Path, out: dict[str, Any], problems: list[str]
) -> tuple[set[str] | None, Any]:
    from tvmrt.runtime.loaders import binary, link

    try:
        members = link.read_members(str(path))
    except ModuleLoadError as exc:
        problems.append(str(exc))
        return None, None
    exported: set[str] = set()
    factory = None
    machines = set()
    for name, data in members:
        info = binary.identify_bytes(data[:4096])
        machines.add(info.machine)
        try:
            binary.check_host_compatible(info, f"{path}:{name}", "object file")
        except ModuleLoadError as exc:
            problems.append(str(exc))
            continue
        elf = binary.ElfFile(data, f"{path}:{name}")
        symbols = elf.symbols(dynamic=False)
        exported.update(binary.scan_tvm_symbols(symbols).functions)
        factory = factory or _read_factory(elf, symbols, f"{path}:{name}", problems)
    out["members"] = [name for name, _ in members]
    out["machine"] = ", ".join(sorted(m for m in machines if m))
    out["functions"] = len(exported)
    if link.find_compiler() is None:
        problems.append("loading a .tar export links it with a C compiler, and none was found")
    return exported, factory


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


def dumps(report: dict[str, Any]) -> str:
    """The inspection report as indented JSON."""
    return json.dumps(report, indent=2)

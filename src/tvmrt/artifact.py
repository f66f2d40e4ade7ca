"""Graph-executor artifacts on disk: find their files, load them, inspect them statically.

An artifact is one of

* a folder holding a graph JSON, a kernel library and (usually) a params file, the
  layout of TVM's ``deploy_graph.json`` / ``deploy_lib.so`` / ``deploy_param.params``
  or tvmrt's ``deploy.json`` / ``deploy.so`` / ``deploy.params``;
* one file the loader turns into a factory (``lib["default"](dev)``): an exported
  factory library (``.so``/``.tar``/``.o``, system-lib builds included), an AOT build
  (run through :class:`~tvmrt.runtime.executor.AotModule`), a Model Library Format tar or
  a tvmc package (docs/artifacts.md lists the forms);
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

from tvmrt.contrib.graph_executor import GraphModule, create
from tvmrt.error import ArtifactNotFoundError, DeviceUnavailableError, ModuleLoadError
from tvmrt.runtime.device import Device, cpu
from tvmrt.runtime.executor import AotExecutor, AotModule
from tvmrt.runtime.executor.profile import AotProfiler
from tvmrt.runtime.graph_executor.roles import output_labels
from tvmrt.runtime.module import Module, load_module
from tvmrt.runtime.ndarray import NDArray
from tvmrt.runtime.params import mapped_file, read_param_names

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
            raise ArtifactNotFoundError(f"artifact {str(root)!r} does not exist")
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
            raise ArtifactNotFoundError(f"{role} file {str(file)!r} does not exist")
    return ArtifactFiles(found_lib, found_graph, found_params)


@dataclass
class LoadedModel:
    """A loaded artifact: the executor, its library and what came from where.

    ``module`` is a :class:`GraphModule`, or an :class:`~tvmrt.runtime.executor.AotModule`
    for an AOT build (same ``set_input``/``run``/``get_output``/``get_num_outputs``).
    """

    module: Any
    lib: Module
    files: ArtifactFiles
    param_names: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_aot(self) -> bool:
        """Whether the model runs on TVM's AOT executor (no graph)."""
        return isinstance(self.module, (AotModule, AotProfiler))

    def user_inputs(self) -> dict[str, tuple[tuple[int, ...], str]]:
        """Inputs that are not params: name → (shape, dtype)."""
        if self.is_aot:
            aot = self.module.module
            assert isinstance(aot, AotExecutor)
            return {t.name: (t.shape, str(t.dtype)) for t in aot.inputs}
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
        """One unique label per output, the same on screen and as ``.npz`` keys.

        Graph outputs are ``node_i`` (:func:`~tvmrt.runtime.graph_executor.roles.output_labels`);
        an AOT build's come from its metadata.
        """
        if self.is_aot:
            aot = self.module.module
            assert isinstance(aot, AotExecutor)
            return [t.name or f"output_{i}" for i, t in enumerate(aot.outputs)]
        return output_labels(self.module.executor.graph)


# module kinds holding kernels for a device, not the host (see tvmrt.runtime.loaders.blob)
DEVICE_MODULE_KINDS = {"opencl": "OpenCL", "cuda": "CUDA", "vulkan": "Vulkan", "metal": "Metal"}


def _check_device_code(lib: Module, dev: Device, path: Path) -> None:
    """Refuse a CPU run of an artifact whose kernels are device code, naming the device.

    Without this its host code would hand CPU memory to the device's kernel launcher.
    """
    if dev.device_type != cpu().device_type:
        return
    stack, kinds = [lib], set()
    while stack:
        module = stack.pop()
        if module.type_key in DEVICE_MODULE_KINDS:
            kinds.add(module.type_key)
        stack.extend(module.imported_modules)
    if kinds:
        kind = sorted(kinds)[0]
        raise DeviceUnavailableError(
            f"{path.name!r} holds {DEVICE_MODULE_KINDS[kind]} kernels ({kind!r} device "
            f"module), which do not run on the CPU: choose that device (tvmrt ... --device "
            f"{kind}; in Python, pass runtime.{kind}(0) with runtime.cpu(0))"
        )


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
    _check_device_code(lib, dev, files.lib)
    names: set[str] = set()
    if lib.type_key == "AotExecutorFactory" and files.graph is None:
        executor = lib["default"](dev)
        if debug:  # no graph, no per-operator timing: the whole model is one call
            return LoadedModel(AotProfiler(executor, dump_root), lib, files, frozenset())
        return LoadedModel(AotModule(executor), lib, files, frozenset())
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
    names.update(module.executor.linked_param_names)  # TVM 0.7/0.8 link-params weights
    if files.params is not None:
        with mapped_file(files.params) as data:  # mapped once, copied once into the inputs
            module.load_params(data)
            names.update(read_param_names(data))
    return LoadedModel(module, lib, files, frozenset(names))


# -- static inspection ------------------------------------------------------------------


def inspect_artifact(files: ArtifactFiles) -> dict[str, Any]:
    """Describe an artifact without executing any of its code (:mod:`tvmrt.artifact_inspect`).

    Returns a JSON-ready dict: the library (its form as the loader's dispatcher sees it,
    architecture, TVM ABI, kernels it exports), the graph (inputs, outputs, nodes, kernels,
    storage plan), the params (count, bytes), and ``problems``: everything that would stop
    it from running here (``runnable`` is true only when there is none).
    """
    from tvmrt.artifact_inspect import inspect_files

    return inspect_files(files)


def dumps(report: dict[str, Any]) -> str:
    """The inspection report as indented JSON."""
    return json.dumps(report, indent=2)

"""The package's layers point down only, and no two modules or packages import each other.

The import graph is read from the source (every ``import`` statement, including those
inside functions and under ``TYPE_CHECKING``), not from what happens to be imported at
run time, so an import hidden in a function cannot close a circle unseen.

Inside ``tvmrt.runtime`` the same holds between floors (``RUNTIME_FLOORS``): core types
and devices -> arrays -> modules and the registry -> the kernel host -> loaders -> engines
-> TVM's Python faces. An import under ``if TYPE_CHECKING:`` (a type-only import) may point
sideways inside one layer or floor, closing a circle no running code closes, but never up.
"""

from __future__ import annotations

import ast
import importlib
from collections.abc import Iterator
from pathlib import Path

import pytest

import tvmrt
from tvmrt.runtime.builtins import BUILTIN_FUNCTIONS
from tvmrt.runtime.device import _lazy as DEVICE_BACKENDS

SRC = Path(tvmrt.__file__).parent

# Each top-level part of tvmrt and the parts it may import (besides itself), bottom up:
# error -> binfmt (the binary-format toolkit) -> runtime -> TVM's Python faces (contrib) ->
# artifact (files -> model) -> apps (compiler, serve, cli). tvmrt._version, the version
# string, is below everything.
BOTTOM = "tvmrt._version"
_RUNTIME = {"tvmrt.error", "tvmrt.binfmt", "tvmrt.runtime"}
LAYERS: dict[str, set[str]] = {
    BOTTOM: set(),
    "tvmrt.error": set(),
    # files read and written byte by byte (ELF, archives, dmlc streams): nothing is run
    "tvmrt.binfmt": {"tvmrt.error"},
    "tvmrt.runtime": {"tvmrt.error", "tvmrt.binfmt"},
    # flags and folders for C/C++ programs using libtvmrt_runtime (`tvmrt config`)
    "tvmrt.config": {"tvmrt.error"},
    "tvmrt.contrib": _RUNTIME,
    "tvmrt.testing": {*_RUNTIME, "tvmrt.contrib"},
    "tvmrt.artifact": {*_RUNTIME, "tvmrt.contrib"},
    # DLR 1.10's Python API (SageMaker Neo models) over the runtime's executors
    "tvmrt.dlr": {*_RUNTIME, "tvmrt.contrib"},
    "tvmrt.compiler": {*_RUNTIME, "tvmrt.contrib", "tvmrt.artifact"},
    "tvmrt.serve": {*_RUNTIME, "tvmrt.contrib", "tvmrt.artifact"},
    # microcontrollers: MLF packages built into firmware and run on emulated boards (the
    # host run it compares with is the runtime's MLF AOT loader)
    "tvmrt.micro": _RUNTIME,
    # TVM's RPC server and tracker: at the serve level (it loads artifacts for remote clients)
    "tvmrt.rpc": {*_RUNTIME, "tvmrt.contrib", "tvmrt.artifact"},
    "tvmrt.cli": {
        *_RUNTIME,
        "tvmrt.contrib",
        "tvmrt.artifact",
        "tvmrt.serve",
        "tvmrt.compiler",
        "tvmrt.config",
        "tvmrt.rpc",
        "tvmrt.micro",
    },
    # TVM's `python -m tvm.exec.rpc_server`: thin wrappers of the tvmrt command's verbs
    "tvmrt.exec": {"tvmrt.cli"},
    # the package root and ``python -m tvmrt`` re-export what TVM's ``import tvm`` gives
    # TVM <= 0.6's ``tvm.module`` and the params helpers of ``tvm.relay``, faces of the runtime
    "tvmrt.module": _RUNTIME,
    "tvmrt.relay": _RUNTIME,
    # TVM's tvm.relax as a runtime has it: the Relax VM's face
    "tvmrt.relax": _RUNTIME,
    "tvmrt": {
        *_RUNTIME,
        "tvmrt.contrib",
        "tvmrt.compiler",
        "tvmrt.module",
        "tvmrt.relay",
        "tvmrt.relax",
    },
    "tvmrt.__main__": {"tvmrt.cli"},
}


# runtime's floors, bottom up: a runtime module imports modules of its own floor and below.
FLOORS = ("core", "arrays", "modules", "kernel host", "loaders", "engines", "faces")
# Each runtime module's floor: a name is one module (a package's name is its __init__);
# "package.*" is every module inside that package not named on its own.
RUNTIME_FLOORS: dict[str, str] = {
    # core types and devices: the C API's structs, dtypes, the device table and its backends,
    # timing and profiling reports
    "tvmrt.runtime._ctypes_api": "core",
    "tvmrt.runtime._deprecate": "core",
    "tvmrt.runtime._dlpack": "core",
    "tvmrt.runtime.dtype": "core",
    "tvmrt.runtime.device_type": "core",
    "tvmrt.runtime.device": "core",
    "tvmrt.runtime.device_api": "core",
    "tvmrt.runtime.backends": "core",
    "tvmrt.runtime.backends.*": "core",
    "tvmrt.runtime.benchmark": "core",
    "tvmrt.runtime.profiling": "core",
    "tvmrt.runtime.object_base": "core",
    "tvmrt.runtime.profiling.*": "core",
    # arrays: NDArray, its memory and DLPack, tensor records and params files
    "tvmrt.runtime.ndarray": "arrays",
    "tvmrt.runtime.tvm_array": "arrays",
    "tvmrt.runtime._transfer": "arrays",
    "tvmrt.runtime.dlpack_export": "arrays",
    "tvmrt.runtime.dlpack_import": "arrays",
    "tvmrt.runtime.tensor_record": "arrays",
    "tvmrt.runtime.params": "arrays",
    # modules and the registry: packed functions, objects, Module, the global functions and
    # their lazy table
    "tvmrt.runtime.packed_func": "modules",
    "tvmrt.runtime.packed_values": "modules",
    "tvmrt.runtime.object": "modules",
    "tvmrt.runtime.object_generic": "modules",
    "tvmrt.runtime.object_path": "modules",
    "tvmrt.runtime.container": "modules",
    "tvmrt.runtime.registry": "modules",
    "tvmrt.runtime.builtins": "modules",
    "tvmrt.runtime.module": "modules",
    "tvmrt.runtime.module_info": "modules",
    "tvmrt.runtime.static_library": "modules",
    # a remote session's upload and module loader, found from its device's DeviceAPI
    "tvmrt.runtime.remote_session": "modules",
    # the kernel host: what compiled kernels call back into (backend services, callbacks,
    # threads, device launches, the runtime functions they look up by name)
    "tvmrt.runtime.threads": "kernel host",
    "tvmrt.runtime.kernel_callbacks": "kernel host",
    "tvmrt.runtime.kernel_services": "kernel host",
    "tvmrt.runtime.launch": "kernel host",
    # TVM's Python faces of the C runtime's modules, functions and values (its engines)
    "tvmrt.runtime.native_module": "kernel host",
    # the OpenCL device backend is the C runtime's (its calls go through the one library)
    "tvmrt.runtime.backends.opencl": "kernel host",
    "tvmrt.runtime.contrib": "kernel host",
    "tvmrt.runtime.contrib.*": "kernel host",
    # loaders: files -> modules (one leaf per form of library)
    "tvmrt.runtime.loaders": "loaders",
    "tvmrt.runtime.loaders.*": "loaders",
    # engines: the graph executor and its factory, the AOT executor, the Relay VM;
    # export_library writes a factory and its kernels back out, so it sits on their floor
    "tvmrt.runtime.graph_executor": "engines",
    "tvmrt.runtime.graph_executor.*": "engines",
    "tvmrt.runtime.executor._aot": "engines",
    "tvmrt.runtime.executor._aot_native": "engines",
    "tvmrt.runtime.executor._crt_aot": "engines",
    "tvmrt.runtime.executor._aot_io": "engines",
    # the Executor protocol and TensorInfo the engines describe their tensors with
    "tvmrt.runtime.executor.protocol": "engines",
    "tvmrt.runtime.vm.*": "engines",
    "tvmrt.runtime.export": "engines",
    "tvmrt.runtime.pack_imports": "engines",
    # TVM's Python faces inside the runtime: tvm.runtime, tvm.nd, tvm.runtime.vm,
    # tvm.runtime.executor, tvm.runtime.profiler_vm
    "tvmrt.runtime": "faces",
    "tvmrt.runtime.compat": "faces",
    "tvmrt.runtime.nd": "faces",
    "tvmrt.runtime.vm": "faces",
    "tvmrt.runtime.vm.api": "faces",
    "tvmrt.runtime.relax_vm": "faces",
    "tvmrt.runtime.relax_profiler": "faces",
    "tvmrt.runtime.executor": "faces",
    "tvmrt.runtime.executor.*": "faces",
    "tvmrt.runtime.profiler_vm": "faces",
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def imports_in(tree: ast.AST, package: str) -> Iterator[tuple[str, bool]]:
    """``(module, type_only)`` for every import in ``tree``, at any depth; ``type_only`` when
    it sits under ``if TYPE_CHECKING:`` (not in its ``else``). Relative imports are resolved
    against ``package``."""
    type_only = {
        id(inner)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and _is_type_checking(node)
        for statement in node.body
        for inner in ast.walk(statement)
    }
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, id(node) in type_only) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            folder = SRC.parent / base.replace(".", "/")
            for alias in node.names:
                # ``from package import submodule`` imports the submodule (the package's
                # __init__ runs first, as for any submodule: that is not an edge of its own);
                # ``from module import name`` imports the module
                is_module = (folder / alias.name).is_dir() or (folder / f"{alias.name}.py").exists()
                yield (f"{base}.{alias.name}" if is_module else base), id(node) in type_only


def imports_of(path: Path) -> Iterator[tuple[str, bool]]:
    """Every module ``path`` imports, at any depth of the file, and whether type-only."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    yield from imports_in(ast.parse(path.read_text(), str(path)), package)


def import_edges() -> dict[str, dict[str, bool]]:
    """Module -> {tvmrt module it imports: whether every import of it is type-only}."""
    edges: dict[str, dict[str, bool]] = {}
    for path in sorted(SRC.rglob("*.py")):
        source = module_name(path)
        mine = edges.setdefault(source, {})
        for target, type_only in imports_of(path):
            if target != source and (target == "tvmrt" or target.startswith("tvmrt.")):
                mine[target] = mine.get(target, True) and type_only
    return edges


def import_graph(type_only: bool = True) -> dict[str, set[str]]:
    """Module -> the tvmrt modules it imports (without the type-only ones if not ``type_only``)."""
    return {
        source: {t for t, only in targets.items() if type_only or not only}
        for source, targets in import_edges().items()
    }


def floor_of(module: str) -> str:
    """The floor of a runtime module in ``RUNTIME_FLOORS`` (KeyError if it has none)."""
    if module in RUNTIME_FLOORS:
        return RUNTIME_FLOORS[module]
    package = module.rpartition(".")[0]
    while package:
        if f"{package}.*" in RUNTIME_FLOORS:
            return RUNTIME_FLOORS[f"{package}.*"]
        package = package.rpartition(".")[0]
    raise KeyError(f"{module} has no floor in RUNTIME_FLOORS")


def layer_of(module: str) -> str:
    if module in ("tvmrt", "tvmrt.__main__"):
        return module
    parts = module.split(".")
    top = ".".join(parts[:2])
    return "tvmrt.artifact" if top.startswith("tvmrt.artifact") else top


def package_of(module: str, graph: dict[str, set[str]]) -> str:
    is_package = (SRC.parent / module.replace(".", "/") / "__init__.py").exists()
    return module if is_package else module.rpartition(".")[0]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_every_import_points_down() -> None:
    graph = import_graph()
    upward = sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        for target in targets
        if layer_of(target) not in (layer_of(source), BOTTOM)
        and layer_of(target) not in LAYERS[layer_of(source)]
    )
    assert upward == []


def test_the_runtime_imports_nothing_above_it() -> None:
    graph = import_graph()
    above = ("tvmrt.contrib", "tvmrt.artifact", "tvmrt.cli", "tvmrt.serve", "tvmrt.compiler")
    found = sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        if source.startswith("tvmrt.runtime")
        for target in targets
        if target.startswith(above)
    )
    assert found == []


def test_the_binary_toolkit_imports_only_error() -> None:
    graph = import_graph()
    found = sorted(
        f"{source} imports {target}"
        for source, targets in graph.items()
        if source.startswith("tvmrt.binfmt")
        for target in targets
        if not target.startswith(("tvmrt.binfmt", "tvmrt.error"))
    )
    assert found == []
    assert any(name.startswith("tvmrt.binfmt.") for name in graph)


def test_every_runtime_module_has_a_floor() -> None:
    modules = [m for m in import_graph() if m == "tvmrt.runtime" or m.startswith("tvmrt.runtime.")]
    missing = []
    for module in modules:
        try:
            floor_of(module)
        except KeyError:
            missing.append(module)
    assert missing == []
    assert set(RUNTIME_FLOORS.values()) <= set(FLOORS)
    # every line of the table names something that exists
    stale = [
        key
        for key in RUNTIME_FLOORS
        if not any(m == key or (key.endswith(".*") and m.startswith(key[:-1])) for m in modules)
    ]
    assert stale == []


def upward_floor_edges(graph: dict[str, set[str]]) -> list[str]:
    """``"a (floor) imports b (higher floor)"`` for each runtime import that climbs."""
    return sorted(
        f"{source} ({floor_of(source)}) imports {target} ({floor_of(target)})"
        for source, targets in graph.items()
        if source == "tvmrt.runtime" or source.startswith("tvmrt.runtime.")
        for target in targets
        if target == "tvmrt.runtime" or target.startswith("tvmrt.runtime.")
        if FLOORS.index(floor_of(target)) > FLOORS.index(floor_of(source))
    )


def test_runtime_floors_point_down() -> None:
    # type-only imports included: they may point sideways, never up
    assert upward_floor_edges(import_graph()) == []


def test_no_cycle_between_runtime_floors() -> None:
    floors: dict[str, set[str]] = {}
    for source, targets in import_graph().items():
        if source == "tvmrt.runtime" or source.startswith("tvmrt.runtime."):
            floors.setdefault(floor_of(source), set()).update(
                floor_of(t)
                for t in targets
                if (t == "tvmrt.runtime" or t.startswith("tvmrt.runtime."))
                and floor_of(t) != floor_of(source)
            )
    assert cycles(floors) == []


def test_no_module_cycle() -> None:
    # a type-only import may close a circle inside one layer or floor (nothing runs it)
    assert cycles(import_graph(type_only=False)) == []


def test_no_package_cycle() -> None:
    graph = import_graph(type_only=False)
    packages: dict[str, set[str]] = {}
    for source, targets in graph.items():
        mine = package_of(source, graph)
        theirs = {package_of(t, graph) for t in targets}
        # a package's own __init__ re-exporting its children is not a cycle between packages
        packages.setdefault(mine, set()).update(p for p in theirs if p != mine)
    for package, targets in packages.items():
        targets -= {t for t in targets if package.startswith(t + ".")}  # parent re-exports
    assert cycles(packages) == []


def test_the_checker_sees_function_level_imports(tmp_path: Path) -> None:
    source = tmp_path / "demo.py"
    source.write_text("def f():\n    from tvmrt.contrib import graph_executor\n")
    tree = ast.parse(source.read_text())
    found = [n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)]
    assert found == ["tvmrt.contrib"]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_the_checker_tells_type_only_imports_apart() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "import typing\n"
        "from tvmrt.runtime import device\n"
        "if TYPE_CHECKING:\n"
        "    from tvmrt.runtime.device_api import DeviceAPI\n"
        "else:\n"
        "    import tvmrt.runtime.ndarray\n"
        "if typing.TYPE_CHECKING:\n"
        "    import tvmrt.runtime.loaders\n"
        "def f():\n"
        "    from tvmrt.runtime.module import Module\n"
    )
    found = dict(imports_in(ast.parse(source), "tvmrt.runtime"))
    assert {name for name, only in found.items() if only} == {
        "tvmrt.runtime.device_api",
        "tvmrt.runtime.loaders",
    }
    assert not found["tvmrt.runtime.device"]
    assert not found["tvmrt.runtime.ndarray"]
    assert not found["tvmrt.runtime.module"]
    # a type-only import that climbs a floor is still refused
    assert upward_floor_edges({"tvmrt.runtime.device": {"tvmrt.runtime.loaders.dispatch"}}) == [
        "tvmrt.runtime.device (core) imports tvmrt.runtime.loaders.dispatch (loaders)"
    ]


@pytest.mark.parametrize("name", sorted(BUILTIN_FUNCTIONS))
def test_builtin_functions_live_in_the_runtime(name: str) -> None:
    module_path, _, attribute = BUILTIN_FUNCTIONS[name].partition(":")
    assert module_path.startswith("tvmrt.runtime.")
    assert callable(getattr(importlib.import_module(module_path), attribute))


def test_device_backends_live_in_the_runtime() -> None:
    for target in DEVICE_BACKENDS.values():
        module_path, _, function = target.partition(":")
        assert module_path.startswith("tvmrt.runtime.backends.")
        assert callable(getattr(importlib.import_module(module_path), function))

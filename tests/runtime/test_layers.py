"""The package's layers point down only, and no two modules or packages import each other.

The import graph is read from the source (every ``import`` statement, including those
inside functions and under ``TYPE_CHECKING``), not from what happens to be imported at
run time, so an import hidden in a function cannot close a circle unseen.
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
# error -> runtime -> TVM's Python faces (contrib) -> artifact (files -> model) -> apps
# (compiler, serve, cli). tvmrt._version, the version string, is below everything.
BOTTOM = "tvmrt._version"
LAYERS: dict[str, set[str]] = {
    BOTTOM: set(),
    "tvmrt.error": set(),
    "tvmrt.runtime": {"tvmrt.error"},
    # flags and folders for C/C++ programs using libtvmrt_runtime (`tvmrt config`)
    "tvmrt.config": {"tvmrt.error"},
    "tvmrt.contrib": {"tvmrt.error", "tvmrt.runtime"},
    "tvmrt.testing": {"tvmrt.error", "tvmrt.runtime", "tvmrt.contrib"},
    "tvmrt.artifact": {"tvmrt.error", "tvmrt.runtime", "tvmrt.contrib"},
    "tvmrt.compiler": {"tvmrt.error", "tvmrt.runtime", "tvmrt.contrib", "tvmrt.artifact"},
    "tvmrt.serve": {"tvmrt.error", "tvmrt.runtime", "tvmrt.contrib", "tvmrt.artifact"},
    # TVM's RPC server and tracker: at the serve level (it loads artifacts for remote clients)
    "tvmrt.rpc": {"tvmrt.error", "tvmrt.runtime", "tvmrt.contrib", "tvmrt.artifact"},
    "tvmrt.cli": {
        "tvmrt.error",
        "tvmrt.runtime",
        "tvmrt.contrib",
        "tvmrt.artifact",
        "tvmrt.serve",
        "tvmrt.compiler",
        "tvmrt.config",
        "tvmrt.rpc",
    },
    # TVM's `python -m tvm.exec.rpc_server`: thin wrappers of the tvmrt command's verbs
    "tvmrt.exec": {"tvmrt.cli"},
    # the package root and ``python -m tvmrt`` re-export what TVM's ``import tvm`` gives
    # TVM <= 0.6's ``tvm.module`` and the params helpers of ``tvm.relay``, faces of the runtime
    "tvmrt.module": {"tvmrt.error", "tvmrt.runtime"},
    "tvmrt.relay": {"tvmrt.error", "tvmrt.runtime"},
    "tvmrt": {
        "tvmrt.error",
        "tvmrt.runtime",
        "tvmrt.contrib",
        "tvmrt.compiler",
        "tvmrt.module",
        "tvmrt.relay",
    },
    "tvmrt.__main__": {"tvmrt.cli"},
}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imports_of(path: Path) -> Iterator[str]:
    """Every tvmrt module ``path`` imports, at any depth of the file."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
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
                yield f"{base}.{alias.name}" if is_module else base


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        targets = {t for t in imports_of(path) if t == "tvmrt" or t.startswith("tvmrt.")}
        graph[module_name(path)] = targets - {module_name(path)}
    return graph


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


def test_no_module_cycle() -> None:
    assert cycles(import_graph()) == []


def test_no_package_cycle() -> None:
    graph = import_graph()
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

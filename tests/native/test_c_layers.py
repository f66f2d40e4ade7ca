"""No two C translation units of a native library call each other, directly or around a circle.

For each library in src/tvmrt/_native/sources.txt (the list both builds read), every source
is compiled to an object; `nm` gives the symbols each object defines and the ones it leaves
undefined. An object that leaves undefined a symbol another object of the same library
defines depends on that object. The graph of those dependencies must have no cycle, as
tests/runtime/test_layers.py demands of the Python imports: a file then reads, and can be
tested, on top of the files below it only.
"""

from __future__ import annotations

import re
import subprocess
import sysconfig
from pathlib import Path

import pytest
from tests.native.conftest import INCLUDE, NATIVE_SRC, _need

SOURCES = NATIVE_SRC / "sources.txt"
CFLAGS = ["-std=c11", "-D_GNU_SOURCE", "-O0", "-fPIC", "-fvisibility=hidden"]

Graph = dict[str, set[str]]


def library_sources(library: str) -> list[str]:
    """The sources of `library`, as setup.py and the Makefile read them."""
    rows = [line.split() for line in SOURCES.read_text(encoding="utf-8").splitlines()]
    return [row[0] for row in rows if row and not row[0].startswith("#") and library in row[1:]]


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(defined, undefined) global symbols of an object file."""
    out = subprocess.run(
        [_need("nm"), "-P", str(obj)], capture_output=True, text=True, check=True
    ).stdout
    defined: set[str] = set()
    undefined: set[str] = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2:
            continue
        name, kind = parts[0], parts[1]
        if kind in ("U", "w", "v"):
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def dependency_graph(objects: dict[str, Path]) -> Graph:
    """unit -> the units whose symbols it uses."""
    table = {unit: symbols(obj) for unit, obj in objects.items()}
    owner: dict[str, str] = {}
    for unit, (defined, _) in table.items():
        for name in defined:
            assert name not in owner, f"{name} is defined in {owner[name]} and in {unit}"
            owner[name] = unit
    return {
        unit: {owner[name] for name in undefined if name in owner and owner[name] != unit}
        for unit, (_, undefined) in table.items()
    }


def find_cycle(graph: Graph) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(unit: str) -> list[str] | None:
        state[unit] = 1
        path.append(unit)
        for dep in sorted(graph.get(unit, ())):
            if state.get(dep) == 1:
                return [*path[path.index(dep) :], dep]
            if dep not in state:
                found = visit(dep)
                if found is not None:
                    return found
        path.pop()
        state[unit] = 2
        return None

    for unit in sorted(graph):
        if unit not in state:
            found = visit(unit)
            if found is not None:
                return found
    return None


def compile_objects(sources: dict[str, str | Path], out: Path, extra: list[str]) -> dict[str, Path]:
    cc = _need("cc")
    objects: dict[str, Path] = {}
    for unit, source in sources.items():
        obj = out / (unit.replace("/", "__") + ".o")
        cmd = [cc, *CFLAGS, f"-I{NATIVE_SRC}", f"-I{INCLUDE}", *extra, "-c", str(source)]
        subprocess.run([*cmd, "-o", str(obj)], check=True, capture_output=True, text=True)
        objects[unit] = obj
    return objects


@pytest.mark.parametrize("library", ["extension", "runtime", "dlr"])
def test_no_call_cycle_between_translation_units(library: str, tmp_path: Path) -> None:
    names = library_sources(library)
    assert names, f"sources.txt lists no sources for {library}"
    extra = [f"-I{sysconfig.get_paths()['include']}"] if library == "extension" else []
    objects = compile_objects({name: NATIVE_SRC / name for name in names}, tmp_path, extra)
    graph = dependency_graph(objects)
    cycle = find_cycle(graph)
    assert cycle is None, f"{library}: C translation units call each other: {' -> '.join(cycle)}"


def test_every_c_file_is_listed() -> None:
    """A C file missing from sources.txt would escape both builds and this test."""
    listed = {s for lib in ("extension", "runtime", "dlr") for s in library_sources(lib)}
    present = {str(p.relative_to(NATIVE_SRC)) for p in NATIVE_SRC.rglob("*.c")}
    assert present == listed


def test_the_check_sees_a_cycle(tmp_path: Path) -> None:
    """The detector itself: three units calling around a circle are reported by name."""
    units = {
        "a.c": "int b(void); int a(void) { return b(); }",
        "b.c": "int c(void); int b(void) { return c(); }",
        "c.c": "int a(void); int c(void) { return a() + 1; }",
        "d.c": "int a(void); int d(void) { return a(); }",
    }
    paths: dict[str, str | Path] = {}
    for name, text in units.items():
        (tmp_path / name).write_text(text + "\n", encoding="utf-8")
        paths[name] = tmp_path / name
    graph = dependency_graph(compile_objects(paths, tmp_path, []))
    assert graph["d.c"] == {"a.c"}
    assert find_cycle(graph) == ["a.c", "b.c", "c.c", "a.c"]
    del graph["c.c"]
    assert find_cycle(graph) is None


def _typedef_names(text: str) -> set[str]:
    """Names a C text declares: typedefs (structs, unions, enums, function pointers) and the
    k-constants of TVM and DLPack (enumerators or macros)."""
    names = set(re.findall(r"}\s*(\w+)\s*;", text))
    names |= set(re.findall(r"typedef[^;{]*\(\s*\*\s*(\w+)\s*\)", text))
    names |= set(re.findall(r"typedef\s+[\w\s\*]+?\b(\w+)\s*;", text))
    names |= set(re.findall(r"#define\s+(k[A-Z]\w+)\b", text))
    names |= set(re.findall(r"^\s*(k[A-Z]\w+)\s*[=,\n]", text, re.MULTILINE))
    return names


def test_the_abi_types_are_declared_once() -> None:
    """Every C file takes TVM's and DLPack's types from the public headers (include/), none
    keeps a private copy."""
    public: set[str] = set()
    for header in INCLUDE.rglob("*.h"):
        public |= _typedef_names(header.read_text(encoding="utf-8"))
    assert {"TVMValue", "TVMParallelGroupEnv", "DLTensor", "TVMBackendPackedCFunc"} <= public
    copies = {
        f"{path.relative_to(NATIVE_SRC)}: {name}"
        for path in sorted(NATIVE_SRC.rglob("*.[ch]"))
        for name in _typedef_names(path.read_text(encoding="utf-8")) & public
    }
    assert not copies

"""TVM's public Python surface, as data, and how tvmrt's compares with it.

Run as a script under a Python that has TVM (``python api_surface.py``) it prints, as JSON,
the names TVM defines in each module of :data:`MODULES` (classes and functions of TVM's own,
its submodules, the values the module assigns itself; not what it imports from ``typing``,
``ctypes`` or ``numpy``), every TVM class's public methods and properties (those a TVM class
defines, not those of ``ctypes.Structure`` or ``str``), and every signature: parameter names,
order, kinds and defaults (annotations ignored). Only the standard library is used, so it runs
in a TVM peer's venv.

:func:`compare` reads tvmrt's live objects at the same paths (``tvm`` -> ``tvmrt``) and lists
every difference: a name absent, a method absent, a signature that rejects a call TVM's
accepts (tvmrt may add parameters, with defaults).
"""

from __future__ import annotations

import importlib
import inspect
import json
import re
import sys
from dataclasses import dataclass, field
from typing import Any

MODULES = (
    "runtime",
    "runtime.ndarray",
    "runtime.module",
    "runtime.packed_func",
    "runtime.object",
    "runtime.container",
    "runtime.profiling",
    "runtime.params",
    "runtime.vm",
    "runtime.executor",
    "contrib.graph_executor",
    "contrib.debugger.debug_executor",
    "contrib.graph_runtime",
)
_KINDS = {
    inspect.Parameter.POSITIONAL_ONLY: "pos",
    inspect.Parameter.POSITIONAL_OR_KEYWORD: "pk",
    inspect.Parameter.VAR_POSITIONAL: "var",
    inspect.Parameter.KEYWORD_ONLY: "kw",
    inspect.Parameter.VAR_KEYWORD: "varkw",
}
_SIMPLE = (type(None), bool, int, float, str)


def _ours(obj: object, root: str) -> bool:
    module = getattr(obj, "__module__", None) or ""
    return module == root or module.startswith(root + ".")


def _default(value: object) -> str:
    if isinstance(value, _SIMPLE) or (
        isinstance(value, tuple) and all(isinstance(v, _SIMPLE) for v in value)
    ):
        return repr(value)
    return f"<{type(value).__name__}>"


def signature(obj: Any, drop_first: bool = False) -> list[list[str | None]] | None:
    """``[[name, kind, default repr or None], ...]``; None where Python cannot tell."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return None
    params = list(sig.parameters.values())
    if drop_first and params and params[0].kind != inspect.Parameter.VAR_POSITIONAL:
        params = params[1:]
    return [
        [p.name, _KINDS[p.kind], None if p.default is p.empty else _default(p.default)]
        for p in params
    ]


def _defining_class(cls: type, name: str) -> type | None:
    for base in cls.__mro__:
        if name in vars(base):
            return base
    return None


def member(cls: type, name: str) -> dict[str, Any] | None:
    """How ``cls`` offers ``name``: a method (with its signature), a property, an attribute."""
    owner = _defining_class(cls, name)
    if owner is None:
        return None
    raw = vars(owner)[name]
    if isinstance(raw, staticmethod):
        return {"kind": "method", "signature": signature(raw.__func__)}
    if isinstance(raw, classmethod):
        return {"kind": "method", "signature": signature(raw.__func__, drop_first=True)}
    if inspect.isfunction(raw):
        return {"kind": "method", "signature": signature(raw, drop_first=True)}
    if isinstance(raw, property) or (hasattr(raw, "__get__") and not callable(raw)):
        return {"kind": "property"}
    return {"kind": "attribute"}


def _class_members(cls: type, root: str) -> dict[str, dict[str, Any]]:
    out = {}
    for name in sorted(dir(cls)):
        owner = _defining_class(cls, name)
        if name.startswith("_") or owner is None or not _ours(owner, root):
            continue
        found = member(cls, name)
        if found is not None:
            out[name] = found
    return out


def describe(obj: object, root: str) -> dict[str, Any]:
    """A class (constructor signature and members), a function (signature), or a value."""
    if inspect.isclass(obj):
        return {
            "kind": "class",
            "signature": signature(obj),
            "members": _class_members(obj, root),
        }
    if callable(obj):
        return {"kind": "function", "signature": signature(obj)}
    return {"kind": "value"}


def _assigned(module: object, name: str) -> bool:
    try:
        source = inspect.getsource(module)  # type: ignore[arg-type]
    except (OSError, TypeError):
        return False
    return re.search(rf"^{re.escape(name)}\s*(:[^=]*)?=", source, re.MULTILINE) is not None


def dump(root: str = "tvm") -> dict[str, Any]:
    """``{"modules": {path: {name: ref}}, "objects": {ref: description}}`` for :data:`MODULES`.

    A class or function is described once, under ``ref`` (``module.qualname``, its origin);
    submodules are ``{"kind": "module"}``.
    """
    modules: dict[str, dict[str, Any]] = {}
    objects: dict[str, Any] = {}
    for path in MODULES:
        module = importlib.import_module(f"{root}.{path}")
        names: dict[str, Any] = {}
        for name in sorted(dir(module)):
            if name.startswith("_"):
                continue
            obj = getattr(module, name)
            if inspect.ismodule(obj):
                if obj.__name__ == f"{module.__name__}.{name}":
                    names[name] = {"kind": "module"}
            elif (inspect.isclass(obj) or callable(obj)) and _ours(obj, root):
                ref = f"{obj.__module__}.{getattr(obj, '__qualname__', name)}"
                names[name] = {"ref": ref}
                objects.setdefault(ref, describe(obj, root))
            elif not inspect.isclass(obj) and not callable(obj) and _assigned(module, name):
                names[name] = {"kind": "value"}
        modules[path] = names
    return {"modules": modules, "objects": objects}


def accepts(theirs: list[list[str | None]], ours: list[list[str | None]]) -> list[str]:
    """Why a function with signature ``ours`` rejects a call one with ``theirs`` accepts."""
    problems: list[str] = []
    kinds = {kind for _, kind, _ in ours}
    positional = [p for p in theirs if p[1] in ("pos", "pk")]
    ours_positional = [p for p in ours if p[1] in ("pos", "pk")]
    matched: set[str | None] = set()

    def check_default(mine: list[str | None], their: list[str | None]) -> None:
        if their[2] is not None and mine[2] is None:
            problems.append(f"{mine[0]} has no default where TVM's is {their[2]}")
        elif their[2] is not None and mine[2] != their[2]:
            problems.append(f"{mine[0]} defaults to {mine[2]} where TVM's is {their[2]}")

    for i, their in enumerate(positional):
        if i >= len(ours_positional):
            if "var" not in kinds or their[1] == "pk":
                problems.append(f"no positional parameter {i} ({their[0]})")
            continue
        mine = ours_positional[i]
        matched.add(mine[0])
        if their[1] == "pk" and (mine[1] != "pk" or mine[0] != their[0]):
            problems.append(f"parameter {i} is {mine[0]} ({mine[1]}) where TVM's is {their[0]}")
            continue
        check_default(mine, their)
    for their in theirs:
        if their[1] in ("var", "varkw") and their[1] not in kinds:
            problems.append(f"takes no {'*' if their[1] == 'var' else '**'}{their[0]}")
        if their[1] != "kw":
            continue
        mine_kw = [p for p in ours if p[0] == their[0] and p[1] in ("pk", "kw")]
        if mine_kw:
            matched.add(mine_kw[0][0])
            check_default(mine_kw[0], their)
        elif "varkw" not in kinds:
            problems.append(f"no keyword parameter {their[0]}")
    for mine in ours:
        if mine[0] not in matched and mine[1] in ("pos", "pk", "kw") and mine[2] is None:
            problems.append(f"{mine[0]} is required where TVM has no such parameter")
    return problems


@dataclass
class Comparison:
    """Counts and differences of tvmrt's surface against TVM's (a :func:`dump`)."""

    names: tuple[int, int] = (0, 0)
    methods: tuple[int, int] = (0, 0)
    signatures: tuple[int, int] = (0, 0)
    differences: dict[str, str] = field(default_factory=dict)


def _lookup(root: str, path: str, name: str) -> tuple[bool, object]:
    try:
        module = importlib.import_module(f"{root}.{path}")
        return True, getattr(module, name)
    except (ImportError, AttributeError):
        return False, None


def compare(tvm: dict[str, Any], root: str = "tvmrt") -> Comparison:
    """tvmrt's objects at TVM's paths against TVM's surface ``tvm``.

    Difference keys: ``name runtime.ndarray.cpu``, ``method tvm...Module.clear_imports``,
    ``signature tvm...Module.export_library`` (one per TVM object, at its first path).
    """
    result = Comparison()
    names = [0, 0]
    methods = [0, 0]
    sigs = [0, 0]
    seen: set[str] = set()
    for path, entries in tvm["modules"].items():
        for name, entry in entries.items():
            names[1] += 1
            found, obj = _lookup(root, path, name)
            if not found:
                result.differences[f"name {path}.{name}"] = "absent"
                continue
            names[0] += 1
            ref = entry.get("ref")
            if ref is None or ref in seen:
                continue
            seen.add(ref)
            theirs = tvm["objects"][ref]
            if theirs["kind"] == "class" and not inspect.isclass(obj):
                result.differences[f"signature {ref}"] = "a class in TVM, not a class here"
                sigs[1] += 1
                continue
            if theirs["signature"] is not None:
                sigs[1] += 1
                ours = signature(obj)
                problems = ["no signature"] if ours is None else accepts(theirs["signature"], ours)
                if problems:
                    result.differences[f"signature {ref}"] = "; ".join(problems)
                else:
                    sigs[0] += 1
            for attr, their_member in theirs.get("members", {}).items():
                methods[1] += 1
                mine = member(obj, attr) if inspect.isclass(obj) else None
                if mine is None:
                    result.differences[f"method {ref}.{attr}"] = "absent"
                    continue
                methods[0] += 1
                if their_member["kind"] != "method" or their_member["signature"] is None:
                    continue
                sigs[1] += 1
                if mine["kind"] != "method" or mine["signature"] is None:
                    result.differences[f"signature {ref}.{attr}"] = f"a {mine['kind']} here"
                    continue
                problems = accepts(their_member["signature"], mine["signature"])
                if problems:
                    result.differences[f"signature {ref}.{attr}"] = "; ".join(problems)
                else:
                    sigs[0] += 1
    result.names, result.methods, result.signatures = (
        (names[0], names[1]),
        (methods[0], methods[1]),
        (sigs[0], sigs[1]),
    )
    return result


def to_text(surface: dict[str, Any]) -> str:
    """JSON with one line per module and per class member or function (a short fixture)."""

    def block(items: dict[str, Any], indent: str, inner: Any) -> list[str]:
        rows = [
            f"{indent}{json.dumps(key)}: {inner(value, indent)}" for key, value in items.items()
        ]
        return ["{", *[r + "," for r in rows[:-1]], *rows[-1:], indent[:-1] + "}"]

    def obj(value: dict[str, Any], indent: str) -> str:
        if not value.get("members"):
            return json.dumps(value)
        head = {k: v for k, v in value.items() if k != "members"}
        members = block(value["members"], indent + "  ", lambda v, _: json.dumps(v))
        return json.dumps(head)[:-1] + ', "members": ' + "\n".join(members) + "}"

    modules = block(surface["modules"], "  ", lambda v, _: json.dumps(v))
    objects = block(surface["objects"], "  ", obj)
    text = '{\n "modules": ' + "\n".join(modules) + ',\n "objects": ' + "\n".join(objects)
    return text + "\n}\n"


if __name__ == "__main__":
    sys.stdout.write(to_text(dump(sys.argv[1] if len(sys.argv) > 1 else "tvm")))

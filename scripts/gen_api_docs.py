"""Write docs/api.md: the API reference, generated from the public names' docstrings.

python scripts/gen_api_docs.py          # rewrite docs/api.md
python scripts/gen_api_docs.py --check  # exit 1 if docs/api.md is out of date
"""

from __future__ import annotations

import importlib
import inspect
import sys
from pathlib import Path

MODULES = [
    "tvmrt",
    "tvmrt.runtime",
    "tvmrt.runtime.profiling",
    "tvmrt.contrib.graph_executor",
    "tvmrt.contrib.debugger.debug_executor",
    "tvmrt.artifact",
    "tvmrt.error",
    "tvmrt.testing",
]
OUT = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def _signature(obj: object) -> str:
    try:
        return str(inspect.signature(obj))  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return ""


def _markdown(doc: str) -> str:
    """NumPy-style section underlines would become Markdown headings: bold the title."""
    lines = doc.splitlines()
    out: list[str] = []
    for line in lines:
        if out and line and set(line) == {"-"} and out[-1].strip():
            out[-1] = f"**{out[-1].strip()}**"
            continue
        out.append(line)
    return "\n".join(out)


def _entry(name: str, obj: object, level: str = "###") -> list[str]:
    doc = _markdown(inspect.getdoc(obj) or "(undocumented)")
    kind = "class" if inspect.isclass(obj) else "function" if callable(obj) else "value"
    if kind == "value" or inspect.ismodule(obj):
        return []
    head = f"{level} `{name}{_signature(obj) if kind == 'function' else ''}`"
    lines = [head, "", doc, ""]
    if inspect.isclass(obj):
        for attr, member in _own_members(obj).items():
            if attr.startswith("_") and attr not in ("__init__", "__call__"):
                continue
            target = member.fget if isinstance(member, property) else member
            if not (callable(target) or isinstance(member, property)):
                continue
            if attr == "__init__" and not getattr(target, "__doc__", None):
                continue
            sig = "" if isinstance(member, property) else _signature(target)
            summary = (inspect.getdoc(target) or "").split("\n\n")[0]
            lines.append(f"- `{attr}{sig}`: {summary}".rstrip(": "))
        lines.append("")
    return lines


def _public_classes() -> set[int]:
    found = set()
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        found.update(id(getattr(module, name)) for name in getattr(module, "__all__", []))
    return found


def _own_members(cls: type) -> dict[str, object]:
    """``cls``'s members, with those of tvmrt base classes the reference does not list
    itself (an implementation part the class builds on); the class's own last."""
    public = _public_classes()
    members: dict[str, object] = {}
    for base in reversed(cls.__mro__):
        if base is cls or (base.__module__.startswith("tvmrt") and id(base) not in public):
            members.update(vars(base))
    return members


def render() -> str:
    """The whole reference as Markdown."""
    out = [
        "# API reference",
        "",
        "Generated from docstrings by `scripts/gen_api_docs.py`; do not edit by hand.",
        "",
    ]
    for module_name in MODULES:
        module = importlib.import_module(module_name)
        out += [f"## `{module_name}`", "", (inspect.getdoc(module) or "").strip(), ""]
        for name in getattr(module, "__all__", []):
            out += _entry(f"{module_name}.{name}", getattr(module, name))
    return "\n".join(out).rstrip() + "\n"


def main() -> int:
    """Write or check docs/api.md."""
    text = render()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT} is out of date: run python scripts/gen_api_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    print(f"wrote {OUT} ({len(text.splitlines())} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

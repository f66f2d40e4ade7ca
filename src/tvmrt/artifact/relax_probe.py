"""What the C runtime reads from a Relax VM executable, asked in a child process.

A Relax executable's reader is the C runtime's (``libtvmrt_runtime``), and it reads the
executable from the loaded library: there is no reading it without ``dlopen``. So
``tvmrt inspect`` asks a child process (``python -m tvmrt.artifact.relax_probe FILE``) to
load it, :func:`~tvmrt.runtime.relax_vm.describe` it and make a VM of it on the CPU
(which resolves every name of its function table, as a run would, and calls nothing).
The library's initialisers run in that child, none of its kernels; a library that crashes
ends the child only, and the inspecting process loads nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

__all__ = ["probe"]

_MARK = "tvmrt-relax-probe: "  # the child's answer line (the library may print too)
_TIMEOUT_S = 120.0


def probe(path: Path) -> dict[str, Any]:
    """The child's answer for the executable at ``path``: ``describe`` (the C runtime's
    description), ``imports`` (the module kinds of the library's import tree) and
    ``refused`` (why a VM cannot be made of it here, or None); or ``error`` alone (why it
    could not be loaded)."""
    package_root = str(Path(__file__).resolve().parents[2])  # the folder holding tvmrt/
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH")) if p)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tvmrt.artifact.relax_probe", str(path)],
            capture_output=True,
            text=True,
            timeout=_TIMEOUT_S,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"loading {str(path)!r} did not finish within {_TIMEOUT_S:g} s"}
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_MARK):
            answer: dict[str, Any] = json.loads(line[len(_MARK) :])
            return answer
    why = f"signal {-done.returncode}" if done.returncode < 0 else f"exit {done.returncode}"
    tail = done.stderr.strip().splitlines()[-1:] or [""]
    ended = f"loading {str(path)!r} to read its executable ended its process ({why})"
    return {"error": f"{ended} {tail[0]}".rstrip()}


def _kinds(module: Any) -> list[str]:
    """The type keys of ``module``'s import tree, each once, depth first."""
    seen: list[str] = []
    stack = list(module.imported_modules)
    while stack:
        mod = stack.pop(0)
        if mod.type_key not in seen:
            seen.append(mod.type_key)
        stack.extend(mod.imported_modules)
    return seen


def _answer(path: str) -> dict[str, Any]:
    from tvmrt.error import TVMError
    from tvmrt.runtime.device import cpu
    from tvmrt.runtime.module import load_module
    from tvmrt.runtime.relax_vm import VirtualMachine, describe

    try:
        lib = load_module(path)
        described = describe(lib)
    except (TVMError, OSError) as exc:
        return {"error": str(exc)}
    refused = None
    try:
        VirtualMachine(lib, cpu())
    except TVMError as exc:
        refused = str(exc)
    return {"describe": described, "imports": _kinds(lib), "refused": refused}


if __name__ == "__main__":
    print(_MARK + json.dumps(_answer(sys.argv[1])), flush=True)

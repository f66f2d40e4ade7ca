"""Import today's TVM (Relax + TIR) and onnx on demand, with one clear error when missing.

``import tvmrt`` never imports TVM: it is a 300 MB compiler that a deployment does not
need. Everything in :mod:`tvmrt.compiler` that needs it calls :func:`require_tvm` first.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["require_tvm", "require_onnx", "INSTALL_HINT"]

INSTALL_HINT = (
    "pip install 'tvmrt[compile]' (from a checkout of tvmrt: pip install -e '.[compile]')"
)
"""How to get the compiler's dependencies (apache-tvm, apache-tvm-ffi, onnx)."""


def require_tvm() -> ModuleType:
    """Import and return ``tvm`` (with Relax and the ONNX frontend).

    Raises
    ------
    ImportError
        If apache-tvm is not installed, naming the extra that installs it.
    """
    try:
        tvm = importlib.import_module("tvm")
        importlib.import_module("tvm.relax")
    except ImportError as exc:
        raise ImportError(
            f"tvmrt.compile needs apache-tvm (today's TVM, Relax + TIR) as its kernel "
            f"compiler, which is not installed: {INSTALL_HINT} ({exc})"
        ) from exc
    return tvm


def require_onnx() -> ModuleType:
    """Import and return ``onnx``.

    Raises
    ------
    ImportError
        If onnx is not installed, naming the extra that installs it.
    """
    try:
        return importlib.import_module("onnx")
    except ImportError as exc:
        raise ImportError(
            f"tvmrt.compile reads ONNX models with the onnx package, which is not "
            f"installed: {INSTALL_HINT} ({exc})"
        ) from exc

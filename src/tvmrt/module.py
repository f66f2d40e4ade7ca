"""``tvm.module`` of TVM <= 0.6: the old home of ``load`` and ``Module``.

Scripts written against TVM 0.6's deployment guide call ``tvm.module.load(path)``; with
``import tvmrt as tvm`` the same line loads the library through
:func:`tvmrt.runtime.load_module`. New code uses ``tvmrt.runtime.load_module``.
"""

from __future__ import annotations

from tvmrt.runtime.compat import enabled
from tvmrt.runtime.module import Module, load_module, system_lib

__all__ = ["load", "Module", "system_lib", "enabled"]

load = load_module
"""``tvm.module.load(path, fmt="")``: :func:`tvmrt.runtime.load_module` under its old name."""

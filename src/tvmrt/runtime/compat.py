"""Pieces of ``tvm.runtime`` that ported code calls: ``enabled``, ``numpyasarray``."""

from __future__ import annotations

from tvmrt.runtime.module_info import enabled
from tvmrt.runtime.ndarray import numpyasarray

__all__ = ["enabled", "numpyasarray"]

"""Warnings for TVM names that tvmrt keeps only for compatibility."""

from __future__ import annotations

import warnings

__all__ = ["warn_deprecated"]


def warn_deprecated(thing: str, *, instead: str, stacklevel: int = 3) -> None:
    """Warn that ``thing`` is deprecated and ``instead`` should be used, at the caller's line."""
    warnings.warn(
        f"{thing} is deprecated, use {instead} instead",
        DeprecationWarning,
        stacklevel=stacklevel,
    )

"""``dlr.metadata``: the names ``import dlr`` exports and the DLR version tvmrt's matches."""

from __future__ import annotations

__all__ = ["NAME", "VERSION"]

NAME = ["DLRModel"]
VERSION = "1.10.0"

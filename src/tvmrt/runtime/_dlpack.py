"""DLPack exchange (placeholder; being written)."""

from __future__ import annotations

from typing import Any


def to_dlpack_capsule(*args: Any) -> Any:
    """Export."""
    raise NotImplementedError


def from_dlpack(obj: Any) -> Any:
    """Import."""
    raise NotImplementedError

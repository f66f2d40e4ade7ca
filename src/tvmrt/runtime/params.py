"""TVM's params format (placeholder; being written)."""

from __future__ import annotations

from typing import Any

__all__ = [
    "save_param_dict",
    "load_param_dict",
    "save_param_dict_to_file",
    "load_param_dict_from_file",
]


def save_param_dict(params: Any) -> bytearray:
    """Serialise params."""
    raise NotImplementedError


def load_param_dict(param_bytes: Any) -> dict[str, Any]:
    """Deserialise params."""
    raise NotImplementedError


def save_param_dict_to_file(params: Any, path: Any) -> None:
    """Serialise params to a file."""
    raise NotImplementedError


def load_param_dict_from_file(path: Any) -> dict[str, Any]:
    """Deserialise params from a file."""
    raise NotImplementedError

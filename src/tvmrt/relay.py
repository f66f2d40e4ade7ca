"""The params helpers old scripts reach through ``tvm.relay``.

TVM v0.19 keeps ``relay.save_param_dict`` / ``relay.load_param_dict``
(``python/tvm/relay/param_dict.py``, deprecated since 0.9 in its docs, without a warning)
as plain forwards to ``tvm.runtime``; so do these. tvmrt has no Relay compiler: only the
params format lives here.
"""

from __future__ import annotations

from collections.abc import Mapping

from tvmrt.runtime import params as _params
from tvmrt.runtime.ndarray import NDArray

__all__ = ["save_param_dict", "load_param_dict"]


def save_param_dict(params: Mapping[str, object]) -> bytearray:
    """Serialize a dict of arrays: :func:`tvmrt.runtime.save_param_dict`."""
    return _params.save_param_dict(params)


def load_param_dict(param_bytes: bytes | bytearray | memoryview) -> dict[str, NDArray]:
    """Read a params blob: :func:`tvmrt.runtime.load_param_dict`."""
    return _params.load_param_dict(param_bytes)

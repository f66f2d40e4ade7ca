"""Choose the LLVM CPU target for compiled kernels.

TVM 0.27 only accepts targets as dicts or JSON (``"llvm -mcpu=x"`` strings are rejected),
plain ``{"kind": "llvm"}`` produces generic SSE2 code, and ``"mcpu": "native"`` is not
understood by its LLVM, which logs an error and silently falls back to generic code.
So the CPU is always named: the host's by default, or a portable level such as
``x86-64-v3`` on request.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping
from typing import Any

from tvmrt.compiler._tvm import require_tvm
from tvmrt.error import ArgumentTypeError, InvalidArgumentError

__all__ = ["TargetSpec", "resolve_target", "host_cpu", "PORTABLE_CPUS"]

TargetSpec = str | Mapping[str, Any] | None
"""What :func:`resolve_target` accepts: ``None``/``"host"``, a CPU name or portable level,
``"llvm -mcpu=... -mattr=..."``, or a target dict (or its JSON text)."""

PORTABLE_CPUS = ("x86-64", "x86-64-v2", "x86-64-v3", "x86-64-v4", "generic")
"""CPU names that give code for a whole class of machines rather than one microarchitecture."""

_HOST_NAMES = ("host", "native")


def host_cpu() -> str:
    """LLVM's name for this machine's CPU (``target.llvm_get_system_cpu``), e.g. ``znver3``."""
    require_tvm()
    import tvm_ffi

    return str(tvm_ffi.get_global_func("target.llvm_get_system_cpu")())


def _parse_llvm_string(text: str) -> dict[str, Any]:
    """``"llvm -mcpu=x -mattr=+a,+b -num-cores=4"`` as a target dict."""
    parts = text.split()
    out: dict[str, Any] = {"kind": parts[0]}
    for opt in parts[1:]:
        key, sep, value = opt.lstrip("-").partition("=")
        if not opt.startswith("-") or not sep or not key:
            raise InvalidArgumentError(
                f"target {text!r}: option {opt!r} is not of the form -key=value "
                "(e.g. 'llvm -mcpu=x86-64-v3')"
            )
        out[key] = value.split(",") if key in ("mattr", "keys", "libs") else value
        if key == "num-cores":
            out[key] = int(value)
    return out


def _as_dict(spec: TargetSpec) -> dict[str, Any]:
    if spec is None:
        return {"kind": "llvm", "mcpu": "host"}
    if isinstance(spec, Mapping):
        return dict(spec)
    if not isinstance(spec, str):
        raise ArgumentTypeError(f"target must be a str or a dict, got {type(spec).__name__}")
    text = spec.strip()
    if text == "cuda":
        return {"kind": "cuda"}
    if text.startswith("{"):
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"target {spec!r} is not valid JSON: {exc}") from None
        if not isinstance(value, dict):
            raise InvalidArgumentError(f"target {spec!r} must be a JSON object")
        return value
    if text.split(" ", 1)[0] in ("llvm", "c", "cuda", "opencl", "vulkan", "metal", "rocm"):
        return _parse_llvm_string(text)
    if not text or " " in text:
        raise InvalidArgumentError(
            f"target {spec!r} is not a CPU name; use 'host', a CPU such as 'znver3', a "
            f"portable level ({', '.join(PORTABLE_CPUS[:4])}), 'llvm -mcpu=...' or JSON"
        )
    return {"kind": "llvm", "mcpu": text}


def resolve_target(spec: TargetSpec = None) -> dict[str, Any]:
    """Turn a user's target choice into an explicit TVM target dict.

    Parameters
    ----------
    spec
        ``None`` or ``"host"`` (this machine's CPU, by name), ``"native"`` (the same),
        a CPU name (``"znver3"``, ``"skylake-avx512"``), a portable level
        (``"x86-64-v3"``: AVX2/FMA, ``"x86-64-v2"``: SSE4.2), ``"llvm -mcpu=..."``, or a
        target dict / JSON object with ``"kind": "llvm"``; or ``"cuda"`` / ``"cuda
        -arch=sm_XY"`` / ``{"kind": "cuda", "arch": "sm_XY"}`` for an NVIDIA GPU (arch
        ``sm_75`` unless given).

    Returns
    -------
    dict
        A target dict with ``kind`` ``"llvm"`` and, unless the caller gave a dict without
        one, an ``mcpu`` that LLVM knows; or ``kind`` ``"cuda"`` with an ``arch``.

    Raises
    ------
    ValueError
        If the target is not a CPU (LLVM) target, or names a CPU LLVM does not know.
    """
    target = _as_dict(spec)
    kind = target.get("kind")
    if kind == "cuda":  # an NVIDIA GPU (tvmrt.compiler.cuda), PTX for arch and up
        target.setdefault("arch", "sm_75")
        return target
    if kind != "llvm":
        raise InvalidArgumentError(
            f"target kind {kind!r} is not supported: the target must be an LLVM CPU target "
            "(e.g. 'host' or 'x86-64-v3') or 'cuda' (an NVIDIA GPU, e.g. 'cuda -arch=sm_75')"
        )
    mcpu = target.get("mcpu")
    if mcpu in _HOST_NAMES:
        # LLVM 22 does not understand "native" and silently emits generic code
        target["mcpu"] = host_cpu()
    elif isinstance(mcpu, str):
        _check_cpu(target)
    return target


def _check_cpu(target: dict[str, Any]) -> None:
    tvm = require_tvm()
    import tvm_ffi

    probe = {k: v for k, v in target.items() if k in ("kind", "mtriple")}
    known = [
        str(c)
        for c in tvm_ffi.get_global_func("target.llvm_get_cpu_archlist")(tvm.target.Target(probe))
    ]
    if known and target["mcpu"] not in known:
        close = difflib.get_close_matches(target["mcpu"], known, n=3)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}" if close else ""
        raise InvalidArgumentError(
            f"target CPU {target['mcpu']!r} is unknown to LLVM for "
            f"{probe.get('mtriple', 'this machine')}{hint} (LLVM would silently emit generic "
            "code); use 'host' or a portable level such as 'x86-64-v3'"
        )

"""``tvmrt run --compare REF.npz``: does tvmrt reproduce the outputs a reference run saved?

Each member of REF named as an output of the model (any of its names:
:mod:`tvmrt.artifact.output_names`, ``output_0`` included) is compared with that output:
maximum absolute and relative error, and a pass when every element satisfies
``|out - ref| <= atol + rtol * |ref|`` (numpy's ``allclose``; NaNs must match). Members
named as inputs are skipped, others are listed as skipped; only the outputs are read from
REF. ``OUTPUT=REF.npz:MEMBER`` compares one member, whatever its name, with one output.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from tvmrt.cli._npz import NpzReader, npz_member
from tvmrt.error import UsageError

__all__ = ["add_compare_arguments", "compare_outputs"]

RTOL = 1e-5
ATOL = 1e-6


def add_compare_arguments(parser: argparse.ArgumentParser) -> None:
    """--compare REF.npz, --rtol, --atol."""
    parser.add_argument(
        "--compare",
        metavar="REF.npz",
        help="compare the outputs with a reference run's (members named as run names the "
        "outputs, e.g. softmax_0, or TVM's softmax:0, or output_0 by position); exit 1 when "
        "one differs past --rtol/--atol); OUTPUT=REF.npz:MEMBER compares one member with one "
        "output",
    )
    parser.add_argument(
        "--rtol", type=float, default=RTOL, help=f"relative tolerance of --compare ({RTOL:g})"
    )
    parser.add_argument(
        "--atol", type=float, default=ATOL, help=f"absolute tolerance of --compare ({ATOL:g})"
    )


def compare_outputs(
    outputs: Sequence[tuple[str, np.ndarray[Any, Any]]],
    aliases: Mapping[str, int],
    inputs: Sequence[str],
    path: str,
    rtol: float,
    atol: float,
) -> tuple[list[str], bool]:
    """Report lines and whether every compared output is within tolerance.

    ``outputs`` are ``(name, array)`` in output order; ``aliases`` every name of an output
    -> its position; ``inputs`` the model's input names (members skipped).
    """
    if rtol < 0 or atol < 0:
        raise UsageError(f"--rtol and --atol must be >= 0, got {rtol:g} and {atol:g}")
    spec = path
    name, sep, file = spec.partition("=")
    picked = npz_member(file, name) if sep else None
    if picked is not None:
        if name not in aliases:
            raise UsageError(
                f"--compare {spec!r}: {name!r} is not an output of the model; its outputs are "
                f"{[n for n, _ in outputs]} (or output_0, output_1, ...)"
            )
        path, member = str(picked[0]), picked[1]
        aliases = {member: aliases[name]}
    lines = [f"compare with {spec} (rtol {rtol:g}, atol {atol:g}):"]
    ok, compared = True, set()
    with NpzReader(path) as ref:
        if picked is not None and member not in ref.keys:
            raise UsageError(f"--compare {spec!r}: {path!r} has no member {member!r}: {ref.keys}")
        for key in ref.keys:
            if picked is not None and key != member:
                continue
            if key in inputs:
                continue
            if key not in aliases:
                lines.append(f"  {key}: not an output of the model; skipped")
                continue
            index = aliases[key]
            name, out = outputs[index]
            shown = name if key == name else f"{name} (as {key})"
            if index in compared:
                lines.append(f"  {shown}: compared already under another name; skipped")
                continue
            compared.add(index)
            shape = ref.header(key)[0]
            if shape != out.shape:
                ok = False
                lines.append(f"  {shown}: shape {out.shape}, reference {shape}: MISMATCH")
                continue
            line, good = _compare(out, ref.array(key), rtol, atol)
            ok = ok and good
            lines.append(f"  {shown}: {line}")
    if not compared:
        raise UsageError(
            f"{path!r} holds no output of the model; its members are {ref.keys}, the "
            f"model's outputs are {[n for n, _ in outputs]} (or output_0, output_1, ...); "
            "compare one member with one output by --compare OUTPUT=REF.npz:MEMBER"
        )
    missing = [outputs[i][0] for i in range(len(outputs)) if i not in compared]
    if missing:
        lines.append(f"  not in the reference: {', '.join(missing)}")
    lines.append("outputs match the reference" if ok else "outputs DIFFER from the reference")
    return lines, ok


def _compare(
    out: np.ndarray[Any, Any], ref: np.ndarray[Any, Any], rtol: float, atol: float
) -> tuple[str, bool]:
    if out.dtype.kind not in "biufc" or ref.dtype.kind not in "biufc":
        same = bool(np.array_equal(out, ref))
        return ("equal" if same else "NOT equal"), same
    a, b = out.astype(np.float64), ref.astype(np.float64)
    diff = np.abs(a - b)
    finite = np.isfinite(diff)
    max_abs = float(diff[finite].max()) if finite.any() else 0.0
    with np.errstate(divide="ignore", invalid="ignore"):
        rel = np.where(b != 0, diff / np.abs(b), np.where(diff == 0, 0.0, np.inf))
    max_rel = float(rel[np.isfinite(rel)].max()) if np.isfinite(rel).any() else 0.0
    good = bool(np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))
    bad = int(np.count_nonzero(~np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=True)))
    verdict = "ok" if good else f"DIFFERS ({bad} of {a.size} elements past tolerance)"
    return f"max abs error {max_abs:.3g}, max rel error {max_rel:.3g}: {verdict}", good

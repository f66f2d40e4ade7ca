"""``tvmrt inspect`` text for a Relax VM executable: functions, builtins, kernels, devices."""

from __future__ import annotations

from tvmrt.artifact.report import RelaxCallee, RelaxReport, RelaxTensor

__all__ = ["relax_lines", "tensor_text"]

_SHOWN = 8
# what provides a name of the function table, as a phrase (RelaxCallee.provided_by)
_BY = {
    "kernel": "the library's kernels",
    "builtin": "provided by tvmrt's Relax VM",
    "registered": "provided by a registered global function",
    "runtime": "provided by tvmrt's runtime",
    "missing": "missing: nothing provides it",
}


def tensor_text(t: RelaxTensor) -> str:
    """``(n, 16) float32``: a symbolic dimension by its symbol, else ``?``."""
    if t.kind not in ("tensor",) and t.shape is None:
        return {"any": "any value (not checked)"}.get(t.kind, t.kind)
    dims = []
    for i, d in enumerate(t.shape or []):
        dims.append(str(d) if d != -1 else (t.symbols or {}).get(str(i), "?"))
    shape = f"({', '.join(dims)}{',' if len(dims) == 1 else ''})" if t.shape is not None else "?"
    return f"{shape} {t.dtype}" if t.dtype else shape


def _names(callees: list[RelaxCallee]) -> str:
    names = [c.name for c in callees]
    shown = ", ".join(names[:_SHOWN])
    return shown + (f", ... and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def relax_lines(rx: RelaxReport) -> list[str]:
    """The lines describing the report's ``library.relax``."""
    lines = [
        f"relax VM: {rx.module_kind} of {rx.era} (magic {rx.magic}), {rx.exec_mode} mode",
        f"  built for: {', '.join(rx.devices)}",
    ]
    for fn in rx.functions:
        kind = "" if fn.kind == "vm" else f", {fn.kind} (compiled)"
        lines.append(
            f"  {fn.name}: {len(fn.params)} parameter(s), {fn.instructions} instructions, "
            f"{fn.registers} registers{kind}"
        )
        for p in fn.params:
            lines.append(f"    {p.name}: {tensor_text(p)}")
        lines.append(f"    returns: {tensor_text(fn.returns)}")
    groups: dict[tuple[str, str | None], list[RelaxCallee]] = {}
    for callee in rx.builtins:
        groups.setdefault((callee.provided_by, callee.family), []).append(callee)
    for (by, family), callees in groups.items():
        what = f"refused: {family}" if by == "refused" else _BY.get(by, by)
        lines.append(f"  calls:  {len(callees)} builtin(s) {_names(callees)} ({what})")
    if rx.kernels:
        lines.append(
            f"  calls:  {len(rx.kernels)} kernel(s) {_names(rx.kernels)} ({_BY['kernel']})"
        )
    lines.append(
        f"  constants: {rx.constants} ({rx.tensor_constants} tensors, "
        f"{rx.tensor_constant_bytes} bytes)"
    )
    return lines

"""``tvmrt inspect``: what an artifact is and whether it can run here, executing none of it."""

from __future__ import annotations

import argparse
from typing import Any

from tvmrt.artifact import find_artifact, inspect_artifact
from tvmrt.artifact.report import InspectionReport
from tvmrt.cli._common import UsageError
from tvmrt.cli.inspect_relax import relax_lines
from tvmrt.cli.inspect_vm import relay_vm_lines
from tvmrt.runtime.loaders.needs import DEVICE_PROVIDED

EXAMPLES = """examples:
  tvmrt inspect model_dir/
  tvmrt inspect deploy_lib.tar --json
  tvmrt inspect model.so                     # a Relax VM executable (tvm.compile)
  tvmrt inspect --graph g.json --lib lib.so --params p.params

exit status: 0 if the artifact can run here, 1 if something would stop it (listed).
"""


def register(subparsers: Any) -> None:
    """Add the ``inspect`` verb."""
    parser = subparsers.add_parser(
        "inspect",
        help="describe an artifact without running any of its code",
        description="Describe an artifact (its form: factory library, system-lib, AOT, object, "
        "export tar, Model Library Format, tvmc package, Relay or Relax VM executable; ABI, "
        "architecture, inputs, outputs, kernels, params, planned memory) and list what would "
        "stop it from running here. "
        "Only headers, symbol tables, the graph and the params are read: nothing from the "
        "artifact executes in this process (a Relax VM executable is read by the C runtime "
        "in a child process, which opens its library: its initialisers run there, none of "
        "its kernels).",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("artifact", nargs="?", help="folder or factory library")
    parser.add_argument("--graph", metavar="FILE", help="graph JSON")
    parser.add_argument("--lib", metavar="FILE", help="kernel library")
    parser.add_argument("--params", metavar="FILE", help="params blob")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=inspect)


def inspect(args: argparse.Namespace) -> int:
    """Inspect and print; exit 1 when the artifact cannot run here."""
    if args.artifact is None and args.lib is None:
        raise UsageError("give an ARTIFACT (folder or factory library) or --lib")
    report = inspect_artifact(find_artifact(args.artifact, args.graph, args.lib, args.params))
    print(report.to_json() if args.json else _text(report))
    return 0 if report.runnable else 1


_SHOWN = 8


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:.2f} MB" if nbytes >= 1e5 else f"{nbytes} bytes"


def _fact(value: object) -> str:
    if isinstance(value, list):
        return "; ".join(_fact(v) for v in value) or "none"
    if isinstance(value, dict) and {"name", "shape", "dtype", "size"} <= set(value):
        flat = " (shape not recorded: flat)" if "shape_known" in value else ""
        shape = tuple(value["shape"])
        return f"{value['name']}: {shape} {value['dtype']}, {value['size']} bytes{flat}"
    if isinstance(value, dict):
        return " ".join(str(v) for v in value.values())
    return "not recorded" if value is None else str(value)


def _text(report: InspectionReport) -> str:
    lines = []
    lib = report.library
    lines.append(f"library:  {report.files['lib']}")
    if lib.form_text is not None:
        lines.append(f"  form:   {lib.form_text} [{lib.form}]")
    lines.append(f"  kind:   {lib.kind}")
    if lib.abi is not None:
        lines.append(f"  ABI:    {_ABI_TEXT.get(lib.abi, lib.abi)}")
    if lib.system_lib:
        lines.append("  registers its functions at load (system-lib): runtime.system_lib()")
    if lib.linked_params is not None:
        lines.append(f"  params: linked into the library ({lib.linked_params})")
    if lib.functions is not None:
        lines.append(f"  exports {lib.functions} function(s)")
    if lib.c_sources is not None:
        lines.append(f"  C sources (compiled at load): {', '.join(lib.c_sources)}")
    if lib.mlf is not None:
        mlf = lib.mlf
        lines.append(
            f"  MLF:    version {mlf.version}, model {mlf.model!r}, executor "
            f"{', '.join(mlf.executors) or 'none recorded'}, target {', '.join(mlf.targets)}"
        )
    for section in lib.extra.values():  # a form's own facts, one line each
        if isinstance(section, dict):
            lines.extend(f"  {key}: {_fact(value)}" for key, value in section.items())
    if lib.embedded is not None:
        lines.append(f"  embeds: {lib.embedded}")
    if lib.device_code is not None:
        lines.append(f"  device code: {lib.device_code}")
    if lib.needs is not None:
        kernels = [n for n, state in lib.needs.functions.items() if state == DEVICE_PROVIDED]
        for name, state in lib.needs.functions.items():
            if state != DEVICE_PROVIDED:
                lines.append(f"  calls:  {name} ({state})")
        if kernels:  # one line for the device module's kernels (--json lists each)
            shown = ", ".join(kernels[:_SHOWN])
            more = f", ... and {len(kernels) - _SHOWN} more" if len(kernels) > _SHOWN else ""
            lines.append(f"  calls:  {len(kernels)} kernel(s) of its device module ({shown}{more})")
        if lib.needs.cpu.uses:
            lines.append(f"  CPU features its code uses: {', '.join(lib.needs.cpu.uses)}")
    if lib.relay_vm is not None:
        lines.extend(relay_vm_lines(lib.relay_vm))
    if lib.relax is not None:
        lines.extend(relax_lines(lib.relax))
    graph = report.graph
    if graph:
        lines.append(
            f"graph:    {graph.nodes} nodes, {graph.operators} operators, "
            f"{len(graph.kernels)} distinct kernels"
        )
        for title, items in (("inputs", graph.inputs), ("outputs", graph.outputs)):
            lines.append(f"{title}:")
            for item in items[:_SHOWN]:
                lines.append(f"  {item.name}: {tuple(item.shape)} {item.dtype}")
            if len(items) > _SHOWN:
                lines.append(f"  ... and {len(items) - _SHOWN} more (--json lists them all)")
        storage = graph.storage
        if storage is None:  # the graph's storage plan was refused: see the problems
            lines.append("memory:   no plan (the graph's storage plan is refused)")
        else:
            lines.append(
                f"memory:   {storage.pools} pools, {_mb(storage.bytes)} planned "
                f"({_mb(storage.bytes_without_reuse)} without reuse; "
                f"plan by {storage.planned_by})"
            )
    params = report.params
    lines.append(f"params:   {params.count} tensors, {_mb(params.bytes)}")
    if params.subnormal_note is not None:
        lines.append(f"  warning: {params.subnormal_note}")
    host = report.host
    if report.problems:
        lines.append(f"cannot run here ({host.machine}, {host.os}):")
        lines.extend(f"  - {p}" for p in report.problems)
    else:
        lines.append(f"runs here ({host.machine}, {host.os}): yes")
    return "\n".join(lines)


_ABI_TEXT = {
    "legacy": "legacy packed functions (TVM <= 0.20, NNVM/Relay era)",
    # the one place inspect names the TVM era of a tvm-ffi library (its form line does not)
    "tvm-ffi": "tvm-ffi, from TVM 0.22 or later (kernels exported as __tvm_ffi_<name>)",
    "tvm-ffi-0.21": "tvm-ffi, from TVM 0.21 (kernels exported under their own names)",
    "none": "none (not a TVM module)",
    "empty": "none needed: a library with no kernels (TVM's export of a module that has none)",
}

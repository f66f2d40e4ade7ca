"""``tvmrt micro``: MLF AOT packages built into Cortex-M firmware and run on an emulated board.

``tvmrt micro build PACKAGE --board B -o firmware.elf`` links the package with tvmrt's micro
runtime and prints the flash/RAM table; ``tvmrt micro run PACKAGE --board B -i inputs.npz``
builds, runs one inference under QEMU, prints the outputs, the instructions and the stack it
took, compares them with tvmrt's host run of the same package (where the package is C code
and this machine has a C compiler) and, with ``--compare REF.npz``, with a reference;
``tvmrt micro boards`` lists the boards; ``tvmrt micro files`` prints the include folder
and C files a firmware project of one's own compiles.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.cli._common import describe_array
from tvmrt.cli._npz import NpzReader
from tvmrt.cli.compare import add_compare_arguments, compare_outputs
from tvmrt.error import UsageError

__all__ = ["register"]

EXAMPLES = """examples:
  tvmrt micro boards
  tvmrt micro files --sources
  tvmrt micro build model.tar --board mps2-an385 -o firmware.elf
  tvmrt micro run model.tar --board mps2-an386 -i inputs.npz
  tvmrt micro run model.tar --board mps3-an547 -i inputs.npz --compare golden.npz
"""


def register(subparsers: Any) -> None:
    """Add the ``micro`` verb and its ``build``, ``run`` and ``boards`` actions."""
    parser = subparsers.add_parser(
        "micro",
        help="build an MLF AOT package into Cortex-M firmware and run it on an emulated board",
        description="Build a Model Library Format AOT package (microTVM's export) into "
        "firmware with tvmrt's micro runtime, and run it on a Cortex-M board QEMU emulates.",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    boards = actions.add_parser("boards", help="list the boards")
    boards.set_defaults(handler=_boards)
    files = actions.add_parser(
        "files",
        help="print what a firmware project compiles: the include folder, the runtime's C "
        "files, the example platform port and board files",
    )
    what = files.add_mutually_exclusive_group()
    for flag, help_text in (
        ("--include", "the include folder only (for -I)"),
        ("--sources", "the runtime's C files only"),
        ("--port", "the emulated boards' platform port, start-up, semihosting, linker script"),
    ):
        what.add_argument(flag, action="store_true", help=help_text)
    files.set_defaults(handler=_files)
    for name, help_text in (
        ("build", "build the firmware and print its flash/RAM table"),
        ("run", "build, run one inference on the emulated board, check the answer"),
    ):
        action = actions.add_parser(name, help=help_text, epilog=EXAMPLES)
        action.add_argument("package", help="the MLF package: its .tar or unpacked folder")
        action.add_argument("--board", required=True, help="the board (tvmrt micro boards)")
        action.add_argument(
            "--cc", help="the Cortex-M C compiler command (default arm-none-eabi-gcc)"
        )
        action.add_argument(
            "--stack-bytes",
            type=int,
            default=16 << 10,
            help="the stack the firmware reserves (16384)",
        )
        if name == "build":
            action.add_argument(
                "-o", "--output", required=True, metavar="FIRMWARE.elf", help="the ELF to write"
            )
            action.set_defaults(handler=_build)
        else:
            action.add_argument(
                "-i", "--inputs", required=True, metavar="INPUTS.npz", help="the inputs by name"
            )
            action.add_argument("-o", "--output", metavar="FILE.npz", help="save the outputs")
            action.add_argument(
                "--no-host", action="store_true", help="skip the host run of the same package"
            )
            add_compare_arguments(action)
            action.set_defaults(handler=_run)


def _boards(args: argparse.Namespace) -> int:
    from tvmrt.micro import BOARDS

    for board in BOARDS.values():
        print(f"{board.name:<12} {board.summary}; {board.float_note}")
    return 0


def _files(args: argparse.Namespace) -> int:
    from tvmrt.micro import include_dirs, port_files, runtime_sources

    everything = not (args.include or args.sources or args.port)
    if args.include or everything:
        print("\n".join(str(d) for d in include_dirs()[:1]))
    if args.sources or everything:
        print("\n".join(str(p) for p in runtime_sources()))
    if args.port or everything:
        print("\n".join(str(p) for p in port_files()))
    return 0


def _firmware(args: argparse.Namespace, output: Path | None, work: Path) -> Any:
    from tvmrt.micro import board, build_firmware

    start = time.perf_counter()
    firmware = build_firmware(
        args.package,
        board(args.board),
        output,
        cc=args.cc,
        stack_bytes=args.stack_bytes,
        work=work,
    )
    where = firmware.elf if output is not None else "a temporary folder"
    print(
        f"built {firmware.package.shown} ({firmware.package.interface} interface, entry "
        f"{firmware.package.entry}) for {firmware.board.name} ({firmware.board.summary}) into "
        f"{where} in {time.perf_counter() - start:.1f} s"
    )
    if not firmware.board.hard_float and any(
        t.dtype.startswith("float") for t in (*firmware.package.inputs, *firmware.package.outputs)
    ):
        print(f"note: {firmware.board.float_note}")
    return firmware


def _build(args: argparse.Namespace) -> int:
    work = Path(tempfile.mkdtemp(prefix="tvmrt-micro-"))
    try:
        firmware = _firmware(args, Path(args.output), work)
        print("flash/RAM by part (bytes):")
        print(firmware.footprint.table())
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _read_inputs(path: str, tensors: list[Any]) -> dict[str, np.ndarray[Any, Any]]:
    out: dict[str, np.ndarray[Any, Any]] = {}
    with NpzReader(path) as npz:
        for tensor in tensors:
            if tensor.name not in npz.keys:
                raise UsageError(
                    f"{path!r} has no input {tensor.name!r}; its members are {npz.keys}, the "
                    f"package's inputs {[t.name for t in tensors]}"
                )
            out[tensor.name] = npz.array(tensor.name)
    return out


def _host_outputs(package: str, inputs: dict[str, np.ndarray[Any, Any]]) -> list[Any]:
    """The same AOT package run by tvmrt on this machine (its C compiled for the host)."""
    from tvmrt.runtime.device import cpu
    from tvmrt.runtime.executor import AotModule
    from tvmrt.runtime.loaders.mlf_aot import load_mlf_aot

    factory = load_mlf_aot(package, Path(package).name)
    module = AotModule(factory["default"](cpu(0)))
    for name, value in inputs.items():
        module.set_input(name, value)
    module.run()
    return [module.get_output(i).numpy() for i in range(module.get_num_outputs())]


def _run(args: argparse.Namespace) -> int:
    from tvmrt.micro import run_firmware

    work = Path(tempfile.mkdtemp(prefix="tvmrt-micro-"))
    try:
        firmware = _firmware(args, None, work)
        package = firmware.package
        inputs = _read_inputs(args.inputs, package.inputs)
        run = run_firmware(firmware, list(inputs.values()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    board = firmware.board
    print(
        f"ran on {board.name} (QEMU, -icount shift=0): {run.instructions} instructions "
        f"({run.ticks} SysTick ticks at {board.cpu_hz / 1e6:g} MHz), stack high water "
        f"{run.stack_used} of {firmware.stack_bytes} bytes"
    )
    print("inputs:")
    for name, arr in inputs.items():
        print(f"  {name}: {describe_array(arr)}")
    names = [t.name for t in package.outputs]
    print("outputs:")
    for name, arr in zip(names, run.outputs, strict=True):
        print(f"  {name}: {describe_array(arr)}")
    ok = True
    if package.interface == "graph" and not args.no_host:
        print("host run: none (tvmrt runs an MLF graph package's C on a board only)")
    elif not args.no_host and package.sources:
        host = _host_outputs(args.package, inputs)
        print("host run (tvmrt on this machine, the same package):")
        for name, got, want in zip(names, run.outputs, host, strict=True):
            line, good = _agreement(got, want, args.rtol, args.atol)
            print(f"  {name}: {line}")
            ok = ok and good
    print("flash/RAM by part (bytes):")
    print(firmware.footprint.table(run.stack_used, firmware.stack_bytes))
    if args.output:
        np.savez(args.output, **dict(zip(names, run.outputs, strict=True)))
        print(f"saved {len(names)} output(s) to {args.output}")
    if args.compare:
        aliases = {name: i for i, name in enumerate(names)}
        aliases.update({f"output_{i}": i for i in range(len(names))})
        aliases.update({f"out_{i}": i for i in range(len(names))})
        outputs = [(n, a) for n, a in zip(names, run.outputs, strict=True)]
        if "=" not in args.compare:  # MLF may record no output shapes: take the reference's
            outputs = _as_reference(outputs, aliases, args.compare)
        lines, good = compare_outputs(
            outputs, aliases, list(inputs), args.compare, args.rtol, args.atol
        )
        print("\n".join(lines))
        ok = ok and good
    return 0 if ok else 1


def _as_reference(
    outputs: list[tuple[str, np.ndarray[Any, Any]]], aliases: dict[str, int], path: str
) -> list[tuple[str, np.ndarray[Any, Any]]]:
    """Each output in the shape of its reference member, where the sizes agree."""
    with NpzReader(path) as ref:
        shapes = {aliases[k]: ref.header(k)[0] for k in ref.keys if k in aliases}
    out = []
    for i, (name, arr) in enumerate(outputs):
        shape = shapes.get(i)
        fits = shape is not None and int(np.prod(shape)) == arr.size
        out.append((name, arr.reshape(shape) if fits and shape is not None else arr))
    return out


def _agreement(
    got: np.ndarray[Any, Any], want: np.ndarray[Any, Any], rtol: float, atol: float
) -> tuple[str, bool]:
    """How the board's output compares with the host's: integers must be equal bit for
    bit; floats within ``rtol``/``atol`` (libm and soft-float may round differently)."""
    if got.dtype == want.dtype and got.tobytes() == want.tobytes():
        return "bitwise equal", True
    if got.size != want.size or got.dtype != want.dtype:
        return (
            f"DIFFERENT: {got.dtype} x{got.size} here, {want.dtype} x{want.size} on the host",
            False,
        )
    a, b = got.astype(np.float64).ravel(), want.astype(np.float64).ravel()
    diff = np.abs(a - b)
    good = got.dtype.kind == "f" and bool(np.allclose(a, b, rtol=rtol, atol=atol))
    verdict = "within tolerance" if good else "DIFFERS"
    return (
        f"max abs difference {float(diff.max()):.3g} "
        f"({int(np.count_nonzero(diff))} elements): {verdict}",
        good,
    )

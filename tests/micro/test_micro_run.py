"""Issue 48 items 2 and 4: MLF AOT packages built into firmware and run on emulated
Cortex-M boards answer as TVM does.

The packages are TVM 0.16's ``export_model_library_format`` of ``target="c"`` CRT AOT builds
(tests/mlf_aot/build_mlf_aot_fixtures.py); the references are TVM's own outputs for the same
model (host-driven AOT over TVM's C++ runtime) and tvmrt's host run of the same package.
Integer models are bitwise; so are these float models, on soft-float (M3) as on the FPU boards
(the firmware is compiled with ``-ffp-contract=off``, as the host build contracts nothing).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import numpy as np
import pytest

from support.cli import tvmrt
from support.mlf_aot_cases import CASES, golden, package_path, same_bits
from tvmrt.micro import BOARDS, board, build_firmware, run_firmware

# every case on a soft-float and a hard-float board; the FPU boards take turns
PAIRS = [
    (case, name)
    for i, case in enumerate(CASES)
    for name in ("mps2-an385", ("mps2-an386", "mps2-an505", "mps3-an547")[i % 3])
]


@pytest.mark.parametrize(("case", "board_name"), PAIRS)
def test_emulated_outputs_are_bitwise_tvm(
    mlf_root: Path, tmp_path: Path, case: str, board_name: str
) -> None:
    inputs, want = golden(mlf_root, case)
    firmware = build_firmware(
        str(package_path(mlf_root, case, "tar")), board(board_name), work=tmp_path
    )
    run = run_firmware(firmware, list(inputs.values()))
    assert len(run.outputs) == len(want)
    for got, ref in zip(run.outputs, want, strict=True):
        assert same_bits(got, ref), (case, board_name, np.abs(got.ravel() - ref.ravel()).max())
    assert 0 < run.stack_used < firmware.stack_bytes
    assert run.instructions > 0


def test_every_board_runs_the_unpacked_folder_too(mlf_root: Path, tmp_path: Path) -> None:
    inputs, want = golden(mlf_root, "int8_c_separate")
    path = str(package_path(mlf_root, "int8_c_separate", "folder"))
    for name in BOARDS:
        firmware = build_firmware(path, board(name), work=tmp_path / name)
        assert same_bits(run_firmware(firmware, list(inputs.values())).outputs[0], want[0])


def test_the_footprint_accounts_for_every_byte_the_elf_holds(
    mlf_root: Path, tmp_path: Path
) -> None:
    """The parts add up to the sections `size -A` reads from the ELF (an independent reader)."""
    path = str(package_path(mlf_root, "float_c_linked", "tar"))
    firmware = build_firmware(path, board("mps2-an385"), work=tmp_path)
    sizes = subprocess.run(
        ["arm-none-eabi-size", "-A", str(firmware.elf)], capture_output=True, text=True, check=True
    ).stdout
    section = {m[0]: int(m[1]) for m in re.findall(r"^(\.\S+)\s+(\d+)", sizes, re.M)}
    flash = section[".text"] + section[".rodata"] + section.get(".ARM.exidx", 0) + section[".data"]
    ram = section[".data"] + section[".bss"]
    footprint = firmware.footprint
    assert footprint.total_flash == flash
    assert footprint.total_ram == ram
    # the linked params are the model's constants: 8*3*3*3 + 8 float32 = 896 bytes
    assert footprint.parts["model params"]["rodata"] >= 896
    assert footprint.parts["model workspace"]["bss"] > 0  # USMP's pool
    assert footprint.flash("tvmrt runtime") < 12 * 1024


def test_cli_run_prints_the_figures_and_compares(mlf_root: Path, tmp_path: Path) -> None:
    inputs, _ = golden(mlf_root, "float_c_linked")
    np.savez(tmp_path / "in.npz", **inputs)
    ref = mlf_root / "float" / "golden.npz"
    tar = package_path(mlf_root, "float_c_linked", "tar")
    done = tvmrt(
        "micro", "run", str(tar), "--board", "mps2-an385", "-i", str(tmp_path / "in.npz"),
        "--compare", str(ref), "-o", str(tmp_path / "out.npz"),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert re.search(r"ran on mps2-an385 \(QEMU, -icount shift=0\): \d+ instructions", out)
    assert "output0: bitwise equal" in out
    assert "output1: bitwise equal" in out
    assert "outputs match the reference" in out
    assert "note: no FPU: float models run on soft-float" in out
    assert re.search(r"^tvmrt runtime\s+\d+\s+\d+", out, re.M)
    assert np.load(tmp_path / "out.npz")["output1"].shape == (1, 8)


def test_cli_compare_with_a_wrong_reference_exits_1(mlf_root: Path, tmp_path: Path) -> None:
    inputs, want = golden(mlf_root, "int8_c_linked")
    np.savez(tmp_path / "in.npz", **inputs)
    np.savez(tmp_path / "ref.npz", out_0=(want[0].astype(np.int16) + 1).astype(np.int8))
    tar = package_path(mlf_root, "int8_c_linked", "tar")
    done = tvmrt(
        "micro", "run", str(tar), "--board", "mps2-an386", "-i", str(tmp_path / "in.npz"),
        "--compare", str(tmp_path / "ref.npz"),
    )  # fmt: skip
    assert done.returncode == 1
    assert "outputs DIFFER from the reference" in done.stdout


def test_cli_build_writes_the_elf_and_the_table(mlf_root: Path, tmp_path: Path) -> None:
    tar = package_path(mlf_root, "int8_packed_linked", "tar")
    elf = tmp_path / "firmware.elf"
    done = tvmrt("micro", "build", str(tar), "--board", "mps3-an547", "-o", str(elf))
    assert done.returncode == 0, done.stderr
    assert elf.read_bytes()[:4] == b"\x7fELF"
    assert "packed interface, entry tvmgen_int8_net_run" in done.stdout
    assert re.search(r"^total\s+\d+\s+\d+$", done.stdout, re.M)


def test_cli_lists_the_boards() -> None:
    done = tvmrt("micro", "boards")
    assert done.returncode == 0
    assert [line.split()[0] for line in done.stdout.splitlines()] == list(BOARDS)

"""Issue 48 items 3-5: microcontroller models TVM 0.16 built (tests/micro/build_micro_fixtures.py:
the sine demo's model, a keyword spotter, an int8 CNN) in every AOT form it writes for a
Cortex-M (C with and without USMP, the packed API, llvm object code for the M3 and the M4F)
and graph-executor packages (their graph turned into a static plan when built) run on the
emulated boards, bitwise as TVM's own run of the same model and, for the AOT C packages,
as tvmrt's host run of the same package."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from support.mlf_aot_cases import golden
from tvmrt.micro import board, build_firmware, run_firmware
from tvmrt.runtime.device import cpu
from tvmrt.runtime.executor import AotModule
from tvmrt.runtime.loaders.mlf_aot import load_mlf_aot

MODELS = ("sine", "kws", "int8cnn")
# each C form on the soft-float M3 and one FPU board; object code on the board it was built for
RUNS = [
    *((f"{m}_{form}", b) for m in MODELS for form in ("c_usmp", "c_nousmp", "packed")
      for b in ("mps2-an385", {"sine": "mps2-an386", "kws": "mps2-an505", "int8cnn": "mps3-an547"}[m])),
    *((f"{m}_llvm_m3_packed", "mps2-an385") for m in MODELS),
    *((f"{m}_llvm_m4f_packed", "mps2-an386") for m in MODELS),
    *((f"{m}_graph", b) for m in MODELS for b in ("mps2-an385", "mps2-an386")),
]  # fmt: skip


def test_the_fixtures_hold_every_form(micro_root: Path) -> None:
    index = json.loads((micro_root / "index.json").read_text())
    names = {p["name"] for p in index["packages"]}
    assert {name for name, _ in RUNS} <= names
    # what TVM 0.16 cannot build is recorded, with its reason, not silently missing
    assert all("tvm_check_return" in s["why"] for s in index["skipped"])


@pytest.mark.parametrize(("name", "board_name"), RUNS)
def test_the_board_answers_as_tvm(
    micro_root: Path, tmp_path: Path, name: str, board_name: str
) -> None:
    inputs, want = golden(micro_root, name)  # <model>/golden.npz, the layout of tests/mlf_aot
    tar = micro_root / name.split("_")[0] / f"{name}.tar"
    firmware = build_firmware(str(tar), board(board_name), work=tmp_path)
    run = run_firmware(firmware, list(inputs.values()))
    for got, ref in zip(run.outputs, want, strict=True):
        assert got.dtype == ref.dtype
        assert got.tobytes() == ref.tobytes(), (name, board_name)
    if firmware.package.interface in ("c", "packed") and firmware.package.sources:
        # C of an AOT package: tvmrt's host run of the same package agrees too
        module = AotModule(load_mlf_aot(str(tar), tar.name)["default"](cpu(0)))
        module.set_input(**inputs)
        module.run()
        assert module.get_output(0).numpy().tobytes() == run.outputs[0].tobytes()
    footprint = firmware.footprint
    # the anchors: TVM's minimal C runtime ~12 KB of code, TFLite Micro's 20 KB flash / 4 KB RAM
    assert footprint.flash("tvmrt runtime") < 12 * 1024
    assert footprint.ram("tvmrt runtime") < 4 * 1024
    assert footprint.flash("model params") > 0
    assert 0 < run.stack_used < firmware.stack_bytes

"""Flash, RAM and instructions of MLF AOT packages on the emulated Cortex-M boards.

    .venv/bin/python bench/micro.py ROOT [--boards mps2-an385,mps2-an386]

ROOT holds ``<model>/<package>.tar`` and ``<model>/golden.npz`` (TVM's inputs ``in_*`` and
outputs ``out_*``), as tests/micro/build_micro_fixtures.py and
tests/mlf_aot/build_mlf_aot_fixtures.py write them (``build/micro/<hash>``,
``build/mlf_aot/<hash>`` once the tests ran). For each package and board: one inference
under QEMU (``-icount shift=0``: instructions from SysTick's count), whether the outputs
equal TVM's bit for bit, and the flash/RAM split by part (tvmrt.micro.footprint). Prints a
markdown table; ``--parts`` adds each firmware's full table.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
from pathlib import Path

import numpy as np

from tvmrt.error import TVMError
from tvmrt.micro import board, build_firmware, run_firmware


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--boards", default="mps2-an385,mps2-an386")
    parser.add_argument("--parts", action="store_true", help="print each footprint table")
    args = parser.parse_args()
    print(
        "| package | board | instructions | stack | flash | RAM (+stack) | kernels | params "
        "| tvmrt runtime (flash/RAM) | vs TVM |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for tar in sorted(args.root.glob("*/*.tar")):
        data = np.load(tar.parent / "golden.npz")
        inputs = [data[k] for k in data.files if k.startswith("in_")]
        want = [data[k] for k in sorted(k for k in data.files if k.startswith("out_"))]
        for name in args.boards.split(","):
            work = Path(tempfile.mkdtemp(prefix="tvmrt-bench-micro-"))
            try:
                firmware = build_firmware(str(tar), board(name), work=work)
                run = run_firmware(firmware, inputs)
            except TVMError as exc:  # a package that cannot run there: say why, go on
                print(f"| {tar.stem} | {name} | {str(exc).splitlines()[0][:120]} |")
                continue
            finally:
                shutil.rmtree(work, ignore_errors=True)
            same = all(g.tobytes() == w.tobytes() for g, w in zip(run.outputs, want, strict=True))
            f = firmware.footprint
            params = f.flash("model params")
            print(
                f"| {tar.stem} | {name} | {run.instructions} | {run.stack_used} | "
                f"{f.total_flash} | {f.total_ram} (+{run.stack_used}) | "
                f"{f.flash('model kernels')} | {params} | "
                f"{f.flash('tvmrt runtime')}/{f.ram('tvmrt runtime')} | "
                f"{'bitwise' if same else 'DIFFERS'} |"
            )
            if args.parts:
                print("\n```\n" + f.table(run.stack_used, firmware.stack_bytes) + "\n```\n")


if __name__ == "__main__":
    main()

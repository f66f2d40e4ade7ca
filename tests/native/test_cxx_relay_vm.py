"""examples/cpp/relay_vm.cc (a Relay VM model from C++ through tvmrt's C++ face), built by
`make -C examples/cpp relay_vm` against libtvmrt_runtime, plain and with ASan + UBSan:
relayvm/cnn-static and relayvm/dyn-batch-mlp at batch 1 and 3 give TVM's golden bits."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support.cxx import SANITIZE, cxx_env, native_lib_dir, shell
from support.paths import REPO
from support.relayvm_cases import golden_runs, same_bits


@pytest.fixture(scope="module", params=["plain", "asan"])
def built(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[Path, dict[str, str]]:
    variant = request.param
    env = cxx_env(native_lib_dir(tmp_path_factory, variant))
    build = tmp_path_factory.mktemp(f"cpp-relay-vm-{variant}")
    flags = "-std=c++17 -O2 -Wall -Wextra -Werror"
    if variant == "asan":
        flags = f"-std=c++17 -O1 -g -Wall -Wextra -Werror {SANITIZE}"
    shell(
        f"make -C {REPO / 'examples' / 'cpp'} relay_vm BUILD={build} CXXFLAGS='{flags}' "
        f"TVMRT_CONFIG='{sys.executable} -m tvmrt.config'",
        env,
        build,
    )
    return build, env


@pytest.mark.parametrize("case", ["cnn-static", "dyn-batch-mlp"])
def test_relay_vm_example_gives_the_golden_bits(
    built: tuple[Path, dict[str, str]], artifacts: Path, tmp_path: Path, case: str
) -> None:
    build, env = built
    folder = artifacts / "relayvm" / case
    name = "data" if case == "cnn-static" else "x"
    for run in golden_runs(folder, [name]):
        x = run.inputs[name]
        assert isinstance(x, np.ndarray)
        x.astype("<f4").tofile(tmp_path / "in.bin")
        dims = " ".join(str(d) for d in x.shape)
        out = shell(f"{build / 'relay_vm'} {folder / 'vm.so'} in.bin {dims} out_", env, tmp_path)
        (want,) = run.outputs
        assert f"output 0: {' '.join(str(d) for d in want.shape)}" in out
        got = np.fromfile(tmp_path / "out_0.bin", dtype=want.dtype).reshape(want.shape)
        assert same_bits(got, want), f"{case} {run.name}"

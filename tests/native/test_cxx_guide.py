"""The deployment guide's C++ program (examples/cpp/guide.cc, unchanged) compiles with
`g++ -std=c++17 main.cc $(tvmrt config --cflags --libs)` and, in a copy of MobileNet v1 with
cat.bin written from golden.npz's data, prints TVM's argmax and computes golden's output_0
byte for byte, with no libpython in the program."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest

from support.cxx import cxx_env, native_lib_dir, shell
from support.paths import REPO

GUIDE = REPO / "examples" / "cpp" / "guide.cc"
DUMP = Path(__file__).parent / "cxx" / "dump_freed.cc"


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    return cxx_env(native_lib_dir(tmp_path_factory))


@pytest.fixture
def mobilenet(artifacts, tmp_path):
    folder = tmp_path / "mobilenet_v1"
    folder.mkdir()
    source = artifacts / "mobilenet_v1"
    for name in ("deploy_lib.so", "deploy_graph.json", "deploy_param.params"):
        shutil.copy(source / name, folder / name)
    golden = np.load(source / "golden.npz")
    golden["data"].astype(np.float32).tofile(folder / "cat.bin")
    return folder, golden


@pytest.mark.slow
def test_guide_program_matches_golden_bitwise(env, mobilenet, tmp_path):
    folder, golden = mobilenet
    shutil.copy(GUIDE, tmp_path / "main.cc")
    shell("g++ -std=c++17 main.cc $(tvmrt config --cflags --libs) -o guide", env, tmp_path)
    out = shell(str(tmp_path / "guide"), env, folder)
    expected = int(np.argmax(golden["output_0"]))
    assert out == f"The maximum position in output vector is: {expected}\n"
    assert expected == 995
    ldd = shell(f"ldd {tmp_path / 'guide'}", env, tmp_path)
    assert "libtvmrt_runtime.so" in ldd
    assert "python" not in ldd.lower()

    # the same program, its freed arrays written out: x (the input), then y (the output)
    shutil.copy(DUMP, tmp_path / "dump_freed.cc")
    shell(
        "g++ -std=c++17 main.cc dump_freed.cc -Wl,--wrap=TVMArrayFree "
        "$(tvmrt config --cflags --libs) -o guide_dump",
        env,
        tmp_path,
    )
    shell(str(tmp_path / "guide_dump"), env, folder)
    assert (folder / "freed_0.bin").read_bytes() == (folder / "cat.bin").read_bytes()
    assert (folder / "freed_1.bin").read_bytes() == golden["output_0"].astype("<f4").tobytes()


def test_guide_program_reports_a_missing_library_as_an_error(env, mobilenet, tmp_path):
    """TVM's C++ API throws tvm::runtime::Error; uncaught, the program aborts with the
    runtime's message instead of crashing on a null module."""
    folder, _ = mobilenet
    (folder / "deploy_lib.so").unlink()
    shutil.copy(GUIDE, tmp_path / "main.cc")
    shell("g++ -std=c++17 main.cc $(tvmrt config --cflags --libs) -o guide", env, tmp_path)
    result = shell(f"{tmp_path / 'guide'} 2>&1 || echo exit=$?", env, folder)
    assert "tvm::runtime::Error" in result
    assert "deploy_lib.so" in result
    assert "exit=134" in result  # std::terminate -> abort, as with TVM's own runtime

"""TVM's two C++ deployment apps, as programs of tvmrt's own that use what they use, compiled
with ``tvmrt config --cflags --libs`` only and run on models TVM 0.16 built
(tests/native/build_tvm_apps.py):

* ``cxx/howto_deploy.cc`` (``apps/howto_deploy/cpp_deploy.cc``): LOG(INFO), ICHECK,
  ICHECK_EQ, a kernel library, a system library linked into the program, a graph
  executor over a factory; and what the check macros throw, in TVM's words;
* ``cxx/bundle.cc`` (``apps/bundle_deploy/bundle.cc``): a system-lib model linked into a
  bundle library that calls ``strlen`` and uses ``uint64_t`` through ``registry.h`` alone,
  driven by ``c/bundle_driver.c`` (``demo.cc``'s dlopen side); its output equals TVM's
  own run bitwise.

tvmrt's headers lacked TVM's logging macros and the standard headers ``registry.h``
brings in, so neither app compiled (issue 47, item 2).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from support.built import built
from support.cxx import cxx_env, native_lib_dir, shell

HERE = Path(__file__).parent
FLAGS = "-std=c++17 -Wall -Wextra -Wpedantic -Werror"


@pytest.fixture(scope="module")
def apps(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], Path]:
    env = cxx_env(native_lib_dir(tmp_path_factory))
    return built(HERE / "build_tvm_apps.py", "tvm_apps"), env, tmp_path_factory.mktemp("apps")


def test_the_howto_deploy_program_runs_all_three_ways(
    apps: tuple[Path, dict[str, str], Path],
) -> None:
    models, env, work = apps
    shell(
        f"g++ {FLAGS} {HERE / 'cxx' / 'howto_deploy.cc'} {models / 'addone_sys.o'} "
        "$(tvmrt config --cflags --libs) -o howto_deploy",
        env,
        work,
    )
    out = shell(
        f"./howto_deploy {models / 'addone_dll.so'} {models / 'relay_add.so'} 2> log.txt", env, work
    )
    log = (work / "log.txt").read_text()
    lines = log.splitlines()
    assert [line.split(": ", 1)[1] for line in lines] == [
        "verified addone",
        "verified addonesys",
        "graph executor verified",
    ], log
    for line in lines:  # TVM's "[HH:MM:SS] file:line: " before each message
        assert line[0] == "[", line
        assert line[9:11] == "] ", line
        assert "howto_deploy.cc:" in line, line
    assert out.splitlines() == [
        "ICHECK_EQ: InternalError: Check failed: 2 + 2 == 5 (4 vs. 5) : arithmetic",
        "ICHECK: InternalError: Check failed: (none != nullptr) is false: no pointer",
        "CHECK_LT: Check failed: 3 < 1 (3 vs. 1) :  (line 1)",
        "LOG(FATAL): fatal 42",
        "CHECK_NOTNULL: ok",
        "done",
    ]


def test_a_bundle_runs_a_system_lib_model_as_tvm_does(
    apps: tuple[Path, dict[str, str], Path],
) -> None:
    models, env, work = apps
    bundle = models / "bundle"
    shell(
        f"g++ {FLAGS} -fPIC -shared {HERE / 'cxx' / 'bundle.cc'} {bundle / 'model.o'} "
        "$(tvmrt config --cflags --libs) -o bundle.so && "
        f"cc -std=c11 -Wall -Wextra -Werror {HERE / 'c' / 'bundle_driver.c'} "
        "$(tvmrt config --cflags) -ldl -o bundle_driver",
        env,
        work,
    )
    files = " ".join(str(bundle / n) for n in ("graph.json", "params.bin", "data.bin"))
    text = shell(f"./bundle_driver ./bundle.so {files} out.bin", env, work)
    assert text.startswith("output 0: ")
    got = np.fromfile(work / "out.bin", "<f4")
    want = np.fromfile(bundle / "output.bin", "<f4")
    assert got.tobytes() == want.tobytes(), (got, want)

"""The C parsers of outside bytes (graph JSON, params blobs, the module blob, AOT metadata,
the Relay VM's code.ro), fuzzed with a fixed seed under ASan + UBSan
(tests/native/c/fuzz_parsers.c, linked with the static library): every mutated input
parses or fails with an error message; no crash, leak or
undefined behaviour. TVMRT_NATIVE_FUZZ_ITERATIONS sets the inputs per target (default
1000); `fuzz/native_parsers.py` runs longer."""

from __future__ import annotations

import os
import tarfile
from collections.abc import Callable
from pathlib import Path

import pytest
from tests.native.conftest import NativeBuild
from tests.support.paths import REPO

ITERATIONS = int(os.environ.get("TVMRT_NATIVE_FUZZ_ITERATIONS", "1000"))

# target -> seed: a file under the artifacts root, or "TAR!MEMBER" extracted first
SEEDS = {
    "graph-mobilenet": ("graph", "mobilenet_v1/deploy_graph.json"),
    "graph-cnn": ("graph", "relay016/tvmc-package/module.tar!mod.json"),
    "params-cnn": ("params", "relay016/tvmc-package/module.tar!mod.params"),
    "blob-factory": ("blob", "relay016/linkparams-so/deploy.so"),
    "blob-system-lib": ("blob", "relay016/systemlib-so/deploy.so"),
    "blob-relayvm": ("blob", "relayvm/control-flow/vm.so"),
    "vmcode-control-flow": ("vmcode", "relayvm/control-flow/code.ro"),
    "vmcode-dyn-shape-op": ("vmcode", "relayvm/dyn-shape-op/code.ro"),
    "vmcode-adt-closure": ("vmcode", "relayvm/adt-closure/code.ro"),
    "blob-aot": ("blob", "relay016/aot-so/deploy.so"),
    "aotmeta-cnn": ("aotmeta", "relay016/aot-so/deploy.so"),
    "ffibin-digits": ("ffibin", "examples/digits/model/standalone.so"),  # in the repository
}


@pytest.mark.parametrize("target", sorted(SEEDS))
def test_parser_survives_mutations(
    target: str,
    native_asan: NativeBuild,
    compile_c: Callable[[NativeBuild, str, bool], Path],
    artifacts: Path,
    tmp_path: Path,
) -> None:
    kind, seed = SEEDS[target]
    if "!" in seed:
        tar_name, member = seed.split("!")
        with tarfile.open(artifacts / tar_name) as tar:
            tar.extract(member, tmp_path, filter="data")
        path = tmp_path / member
    else:
        path = REPO / seed if seed.startswith("examples/") else artifacts / seed
    exe = compile_c(native_asan, "fuzz_parsers", True)
    proc = native_asan.run(exe, kind, path, str(ITERATIONS), "0", timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr[-4000:]
    assert proc.stdout.startswith(f"{kind}: {ITERATIONS} inputs"), proc.stdout
    assert "ERROR: AddressSanitizer" not in proc.stderr
    assert "runtime error" not in proc.stderr  # UBSan

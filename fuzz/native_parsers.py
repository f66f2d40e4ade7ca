"""Long runs of the C runtime's parser fuzzer (tests/native/c/fuzz_parsers.c) under ASan +
UBSan: builds libtvmrt_runtime with `make native` into build/native-asan, links the
harness with it, then runs every target with one RNG seed after another until the time
budget is spent. The `relax-*` targets' seeds are the Relax fixtures the test suite builds
(build/fixtures/relax<era>, or $TVMRT_FIXTURES_DIR: run tests/relax once first). Any
sanitizer report or a failure without an error message stops it.

    python fuzz/native_parsers.py --seconds 300 [--iterations 20000] [--target graph-cnn]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = Path(os.environ.get("TVMRT_ARTIFACTS", REPO.parent / "shared" / "artifacts"))
# the project's own builds of TVM's artifacts (tests/support/fixtures.py): the Relax models
FIXTURES = Path(os.environ.get("TVMRT_FIXTURES_DIR", REPO / "build" / "fixtures"))
FLAGS = "-O1 -g -fsanitize=address,undefined -fno-sanitize-recover=undefined"
# target -> (the harness's parser, seed: a file under the artifacts root, a file of the
# repository, or "TAR!MEMBER"); tests/native/test_c_fuzz.py runs the same targets briefly
TARGETS = {
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
    # Relax VM executables, one per blob container (the era) and form: If/Goto, tuples and
    # shapes, tensor constants, compiled mode
    "relax-control-019": ("relax", "relax019/control/model.so"),
    "relax-onnx-cnn-021": ("relax", "relax021/onnx_cnn/model.so"),
    "relax-tuple-out-027": ("relax", "relax027/tuple_out/model.so"),
    "relax-compiled-027": ("relax", "relax027/compiled/model.so"),
}


def build(out: Path) -> Path:
    """The ASan + UBSan harness linked with the static runtime."""
    subprocess.run(
        ["make", "-s", "native", f"NATIVE_DIR={out}", f"NATIVE_FLAGS={FLAGS}"], cwd=REPO, check=True
    )
    exe = out / "fuzz_parsers"
    cmd = ["cc", "-std=c11", "-D_GNU_SOURCE", *FLAGS.split(), "-I", str(REPO / "src/tvmrt/include")]
    cmd += ["-I", str(REPO / "src/tvmrt/_native"), str(REPO / "tests/native/c/fuzz_parsers.c")]
    cmd += ["-o", str(exe), str(out / "libtvmrt_runtime.a"), "-rdynamic", "-ldl", "-lpthread"]
    subprocess.run([*cmd, "-lm"], check=True)
    return exe


def seed_file(spec: str, work: Path, artifacts: Path = ARTIFACTS) -> Path:
    """A target's seed: a file of the repository, one under ``artifacts``, or for
    ``TAR!MEMBER`` the member extracted into ``work``."""
    if spec.startswith("examples/"):  # a file of the repository
        return REPO / spec
    if spec.startswith("relax") and artifacts is ARTIFACTS:  # built by the tests' fixtures
        return FIXTURES / spec
    if "!" not in spec:
        return artifacts / spec
    tar_name, member = spec.split("!")
    with tarfile.open(artifacts / tar_name) as tar:
        tar.extract(member, work, filter="data")
    return work / member


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="time budget in all")
    parser.add_argument("--iterations", type=int, default=20000, help="inputs per run")
    parser.add_argument("--target", choices=sorted(TARGETS), action="append")
    args = parser.parse_args()
    targets = args.target or sorted(TARGETS)
    exe = build(REPO / "build" / "native-asan")
    env = dict(os.environ, ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1")
    deadline = time.monotonic() + args.seconds
    rng_seed = 1
    with tempfile.TemporaryDirectory() as tmp:
        seeds = {name: seed_file(TARGETS[name][1], Path(tmp)) for name in targets}
        while time.monotonic() < deadline:
            for name in targets:
                kind = TARGETS[name][0]
                cmd = [str(exe), kind, str(seeds[name]), str(args.iterations), str(rng_seed)]
                proc = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
                print(f"{name} seed {rng_seed}: {proc.stdout.strip() or 'FAILED'}", flush=True)
                if proc.returncode != 0:
                    print(proc.stderr[-8000:], file=sys.stderr)
                    return 1
            rng_seed += 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

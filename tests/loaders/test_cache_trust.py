"""Issue 23 item 3 (and item 10's cache folder): cache entries are checked on every use.

Each test damages the entries a real artifact left in a private cache folder
(``packages/`` for the tvmc package, ``compiled/`` for the MLF tar of C sources,
``linked/``), or makes a write fail half-way with ENOSPC. See
src/tvmrt/runtime/loaders/cache.py.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from tvmrt import runtime as rt
from tvmrt.contrib import graph_executor
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders import cache, link

TVMC = "relay016/tvmc-package"
MLF_C = "relay016/mlf-graph"


@pytest.fixture
def cache_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("TVMRT_CACHE_DIR", str(folder))
    return folder


def _run(path: Path, golden: Path) -> None:
    with np.load(golden) as data:
        inputs, expected = data["data"], data["output_0"]
    factory = rt.load_module(path)
    module = graph_executor.GraphModule(factory["default"](rt.cpu(0)))
    module.run(data=inputs)
    np.testing.assert_allclose(module.get_output(0).numpy(), expected, rtol=1e-5, atol=1e-6)


def _entries(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if not p.name.startswith("."))


def _leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]


def _entry_is_intact(entry: Path) -> bool:
    digest = entry.name.split(".")[1]
    return hashlib.sha256(entry.read_bytes()).hexdigest()[:32] == digest


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda b: b[:-64] + bytes(x ^ 0x5A for x in b[-64:]), id="same-size"),
        pytest.param(lambda b: bytes(64) + b[64:], id="header"),
        pytest.param(lambda b: b[: len(b) // 2], id="truncated"),
    ],
)
def test_damaged_package_entry_is_rewritten(
    artifacts: Path, cache_folder: Path, damage: Callable[[bytes], bytes]
) -> None:
    path, golden = artifacts / TVMC / "module.tar", artifacts / TVMC / "golden.npz"
    _run(path, golden)
    (entry,) = _entries(cache_folder / "packages")
    good = entry.read_bytes()
    entry.chmod(stat.S_IRWXU)
    entry.write_bytes(damage(good))
    _run(path, golden)  # not the damaged copy: the member is written again
    (again,) = _entries(cache_folder / "packages")
    assert again.read_bytes() == good
    assert _entry_is_intact(again)


def test_truncated_compiled_object_is_rebuilt(artifacts: Path, cache_folder: Path) -> None:
    if link.find_cxx_compiler() is None or link.find_compiler() is None:
        pytest.skip("no C/C++ compiler for the MLF C sources")
    path, golden = artifacts / MLF_C / "model_c_crt.tar", artifacts / MLF_C / "golden.npz"
    _run(path, golden)
    objects = _entries(cache_folder / "compiled")
    assert objects
    for obj in objects:
        assert _entry_is_intact(obj)
        obj.write_bytes(obj.read_bytes()[:100])  # a crash or a full disk
    for linked in _entries(cache_folder / "linked"):
        linked.unlink()  # so that the objects are used again
    _run(path, golden)
    rebuilt = _entries(cache_folder / "compiled")
    assert len(rebuilt) == len(objects)
    assert all(_entry_is_intact(obj) for obj in rebuilt)


def _fail_writes_in(folder: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Make os.write into files under ``folder`` write half of the first chunk, then fail
    with ENOSPC; returns the files it failed."""
    real_write = os.write
    failed: list[str] = []

    def write(fd: int, data: bytes | memoryview) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if not target.startswith(str(folder)):
            return real_write(fd, data)
        if target not in failed:
            failed.append(target)
            return real_write(fd, bytes(data)[: max(len(data) // 2, 1)])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)
    return failed


def test_full_disk_writing_a_package_entry_leaves_nothing(
    artifacts: Path, cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = _fail_writes_in(cache_folder, monkeypatch)
    with pytest.raises(ModuleLoadError, match="No space left on device") as info:
        rt.load_module(artifacts / TVMC / "module.tar")
    assert str(cache_folder / "packages") in str(info.value)
    assert failed
    assert _entries(cache_folder / "packages") == []
    assert _leftovers(cache_folder) == []


def test_full_disk_writing_a_compiled_object_leaves_nothing(
    artifacts: Path, cache_folder: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if link.find_cxx_compiler() is None or link.find_compiler() is None:
        pytest.skip("no C/C++ compiler for the MLF C sources")
    failed = _fail_writes_in(cache_folder / "compiled", monkeypatch)
    path, golden = artifacts / MLF_C / "model_c_crt.tar", artifacts / MLF_C / "golden.npz"
    _run(path, golden)  # the object cache is an optimisation: the load goes on
    assert failed
    assert _entries(cache_folder / "compiled") == []
    assert _leftovers(cache_folder) == []


def test_linker_failing_half_way_leaves_nothing(
    artifacts: Path, cache_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    script = tmp_path / "fullcc"
    script.write_text(
        '#!/bin/sh\nwhile [ "$1" != "-o" ]; do shift; done\n'
        'head -c 1000 /dev/zero > "$2"\necho "No space left on device" >&2\nexit 1\n'
    )
    script.chmod(0o755)
    monkeypatch.setenv("CC", str(script))
    with pytest.raises(ModuleLoadError, match="No space left on device"):
        rt.load_module(artifacts / "iris-factory" / "deploy_lib.tar")
    assert _entries(cache_folder / "linked") == []
    assert _leftovers(cache_folder) == []


def test_write_entry_removes_its_temp_file_on_any_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    failed = _fail_writes_in(tmp_path, monkeypatch)
    with pytest.raises(OSError, match="No space left"):
        cache.write_entry(tmp_path, "k" * 64, ".bin", b"x" * 3_000_000)
    assert failed
    assert list(tmp_path.iterdir()) == []


def test_cache_entry_whose_name_has_no_digest_is_not_used(tmp_path: Path) -> None:
    key = "a" * 64
    (tmp_path / f"{key}.zz.so").write_bytes(b"anything")
    assert cache.find_entry(tmp_path, key, ".so") is None
    assert list(tmp_path.iterdir()) == []
    written = cache.write_entry(tmp_path, key, ".so", b"payload")
    assert cache.find_entry(tmp_path, key, ".so") == written
    assert cache.read_entry(tmp_path, key, ".so") == b"payload"


# -- item 10: a cache folder that cannot be worked out ---------------------------------------


@pytest.mark.parametrize("variable", ["TVMRT_CACHE_DIR", "XDG_CACHE_HOME"])
def test_cache_folder_of_an_unknown_user_names_the_variable(
    monkeypatch: pytest.MonkeyPatch, variable: str
) -> None:
    monkeypatch.delenv("TVMRT_CACHE_DIR", raising=False)
    monkeypatch.setenv(variable, "~nouser_tvmrt_test/x")
    with pytest.raises(ModuleLoadError, match=re.escape(f"${variable}='~nouser_tvmrt_test/x'")):
        cache.cache_dir()


def test_unknown_user_cache_folder_fails_a_load_with_a_tvm_error(
    artifacts: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TVMRT_CACHE_DIR", "~nouser_tvmrt_test/x")
    with pytest.raises(TVMError, match=r"\$TVMRT_CACHE_DIR"):
        rt.load_module(artifacts / TVMC / "module.tar")

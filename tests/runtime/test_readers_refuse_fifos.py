"""The cache and compiler paths read files as the model readers do (binfmt/files.py): a FIFO
(or another non-regular file) where a library, an archive, an object, a cache entry or an
RPC download belongs is refused at once, never read until a writer comes.

Each reader runs in a child process with a timeout, so one that blocks shows as a timeout
(before this, the archive, object, cache and download readers blocked: ``open()`` of a FIFO
waits for a writer; the static library reader said the FIFO did not exist)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

_CHILD = """
import sys
from pathlib import Path
from tvmrt.error import TVMError
kind, path = sys.argv[1], Path(sys.argv[2])
try:
    if kind == "static":
        from tvmrt.runtime.static_library import load_static_library
        load_static_library(str(path), ["f"])
    elif kind == "tar":
        from tvmrt.binfmt.archive import read_members
        read_members(str(path))
    elif kind == "object":
        from tvmrt.runtime.loaders.link import link_object
        link_object(str(path))
    elif kind == "cache":
        from tvmrt.runtime.loaders.cache import find_entry, read_entry
        name = path.name.split(".")[0]
        print("entry", find_entry(path.parent, name, ".so"), read_entry(path.parent, name, ".so"))
    elif kind == "download":
        from tvmrt.rpc.server_env import ServerEnv
        ServerEnv(path.parent).download(path.name)
    print("read")
except TVMError as exc:
    print(f"{type(exc).__name__}: {exc}")
"""


def _child(kind: str, path: Path) -> str:
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    try:
        done = subprocess.run(
            [sys.executable, "-c", _CHILD, kind, str(path)],
            capture_output=True,
            text=True,
            timeout=30,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"{kind}: blocked on the FIFO {path} (timed out after 30 s)")
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.parametrize(
    ("kind", "name", "words"),
    [
        ("static", "lib.o", "ModuleLoadError: static library"),
        ("tar", "model.tar", "ModuleLoadError: archive"),
        ("object", "model.o", "ModuleLoadError: the object file"),
        ("download", "out.so", "InvalidArgumentError: download"),
    ],
)
def test_a_fifo_is_refused_not_read(tmp_path: Path, kind: str, name: str, words: str) -> None:
    fifo = tmp_path / name
    os.mkfifo(fifo)
    out = _child(kind, fifo)
    assert out.startswith(words), out
    assert "is not a regular file (a FIFO); expected a file" in out, out


def test_a_fifo_in_the_cache_is_a_miss_and_is_removed(tmp_path: Path) -> None:
    fifo = tmp_path / f"key.{'0' * 32}.so"  # named as an entry of key "key"
    os.mkfifo(fifo)
    assert _child("cache", fifo) == "entry None None\nread"
    assert not fifo.exists()  # deleted, so the caller builds the entry again

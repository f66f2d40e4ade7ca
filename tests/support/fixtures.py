"""The real TVM artifacts the tests read: built by the project, or third-party data.

Every artifact TVM can make is built by a script under ``tests/fixtures/`` with a TVM peer
(:mod:`support.peers`), on first use, under a file lock, and rebuilt when the script changes
(its sha256, with the sources it runs, is the cache key). The folders of :data:`BUILT` are
built by TVM 0.16 into ``build/fixtures/<builder>/<folder>`` (or ``$TVMRT_FIXTURES_DIR``); a
folder of :data:`PEER_BUILT` names the peer that runs its builder, which writes straight into
``build/fixtures/<folder>`` (the peer's requirements join its cache key): the Relax fixtures,
``relax016`` ... ``relax027``, are ``build_relax.py`` run by each era's TVM. TVM's own
outputs for them are the goldens. A builder that needs tools the machine lacks (the ARM cross compilers) makes
its tests skip, naming the packages that provide them (even with ``TVMRT_REQUIRE_ARTIFACTS``).

Only data the project cannot make (models and foreign-OS binaries published by others) comes
from ``../shared/artifacts`` or ``$TVMRT_ARTIFACTS``; a test that needs it and does not find it
skips with a reason naming the variable (``TVMRT_REQUIRE_ARTIFACTS=1`` makes that a failure).
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path, PosixPath
from typing import Any

import pytest

from support.paths import ARTIFACTS, REPO
from support.peers import peer_env, peer_python, peer_requirements, tvm016_python

__all__ = [
    "BUILT",
    "PEER_BUILT",
    "RELAX_ERAS",
    "NOT_BUILT",
    "FIXTURES_DIR",
    "ArtifactRoot",
    "artifact_folder",
    "built_fixtures",
]

FIXTURES_DIR = Path(os.environ.get("TVMRT_FIXTURES_DIR", REPO / "build" / "fixtures"))
BUILDERS = REPO / "tests" / "fixtures"
# top-level folder name (as under ../shared/artifacts) -> the builder script that makes it
BUILT = {
    "relay016": "build_relay016.py",
    "iris-factory": "build_relay016.py",
    "contrib": "build_contrib.py",
    "relayvm": "build_relayvm.py",
    "cross": "build_cross.py",
    "batched": "build_batched.py",
}
# the TVMs whose Relax VM executables build_relax.py makes (peer "tvm<era>", folder "relax<era>")
RELAX_ERAS = ("016", "019", "021", "025", "027")
# folder -> (builder script, the peer that runs it): the builder writes the folder itself
PEER_BUILT = {f"relax{era}": ("build_relax.py", f"tvm{era}") for era in RELAX_ERAS}
# folders TVM could make that `make test` does not build, and why
NOT_BUILT: dict[str, str] = {}
# other sources a builder runs (part of its cache key), relative to the repository
DEPENDS = {"build_cross.py": ["tests/arm/build_fixtures.py"]}
# tools a folder's builder needs -> what provides them (the folder's tests skip without them)
TOOLS = {
    "cross": (
        ["aarch64-linux-gnu-gcc", "arm-linux-gnueabihf-gcc"],
        "Debian's ARM cross compilers: apt-get install gcc-aarch64-linux-gnu gcc-arm-linux-gnueabihf",
    ),
}


def cache_key(script: str, peer: str | None = None) -> str:
    """sha256 of ``tests/fixtures/<script>`` and the sources it runs (and, for a builder run by
    a named ``peer``, that peer's name and requirements): its build is rebuilt when it changes."""
    digest = hashlib.sha256((BUILDERS / script).read_bytes())
    for other in DEPENDS.get(script, []):
        digest.update((REPO / other).read_bytes())
    if peer is not None:
        digest.update("\n".join((peer, *peer_requirements(peer))).encode())
    return digest.hexdigest()


def missing_tools(name: str) -> str | None:
    """Why the builder of folder ``name`` cannot run here (tools not on PATH), or None."""
    tools, provider = TOOLS.get(name, ([], ""))
    absent = [tool for tool in tools if shutil.which(tool) is None]
    if not absent:
        return None
    return f"building artifact folder '{name}' needs {', '.join(absent)}, not found ({provider})"


def built_fixtures(script: str, peer: str | None = None, folder: str | None = None) -> Path:
    """The output folder of ``tests/fixtures/<script>``, built on first use.

    Without ``peer``: by TVM 0.16, into ``<FIXTURES_DIR>/<script's stem>``. With it (a name of
    :data:`support.peers.PEERS`): by that peer's python, into ``<FIXTURES_DIR>/<folder>``.
    """
    source = BUILDERS / script
    key = cache_key(script, peer)
    name = folder or source.stem.removeprefix("build_")
    root = FIXTURES_DIR / name
    stamp = root / ".built"
    if stamp.is_file() and stamp.read_text().split()[0] == key:
        return root
    FIXTURES_DIR.mkdir(parents=True, exist_ok=True)
    lock_name = source.stem if peer is None else f"{source.stem}-{name}"
    with open(FIXTURES_DIR / f".{lock_name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # one builder at a time, across workers and runs
        if stamp.is_file() and stamp.read_text().split()[0] == key:
            return root
        if peer is None:
            python = tvm016_python()
            env = {**os.environ, "TOPHUB_LOCATION": "NONE"}
            by = "TVM 0.16 (hhb-tvm)"
        else:
            python = peer_python(peer)
            env = {**peer_env(python), "TOPHUB_LOCATION": "NONE"}
            by = f"peer {peer} ({python})"
        tmp = FIXTURES_DIR / f".{lock_name}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        start = time.monotonic()
        run = subprocess.run(
            [str(python), str(source), str(tmp)], capture_output=True, text=True, env=env
        )
        if run.returncode != 0:
            shutil.rmtree(tmp, ignore_errors=True)
            raise RuntimeError(f"building the fixtures of {source} failed:\n{run.stderr[-3000:]}")
        shutil.rmtree(root, ignore_errors=True)
        tmp.rename(root)
        stamp.write_text(f"{key} {time.monotonic() - start:.1f}s by {by}\n")
        return root


def _missing(why: str) -> None:
    if os.environ.get("TVMRT_REQUIRE_ARTIFACTS"):
        pytest.fail(why)
    pytest.skip(why)


def artifact_folder(name: str) -> Path:
    """``<artifacts>/<name>``: project-built when a builder makes it, else third-party data."""
    if name in BUILT:
        why = missing_tools(name)
        if why is not None:
            pytest.skip(why)
        return built_fixtures(BUILT[name]) / name
    if name in PEER_BUILT:
        script, peer = PEER_BUILT[name]
        return built_fixtures(script, peer, name)
    folder = ARTIFACTS / name
    if not folder.exists():
        why = (
            f"artifact folder '{name}' is not in {ARTIFACTS}: set TVMRT_ARTIFACTS to a folder "
            f"holding it ({NOT_BUILT.get(name, 'third-party data the project cannot build')})"
        )
        _missing(why)
    return folder


class ArtifactRoot(PosixPath):
    """``$TVMRT_ARTIFACTS`` whose first path component is resolved by :func:`artifact_folder`.

    ``root / "relay016" / "aot-so"`` is the project's own build; ``root / "mobilenet_v1"``
    the third-party folder, or a skip naming ``TVMRT_ARTIFACTS``. Only the root redirects.
    """

    def __truediv__(self, key: Any) -> Path:
        return self.joinpath(key)

    def joinpath(self, *parts: Any) -> Path:
        if not parts:
            return Path(self)
        first, *rest = Path(parts[0]).parts
        return artifact_folder(first).joinpath(*rest, *parts[1:])

    @property
    def parent(self) -> Path:
        """``../shared``: data recorded beside the artifacts (RPC sessions, seeds)."""
        return _Beside(super().parent)


class _Beside(PosixPath):
    """The folder holding the artifacts: ``/ name`` skips, naming the variable, when missing."""

    def __truediv__(self, key: Any) -> Path:
        return self.joinpath(key)

    def joinpath(self, *parts: Any) -> Path:
        path = Path(self).joinpath(*parts)
        first = Path(self) / Path(parts[0]).parts[0]
        if not first.exists():
            _missing(
                f"recorded data '{first.name}' is not in {Path(self)}: set TVMRT_ARTIFACTS to "
                f"an artifacts folder with {first.name}/ beside it (recordings kept outside the repository)"
            )
        return path

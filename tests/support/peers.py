"""Real TVM peers the tests talk to, each in its own cached virtual environment.

TVM 0.16 (Relay, RPC, its C++ runtime) comes from the ``hhb-tvm`` wheel, which needs
Python 3.10. The venv is made once under ``build/peers`` (or ``$TVMRT_PEERS_DIR``) and
reused; a test that needs it calls :func:`tvm016_python` and is skipped, with the reason,
only when the package index cannot be reached.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from support.paths import REPO

__all__ = ["PEERS_DIR", "find_python310", "tvm016_package_dir", "tvm016_python"]

PEERS_DIR = Path(os.environ.get("TVMRT_PEERS_DIR", REPO / "build" / "peers"))
# hhb-tvm imports tqdm and tflite from tvm.relay without declaring them
TVM016_REQUIREMENTS = ("hhb-tvm==3.2.3", "numpy<2", "pytest", "tqdm", "tflite")


def find_python310() -> Path | None:
    """A working Python 3.10 interpreter: one of pyenv's, or python3.10 on PATH.

    pyenv's shim for python3.10 is on PATH even where 3.10 is not the selected version (it
    then exits 127), so every candidate is run once before it is chosen.
    """
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(pyenv.glob("3.10*/bin/python3.10"), reverse=True)
    on_path = shutil.which("python3.10")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        probe = subprocess.run([str(candidate), "-c", "import venv"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    return None


def _venv(name: str, requirements: tuple[str, ...], check: str) -> Path:
    """The python of venv ``name`` under PEERS_DIR, created and installed on first use."""
    root = PEERS_DIR / name
    python = root / "bin" / "python"
    stamp = root / ".installed"
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    # one installer at a time, across pytest workers and parallel test runs
    with open(PEERS_DIR / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and python.exists():
            return python
        base = find_python310()
        if base is None:
            pytest.skip(f"the {name} peer needs Python 3.10 (python3.10 or pyenv's 3.10)")
        if root.exists():
            shutil.rmtree(root)
        subprocess.run([str(base), "-m", "venv", str(root)], check=True)
        pip = subprocess.run(
            [str(python), "-m", "pip", "install", "-q", *requirements],
            capture_output=True,
            text=True,
        )
        if pip.returncode != 0:
            text = pip.stdout + pip.stderr
            unreachable = any(
                word in text
                for word in (
                    "NewConnectionError",
                    "Temporary failure in name resolution",
                    "Network is unreachable",
                    "Could not fetch URL",
                )
            )
            shutil.rmtree(root, ignore_errors=True)
            if unreachable:
                pytest.skip(
                    f"the package index is unreachable; cannot install {name}: "
                    f"{' '.join(requirements)}"
                )
            raise RuntimeError(f"installing the {name} peer failed:\n{text[-3000:]}")
        subprocess.run([str(python), "-c", check], check=True)
        stamp.touch()
        return python


def tvm016_python() -> Path:
    """Python 3.10 with TVM 0.16 (hhb-tvm 3.2.3): Relay, RPC server/client/tracker."""
    return _venv(
        "tvm016", TVM016_REQUIREMENTS, "import tvm, tvm.relay, tvm.rpc, tvm.contrib.graph_executor"
    )


def tvm016_package_dir() -> Path:
    """The installed ``tvm`` package folder of the TVM 0.16 peer (headers, libtvm_runtime.so)."""
    python = tvm016_python()
    out = subprocess.run(
        [str(python), "-c", "import tvm, os; print(os.path.dirname(tvm.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    )
    return Path(out.stdout.strip())

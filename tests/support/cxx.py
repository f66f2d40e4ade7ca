"""C++ programs against tvmrt's C runtime: build libtvmrt_runtime once per test session
(`make native` into a temporary folder) and compile programs with `tvmrt config`'s flags."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from support.paths import REPO

__all__ = ["SANITIZE", "cxx_env", "native_lib_dir", "shell"]

SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
_FLAGS = {"plain": "-O2", "asan": f"-O1 -g {SANITIZE}"}


def native_lib_dir(tmp_path_factory: pytest.TempPathFactory, variant: str = "plain") -> Path:
    """A folder with libtvmrt_runtime.{so,a} built from this checkout (once per session);
    ``variant="asan"`` builds it with AddressSanitizer and UndefinedBehaviorSanitizer."""
    for tool in ("make", "cc", "g++"):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed; the C++ tests need a C/C++ toolchain")
    root = tmp_path_factory.getbasetemp() / f"cxx-native-{variant}"
    root.mkdir(exist_ok=True)
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (root / "libtvmrt_runtime.a").exists():
            result = subprocess.run(
                ["make", "-s", "native", f"NATIVE_DIR={root}", f"NATIVE_FLAGS={_FLAGS[variant]}"],
                cwd=REPO,
                capture_output=True,
                text=True,
                timeout=600,
                check=False,
            )
            assert result.returncode == 0, result.stderr[-4000:]
    return root


def cxx_env(lib_dir: Path) -> dict[str, str]:
    """The environment in which `tvmrt config` names this checkout and this library build."""
    env = dict(os.environ)
    env["TVMRT_LIBDIR"] = str(lib_dir)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO / "src"), env.get("PYTHONPATH", "")])
    env["TVMRT_PYTHON"] = sys.executable
    env.pop("LD_LIBRARY_PATH", None)  # the programs find the library through their rpath
    env.pop("LD_PRELOAD", None)
    # leaks are errors too
    env["ASAN_OPTIONS"] = "detect_leaks=1:abort_on_error=0"
    env["UBSAN_OPTIONS"] = "print_stacktrace=1:halt_on_error=1"
    return env


def shell(command: str, env: dict[str, str], cwd: Path, timeout: float = 300) -> str:
    """Run a bash command line where `tvmrt` is this checkout's CLI; returns stdout."""
    script = 'tvmrt() { "$TVMRT_PYTHON" -m tvmrt "$@"; }\nset -euo pipefail\n' + command
    result = subprocess.run(
        ["bash", "-c", script],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, (
        f"{command}\nexit {result.returncode}\n{result.stdout[-2000:]}{result.stderr[-4000:]}"
    )
    return result.stdout

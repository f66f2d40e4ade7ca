"""Builds libtvmrt_runtime (plain and AddressSanitizer + UndefinedBehaviorSanitizer) with
`make native` into a temporary folder, and compiles the C test programs of tests/native/c
against it. Tests run every program under both builds."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from tests.support.paths import REPO

C_DIR = Path(__file__).parent / "c"
INCLUDE = REPO / "src" / "tvmrt" / "include"
NATIVE_SRC = REPO / "src" / "tvmrt" / "_native"

SANITIZE = "-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
VARIANTS = {"plain": "-O2", "asan": f"-O1 -g {SANITIZE}"}
# leaks are errors; a huge size read from bad input must fail as an error, not abort
SANITIZER_ENV = {
    "ASAN_OPTIONS": "detect_leaks=1:allocator_may_return_null=1:abort_on_error=0",
    "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
}


@dataclass(frozen=True)
class NativeBuild:
    """One build of the runtime: its folder, flags and the environment to run programs in."""

    variant: str
    lib_dir: Path
    flags: str

    @property
    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.pop("LD_PRELOAD", None)
        env["TVM_NUM_THREADS"] = "2"
        if self.variant == "asan":
            env.update(SANITIZER_ENV)
        return env

    def run(
        self, exe: Path, *args: str | Path, cwd: Path | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        return self.run_env(exe, self.env, *args, cwd=cwd, timeout=timeout)

    def run_env(
        self,
        exe: Path,
        env: dict[str, str],
        *args: str | Path,
        cwd: Path | None = None,
        timeout: float = 300,
    ) -> subprocess.CompletedProcess[str]:
        """run() in the environment `env` (start from self.env)."""
        return subprocess.run(
            [str(exe), *map(str, args)],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _need(tool: str) -> str:
    path = shutil.which(tool)
    if path is None:
        pytest.skip(f"{tool} is not installed; the native runtime tests need a C toolchain")
    return path


@pytest.fixture(scope="session")
def native_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("native")


_BUILDS: dict[str, NativeBuild] = {}


def _build(variant: str, root: Path) -> NativeBuild:
    if variant not in _BUILDS:
        _need("make")
        _need("cc")
        out = root / variant
        flags = VARIANTS[variant]
        proc = subprocess.run(
            ["make", "-s", "native", f"NATIVE_DIR={out}", f"NATIVE_FLAGS={flags}"],
            cwd=REPO,
            capture_output=True,
            text=True,
            check=False,
        )
        assert proc.returncode == 0, proc.stdout + proc.stderr
        assert "warning" not in proc.stderr, proc.stderr
        _BUILDS[variant] = NativeBuild(variant, out, flags)
    return _BUILDS[variant]


@pytest.fixture(scope="session", params=sorted(VARIANTS))
def native(request: pytest.FixtureRequest, native_root: Path) -> NativeBuild:
    """libtvmrt_runtime.{so,a} built by `make native`, once per variant."""
    return _build(request.param, native_root)


@pytest.fixture(scope="session")
def native_asan(native_root: Path) -> NativeBuild:
    """The AddressSanitizer + UndefinedBehaviorSanitizer build only."""
    return _build("asan", native_root)


@pytest.fixture(scope="session")
def native_plain(native_root: Path) -> NativeBuild:
    """The plain build only (what an uninstrumented interpreter can load with ctypes)."""
    return _build("plain", native_root)


@pytest.fixture(scope="session")
def compile_c(native_root: Path) -> Callable[[NativeBuild, str, bool], Path]:
    """compile_c(build, "run_model", static) -> the program tests/native/c/run_model.c linked
    against that build (shared library with an rpath, or the static archive)."""
    done: dict[tuple[str, str, bool], Path] = {}

    def build(native: NativeBuild, name: str, static: bool = False) -> Path:
        key = (native.variant, name, static)
        if key in done:
            return done[key]
        exe = native_root / f"{name}-{native.variant}{'-static' if static else ''}"
        lib_dir = native.lib_dir
        if static:
            link = [str(lib_dir / "libtvmrt_runtime.a"), "-rdynamic", "-ldl", "-lpthread", "-lm"]
        else:
            link = [f"-L{lib_dir}", "-ltvmrt_runtime", "-lpthread", f"-Wl,-rpath,{lib_dir}"]
        cmd = [
            "cc",
            "-std=c11",
            "-D_GNU_SOURCE",
            "-Wall",
            "-Wextra",
            "-Werror",
            *native.flags.split(),
            f"-I{INCLUDE}",
            f"-I{NATIVE_SRC}",  # the fuzz harness reaches the parsers' internal header
            str(C_DIR / f"{name}.c"),
            "-o",
            str(exe),
            *link,
        ]
        proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert proc.returncode == 0, " ".join(cmd) + "\n" + proc.stderr
        done[key] = exe
        return exe

    return build


def link_shared(objects: list[Path], out: Path) -> Path:
    """Link TVM export objects (`.o` members of an export tar, or C sources of target "c")
    into one shared library."""
    cmd = ["cc", "-shared", "-fPIC", "-O2", f"-I{INCLUDE}", "-o", str(out), *map(str, objects)]
    cmd.append("-lm")
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return out

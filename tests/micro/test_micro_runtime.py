"""Issue 48 item 1: the micro runtime's C, built for the host under ASan and UBSan
(tests/micro/c/stack_allocator_checks.c), with and without TVM's LIFO check; and the
runtime's sources compile warning-free for every board with the flags firmware uses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tvmrt.micro import BOARDS, include_dirs, runtime_sources

HERE = Path(__file__).parent
SANITIZE = ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined"]


@pytest.mark.no_cross
@pytest.mark.parametrize("lifo", [False, True], ids=["plain", "lifo-check"])
def test_stack_allocator_and_workspace_on_the_host(tmp_path: Path, lifo: bool) -> None:
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.skip("no host C compiler (install gcc)")
    exe = tmp_path / "checks"
    flags = ["-std=c11", "-Wall", "-Wextra", "-Werror", "-g", *SANITIZE]
    flags += ["-DTVM_CRT_STACK_ALLOCATOR_ENABLE_LIFO_CHECK"] if lifo else []
    includes = [f"-I{d}" for d in include_dirs()]
    sources = [str(HERE / "c" / "stack_allocator_checks.c"), *map(str, runtime_sources())]
    subprocess.run([cc, *flags, *includes, *sources, "-o", str(exe)], check=True)
    done = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok"


@pytest.mark.parametrize("name", list(BOARDS))
def test_the_runtime_compiles_without_warnings_for_every_board(tmp_path: Path, name: str) -> None:
    board = BOARDS[name]
    includes = [f"-I{d}" for d in include_dirs()]
    for source in runtime_sources():
        subprocess.run(
            ["arm-none-eabi-gcc", "-std=c11", "-O2", "-Wall", "-Wextra", "-Wpedantic", "-Werror",
             *board.cflags, *includes, "-c", str(source), "-o", str(tmp_path / "x.o")],
            check=True,
        )  # fmt: skip

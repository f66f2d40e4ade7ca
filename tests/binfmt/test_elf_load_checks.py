"""Issue 23 item 4: a library damaged where ``ld.so`` trusts it is refused before ``dlopen``.

Each case damages one field of ``relay016/linkparams-so/deploy.so`` (made here, from the
real library) that, before the checks, killed the process inside ``dlopen`` (SIGSEGV,
SIGBUS, an ``ld.so`` assertion) or loaded and answered wrongly, and ``tvmrt inspect``
said it runs. The load runs in a child process so that a regression is a failed test,
not a dead test run.
"""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path

import pytest

from tvmrt.binfmt.binary import ElfFile
from tvmrt.binfmt.elf_checks import check_loadable
from tvmrt.cli import main as cli_main
from tvmrt.error import ModuleLoadError

LINKPARAMS = "relay016/linkparams-so/deploy.so"
_PT_LOAD, _PT_DYNAMIC = 1, 2
_DT_PLTGOT, _DT_PLTREL = 3, 20
_DT_VERNEED, _DT_VERNEEDNUM = 0x6FFFFFFE, 0x6FFFFFFF


def _phdr(data: bytes, ptype: int, k: int) -> int:
    """Byte offset of the ``k``-th program header of type ``ptype`` (64-bit file)."""
    phoff = struct.unpack_from("<Q", data, 0x20)[0]
    phnum = struct.unpack_from("<H", data, 0x38)[0]
    found = [
        phoff + i * 56
        for i in range(phnum)
        if struct.unpack_from("<I", data, phoff + i * 56)[0] == ptype
    ]
    return found[k]


def _dyn_value(data: bytes, tag: int) -> int:
    """Byte offset of the value of dynamic entry ``tag``."""
    at = struct.unpack_from("<Q", data, _phdr(data, _PT_DYNAMIC, 0) + 8)[0]  # p_offset
    while True:
        entry = struct.unpack_from("<qQ", data, at)[0]
        if entry == tag:
            return at + 8
        assert entry != 0, f"no dynamic tag {tag}"
        at += 16


def _set(data: bytes, offset: int, value: int) -> bytes:
    return data[:offset] + struct.pack("<Q", value) + data[offset + 8 :]


def _verneed_version(data: bytes) -> bytes:
    """Damage vn_version of the first needed-version entry (2: not the one ELF defines)."""
    at = struct.unpack_from("<Q", data, _dyn_value(data, _DT_VERNEED))[0]
    assert at < _phdr_end(data, 0), "DT_VERNEED lies in the first PT_LOAD (vaddr = offset)"
    return data[:at] + struct.pack("<H", 2) + data[at + 2 :]


def _phdr_end(data: bytes, k: int) -> int:
    at = _phdr(data, _PT_LOAD, k)
    vaddr, _, filesz = struct.unpack_from("<QQQ", data, at + 16)
    return int(vaddr + filesz)


# (id, field named in the message, how to damage it)
CASES = [
    ("load1-filesz", "PT_LOAD[1].p_filesz", lambda d: _set(d, _phdr(d, _PT_LOAD, 1) + 32, 0)),
    ("load2-filesz", "PT_LOAD[2].p_filesz", lambda d: _set(d, _phdr(d, _PT_LOAD, 2) + 32, 0)),
    ("load0-offset", "PT_LOAD[0].p_offset", lambda d: _set(d, _phdr(d, _PT_LOAD, 0) + 8, 2**40)),
    (
        "dynamic-vaddr",
        "PT_DYNAMIC.p_vaddr",
        lambda d: _set(d, _phdr(d, _PT_DYNAMIC, 0) + 16, 0x123),
    ),
    ("pltgot", "DT_PLTGOT", lambda d: _set(d, _dyn_value(d, _DT_PLTGOT), 0)),
    ("pltrel", "DT_PLTREL", lambda d: _set(d, _dyn_value(d, _DT_PLTREL), 0)),
    ("verneednum", "DT_VERNEEDNUM", lambda d: _set(d, _dyn_value(d, _DT_VERNEEDNUM), 7)),
    ("vn-version", "DT_VERNEED entry 0.vn_version", _verneed_version),
]
IDS = [c[0] for c in CASES]


@pytest.fixture(scope="module")
def original(artifacts: Path) -> bytes:
    return (artifacts / LINKPARAMS).read_bytes()


@pytest.mark.parametrize(("case", "field", "damage"), CASES, ids=IDS)
def test_damaged_field_is_named(original, case, field, damage):
    with pytest.raises(ModuleLoadError) as info:
        check_loadable(ElfFile(damage(original), "deploy.so"))
    assert f"'deploy.so': {field} is " in str(info.value)
    assert "expected" in str(info.value)


_CHILD = """
import sys
from tvmrt.error import ModuleLoadError
from tvmrt.runtime import load_module
try:
    load_module(sys.argv[1])
except ModuleLoadError as exc:
    print(exc)
    sys.exit(3)
print("loaded")
"""


@pytest.mark.parametrize(("case", "field", "damage"), CASES, ids=IDS)
def test_load_module_refuses_before_dlopen(original, tmp_path, case, field, damage):
    path = tmp_path / "deploy.so"
    path.write_bytes(damage(original))
    result = subprocess.run(
        [sys.executable, "-c", _CHILD, str(path)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 3, (result.returncode, result.stdout, result.stderr)
    assert f"{str(path)!r}: {field} is " in result.stdout


@pytest.mark.parametrize(("case", "field", "damage"), CASES, ids=IDS)
def test_inspect_exits_1_naming_the_field(original, tmp_path, capsys, case, field, damage):
    path = tmp_path / "deploy.so"
    path.write_bytes(damage(original))
    assert cli_main(["inspect", str(path)]) == 1
    out = capsys.readouterr().out
    assert f"{field} is " in out
    assert "runs here" not in out or ": yes" not in out.split("runs here", 1)[1].split("\n")[0]


def test_the_real_library_passes_and_loads(original, artifacts):
    check_loadable(ElfFile(original, "deploy.so"))


ARM = ["cross/aarch64/deploy.so", "cross/aarch64/deploy_lib.so", "cross/armv7hf/deploy.so"]
ARM += ["cross/armv7hf/deploy_lib.so", "aarch64/deploy_lib.so"]


@pytest.mark.parametrize("name", ARM)
def test_arm_libraries_pass_the_static_checks(artifacts, name, capsys):
    path = artifacts / name
    if not path.is_file():
        pytest.skip(f"{name} is not among the artifacts")
    check_loadable(ElfFile.from_path(path))  # ELFCLASS32 and 64, REL and RELA
    cli_main(["inspect", str(path)])
    out = capsys.readouterr().out
    assert "checked before dlopen" not in out

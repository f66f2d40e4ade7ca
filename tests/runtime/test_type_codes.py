"""One copy of each ABI table: type codes, DLDataType, CUDA argument kinds, VM opcodes.

* ``ArgTypeCode`` is the only spelling of ``TVMArgTypeCode`` in the Python source, and it
  equals the C header's enum; no module assigns a type code as a bare number.
* ``DLDataType`` is declared once (``runtime/_ctypes_api.py``).
* The CUDA argument kinds are one C table (``tvmrt_cuda_arg_kind``), which Python asks.
* The Relay VM's opcode names and fixed field counts agree between the Python reader and
  the C one (the twins keep one table each until the Python one goes; this keeps them equal).
"""

from __future__ import annotations

import ast
import ctypes
import re

from support.paths import REPO
from tvmrt.runtime import kernel_services
from tvmrt.runtime._ctypes_api import ArgTypeCode
from tvmrt.runtime.vm import opcodes

SRC = REPO / "src" / "tvmrt"
HEADER = SRC / "include" / "tvm" / "runtime" / "c_runtime_api.h"
# a type code written as a number: `X = 7  # kTVMDLTensorHandle`, `A, B = 11, 0  # type codes`
_CODE_NAME = re.compile(
    r"^_?(INT|UINT|FLOAT|BOOL|HANDLE|NULL|NONE|STR|BYTES|NDARRAY|DLTENSOR|OBJECT|MODULE|FUNC"
    r"|DATATYPE|DEVICE|OPAQUE_PTR|RAW_STR|SMALL_STR|FIRST_OBJECT|DLTENSOR_HANDLE)$"
)
_NUMERIC_CODE = re.compile(r"=\s*[-\d, ()]+#.*\b(kTVM\w+|kDL(Int|UInt|Float)\b|type codes?\b)")


def _c_enum(text: str, first: str) -> dict[str, int]:
    """The members of the C enum whose first member is `first` (explicit values only)."""
    body = text[text.index(first) :].split("}", 1)[0]
    return {m[0]: int(m[1]) for m in re.findall(r"(k\w+)\s*=\s*(\d+)", body)}


def test_arg_type_codes_are_the_c_headers() -> None:
    members = _c_enum(HEADER.read_text(), "kTVMArgInt")
    by_value = {code.value: code for code in ArgTypeCode}
    for name, value in members.items():
        assert value in by_value, f"{name} = {value} has no ArgTypeCode member"
    ext = re.search(r"#define kTVMExtBegin (\d+)", HEADER.read_text())
    assert ext is not None
    assert int(ext[1]) == ArgTypeCode.EXT_BEGIN
    assert members["kTVMArgBool"] == ArgTypeCode.BOOL
    assert members["kTVMNDArrayHandle"] == ArgTypeCode.NDARRAY_HANDLE


def _named_numbers(tree: ast.Module) -> list[tuple[int, str]]:
    """Module-level names of a type code (``INT``, ``_NDARRAY``...) bound to int literals."""
    found = []
    for node in tree.body:
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            names = target.elts if isinstance(target, ast.Tuple) else [target]
            values = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
            for name, value in zip(names, values, strict=False):
                if (
                    isinstance(name, ast.Name)
                    and _CODE_NAME.match(name.id)
                    and isinstance(value, ast.Constant)
                    and isinstance(value.value, int)
                ):
                    found.append((node.lineno, name.id))
    return found


def test_no_python_module_spells_a_type_code_as_a_number() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "_ctypes_api.py":
            continue  # the one table
        text = path.read_text()
        for number, line in enumerate(text.splitlines(), 1):
            if _NUMERIC_CODE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()}")
        for number, name in _named_numbers(ast.parse(text)):
            found.append(f"{path.relative_to(REPO)}:{number}: {name} is a number")
    assert found == []


def test_dldatatype_is_declared_once() -> None:
    declared = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef) and any(
                "Structure" in ast.unparse(b) for b in node.bases
            ):
                fields = ast.unparse(node)
                if "('code', ctypes.c_uint8)" in fields and "('lanes', ctypes.c_uint16)" in fields:
                    declared.append(f"{path.relative_to(SRC)}:{node.name}")
    assert declared == ["runtime/_ctypes_api.py:DLDataType"]


def test_cuda_argument_kinds_come_from_the_c_table() -> None:
    lib = kernel_services.native_library()
    kind = lib.tvmrt_cuda_arg_kind
    kind.restype, kind.argtypes = ctypes.c_int, [ctypes.c_int] * 3
    table = {(c, b): kind(c, b, 1) for c in range(4) for b in (8, 16, 32, 64)}
    assert {k: v for k, v in table.items() if v >= 0} == {
        (0, 32): 0, (1, 32): 1, (0, 64): 2, (1, 64): 3, (2, 32): 4, (2, 64): 5, (3, 64): 6,
    }  # fmt: skip
    assert kind(2, 32, 4) == -1  # vectors are no device-function argument
    launcher = (SRC / "runtime" / "loaders" / "cuda_launch.py").read_text()
    assert "tvmrt_cuda_arg_kind" in launcher
    assert "_KINDS" not in launcher
    for c_file in (
        "_native/cuda_launch.c",
        "_native/runtime/cuda_module.c",
        "_native/runtime/kernel_table.c",
        "_native/runtime/opencl_module.c",
    ):
        text = (SRC / c_file).read_text()
        assert not re.search(r"enum \{ [AK]_I32", text), f"{c_file} declares its own kinds"


def test_relay_vm_opcode_tables_agree_between_python_and_c() -> None:
    text = (SRC / "_native" / "runtime" / "vm_format.c").read_text()
    names_c = text[text.index("tvmrt_vm_opcode_names[VM_NUM_OPCODES] = {") :].split("};", 1)[0]
    assert tuple(re.findall(r'"(\w+)"', names_c)) == opcodes.OPCODE_NAMES
    fixed_c = text[text.index("k_fixed[VM_NUM_OPCODES] = {") :].split("};", 1)[0]
    counts = [int(x) for x in re.findall(r"-?\d+", fixed_c.split("{", 1)[1])]
    python = [-1 if n is None else n for n in opcodes._FIXED]
    assert counts == python
    header = (SRC / "_native" / "runtime" / "vm.h").read_text()
    enum = header[header.index("VM_MOVE,") :].split("VM_NUM_OPCODES", 1)[0]
    assert len(re.findall(r"VM_\w+", enum)) == opcodes.NUM_OPCODES == len(opcodes.OPCODE_NAMES)

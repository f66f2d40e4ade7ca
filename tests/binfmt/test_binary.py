"""The binary-format toolkit (tvmrt.binfmt): what a file is from its header, ELF symbols,
and what the symbols mean for TVM. Nothing here loads a library.

Tier: cpu. Uses the real artifacts (``artifacts`` fixture).
"""

from __future__ import annotations

import pytest

from tvmrt.binfmt import abi, binary


def test_identify_artifacts(artifacts):
    cases = {
        "mobilenet_v1/deploy_lib.so": ("elf", "shared library", "x86-64", 64),
        "aarch64/deploy_lib.so": ("elf", "shared library", "aarch64", 64),
        "windows-dll/deploy.dll": ("pe", "DLL", "x86-64", 64),
        "face-macos/deploy_lib.so": ("macho", "shared library", "x86-64", 64),
        "iris-factory/deploy_lib.tar": ("tar", "gzip-compressed", "", 0),
        "mobilenet_v1/deploy_param.params": ("tvm-params", "params blob", "", 0),
        "mobilenet_v1/deploy_graph.json": ("text", "", "", 0),
    }
    for rel, expected in cases.items():
        info = binary.identify(artifacts / rel)
        assert (info.format, info.kind, info.machine, info.bits) == expected, rel


def test_dynamic_symbols_and_abi(artifacts):
    elf = binary.ElfFile.from_path(artifacts / "mobilenet_v1" / "deploy_lib.so")
    scan = abi.scan_tvm_symbols(elf.symbols())
    assert scan.abi == "legacy"
    assert scan.has_entry
    assert scan.blob_symbol == ""
    assert "__TVMBackendParallelLaunch" in scan.slots
    assert "expf" in scan.undefined
    assert "fused_nn_pad_layout_transform" in scan.functions


def _sym(name: str, kind: str = "func", defined: bool = True) -> binary.ElfSymbol:
    return binary.ElfSymbol(name, kind, "global", 1 if defined else 0, 0, 0)


@pytest.mark.parametrize(
    ("symbols", "expected"),
    [
        ([_sym("__tvm_ffi_library_ctx", "object"), _sym("add")], "tvm-ffi-0.21"),
        ([_sym("__tvm_ffi_add"), _sym("__tvm_ffi_main")], "tvm-ffi"),
        ([_sym("__tvm_ffi__library_bin", "object")], "tvm-ffi"),
        ([_sym("k"), _sym("TVMFFIErrorSetRaisedFromCStrParts", defined=False)], "tvm-ffi"),
        ([_sym("__tvm_main__", "object"), _sym("k")], "legacy"),
        ([_sym("k"), _sym("TVMBackendAllocWorkspace", defined=False)], "legacy"),
        ([_sym("tvmgen_default_fused_add")], "legacy"),
        ([_sym("sin"), _sym("cos")], "none"),
    ],
    ids=["ffi-0.21", "ffi", "ffi-bin", "ffi-error", "main", "c-target", "kernel-names", "none"],
)
def test_abi_detection(symbols, expected):
    assert abi.scan_tvm_symbols(symbols).abi == expected

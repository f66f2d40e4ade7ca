"""Fuzz targets: every parser that reads untrusted bytes, with the one rule they must keep.

Each target takes bytes and may raise only a tvmrt error (``TVMError``); any other
exception, a crash, a hang or a runaway allocation is a bug. The same targets run under
atheris (``fuzz/run.py``, long runs outside the test suite) and under hypothesis in the
test suite (``tests/hostile/test_fuzz.py``, short runs on every CI).
"""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from typing import IO

from tvmrt.binfmt import abi, binary
from tvmrt.binfmt.stream import ByteReader
from tvmrt.error import TVMError
from tvmrt.runtime.graph_executor import parse_graph
from tvmrt.runtime.loaders.blob import parse_module_blob
from tvmrt.runtime.params import load_param_dict

__all__ = ["TARGETS", "TVMError"]


def graph_json(data: bytes) -> None:
    """The graph JSON parser and validator."""
    parse_graph(data)


def params(data: bytes) -> None:
    """The params blob reader."""
    load_param_dict(data)


def module_blob(data: bytes) -> None:
    """The ``__tvm_dev_mblob`` parser (incl. the GraphExecutorFactory payload)."""
    parse_module_blob(data, "fuzzed blob")


def elf(data: bytes) -> None:
    """File identification and ELF symbol tables (what inspect and the loaders read first)."""
    info = binary.identify_bytes(data[:4096])
    if info.format == "elf":
        elf_file = binary.ElfFile(data, "fuzzed.so")
        for dynamic in (True, False):
            symbols = elf_file.symbols(dynamic=dynamic)
            abi.scan_tvm_symbols(symbols)
            for symbol in symbols[:8]:
                if symbol.defined:
                    elf_file.read_symbol(symbol, 64)


def archive(data: bytes) -> None:
    """Reading and checking an export tar's members, as the .tar loader does before linking."""
    from tvmrt.runtime.loaders import link

    with tempfile.NamedTemporaryFile(suffix=".tar") as handle:
        handle.write(data)
        handle.flush()
        for name, member in link.read_members(handle.name):
            link.check_object(member, name, handle.name)


class _Stop(Exception):
    """Raised where a load would run code from the input (link, dlopen): the end of a case."""


def _as_file(data: bytes, handle: IO[bytes]) -> str:
    handle.write(data)
    handle.flush()
    return handle.name


def _suffix(data: bytes) -> str:
    info = binary.identify_bytes(data[:4096])
    if info.format == "tar" or data[:3] in (b"\x1f\x8b\x08", b"BZh") or data[:6] == b"\xfd7zXZ\x00":
        return ".tar"
    return ".o" if info.kind == "object file" else ".so"


def inspect(data: bytes) -> None:
    """``tvmrt inspect`` of a library or export tar (nothing of it runs)."""
    from tvmrt.artifact import find_artifact, inspect_artifact

    with tempfile.NamedTemporaryFile(suffix=_suffix(data)) as handle:
        inspect_artifact(find_artifact(_as_file(data, handle)))


def load_module(data: bytes) -> None:
    """``load_module`` of a library or export tar, up to the point of linking or ``dlopen``."""
    from unittest import mock

    from tvmrt.runtime import load_module as load
    from tvmrt.runtime.loaders import library, link

    def stop(*args: object) -> None:
        raise _Stop

    with (
        tempfile.NamedTemporaryFile(suffix=_suffix(data)) as handle,
        mock.patch.object(library, "dlopen_checked", stop),
        mock.patch.object(link, "link_objects", stop),
        contextlib.suppress(_Stop),
    ):
        load(_as_file(data, handle))


def vm_executable(data: bytes) -> None:
    """The Relay VM executable reader and operand checker (``code.ro``, ``vm.so``'s entry)."""
    from tvmrt.runtime.vm.decode import decode_executable
    from tvmrt.runtime.vm.format import read_executable

    decode_executable(read_executable(data, "fuzzed code.ro"), "fuzzed code.ro")


def vm_operands(data: bytes) -> None:
    """The VM's operand checks on their own: ``code.ro`` read without instruction hashes,
    so mutated registers, indexes, offsets, dtypes and shapes reach the decoder."""
    from tvmrt.runtime.vm.decode import decode_executable
    from tvmrt.runtime.vm.format import read_executable

    decode_executable(read_executable(data, "fuzzed code.ro", check_hash=False), "fuzzed")


def stream(data: bytes) -> None:
    """The dmlc stream reader on its own (strings, vectors, counts)."""
    reader = ByteReader(data, "fuzzed stream", TVMError)
    while reader.remaining:
        reader.strings("strings")
        reader.u64s("u64s")


TARGETS: dict[str, Callable[[bytes], None]] = {
    "graph_json": graph_json,
    "params": params,
    "module_blob": module_blob,
    "elf": elf,
    "archive": archive,
    "stream": stream,
    "vm_executable": vm_executable,
    "vm_operands": vm_operands,
    "inspect": inspect,
    "load_module": load_module,
}

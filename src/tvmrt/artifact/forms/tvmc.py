"""A tvmc package: a tar of ``mod.so`` (or ``mod.tar``), ``mod.json`` and ``mod.params``.

Loaded by the runtime's package loader (:mod:`tvmrt.runtime.loaders.packages`) into a
graph executor factory, so the executor is the factory's own; inspection reads the
members (the library's symbols, the graph, the params).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.forms.graph_build import load_graph_model
from tvmrt.artifact.inspect_binary import Found, archive_members, inspect_elf
from tvmrt.artifact.model import LoadedModel
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders.dispatch import FileKind, Sniffed
from tvmrt.runtime.module import Module
from tvmrt.runtime.params import load_param_dict

__all__ = ["FORM"]


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return sniffed is not None and sniffed.form is FileKind.TVMC


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    return load_graph_model("tvmc", request, lib, None)


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    path = files.lib
    from tvmrt.binfmt import binary

    members = archive_members(path, problems)
    if members is None:
        return
    if "mod.so" in members:
        data = members["mod.so"]
        info = binary.identify_bytes(data[:4096])
        found.library.kind = f"tvmc package; mod.so: {info.describe()}"
        found.library.machine = info.machine
        try:
            binary.check_host_compatible(info, f"{path}:mod.so", "shared library")
        except ModuleLoadError as exc:
            problems.append(str(exc))
        if info.format == "elf":
            inspect_elf(data, f"{path}:mod.so", info.kind, found, problems)
    elif "mod.tar" in members:
        _inspect_nested_tar(members["mod.tar"], f"{path}:mod.tar", found, problems)
    else:
        problems.append(f"{str(path)!r} is a tvmc package without mod.so or mod.tar")
    if "mod.json" in members:
        found.graph_json = members["mod.json"].decode("utf-8", errors="replace")
    if "mod.params" in members:
        try:
            found.params.update(load_param_dict(members["mod.params"]))
        except TVMError as exc:
            problems.append(str(exc))
    found.library.members = sorted(members)


def _inspect_nested_tar(data: bytes, shown: str, found: Found, problems: list[str]) -> None:
    """The objects of the ``export_library`` tar a tvmc package holds as ``mod.tar``."""
    from tvmrt.binfmt import binary

    with tempfile.TemporaryDirectory(prefix="tvmrt-inspect-") as work:
        nested = Path(work) / "mod.tar"
        nested.write_bytes(data)
        members = archive_members(nested, problems)
    if members is None:
        return
    objects = [(n, d) for n, d in sorted(members.items()) if n.endswith(".o")]
    found.library.kind = f"tvmc package; mod.tar: export_library tar of {len(objects)} object(s)"
    for name, obj in objects:
        info = binary.identify_bytes(obj[:4096])
        found.library.machine = info.machine
        try:
            binary.check_host_compatible(info, f"{shown}:{name}", "object file")
        except ModuleLoadError as exc:
            problems.append(str(exc))
            return


FORM = ArtifactForm(
    "tvmc",
    "tvmc package (mod.so or mod.tar, mod.json, mod.params)",
    _claims,
    _load,
    _inspect,
)

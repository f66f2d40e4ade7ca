"""Which files make up an artifact: a folder's graph JSON, library and params, or one file.

An artifact is a folder holding a graph JSON, a kernel library and (usually) a params
file (TVM's ``deploy_graph.json`` / ``deploy_lib.so`` / ``deploy_param.params`` or tvmrt's
``deploy.json`` / ``deploy.so`` / ``deploy.params``), one file that carries everything
(a factory library, an AOT build, a Model Library Format tar, a tvmc package), an
unpacked Model Library Format folder (``metadata.json`` + ``codegen/host/``), or
explicit ``graph=``/``lib=``/``params=`` files. Which form the files are is decided in
:mod:`tvmrt.artifact.forms`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tvmrt.error import ArtifactNotFoundError, ModuleLoadError, TVMError
from tvmrt.runtime.loaders.mlf_aot import is_mlf_folder

__all__ = ["ArtifactBytes", "ArtifactFiles", "find_artifact"]

_LIB_SUFFIXES = (".so", ".tar", ".dll", ".dylib", ".o")
_PREFERRED_STEMS = ("deploy", "mod", "model")


@dataclass(frozen=True)
class ArtifactFiles:
    """The files of one artifact (``graph``/``params`` are None for a factory library).

    ``code`` is a Relay VM executable's ``code.ro`` (its kernels are ``lib``).
    """

    lib: Path
    graph: Path | None = None
    params: Path | None = None
    code: Path | None = None


@dataclass(frozen=True)
class ArtifactBytes:
    """An artifact held in memory (a model decrypted, or read from a bundle): the bytes of
    the files :class:`ArtifactFiles` names, for :func:`tvmrt.artifact.load_artifact`.

    ``lib`` is any library form ``load_module`` takes (a factory or kernel ``.so``, an
    export ``.tar`` or ``.o``, an MLF or tvmc package tar, a Relax ``model.so``); ``graph``,
    ``params`` and ``code`` (a Relay VM's ``code.ro``) go with a kernel library as the
    files of a folder would. Nothing is written to a disk (``tvmrt.runtime.loaders.memory``).
    """

    lib: bytes | bytearray | memoryview
    graph: str | bytes | None = None
    params: bytes | bytearray | memoryview | None = None
    code: bytes | bytearray | memoryview | None = None


def _pick(candidates: list[Path], what: str, folder: Path, flag: str) -> Path | None:
    if not candidates:
        return None
    if len(candidates) == 1:
        return candidates[0]
    preferred = [p for p in candidates if any(s in p.stem.lower() for s in _PREFERRED_STEMS)]
    if len(preferred) == 1:
        return preferred[0]
    names = ", ".join(sorted(p.name for p in candidates))
    raise ModuleLoadError(
        f"folder {str(folder)!r} has several {what} files ({names}); pick one with {flag}"
    )


def find_artifact(
    path: str | os.PathLike[str] | None = None,
    graph: str | os.PathLike[str] | None = None,
    lib: str | os.PathLike[str] | None = None,
    params: str | os.PathLike[str] | None = None,
) -> ArtifactFiles:
    """Resolve the files of an artifact; explicit ``graph``/``lib``/``params`` win.

    Raises
    ------
    FileNotFoundError
        If a named file or folder does not exist.
    ModuleLoadError
        If the folder has no kernel library, or several candidates for one role.
    """
    found_graph = Path(graph) if graph else None
    found_lib = Path(lib) if lib else None
    found_params = Path(params) if params else None
    found_code: Path | None = None
    if path is not None:
        root = Path(path)
        if not root.exists():
            raise ArtifactNotFoundError(f"artifact {str(root)!r} does not exist")
        if root.is_dir() and found_lib is None and is_mlf_folder(root):
            # an unpacked Model Library Format package: its metadata.json names it
            return ArtifactFiles(root / "metadata.json", found_graph, found_params)
        if root.is_dir():
            files = [p for p in sorted(root.iterdir()) if p.is_file()]
            found_code = _vm_code(files, root)
            if found_lib is None:
                libs = [p for p in files if p.suffix in _LIB_SUFFIXES]
                names = {p.name for p in libs}  # TVM's load_module("X.tar") leaves X.tar.so
                libs = [
                    p for p in libs if not (p.name.endswith(".tar.so") and p.name[:-3] in names)
                ]
                if found_code is not None and len(libs) > 1:  # Executable.save's pair
                    libs = [p for p in libs if p.name == "lib.so"] or libs
                found_lib = _pick(libs, "kernel library", root, "--lib")
            if found_graph is None:
                graphs = [
                    p
                    for p in files
                    if p.suffix in (".json", ".graph") and not p.name.endswith("summary.json")
                ]
                found_graph = _pick(graphs, "graph JSON", root, "--graph")
            if found_params is None:
                found_params = _pick(
                    [p for p in files if p.suffix == ".params"], "params", root, "--params"
                )
        elif found_lib is None:
            found_lib = root
        else:
            raise ModuleLoadError(f"artifact {str(root)!r} is a file and --lib was given too")
    if found_lib is None:
        where = f" in {str(path)!r}" if path is not None else ""
        raise ModuleLoadError(
            f"no kernel library found{where}: expected a {'/'.join(_LIB_SUFFIXES)} file "
            "(or pass --lib)"
        )
    for role, file in (("library", found_lib), ("graph", found_graph), ("params", found_params)):
        if file is not None and not file.is_file():
            raise ArtifactNotFoundError(f"{role} file {str(file)!r} does not exist")
    if found_code is not None and found_lib.name == "vm.so":
        found_code = None  # vm.so carries its own code
    if path is not None and Path(path).is_dir() and _is_relax(found_lib):
        # a Relax VM executable carries its code and constants: the folder's other .json
        # and .params files (a case description, say) are not its graph or params
        found_graph = Path(graph) if graph else None
        found_params = Path(params) if params else None
    return ArtifactFiles(found_lib, found_graph, found_params, found_code)


def _is_relax(lib: Path) -> bool:
    """Whether ``lib`` is a Relax VM executable (the loader's dispatcher sniffs it)."""
    from tvmrt.runtime.loaders.dispatch import FileKind, sniff

    if lib.suffix != ".so":
        return False
    try:
        return sniff(str(lib)).form is FileKind.RELAX_VM
    except (TVMError, OSError):
        return False  # loading says what is wrong with it


def _without_tar_so(libs: list[Path]) -> list[Path]:
    """``libs`` less each ``X.tar.so`` beside an ``X.tar``: TVM's ``load_module("X.tar")``
    links the tar into that file, the same library again."""
    names = {p.name for p in libs}
    return [p for p in libs if not (p.name.endswith(".tar.so") and p.name[:-3] in names)]


def _vm_code(files: list[Path], root: Path) -> Path | None:
    """A Relay VM folder's ``code.ro`` (the one so named if there are several ``.ro``)."""
    codes = [p for p in files if p.suffix == ".ro"]
    if len(codes) > 1:
        codes = [p for p in codes if p.name == "code.ro"] or codes
    return _pick(codes, "Relay VM code", root, "--lib (a vm.so)")

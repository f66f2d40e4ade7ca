"""Package leaves: Model Library Format tars and tvmc packages, loaded as one artifact.

Both hold a kernel library (or the code to build one), a graph JSON and a params blob as
separate members. Each is returned as a graph-executor factory over its library, so
``load_module(path)["default"](dev)`` creates the executor with the params bound, as for
an ``export_library`` factory:

* **Model Library Format** (``export_model_library_format``, microTVM's tar):
  ``metadata.json``, ``codegen/host/lib/*.o`` (llvm) or ``codegen/host/src/*.c`` (target
  ``c``; compiled against tvmrt's TVM headers), ``executor-config/graph/<model>.graph``,
  ``parameters/<model>.params``. An AOT build (no ``executor-config/graph/``) is another
  kind of file, loaded by :mod:`.mlf_aot` (its C code compiled with a host CRT platform).
* **tvmc package** (``tvmc compile`` output): ``mod.so`` (or ``mod.tar``: an
  ``export_library`` tar), ``mod.json`` and ``mod.params``.

The library itself goes through the link step and the dispatcher's ``load_library``
(passed in, so this leaf imports no other leaf).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any

from tvmrt.binfmt import archive
from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.loaders import cache, link
from tvmrt.runtime.module import Module
from tvmrt.runtime.params import load_param_dict
from tvmrt.runtime.registry import get_global_func

__all__ = ["load_mlf", "load_tvmc", "mlf_summary"]

LoadLibrary = Callable[[str, str], Module]


def _store(data: bytes, suffix: str, shown: str) -> Path:
    """The cache entry holding ``data`` (:mod:`.cache`: checked on use, else rewritten)."""
    directory = cache.cache_dir() / "packages"
    key = hashlib.sha256(data).hexdigest()
    found = cache.find_entry(directory, key, suffix)
    if found is not None:
        return found
    try:
        return cache.write_entry(directory, key, suffix, data, 0o755)
    except OSError as exc:
        raise ModuleLoadError(
            f"cannot load {shown!r}: cannot write its library to the cache folder "
            f"{str(directory)!r} ({exc}); set $TVMRT_CACHE_DIR to a writable folder"
        ) from exc


def _from_cache(error: ModuleLoadError, entry: Path) -> ModuleLoadError:
    """``error`` (of loading a cache entry), with the entry's path added to its message."""
    return type(error)(f"{error} (tvmrt's copy of that member is cached as {str(entry)!r})")


def _factory(
    graph_json: str, params_blob: bytes | None, name: str, lib: Module, shown: str
) -> Module:
    params = {}
    if params_blob is not None:
        try:
            params = load_param_dict(params_blob)
        except TVMError as exc:
            raise ModuleLoadError(
                f"cannot load {shown!r}: its params are unreadable: {exc}"
            ) from exc
    # a library whose blob already holds a factory: its kernel library is the first import
    kernels = lib.imported_modules[0] if lib.type_key == "GraphExecutorFactory" else lib
    create = get_global_func("tvm.graph_executor_factory.create")  # the engines' constructor
    pairs = [item for pair in params.items() for item in pair]
    factory = create(graph_json, kernels, name, *pairs)
    assert isinstance(factory, Module)
    return factory


# -- tvmc ----------------------------------------------------------------------------------


def load_tvmc(path: str, shown: str, load_library: LoadLibrary) -> Module:
    """Load a tvmc package: ``mod.so`` (or ``mod.tar``) + ``mod.json`` + ``mod.params``.

    Raises
    ------
    ModuleLoadError
        If a member is missing or unreadable (the message names the form).
    """
    members = archive.member_files(path)
    what = f"cannot load {shown!r} (a tvmc package)"
    if "mod.json" not in members:
        raise ModuleLoadError(f"{what}: it has no mod.json (the graph JSON)")
    member = "mod.so" if "mod.so" in members else "mod.tar"
    if member not in members:
        raise ModuleLoadError(f"{what}: it has neither mod.so nor mod.tar (the kernel library)")
    entry = _store(members[member], PurePosixPath(member).suffix, shown)
    if member == "mod.tar":  # its objects are for this machine, or the message names them
        for name, data in archive.read_members(str(entry)):
            if PurePosixPath(name).suffix == ".o":
                link.check_object(data, name, f"{shown}:mod.tar:{PurePosixPath(name).name}")
    try:
        lib_path = entry if member == "mod.so" else link.link_archive(str(entry))
        lib = load_library(str(lib_path), f"{shown}:{member}")
    except ModuleLoadError as exc:
        raise _from_cache(exc, entry) from exc
    graph_json = members["mod.json"].decode("utf-8", errors="replace")
    return _factory(graph_json, members.get("mod.params"), "default", lib, shown)


# -- Model Library Format -------------------------------------------------------------------


def mlf_summary(metadata: bytes, shown: str) -> dict[str, Any]:
    """``{"version", "model", "executors", "targets"}`` from an MLF ``metadata.json``.

    Raises
    ------
    ModuleLoadError
        If the JSON is unreadable or nested too deeply; the message names the file.
    """
    try:
        meta = json.loads(metadata)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModuleLoadError(
            f"cannot load {shown!r}: its metadata.json is not JSON: {exc}"
        ) from exc
    except RecursionError:  # arrays or objects nested thousands deep: no MLF writes that
        raise ModuleLoadError(
            f"cannot load {shown!r}: its metadata.json nests arrays or objects too deeply "
            "to read (TVM writes a few levels)"
        ) from None
    if not isinstance(meta, dict):
        raise ModuleLoadError(f"cannot load {shown!r}: its metadata.json is not a JSON object")
    modules = meta.get("modules")
    if isinstance(modules, dict) and modules:  # version >= 5: one entry per model
        model = str(next(iter(modules)))
        entry = modules[model] if isinstance(modules[model], dict) else {}
    else:  # older layouts kept the fields at the top level
        model = str(meta.get("model_name", "default"))
        entry = meta
    targets = entry.get("target", [])
    if isinstance(targets, dict):
        targets = list(targets.values())
    executors = entry.get("executors", [])
    return {
        "version": meta.get("version"),
        "model": model,
        "executors": [str(e) for e in executors] if isinstance(executors, list) else [],
        "targets": [str(t) for t in targets] if isinstance(targets, list) else [str(targets)],
    }


def load_mlf(path: str, shown: str, load_library: LoadLibrary) -> Module:
    """Load a Model Library Format tar built with the graph executor.

    Raises
    ------
    ModuleLoadError
        If it was built for the AOT executor (microTVM's C runtime), holds no host code,
        its code is for another machine or does not compile, or a member is missing.
    """
    members = archive.member_files(path)
    what = f"cannot load {shown!r} (a Model Library Format tar)"
    summary = mlf_summary(members["metadata.json"], shown)
    model = summary["model"]
    if "graph" not in summary["executors"]:
        executors = ", ".join(summary["executors"]) or "none recorded"
        raise ModuleLoadError(
            f"{what}: it was built for the {executors} executor but holds a graph executor "
            "config; an MLF AOT package has no executor-config/graph/ (its C code is compiled "
            "for this host then)"
        )
    code = [
        (name, data)
        for name, data in sorted(members.items())
        if name.startswith("codegen/host/")
        and (link.is_source(name) or PurePosixPath(name).suffix == ".o")
    ]
    if not code:
        raise ModuleLoadError(
            f"{what}: it holds no host code under codegen/host/ (lib/*.o or src/*.c)"
        )
    graph_name = next(
        (
            n
            for n in (f"executor-config/graph/{model}.graph", "executor-config/graph/graph.json")
            if n in members
        ),
        None,
    )
    if graph_name is None:
        raise ModuleLoadError(f"{what}: it has no executor-config/graph/{model}.graph")
    objects = link.build_objects(code, shown)
    digest = hashlib.sha256(b"tvmrt-mlf-v1")
    for name, data in objects:
        digest.update(name.encode() + b"\0" + hashlib.sha256(data).digest())
    linked = link.link_objects(objects, digest.hexdigest(), shown)
    lib = load_library(str(linked), shown)
    graph_json = members[graph_name].decode("utf-8", errors="replace")
    params = members.get(f"parameters/{model}.params")
    return _factory(graph_json, params, model, lib, shown)

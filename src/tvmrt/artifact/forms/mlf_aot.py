"""A Model Library Format AOT package (microTVM's export), tar or unpacked folder.

Loaded by the runtime's leaf :mod:`tvmrt.runtime.loaders.mlf_aot`: its C code is compiled
for this host once (with a small CRT platform) and the executor is TVM's face
:class:`~tvmrt.runtime.executor.AotModule` over ``lib["default"](dev)``, as for a
host-driven AOT build. Inspection reads ``metadata.json``, the entry function's signature
and the includes of the C code (compiling nothing): the MLF version, executor, interface
API, the inputs and outputs, memory pools and workspace sizes, and what would stop it
from compiling or running here.
"""

from __future__ import annotations

import tempfile
from dataclasses import asdict

from tvmrt.artifact.files import ArtifactFiles
from tvmrt.artifact.forms.base import ArtifactForm, LoadRequest
from tvmrt.artifact.inspect_binary import Found
from tvmrt.artifact.model import LoadedModel
from tvmrt.artifact.report import MlfReport
from tvmrt.error import ModuleLoadError, UnsupportedError
from tvmrt.runtime.executor import AotModule
from tvmrt.runtime.loaders import mlf_aot
from tvmrt.runtime.loaders.dispatch import FileKind, Sniffed
from tvmrt.runtime.module import Module

__all__ = ["FORM"]


def _claims(files: ArtifactFiles, sniffed: Sniffed | None) -> bool:
    return sniffed is not None and sniffed.form is FileKind.MLF_AOT


def _load(request: LoadRequest, lib: Module) -> LoadedModel:
    if request.device.device_type != 1:
        raise UnsupportedError(
            f"an MLF AOT package runs on the CPU (its C code is compiled for this host), "
            f"not on {request.device}"
        )

    def make_module() -> Module:
        executor: Module = lib["default"](request.device)
        return executor

    files = request.files
    if request.debug:  # no graph: the whole model is one call
        dump_root = request.dump_root or tempfile.mkdtemp(prefix="tvmrt_aot_profile_")
        profiler = AotModule(make_module(), (), make_module, dump_root)
        return LoadedModel(profiler, lib, files, "mlf_aot", frozenset(), profiler)
    return LoadedModel(
        AotModule(make_module(), (), make_module), lib, files, "mlf_aot", frozenset()
    )


def _tensor(t: mlf_aot.CrtTensor) -> dict[str, object]:
    out = asdict(t)
    out["shape"] = list(t.shape)  # JSON's form, as --json prints it
    if t.shape_known:
        del out["shape_known"]
    else:
        out["shape_known"] = "not recorded by the package: flat"
    return out


def _inspect(
    files: ArtifactFiles, sniffed: Sniffed | None, found: Found, problems: list[str]
) -> None:
    shown = str(files.lib.parent if files.lib.name == "metadata.json" else files.lib)
    try:
        package = mlf_aot.describe(mlf_aot.read_package(str(files.lib), shown), shown)
    except (ModuleLoadError, OSError) as exc:
        problems.append(str(exc))
        return
    found.aot = True
    found.library.kind = (
        "unpacked Model Library Format folder"
        if files.lib.name == "metadata.json"
        else "Model Library Format tar"
    )
    found.library.mlf = MlfReport(
        package.version, package.model, package.executors, package.targets
    )
    found.library.c_sources = [name for name, _ in package.sources]
    interface = {"c": "c (unpacked: inputs/outputs structs)", "packed": "packed (DLTensor args)"}
    found.library.extra["mlf_aot"] = {
        "interface_api": interface.get(package.interface, package.interface or "unknown"),
        "entry": package.entry or None,
        "inputs": [_tensor(t) for t in package.inputs],
        "outputs": [_tensor(t) for t in package.outputs],
        "workspace_bytes": package.workspace_bytes,
        "constants_bytes": package.constants_bytes,
        "io_bytes": package.io_bytes,
        "memory_pools": package.pools,  # static pools in the code (USMP)
        "workspace_from": (
            "its static pools" if package.pools else "TVMBackendAllocWorkspace (the heap)"
        ),
        "params": "linked into the C code" if package.params_linked else "parameters/ file",
        "runs_as": "C code compiled for this host with tvmrt's CRT platform (cached)",
    }
    problems.extend(package.blockers)


FORM = ArtifactForm(
    "mlf_aot",
    "Model Library Format AOT package (microTVM C code, tar or unpacked folder)",
    _claims,
    _load,
    _inspect,
)

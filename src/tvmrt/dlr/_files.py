"""Which files of a Neo model folder DLR 1.10 uses, and what its ``compiled.meta`` says.

DLR finds files by suffix, not by name (``dlr_common.cc``): one ``*.json`` other than
SageMaker's ``model-shapes.json``, ``hyperparams.json`` and ``version.json`` (the graph),
one ``*.so`` other than ``libdlr.so`` (the kernels; DLR itself is never a model file and
never loaded here), one ``*.params``, at most one ``*.meta`` and one ``*.ro``; several of a
kind are an error naming both. ``model_path`` is a folder, a file, or a colon-separated
list of them. The backend: a ``.params`` selects TVM's graph executor, a ``.ro`` the Relay
VM (checked in that order, as DLR does); TensorFlow, Hexagon and Treelite models are
DLR backends that are not TVM, refused naming the backend.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from tvmrt.binfmt.files import MAX_META_BYTES, read_regular
from tvmrt.error import DLRError

__all__ = [
    "DEVICE_TYPES",
    "ModelFiles",
    "backend_of",
    "device_name",
    "find_files",
    "model_files",
    "read_meta",
    "validate_device",
]

DEVICE_TYPES = {"cpu": 1, "gpu": 2, "opencl": 4}  # DLR's table; "gpu" is kDLCUDA
_AUXILIARY_JSON = ("model-shapes.json", "hyperparams.json", "version.json")
_LIBDLR = "libdlr.so"


@dataclass
class ModelFiles:
    """The files DLR's ``InitModelPath`` picks (empty string: none)."""

    model_json: str = ""
    model_lib: str = ""
    params: str = ""
    metadata: str = ""
    relay_executable: str = ""


def find_files(model_path: str) -> list[str]:
    """Every file of the folders and files in ``model_path`` (colon-separated), sorted per
    folder so that the order does not depend on the file system."""
    files: list[str] = []
    for path in model_path.split(":"):
        if os.path.isdir(path):
            names = sorted(os.listdir(path))
            files.extend(
                os.path.join(path, n) for n in names if not os.path.isdir(os.path.join(path, n))
            )
        else:
            files.append(path)
    return files


def backend_of(files: list[str], model_path: str) -> str:
    """DLR's backend name for the files (``"tvm"``, ``"relayvm"``), or DLRError naming
    the backend tvmrt does not run."""
    lib = False
    for name in files:
        if name.endswith(".params"):
            return "tvm"
        if name.endswith(".ro"):
            return "relayvm"
        if name.endswith(("saved_model.pb", "saved_model.pbtxt")):
            raise DLRError(
                f"{model_path!r} is a TensorFlow 2 SavedModel (DLR's tensorflow backend); "
                "tvmrt's DLR runs TVM models (graph and Relay VM) only"
            )
        if name.endswith("_hexagon_model.so"):
            raise DLRError(
                f"{model_path!r} is a Hexagon model (DLR's hexagon backend); tvmrt's DLR runs "
                "TVM models (graph and Relay VM) only"
            )
        if not name.endswith(_LIBDLR) and name.endswith(".so"):
            lib = True
    if lib:
        raise DLRError(
            f"{model_path!r} holds a library but no .params or .ro: DLR takes it for a "
            "Treelite (decision tree) model, which is not TVM; tvmrt's DLR runs TVM models "
            "(a .so with a graph .json and .params, or a Relay VM .ro with a .meta)"
        )
    raise DLRError(f"Unable to determine backend from path: '{model_path}'.")


def model_files(files: list[str]) -> ModelFiles:
    """DLR's ``InitModelPath``: one file per role, by suffix."""
    found = ModelFiles()

    def take(role: str, kind: str, name: str) -> None:
        if getattr(found, role):
            raise DLRError(f"Found multiple {kind} files: {getattr(found, role)} {name}")
        setattr(found, role, name)

    for name in files:
        base = os.path.basename(name)
        if name.endswith(".json") and base not in _AUXILIARY_JSON:
            take("model_json", "*.json", name)
        elif (not name.endswith(_LIBDLR) and name.endswith(".so")) or name.endswith(".tensorrt"):
            take("model_lib", "model lib", name)
        elif name.endswith(".params"):
            take("params", "*.params", name)
        elif name.endswith(".meta"):
            take("metadata", "*.meta", name)
        elif name.endswith(".ro"):
            take("relay_executable", "*.ro", name)
    return found


def read_meta(path: str) -> dict[str, Any] | None:
    """The ``compiled.meta`` JSON object, or None (no file; DLR ignores unparsable JSON).

    Raises
    ------
    DLRError
        If the file is not a regular file or is over ``MAX_META_BYTES`` (the C API's check).
    """
    if not path:
        return None
    text = read_regular(path, "metadata file", MAX_META_BYTES, DLRError)
    try:
        meta = json.loads(text.decode("utf-8"))
    except (ValueError, RecursionError):
        return None
    return meta if isinstance(meta, dict) else None


def device_name(device_type: int) -> str:
    """DLR's ``GetStringFromDeviceType`` (empty for other types)."""
    for name, code in DEVICE_TYPES.items():
        if code == device_type:
            return name
    return ""


def validate_device(meta: dict[str, Any] | None, device_type: int) -> None:
    """DLR's ``ValidateDeviceTypeIfExists``: the meta's ``TargetDeviceType`` against the
    requested device (no meta or no field: nothing to check)."""
    try:
        wanted = meta["Requirements"]["TargetDeviceType"] if meta is not None else None
    except (KeyError, TypeError):
        return
    if not isinstance(wanted, str):
        return
    required = DEVICE_TYPES.get(wanted, 12)  # DLR: anything else is kDLExtDev
    if required != device_type:
        raise DLRError(
            f'Compiled model requires device type "{device_name(required)}" but user gave '
            f'"{device_name(device_type)}".'
        )

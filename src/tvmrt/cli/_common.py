"""What the run, bench and profile verbs share: artifact options, inputs, outputs."""

from __future__ import annotations

import argparse
import sys
import time
import zipfile
from collections.abc import Callable, Collection, Mapping
from pathlib import Path
from typing import Any

import numpy as np

from tvmrt.artifact import ArtifactFiles, LoadedModel, find_artifact, load_artifact
from tvmrt.artifact.devices import set_kernel_threads
from tvmrt.artifact.output_names import output_aliases
from tvmrt.cli._npz import NpzReader, npz_member
from tvmrt.cli.rpc_flags import remote_device, remote_requested
from tvmrt.error import DeviceUnavailableError, UsageError
from tvmrt.runtime.device import Device, get_device_api
from tvmrt.runtime.device import device as make_device
from tvmrt.runtime.dtype import DataType

__all__ = [
    "UsageError",
    "add_artifact_arguments",
    "add_input_arguments",
    "load",
    "make_inputs",
    "conversions",
]


def add_artifact_arguments(parser: argparse.ArgumentParser) -> None:
    """ARTIFACT plus --graph/--lib/--params, --device and --threads."""
    parser.add_argument(
        "artifact",
        nargs="?",
        help="folder with graph JSON + library + params, a factory library (.so/.tar), or a "
        "Relax VM executable (model.so)",
    )
    parser.add_argument("--graph", metavar="FILE", help="graph JSON (overrides the folder's)")
    parser.add_argument("--lib", metavar="FILE", help="kernel library .so/.tar/.o")
    parser.add_argument("--params", metavar="FILE", help="params blob (TVM's .params format)")
    parser.add_argument(
        "--device",
        default="cpu",
        help="cpu (default), cuda[:N] or opencl[:N]; tvmrt has no other device backends",
    )
    parser.add_argument(
        "--threads",
        type=int,
        metavar="N",
        help="threads for parallel kernels (default: TVM_NUM_THREADS, else one per physical core)",
    )


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """-i/--input and --fill/--seed."""
    parser.add_argument(
        "-i",
        "--input",
        action="append",
        default=[],
        metavar="FILE",
        help="inputs: a .npz (arrays by input name; other members are ignored with a "
        "warning when it gives every input), a .npy for the only input, NAME=FILE.npy, or "
        "NAME=FILE.npz:MEMBER (one member of a .npz, e.g. image=heldout.npz:image); "
        "repeatable",
    )
    parser.add_argument(
        "--fill",
        choices=("zeros", "ones", "random"),
        default="random",
        help="values for inputs not given with -i (default: random)",
    )
    parser.add_argument("--seed", type=int, default=0, help="seed for --fill random (default 0)")
    parser.add_argument(
        "--input-shape",
        action="append",
        default=[],
        metavar="NAME=DIMS",
        help="the shape --fill gives an input with dynamic dimensions (a Relax VM function's "
        "-1 sizes), e.g. x=4x16; repeatable",
    )
    parser.add_argument(
        "--allow-missing-params",
        action="store_true",
        help="run even when weights are missing or the params belong to another model "
        "(missing weights get --fill values: the results are meaningless)",
    )


def load(
    args: argparse.Namespace,
    loader: Callable[[ArtifactFiles, Device], LoadedModel] = load_artifact,
) -> tuple[LoadedModel, float]:
    """Resolve and load the artifact; returns the model and the load time in seconds.

    With ``--rpc``/``--rpc-tracker`` the device is the server's, and ``loader`` loads it
    there.
    """
    if args.artifact is None and args.lib is None:
        raise UsageError("give an ARTIFACT (folder or factory library) or --lib")
    check_named_files(args)
    if args.threads is not None:
        if args.threads < 1:
            raise UsageError(f"--threads must be at least 1, got {args.threads}")
        set_kernel_threads(args.threads)
    remote = remote_requested(args)
    try:
        dev = make_device(args.device)
        if not remote:  # a device nothing here can run on is a bad argument, not a failure
            api = get_device_api(dev)
            if not api.attribute(dev, "exist"):
                reason = getattr(api, "reason", None) or "it does not exist on this machine"
                raise DeviceUnavailableError(f"device {dev} cannot be used: {reason}")
    except (ValueError, DeviceUnavailableError) as exc:
        raise UsageError(str(exc)) from None
    _not_an_artifact(args.artifact)
    files = find_artifact(args.artifact, args.graph, args.lib, args.params)
    start = time.perf_counter()
    if remote:  # --rpc / --rpc-tracker: the server's device; the library goes there
        dev = remote_device(args, dev)
    model = loader(files, dev)
    return model, time.perf_counter() - start


def check_named_files(args: argparse.Namespace) -> None:
    """The files -i, -o and --compare name, checked before the model loads (a typo in one
    costs no load, and no run of a model that takes minutes)."""
    for spec in getattr(args, "input", None) or ():
        name, sep, file = spec.partition("=")
        if sep and npz_member(file, name) is not None:
            continue
        path = Path(file if sep else spec)
        if not path.is_file():
            raise UsageError(f"input file {str(path)!r} does not exist")
    output = getattr(args, "output", None)
    if output and not output.endswith(".npz"):
        raise UsageError(f"-o/--output must name a .npz file, got {output!r}")
    spec = getattr(args, "compare", None)
    if spec:
        name, sep, file = spec.partition("=")
        picked = npz_member(file, name) if sep else None
        path = picked[0] if picked is not None else Path(spec)
        if not path.is_file():
            raise UsageError(f"--compare {spec!r}: the reference file {str(path)!r} does not exist")
        if not zipfile.is_zipfile(path):
            raise UsageError(f"--compare {spec!r}: {str(path)!r} is not a .npz file")


def _not_an_artifact(path: str | None) -> None:
    """Refuse, with what to do instead, a model to compile or one file of a folder."""
    if path is None or not Path(path).is_file():
        return
    file = Path(path)
    suffix = file.suffix.lower()
    if suffix == ".onnx":
        raise UsageError(
            f"{path!r} is an ONNX model, not a compiled artifact: compile it first "
            f"(tvmrt compile {path} -o build/{file.stem}; it needs the compile extra: "
            f"pip install 'tvmrt[compile]'), then run build/{file.stem}"
        )
    if suffix in (".json", ".params"):
        role = "graph JSON" if suffix == ".json" else "params file"
        folder = str(file.parent) if str(file.parent) != "." else "."
        raise UsageError(
            f"{path!r} is a {role}, one file of an artifact: pass the folder that holds it "
            f"({folder!r}), or name each file with --graph, --lib and --params"
        )


def make_inputs(model: LoadedModel, args: argparse.Namespace) -> dict[str, np.ndarray[Any, Any]]:
    """Arrays for every user input: from -i files, else filled per --fill."""
    wanted = model.user_inputs()
    outputs = output_aliases(model.output_names(), [t.name for t in model.executor.outputs])
    given: dict[str, np.ndarray[Any, Any]] = {}
    ignored: dict[str, str] = {}  # member -> its .npz: neither an input nor an output
    for spec in args.input:
        given.update(_read_input_spec(spec, wanted, outputs, ignored))
    dynamic = {n for n, (_, dtype) in wanted.items() if not dtype}
    unknown = sorted(k for k in given if k not in wanted and k.rpartition(".")[0] not in dynamic)
    if unknown:
        raise UsageError(
            f"input(s) {unknown} are not inputs of the model; inputs are {sorted(wanted)}"
        )
    _ignore_members(ignored, wanted, given)
    _check_weights(model, given, args)
    rng = np.random.default_rng(args.seed)
    shapes = _fill_shapes(getattr(args, "input_shape", []), wanted)
    out = {}
    for name, (shape, dtype) in wanted.items():
        if not dtype:  # shape and dtype come with the data (a Relay VM function)
            parts = {k: v for k, v in given.items() if k == name or k.startswith(f"{name}.")}
            if not parts:
                raise UsageError(f"input {name!r} has no static shape or dtype: give it with -i")
            out.update(parts)
            continue
        if name in given:
            arr = given[name]
            if not _fits(arr.shape, shape):
                raise UsageError(
                    f"input {name!r} has shape {arr.shape}, the model expects {shape_text(shape)}"
                )
            out[name] = arr
        elif -1 in shape:  # a dynamic dimension: --fill needs its size
            if name not in shapes:
                example = "x".join("4" if d == -1 else str(d) for d in shape) or "1"
                raise UsageError(
                    f"input {name!r} has dynamic dimensions (shape {shape_text(shape)}): give "
                    f"its array with -i, or the shape to fill with --input-shape "
                    f"{name}={example}"
                )
            out[name] = _fill(shapes[name], dtype, args.fill, rng)
        else:
            out[name] = _fill(shape, dtype, args.fill, rng)
    return out


def shape_text(shape: tuple[int, ...]) -> str:
    """``(?, 16)``: a shape with its dynamic dimensions (-1) as ``?``."""
    dims = ["?" if d == -1 else str(d) for d in shape]
    return f"({', '.join(dims)}{',' if len(dims) == 1 else ''})"


def _fits(got: tuple[int, ...], want: tuple[int, ...]) -> bool:
    """Whether shape ``got`` is ``want``, a -1 of ``want`` matching any size."""
    return len(got) == len(want) and all(w in (-1, g) for g, w in zip(got, want, strict=True))


def _fill_shapes(
    specs: list[str], wanted: Mapping[str, tuple[tuple[int, ...], str]]
) -> dict[str, tuple[int, ...]]:
    """``--input-shape NAME=4x16`` as name -> shape, each checked against the input."""
    out = {}
    for spec in specs:
        name, sep, dims = spec.partition("=")
        try:
            shape = tuple(int(d) for d in dims.split("x")) if dims else ()
        except ValueError:
            shape = (-2,)
        if not sep or not name or any(d < 0 for d in shape):
            raise UsageError(f"--input-shape {spec!r}: expected NAME=DIMS, e.g. x=4x16")
        if name not in wanted:
            raise UsageError(
                f"--input-shape {spec!r}: the model has no input {name!r}; inputs are "
                f"{sorted(wanted)}"
            )
        want, dtype = wanted[name]
        if not dtype:  # nothing to fill from (a Relay VM function, compiled-mode Relax)
            raise UsageError(
                f"--input-shape {spec!r}: input {name!r} has no static shape or dtype: give "
                "its array with -i"
            )
        if not _fits(shape, want):
            raise UsageError(f"--input-shape {spec!r}: input {name!r} has shape {shape_text(want)}")
        out[name] = shape
    return out


def _check_weights(
    model: LoadedModel, given: Mapping[str, object], args: argparse.Namespace
) -> None:
    """Refuse missing or foreign weights unless --allow-missing-params (then warn)."""
    problems = model.executor.weight_problems(set(given))
    if not problems:
        return
    if not getattr(args, "allow_missing_params", False):
        raise UsageError(
            "the weights do not match the model: "
            + "; ".join(problems)
            + ". Give the model's params (--params FILE), or pass --allow-missing-params "
            "to run anyway"
        )
    for problem in problems:
        print(f"warning: {problem}; running anyway (--allow-missing-params)", file=sys.stderr)


def conversions(model: LoadedModel, inputs: Mapping[str, np.ndarray[Any, Any]]) -> list[str]:
    """``input NAME: float64 converted to float32`` per input whose dtype set_input changes."""
    wanted = model.user_inputs()
    out = []
    for name, arr in inputs.items():
        if name not in wanted or not wanted[name][1]:
            continue
        dtype = wanted[name][1]
        if arr.dtype != DataType(dtype).numpy_dtype:
            out.append(f"input {name}: {arr.dtype} converted to {dtype}")
    return out


def _ignore_members(
    ignored: Mapping[str, str],
    wanted: Mapping[str, tuple[tuple[int, ...], str]],
    given: Collection[str],
) -> None:
    """Warn about .npz members that are neither inputs nor outputs, or refuse them.

    They are ignored (a data set's labels beside its images) when every input has its
    array; while an input is left to --fill, they are more likely a misspelt input name.
    """
    if not ignored:
        return
    missing = sorted(
        n for n in wanted if n not in given and not any(k.startswith(f"{n}.") for k in given)
    )
    if missing:
        raise UsageError(
            f"input(s) {sorted(ignored)} in {sorted(set(ignored.values()))} are not inputs of "
            f"the model, and input(s) {missing} have no array; inputs are {sorted(wanted)} "
            "(pick a member with -i NAME=FILE.npz:MEMBER)"
        )
    for key, path in ignored.items():
        print(
            f"warning: {path!r}: {key!r} is neither an input nor an output of the model; ignored",
            file=sys.stderr,
        )


def _read_input_spec(
    spec: str,
    wanted: Mapping[str, tuple[tuple[int, ...], str]],
    outputs: Collection[str] = (),
    ignored: dict[str, str] | None = None,
) -> dict[str, np.ndarray[Any, Any]]:
    name, sep, file = spec.partition("=")
    picked = npz_member(file, name) if sep else None
    if picked is not None:
        path, member = picked
        with NpzReader(path) as npz:
            if member not in npz.keys:
                raise UsageError(f"{spec!r}: {str(path)!r} has no member {member!r}: {npz.keys}")
            return {name: npz.array(member)}
    path = Path(file if sep else spec)
    if not path.is_file():
        raise UsageError(f"input file {str(path)!r} does not exist")
    if zipfile.is_zipfile(path):
        return _read_npz_inputs(path, wanted, outputs, {} if ignored is None else ignored)
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise UsageError(f"cannot read input file {str(path)!r}: {exc}") from None
    if sep:
        return {name: loaded}
    if len(wanted) != 1:
        raise UsageError(
            f"{str(path)!r} holds one array but the model has {len(wanted)} inputs "
            f"({sorted(wanted)}); use NAME=FILE.npy or a .npz"
        )
    return {next(iter(wanted)): loaded}


def _read_npz_inputs(
    path: Path,
    wanted: Mapping[str, tuple[tuple[int, ...], str]],
    outputs: Collection[str],
    ignored: dict[str, str],
) -> dict[str, np.ndarray[Any, Any]]:
    """The model's inputs from a .npz: every header is checked first, only inputs are read.

    Members named as outputs of the model (a reference run's inputs and outputs in one
    file) are left unread with a warning; any other name goes into ``ignored`` (member ->
    file), for :func:`_ignore_members` to judge once every ``-i`` is read.
    """
    # a Relay VM input has no static shape or dtype; a tuple input comes as NAME.0, NAME.1
    dynamic = {n for n, (_, dtype) in wanted.items() if not dtype}

    def is_input(key: str) -> bool:
        return key in wanted or key.rpartition(".")[0] in dynamic

    with NpzReader(path) as npz:
        ignored.update((k, str(path)) for k in npz.keys if not is_input(k) and k not in outputs)
        for key in npz.keys:
            if key in ignored:
                continue
            if not is_input(key):
                print(
                    f"warning: {str(path)!r}: {key!r} is an output of the model, not an input; "
                    f"not read (compare outputs with --compare {path})",
                    file=sys.stderr,
                )
                continue
            if key not in wanted or not wanted[key][1]:
                continue  # the data gives the shape
            shape = npz.header(key)[0]
            if not _fits(shape, tuple(wanted[key][0])):
                raise UsageError(
                    f"input {key!r} has shape {shape}, the model expects "
                    f"{shape_text(tuple(wanted[key][0]))}"
                )
        return {key: npz.array(key) for key in npz.keys if is_input(key)}


def _fill(
    shape: tuple[int, ...], dtype: str, how: str, rng: np.random.Generator
) -> np.ndarray[Any, Any]:
    np_dtype = DataType(dtype).numpy_dtype
    if how == "zeros":
        return np.zeros(shape, np_dtype)
    if how == "ones":
        return np.ones(shape, np_dtype)
    if np_dtype.kind == "f":
        return rng.standard_normal(shape).astype(np_dtype)
    if np_dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(np_dtype)
    info = np.iinfo(np_dtype)
    low, high = max(int(info.min), -100), min(int(info.max), 100)
    return rng.integers(low, high, shape, endpoint=True).astype(np_dtype)


def describe_array(arr: np.ndarray[Any, Any], limit: int = 5) -> str:
    """``shape dtype [v0, v1, ...]`` for summaries."""
    flat = arr.reshape(-1)
    values = ", ".join(f"{v:.6g}" if arr.dtype.kind == "f" else str(v) for v in flat[:limit])
    more = ", ..." if flat.size > limit else ""
    return f"{tuple(arr.shape)} {arr.dtype} [{values}{more}]"

"""What a Model Library Format AOT package says about itself, read from its files.

:func:`describe` reads ``metadata.json`` (names, dtypes and byte sizes of the inputs and
outputs, workspace, constant and I/O sizes), the Relay source (input shapes, and output
shapes where it gives ``@main``'s return type), the ``c`` interface's header (the order of
the struct fields), the C metadata a ``packed`` build carries (output shapes) and the entry
function's signature in the C code; nothing is
compiled. ``blockers`` says what would keep the code from compiling or running on this
host (no C source, an entry with external pools, Cortex-M headers or intrinsics).
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import PurePosixPath
from typing import Any

from tvmrt.error import ModuleLoadError, TVMError
from tvmrt.runtime.dtype import DataType
from tvmrt.runtime.loaders import link

__all__ = ["CrtTensor", "MlfAotPackage", "describe"]

_STANDARD_HEADERS = frozenset(
    {
        *("assert.h", "ctype.h", "errno.h", "float.h", "inttypes.h", "limits.h", "math.h"),
        *("stdarg.h", "stdbool.h", "stddef.h", "stdint.h", "stdio.h", "stdlib.h", "string.h"),
    }
)
_PROVIDED = (  # tvm/runtime/ and tvm/runtime/crt/: tvmrt's include folder has them
    *("c_runtime_api.h", "c_backend_api.h", "metadata_types.h"),
    *("error_codes.h", "platform.h", "stack_allocator.h", "module.h", "func_registry.h"),
)
_KNOWN_FOREIGN = {
    "arm_math.h": "CMSIS-DSP (Arm Cortex-M)",
    "arm_nnfunctions.h": "CMSIS-NN (Arm Cortex-M)",
    "arm_nn_types.h": "CMSIS-NN (Arm Cortex-M)",
    "arm_acle.h": "Arm C language extensions",
    "esp_attr.h": "ESP-IDF (Espressif)",
}


@dataclass(frozen=True)
class CrtTensor:
    """One input or output: ``shape`` is flat (``size // itemsize``) when the package does
    not record it (``shape_known`` False: MLF records no output shapes)."""

    name: str
    shape: tuple[int, ...]
    dtype: str
    size: int
    shape_known: bool = True
    # what the Relay source (inputs) or the C metadata (outputs) says, where its dtype
    # contradicts metadata.json's: (shape, dtype, where); refused by _size_problems
    contradicted: tuple[tuple[int, ...], str, str] | None = None


@dataclass
class MlfAotPackage:
    """What an MLF AOT package says about itself (nothing compiled or run)."""

    shown: str
    version: Any
    model: str
    executors: list[str]
    targets: list[str]
    interface: str  # "c", "packed", or "" when no entry function was found
    entry: str
    inputs: list[CrtTensor]
    outputs: list[CrtTensor]
    workspace_bytes: int | None
    constants_bytes: int | None
    io_bytes: int | None
    pools: list[str]
    params_linked: bool
    sources: list[tuple[str, bytes]] = field(repr=False, default_factory=list)
    headers: list[tuple[str, bytes]] = field(repr=False, default_factory=list)
    blockers: list[str] = field(default_factory=list)

    def to_json(self) -> str:
        """What the executor needs: model, interface, entry, inputs and outputs."""
        return json.dumps(
            {
                "model": self.model,
                "interface": self.interface,
                "entry": self.entry,
                "inputs": [asdict(t) for t in self.inputs],
                "outputs": [asdict(t) for t in self.outputs],
            }
        )


def _main_entry(meta: dict[str, Any]) -> tuple[Any, str, dict[str, Any]]:
    modules = meta.get("modules")
    if isinstance(modules, dict) and modules:  # version >= 5 with several models: the first
        model = str(next(iter(modules)))
        entry = modules[model] if isinstance(modules[model], dict) else {}
    else:
        model = str(meta.get("model_name", "default"))
        entry = meta
    return meta.get("version"), model, entry


def _relay_params(relay: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{name: (shape, dtype)}`` of ``@main``'s parameters in the Relay source."""
    head = re.search(r"def @main\((.*?)\)\s*(->|\{)", relay, re.S)
    if head is None:
        return {}
    out = {}
    for match in re.finditer(r"%([\w.:/-]+)\s*:\s*Tensor\[\(([^)]*)\),\s*(\w+)\]", head.group(1)):
        dims = [d.strip() for d in match.group(2).split(",") if d.strip()]
        if all(d.isdigit() for d in dims):
            out[match.group(1)] = (tuple(int(d) for d in dims), match.group(3))
    return out


_TENSOR_TYPE = re.compile(r"Tensor\[\(([^)]*)\),\s*(\w+)\]")


def _relay_returns(relay: str) -> list[tuple[tuple[int, ...], str]] | None:
    """The shapes and dtypes ``@main`` returns, in order, where the Relay source gives its
    return type (a type-inferred module's text: ``def @main(...) -> (Tensor[...], ...) {``,
    as tvmc and the frontends write it); None where it does not or a size is symbolic."""
    head = re.search(r"def @main\((.*?)\)\s*->\s*([^{]*)\{", relay, re.S)
    if head is None:
        return None
    out = []
    for match in _TENSOR_TYPE.finditer(head.group(2)):
        dims = [d.strip() for d in match.group(1).split(",") if d.strip()]
        if not all(d.isdigit() for d in dims):
            return None
        out.append((tuple(int(d) for d in dims), match.group(2)))
    return out or None


def _c_metadata_shapes(code: str, what: str) -> dict[str, tuple[tuple[int, ...], str]]:
    """``{name: (shape, dtype)}`` of the ``TVMMetadata`` a packed-interface build carries
    (``kTvmgenMetadata_<what>``: names, shapes and DLPack dtypes, as C initializers)."""
    shapes = {
        int(m.group(1)): tuple(int(d) for d in re.findall(r"(-?\d+)L", m.group(2)))
        for m in re.finditer(
            r"kTvmgenMetadata_" + what + r"_(\d+)_shape\[\d*\]\s*=\s*\{([^}]*)\}", code
        )
    }
    block = re.search(r"kTvmgenMetadata_" + what + r"\[\d*\]\s*=\s*\{(.*?)\};", code, re.S)
    if block is None:
        return {}
    out = {}
    entries = re.findall(
        r'"((?:[^"\\]|\\.)*)"\s*/\* name\*/.*?\{(\d+), (\d+), (\d+)\}', block.group(1), re.S
    )
    for index, (name, code_, bits, lanes) in enumerate(entries):
        if index in shapes:
            try:
                dtype = str(DataType.from_code(int(code_), int(bits), int(lanes)))
            except TVMError:  # not a dtype TVM writes: left flat
                continue
            out[name] = (shapes[index], dtype)
    return out


def _struct_fields(headers: list[tuple[str, bytes]], name: str) -> list[str] | None:
    for _, data in headers:
        text = data.decode("utf-8", errors="replace")
        found = re.search(r"struct\s+" + re.escape(name) + r"\s*\{(.*?)\}", text, re.S)
        if found:
            return re.findall(r"void\s*\*\s*(\w+)\s*;", found.group(1))
    return None


def _natural(name: str) -> tuple[Any, ...]:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", name))


def _tensors(
    table: Any,
    order: list[str] | None,
    shapes: dict[str, tuple[tuple[int, ...], str]],
    where: str,
) -> list[CrtTensor]:
    if not isinstance(table, dict):
        return []
    names = list(table)
    if order is not None:  # the c interface's struct: the ABI order (names sanitized)
        by_clean = {re.sub(r"\W", "_", n): n for n in names}
        names = [by_clean.get(f, f) for f in order if by_clean.get(f, f) in table]
    elif shapes and all(n in shapes for n in names):
        names = [n for n in shapes if n in table]  # the Relay order
    else:
        names.sort(key=_natural)
    out = []
    for name in names:
        info = table[name] if isinstance(table[name], dict) else {}
        dtype, size = str(info.get("dtype", "")), int(info.get("size", -1))
        try:
            itemsize = DataType(dtype).itemsize
        except TVMError:  # an unknown dtype is reported by _blockers
            itemsize = 0
        known = shapes.get(name)
        if known is not None and known[1] == dtype:
            out.append(CrtTensor(name, known[0], dtype, size))
        else:
            count = size // itemsize if itemsize and size >= 0 else 0
            against = None if known is None else (known[0], known[1], where)
            out.append(CrtTensor(name, (count,), dtype, size, False, against))
    return out


def _entry_signature(
    sources: list[tuple[str, bytes]], model: str, declared: bool = False
) -> tuple[str, str]:
    """``(interface, entry name)`` from the entry function's definition in the source (or,
    ``declared``, its declaration in a header)."""
    prefix = f"tvmgen_{model}"
    end = ";" if declared else r"\{"
    for suffix in ("_run", "_run_model"):
        name = prefix + suffix
        pattern = re.compile(r"int32_t\s+" + re.escape(name) + r"\s*\(([^)]*)\)\s*" + end, re.S)
        for _, data in sources:
            found = pattern.search(data.decode("utf-8", errors="replace"))
            if found is None:
                continue
            params = [p.strip() for p in found.group(1).split(",") if p.strip()]
            if len(params) == 2 and all(p.startswith("struct ") for p in params):
                return "c", name
            if len(params) == 6 and "resource_handle" in params[-1]:
                return "packed", name
            return f"unsupported ({', '.join(params)})", name
    return "", ""


def describe(files: dict[str, bytes], shown: str, *, micro: bool = False) -> MlfAotPackage:
    """What the package's members say: model, interface, inputs, outputs, sizes, and what
    keeps it from being compiled and run here (``blockers``), or, with ``micro``, built into
    firmware for a Cortex-M board (:mod:`tvmrt.micro`: object code and Arm intrinsics are
    fine there).

    Raises
    ------
    ModuleLoadError
        If ``metadata.json`` is missing or not a JSON object.
    """
    if "metadata.json" not in files:
        raise ModuleLoadError(f"cannot load {shown!r}: it has no metadata.json")
    try:
        meta = json.loads(files["metadata.json"])
    except (ValueError, UnicodeDecodeError) as exc:
        raise ModuleLoadError(
            f"cannot load {shown!r}: its metadata.json is not JSON: {exc}"
        ) from exc
    except RecursionError:
        raise ModuleLoadError(
            f"cannot load {shown!r}: its metadata.json nests arrays or objects too deeply"
        ) from None
    if not isinstance(meta, dict):
        raise ModuleLoadError(f"cannot load {shown!r}: its metadata.json is not a JSON object")
    version, model, entry = _main_entry(meta)
    targets = entry.get("target", [])
    targets = list(targets.values()) if isinstance(targets, dict) else targets
    targets = [str(t) for t in targets] if isinstance(targets, list) else [str(targets)]
    executors = entry.get("executors", [])
    executors = [str(e) for e in executors] if isinstance(executors, list) else []
    functions = entry.get("memory", {}) if isinstance(entry.get("memory"), dict) else {}
    mains = functions.get("functions", {}).get("main", []) if functions else []
    main = mains[0] if isinstance(mains, list) and mains and isinstance(mains[0], dict) else {}
    sources = [
        (n, d)
        for n, d in sorted(files.items())
        if n.startswith("codegen/host/src/") and link.is_source(n)
    ]
    headers = [(n, d) for n, d in sorted(files.items()) if n.startswith("codegen/host/include/")]
    relay = files.get(f"src/{model}.relay", b"").decode("utf-8", errors="replace")
    shapes = _relay_params(relay)
    interface, entry_name = _entry_signature(sources, model)
    if not sources and micro:  # object code (an llvm build): the c interface's header
        interface, entry_name = _entry_signature(headers, model, declared=True)
    graph = f"executor-config/graph/{model}.graph"
    if micro and not interface and "graph" in executors and graph in files:
        interface = "graph"  # tvmrt.micro.graph_plan turns the graph into C
    ordered = interface == "c"
    inputs = _tensors(
        main.get("inputs"),
        _struct_fields(headers, f"tvmgen_{model}_inputs") if ordered else None,
        shapes,
        f"its Relay source (src/{model}.relay)",
    )
    code = b"\n".join(d for _, d in sources).decode("utf-8", errors="replace")
    table, carried = main.get("outputs"), _c_metadata_shapes(code, "outputs")
    where = "its C metadata (kTvmgenMetadata_outputs)"
    returns = _relay_returns(relay)
    if not carried and returns is not None:  # the c interface carries none: the Relay type
        carried = {f"output{i}": r for i, r in enumerate(returns)}
        where = f"its Relay source's return type (src/{model}.relay)"
    if isinstance(table, dict) and len(carried) == len(table) and set(carried) != set(table):
        carried = dict(zip(sorted(table, key=_natural), carried.values(), strict=True))
    outputs = _tensors(
        table,
        _struct_fields(headers, f"tvmgen_{model}_outputs") if ordered else None,
        carried,
        where,
    )
    pools = sorted(set(re.findall(r"static\s+(?:struct\s+)?(global_\w*workspace)\b", code)))
    package = MlfAotPackage(
        shown,
        version,
        model,
        executors,
        targets,
        interface,
        entry_name,
        inputs,
        outputs,
        _int(main.get("workspace_size_bytes")),
        _int(main.get("constants_size_bytes")),
        _int(main.get("io_size_bytes")),
        pools,
        not any(n.startswith("parameters/") for n in files)
        or "global_const_workspace" in code
        or bool(
            re.search(r"static\s+const\s+\w+\s+__attribute__\(\(section\(\"\.rodata\.tvm", code)
        ),
        sources,
        headers,
    )
    package.blockers = _blockers(package, files, code, micro)
    return package


def _int(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) else None


_MAX_TENSOR_BYTES = 1 << 32  # an input or output of a microcontroller model: far below


def _header_sizes(headers: list[tuple[str, bytes]], model: str) -> dict[str, int]:
    """``{NAME: bytes}`` of the ``c`` interface header's ``TVMGEN_<MODEL>_<NAME>_SIZE``."""
    prefix = "TVMGEN_" + re.sub(r"\W", "_", model).upper() + "_"
    out = {}
    for _, data in headers:
        text = data.decode("utf-8", errors="replace")
        for name, size in re.findall(r"#define\s+(\w+)_SIZE\s+(\d+)", text):
            if name.startswith(prefix) and name != f"{prefix}WORKSPACE":
                out[name[len(prefix) :]] = int(size)
    return out


def _size_problems(package: MlfAotPackage, what: str) -> list[str]:
    """The code writes as many bytes as it was compiled for: every size must agree with
    the shape, and with the header's, or the buffers tvmrt allocates would be overrun."""
    out = []
    declared = _header_sizes(package.headers, package.model)
    for tensor in (*package.inputs, *package.outputs):
        if tensor.contradicted is not None:  # the code was built for the other one
            shape, dtype, where = tensor.contradicted
            out.append(
                f"{what}: {tensor.name!r} is {tensor.dtype} in metadata.json, but {dtype} of "
                f"shape {shape} in {where}"
            )
            continue
        try:
            itemsize = DataType(tensor.dtype).itemsize
        except TVMError:
            out.append(f"{what}: {tensor.name!r} has dtype {tensor.dtype!r}, not a TVM dtype")
            continue
        if not 0 <= tensor.size <= _MAX_TENSOR_BYTES or tensor.size % max(itemsize, 1):
            out.append(
                f"{what}: {tensor.name!r} is {tensor.size} bytes in metadata.json, not a "
                f"whole number of {tensor.dtype} elements of at most {_MAX_TENSOR_BYTES} bytes"
            )
            continue
        count = 1
        for dim in tensor.shape:
            count *= dim
        if tensor.shape_known and count * itemsize != tensor.size:
            out.append(
                f"{what}: {tensor.name!r} is {tensor.size} bytes in metadata.json, but its "
                f"shape {tensor.shape} of {tensor.dtype} makes {count * itemsize}"
            )
        header = declared.get(re.sub(r"\W", "_", tensor.name).upper())
        if header is not None and header != tensor.size:
            out.append(
                f"{what}: {tensor.name!r} is {tensor.size} bytes in metadata.json, but the "
                f"code was compiled for {header} (tvmgen_{package.model}.h)"
            )
    return out


def _foreign(header: str) -> str:
    base = PurePosixPath(header).name
    if base in _KNOWN_FOREIGN:
        return _KNOWN_FOREIGN[base]
    if base.startswith("esp_") or header.startswith(("freertos/", "driver/", "soc/")):
        return "ESP-IDF (Espressif)"
    if base.startswith(("stm32", "nrf", "fsl_")):
        return "a microcontroller vendor's SDK"
    return "not part of the package or of standard C"


def _blockers(
    package: MlfAotPackage, files: dict[str, bytes], code: str, micro: bool = False
) -> list[str]:
    what = f"{package.shown!r} (an MLF AOT package)"
    out = []
    objects = [n for n in files if n.startswith("codegen/host/lib/") and n.endswith(".o")]
    graph = micro and package.interface == "graph"
    if "aot" not in package.executors and not graph:
        out.append(f"{what} records executors {package.executors}, not aot")
    if not package.sources and micro and objects:
        pass  # object code: tvmrt.micro finds its entry in the objects' symbols
    elif not package.sources:
        out.append(
            f"{what} holds no C source under codegen/host/src/"
            + (f" (only compiled objects: {', '.join(objects)})" if objects else "")
            + "; tvmrt compiles an AOT package's C code for this host"
        )
    elif not package.interface:
        out.append(f"{what}: no entry function tvmgen_{package.model}_run in its C code")
    elif package.interface.startswith("unsupported"):
        out.append(
            f"{what}: its entry {package.entry} takes {package.interface[len('unsupported ') :]}; "
            "tvmrt calls the c interface (inputs, outputs structs) and the packed interface "
            "(external workspace pools or devices are not provided)"
        )
    if not graph and (
        not package.outputs
        or any(t.size < 0 or (t.shape == (0,) and t.size) for t in package.outputs)
    ):
        out.append(f"{what}: metadata.json records no output dtypes and sizes for main")
    out.extend(_size_problems(package, what))
    for header in sorted(set(re.findall(r"#include\s*[<\"]([^>\"]+)[>\"]", code))):
        base = PurePosixPath(header).name
        if header.startswith("tvm/runtime/") and base in _PROVIDED:
            continue
        if base in _STANDARD_HEADERS or f"codegen/host/include/{base}" in files:
            continue
        where = "tvmrt's micro runtime does not provide it" if micro else "this host lacks it"
        out.append(f"{what}: its C code includes <{header}> ({_foreign(header)}); {where}")
    if micro:
        return out
    for intrinsic in sorted(
        set(
            re.findall(
                r"\b(__(?:SMLAD|SXTB16|SSUB8|QADD8|SSAT|USAT)\w*|__builtin_arm_\w+)\s*\(", code
            )
        )
    ):
        out.append(f"{what}: its C code calls {intrinsic}, an Arm Cortex-M intrinsic")
    return out

"""The Open Inference Protocol (KServe v2) on the wire: tensors in JSON and binary form.

A request body is either JSON (``{"inputs": [{"name", "shape", "datatype", "data"}]}``) or,
with the binary-tensor extension, a JSON header of ``Inference-Header-Content-Length`` bytes
followed by the raw bytes of every input whose ``parameters.binary_data_size`` is set, in
the order of ``inputs``. Responses mirror this: outputs asked for with
``parameters.binary_data`` (or every output, with the request-level
``parameters.binary_data_output``) go after the JSON header as raw little-endian bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tvmrt.error import TVMError
from tvmrt.serve.jsondata import SPARE_VALUES, array_from_json, count_values, json_data, short

__all__ = [
    "ServeError",
    "BadRequestError",
    "NotFoundError",
    "OverloadedError",
    "DeadlineError",
    "TensorSpec",
    "InferRequest",
    "DATATYPES",
    "datatype_of",
    "parse_infer_request",
    "encode_infer_response",
    "HEADER_LENGTH",
    "max_values",
]

HEADER_LENGTH = "inference-header-content-length"


class ServeError(TVMError):
    """A request the server answers with an HTTP error; ``status`` is the code."""

    status = 500
    retry_after: float | None = None


class BadRequestError(ServeError, ValueError):
    """A malformed or mismatched request (HTTP 400, or 413 for an oversized body)."""

    status = 400

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class NotFoundError(ServeError, LookupError):
    """An unknown model or route (HTTP 404)."""

    status = 404


class OverloadedError(ServeError):
    """The model's queue is full (HTTP 503 with ``Retry-After``)."""

    status = 503

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeadlineError(ServeError, TimeoutError):
    """The request did not finish within the per-request timeout (HTTP 504)."""

    status = 504


# v2 datatype <-> numpy dtype (little-endian, as the binary extension requires)
DATATYPES: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype("bool"),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
}
_BY_NUMPY = {dt.str.lstrip("<|="): name for name, dt in DATATYPES.items()}


def datatype_of(dtype: str) -> str:
    """The v2 datatype for a tvm/numpy dtype string (``float32`` -> ``FP32``)."""
    if dtype == "bfloat16":
        return "BF16"
    try:
        key = np.dtype(dtype).str.lstrip("<|=>")
    except TypeError:
        key = ""
    if key not in _BY_NUMPY:
        raise BadRequestError(f"dtype {dtype!r} has no Open Inference Protocol datatype")
    return _BY_NUMPY[key]


@dataclass(frozen=True)
class TensorSpec:
    """One input or output of a served model.

    A dimension of -1 is given by each request (a VM model's dynamic dimension;
    :mod:`tvmrt.serve.dynamic`).
    """

    name: str
    shape: tuple[int, ...]
    datatype: str
    max_batch: int = 0  # > 0: dynamic batching; requests send 1..max_batch rows

    @property
    def dynamic(self) -> bool:
        """Whether requests give part of the shape."""
        return -1 in self.shape

    def metadata(self) -> dict[str, Any]:
        """The protocol's ``{"name", "datatype", "shape"}`` (-1: a size the request gives)."""
        shape = [-1, *self.shape[1:]] if self.max_batch else list(self.shape)
        return {"name": self.name, "datatype": self.datatype, "shape": shape}


@dataclass
class InferRequest:
    """A parsed infer request: arrays by input name and how to return each output."""

    id: str | None
    inputs: dict[str, np.ndarray[Any, Any]]
    outputs: list[str] | None = None  # None: every output
    binary_outputs: set[str] = field(default_factory=set)
    binary_default: bool = False


_UNBOUNDED = 1 << 62


def _fail(message: str) -> BadRequestError:
    return BadRequestError(message)


def max_values(inputs: Sequence[TensorSpec]) -> int:
    """The most JSON values a request to a model with ``inputs`` may hold."""
    total = 0
    for spec in inputs:
        if spec.dynamic:  # sizes come with the request: the JSON byte limit bounds them
            return _UNBOUNDED
        rows = spec.max_batch or 1
        total += rows * math.prod(spec.shape)
    return total + SPARE_VALUES


def parse_infer_request(
    body: bytes | bytearray,
    headers: Mapping[str, str],
    inputs: Sequence[TensorSpec],
    outputs: Sequence[str] | None,
    max_json_bytes: int | None = None,
    max_tensor_bytes: int | None = None,
    shown_outputs: Sequence[str] | None = None,
) -> InferRequest:
    """Parse and validate a request against the model's inputs and outputs.

    ``outputs`` are every name an output may be asked for by; ``shown_outputs`` the names
    an error message lists (default: ``outputs``).

    The JSON part is refused unparsed (413) past ``max_json_bytes``, and (400) when it
    could hold more values than the model's inputs take (:func:`max_values`), so parsing
    costs memory and time in proportion to the model. An input with dynamic dimensions is
    refused when its shape, zero sizes counted as one, would take more than
    ``max_tensor_bytes``. ``outputs`` None: any output name (a model whose outputs are
    known only after it ran checks them then).

    Raises
    ------
    BadRequestError
        Naming the tensor and what was expected: unknown or missing input, wrong shape or
        datatype, a value out of the datatype's range, bad data, malformed JSON or binary
        layout, unknown output. Values the client sent are echoed cut short.
    """
    header_len = headers.get(HEADER_LENGTH)
    if header_len is not None:
        try:
            n = int(header_len)
        except ValueError:
            raise _fail(f"{HEADER_LENGTH} must be an integer, got {short(header_len)}") from None
        if not 0 <= n <= len(body):
            raise _fail(f"{HEADER_LENGTH} is {n} but the body has only {len(body)} bytes")
        json_part, binary = body[:n], memoryview(body)[n:]
    else:
        json_part, binary = body, memoryview(b"")
    if max_json_bytes is not None and len(json_part) > max_json_bytes:
        raise BadRequestError(
            f"the request's JSON is {len(json_part)} bytes, over the limit of "
            f"{max_json_bytes} bytes (send large tensors as binary data)",
            status=413,
        )
    limit = max_values(inputs)
    found = count_values(json_part)
    if found > limit:
        raise _fail(
            f"the request's JSON may hold {found} values (commas and brackets), more than "
            f"the {limit} allowed: the model's input elements plus {SPARE_VALUES}"
        )
    try:
        doc = json.loads(json_part)
    except RecursionError:
        raise _fail("request body is not valid JSON: nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError is a ValueError
        raise _fail(f"request body is not valid JSON: {short(str(exc), 200)}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("inputs"), list):
        raise _fail('request JSON must be an object with an "inputs" list')
    specs = {s.name: s for s in inputs}
    arrays: dict[str, np.ndarray[Any, Any]] = {}
    offset = 0
    for item in doc["inputs"]:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _fail('every element of "inputs" must be an object with a "name"')
        name = item["name"]
        spec = specs.get(name)
        if spec is None:
            raise _fail(f"unknown input {short(name)}; the model's inputs are {sorted(specs)}")
        if name in arrays:
            raise _fail(f"input {name!r} is given twice")
        shape, datatype = _check_header(item, spec, max_tensor_bytes)
        params = item.get("parameters") or {}
        size = params.get("binary_data_size") if isinstance(params, dict) else None
        if size is not None:
            if type(size) is not int or size < 0:
                raise _fail(
                    f"input {name!r}: binary_data_size must be a byte count, got {short(size)}"
                )
            if offset + size > len(binary):
                raise _fail(
                    f"input {name!r}: binary_data_size {size} runs past the "
                    f"{len(binary)} binary bytes of the body"
                )
            arrays[name] = _from_binary(binary[offset : offset + size], spec, datatype, shape)
            offset += size
        else:
            if "data" not in item:
                raise _fail(f'input {name!r} has neither "data" nor binary_data_size')
            arrays[name] = _from_json(item["data"], spec, datatype, shape)
    if offset != len(binary):
        raise _fail(f"the body has {len(binary) - offset} binary bytes no input claims")
    if any(s.max_batch for s in inputs) and len({a.shape[0] for a in arrays.values()}) > 1:
        sizes = {n: a.shape[0] for n, a in arrays.items()}
        raise _fail(f"inputs have different batch sizes {sizes}; they must agree")
    missing = sorted(set(specs) - set(arrays))
    if missing:
        raise _fail(f"missing input(s) {missing}; the model's inputs are {sorted(specs)}")
    request = InferRequest(doc.get("id") if isinstance(doc.get("id"), str) else None, arrays)
    top = doc.get("parameters") or {}
    request.binary_default = bool(isinstance(top, dict) and top.get("binary_data_output"))
    if "outputs" in doc:
        if not isinstance(doc["outputs"], list):
            raise _fail('"outputs" must be a list of {"name": ...} objects')
        request.outputs = []
        for out in doc["outputs"]:
            oname = out.get("name") if isinstance(out, dict) else None
            if not isinstance(oname, str) or (outputs is not None and oname not in outputs):
                shown = list(outputs or []) if shown_outputs is None else list(shown_outputs)
                raise _fail(f"unknown output {short(oname)}; the model's outputs are {shown}")
            request.outputs.append(oname)
            oparams = out.get("parameters") or {}
            if isinstance(oparams, dict) and oparams.get("binary_data", request.binary_default):
                request.binary_outputs.add(oname)
    return request


def _check_header(
    item: dict[str, Any], spec: TensorSpec, max_tensor_bytes: int | None
) -> tuple[tuple[int, ...], str]:
    shape, datatype = item.get("shape"), item.get("datatype")
    if datatype != spec.datatype:
        raise _fail(
            f"input {spec.name!r} has datatype {short(datatype)}, expected {spec.datatype!r}"
        )
    if not isinstance(datatype, str) or datatype not in DATATYPES:
        raise _fail(
            f"input {spec.name!r} has datatype {short(datatype)}, "
            f"expected one of {sorted(DATATYPES)}"
        )
    if isinstance(shape, list) and len(shape) > 32:
        raise _fail(f"input {spec.name!r}: shape has {len(shape)} dimensions, at most 32 allowed")
    if not isinstance(shape, list) or not all(type(d) is int and d >= 0 for d in shape):
        raise _fail(f"input {spec.name!r}: shape must be a list of sizes, got {short(shape)}")
    if spec.max_batch:
        if len(shape) != len(spec.shape) or tuple(shape[1:]) != spec.shape[1:]:
            expected = ", ".join(["N", *map(str, spec.shape[1:])])
            raise _fail(f"input {spec.name!r} has shape {short(shape)}, expected [{expected}]")
        if not 1 <= shape[0] <= spec.max_batch:
            raise _fail(f"input {spec.name!r} has batch {shape[0]}, expected 1 to {spec.max_batch}")
    elif spec.dynamic:
        _check_dynamic(spec, shape, DATATYPES[datatype].itemsize, max_tensor_bytes)
    elif tuple(shape) != spec.shape:
        raise _fail(f"input {spec.name!r} has shape {short(shape)}, expected {list(spec.shape)}")
    return tuple(shape), datatype


def _check_dynamic(spec: TensorSpec, shape: list[int], itemsize: int, limit: int | None) -> None:
    """A request's shape against a spec with -1 dimensions, and the byte limit."""
    fits = len(shape) == len(spec.shape) and all(
        want in (-1, got) for want, got in zip(spec.shape, shape, strict=True)
    )
    if not fits:
        expected = ", ".join("N" if d == -1 else str(d) for d in spec.shape)
        raise _fail(f"input {spec.name!r} has shape {short(shape)}, expected [{expected}]")
    if limit is not None:
        span = itemsize
        for d in shape:  # zero sizes count as one: a [0, 10**15] tensor is refused too
            span *= max(d, 1)
            if span > limit:
                raise BadRequestError(
                    f"input {spec.name!r}: shape {short(shape)} would take more than the "
                    f"{limit} bytes allowed for one tensor (the body limit)",
                    status=413,
                )


def _from_binary(data: memoryview, spec: TensorSpec, datatype: str, shape: tuple[int, ...]) -> Any:
    dtype = DATATYPES[datatype]
    want = math.prod(shape) * dtype.itemsize
    if len(data) != want:
        raise _fail(
            f"input {spec.name!r}: {len(data)} binary bytes, expected {want} "
            f"({datatype} x {list(shape)})"
        )
    return np.frombuffer(data, dtype).reshape(shape)


def _from_json(data: object, spec: TensorSpec, datatype: str, shape: tuple[int, ...]) -> Any:
    try:
        return array_from_json(data, spec.name, datatype, DATATYPES[datatype], shape)
    except ValueError as exc:
        raise _fail(str(exc)) from None


def encode_infer_response(
    model: str, request: InferRequest, outputs: Sequence[tuple[TensorSpec, np.ndarray[Any, Any]]]
) -> tuple[bytes, dict[str, str]]:
    """The response body and its extra headers (the header length for binary outputs)."""
    entries: list[dict[str, Any]] = []
    chunks: list[bytes] = []
    for spec, arr in outputs:
        entry: dict[str, Any] = {
            "name": spec.name,
            "datatype": spec.datatype,
            "shape": list(arr.shape),
        }
        binary = spec.name in request.binary_outputs or (
            request.outputs is None and request.binary_default
        )
        if binary:
            raw = np.ascontiguousarray(arr, DATATYPES[spec.datatype]).tobytes()
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = json_data(arr)
        entries.append(entry)
    doc: dict[str, Any] = {"model_name": model, "model_version": "1", "outputs": entries}
    if request.id is not None:
        doc["id"] = request.id
    head = json.dumps(doc, separators=(",", ":"), allow_nan=False).encode()
    if not chunks:
        return head, {"content-type": "application/json"}
    return b"".join([head, *chunks]), {
        "content-type": "application/octet-stream",
        HEADER_LENGTH: str(len(head)),
    }

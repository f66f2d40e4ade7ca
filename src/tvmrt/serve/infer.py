"""An infer request for one served model: parsed against its tensors, answered in its names.

Both routes to an answer (:meth:`InferenceApp.handle <tvmrt.serve.app.InferenceApp.handle>`
through ASGI, and :meth:`~tvmrt.serve.app.InferenceApp.answer_now` from the HTTP protocol)
use these two steps, so they answer alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from tvmrt.serve.limits import ServeLimits
from tvmrt.serve.model import ServedModel
from tvmrt.serve.protocol import BadRequestError, InferRequest, TensorSpec, parse_infer_request

__all__ = ["output_pairs", "parse_request"]


def parse_request(
    model: ServedModel, headers: Mapping[str, str], body: bytes | bytearray, limits: ServeLimits
) -> InferRequest:
    """``body`` checked against ``model``'s inputs and outputs (raises BadRequestError)."""
    # any name of an output (artifact/output_names.py); a dynamic model's after it ran
    names = None if model.dynamic else list(model.output_aliases)
    return parse_infer_request(
        body,
        headers,
        model.inputs,
        names,
        limits.max_json_bytes,
        limits.max_body_bytes,
        [s.name for s in model.outputs],
    )


def output_pairs(
    model: ServedModel, request: InferRequest, arrays: list[Any]
) -> list[tuple[TensorSpec, Any]]:
    """The outputs to answer with, each with the spec (and name) the client asked for."""
    wanted = request.outputs
    if model.dynamic:  # outputs known from this answer: output_0, output_1, ...
        specs = model.output_specs(arrays)
        unknown = sorted(set(wanted or ()) - {s.name for s in specs})
        if unknown:
            raise BadRequestError(
                f"unknown output(s) {unknown}; the model returned {[s.name for s in specs]}"
            )
        return [
            (spec, arr)
            for spec, arr in zip(specs, arrays, strict=True)
            if wanted is None or spec.name in wanted
        ]
    if wanted is None:
        return list(zip(model.outputs, arrays, strict=True))
    # in the model's order, each named as the client asked for it
    asked = sorted(wanted, key=lambda n: model.output_aliases[n])
    return [
        (
            replace(model.outputs[model.output_aliases[n]], name=n),
            arrays[model.output_aliases[n]],
        )
        for n in asked
    ]

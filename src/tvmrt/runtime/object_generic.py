"""TVM's ``tvm.runtime.object_generic``: ``ObjectGeneric``, ``convert_to_object``,
``convert`` and ``const`` (defined in :mod:`tvmrt.runtime.object`)."""

from __future__ import annotations

from tvmrt.runtime.object import ObjectGeneric, const, convert, convert_to_object

__all__ = ["ObjectGeneric", "const", "convert", "convert_to_object"]

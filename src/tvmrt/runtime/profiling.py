"""Profiling reports (placeholder; being written)."""

from __future__ import annotations

"""Build configuration that pyproject.toml cannot express: the native backend library."""

from __future__ import annotations

from setuptools import setup

setup()

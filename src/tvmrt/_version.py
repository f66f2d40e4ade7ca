"""The version of tvmrt, importable from every layer (``tvmrt.__version__`` re-exports it).

Kept in step with ``[project] version`` in pyproject.toml.
"""

from __future__ import annotations

__all__ = ["__version__"]

__version__ = "0.1.0"

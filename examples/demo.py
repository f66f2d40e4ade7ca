"""Placeholder demo (replaced as the runtime lands)."""

from __future__ import annotations

import tvmrt

print(tvmrt.__version__)

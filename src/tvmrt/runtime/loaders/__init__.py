"""Built-in module loaders, registered as ``runtime.module.loadfile_<kind>`` on import."""

from __future__ import annotations

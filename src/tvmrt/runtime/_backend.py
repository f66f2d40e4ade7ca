"""Backend services for compiled kernels (workspace, parallel launch, errors).

Placeholder until the native backend lands: only the thread count is known.
"""

from __future__ import annotations

from tvmrt.runtime.threads import default_num_threads

__all__ = ["num_threads"]


def num_threads() -> int:
    """Threads of the worker pool."""
    return default_num_threads()

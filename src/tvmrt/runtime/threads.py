"""How many threads compiled kernels use for their parallel loops."""

from __future__ import annotations

import os

__all__ = ["num_threads", "default_num_threads"]


def default_num_threads() -> int:
    """Threads TVM would use here: ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else cores.

    Cores are the CPUs this process may run on (its affinity mask), like TVM's
    ``MaxConcurrency``.
    """
    for var in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        text = os.environ.get(var, "").strip()
        if text:
            try:
                value = int(text)
            except ValueError:
                raise ValueError(f"{var}={text!r} is not an integer") from None
            if value > 0:
                return value
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def num_threads() -> int:
    """Threads the runtime's worker pool runs parallel kernel loops on (TVM's ``num_threads``)."""
    from tvmrt.runtime import _backend

    return _backend.num_threads()

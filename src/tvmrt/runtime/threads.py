"""How many threads compiled kernels use for their parallel loops.

The one parser of ``TVM_NUM_THREADS`` / ``OMP_NUM_THREADS`` (the native backend takes the
number from here; the pool itself, ``num_threads`` and ``set_num_threads``, is
:mod:`tvmrt.runtime.kernel_services`). A value that is not a whole positive number is
ignored with a warning, and one above :func:`max_threads` is lowered to it with a
warning: TVM's ``atoi`` read ``"4x"`` as 4 and ``"abc"`` as one thread, and created any
number of threads asked for.

Default without either variable: the physical cores among the CPUs this process may run
on (its affinity mask), i.e. one thread per core however many hyper-threads it has.
TVM v0.19 takes ``std::thread::hardware_concurrency() / 2`` on every x86-64 host: the same
on a host with two hyper-threads per core and all CPUs usable, but half the cores on a
host or VM without hyper-threading, and it ignores the affinity mask (containers,
``taskset``). See README, "Where tvmrt differs".
"""

from __future__ import annotations

import os
import re
import warnings

__all__ = [
    "default_num_threads",
    "max_threads",
    "parse_num_threads",
    "available_cpus",
    "physical_cores",
]

_HARD_LIMIT = 1024  # the native pool's own bound
_PER_CPU = 4  # more threads than this per CPU only adds switching
_DIGITS = re.compile(r"[0-9]+")


def available_cpus() -> int:
    """CPUs this process may run on (its affinity mask), like TVM's ``MaxConcurrency``."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def physical_cores() -> int:
    """Physical cores among the CPUs this process may run on (hyper-threads counted once).

    Read from ``/sys/devices/system/cpu/cpu<N>/topology``; where that is missing, every
    CPU counts as a core.
    """
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
    cores = set()
    for cpu in cpus:
        topology = f"/sys/devices/system/cpu/cpu{cpu}/topology"
        try:
            with (
                open(f"{topology}/physical_package_id") as package,
                open(f"{topology}/core_id") as core,
            ):
                cores.add((package.read().strip(), core.read().strip()))
        except OSError:
            cores.add(("cpu", str(cpu)))
    return max(len(cores), 1)


def max_threads() -> int:
    """The most threads the pool accepts: 4 per CPU this process may use, at least 64."""
    return min(max(_PER_CPU * available_cpus(), 64), _HARD_LIMIT)


def parse_num_threads(var: str, text: str) -> int | None:
    """The thread count ``text`` (the value of ``var``) asks for, or None to ignore it.

    Warns (``RuntimeWarning``) when the value is ignored or lowered.
    """
    text = text.strip()
    if not text:
        return None
    if not _DIGITS.fullmatch(text) or int(text) == 0:
        warnings.warn(
            f"{var}={text!r} is not a positive whole number of threads; ignoring it",
            RuntimeWarning,
            stacklevel=3,
        )
        return None
    value, limit = int(text), max_threads()
    if value > limit:
        warnings.warn(
            f"{var}={text} asks for more threads than tvmrt runs ({limit}: {_PER_CPU} per CPU "
            f"this process may use, at least 64); using {limit}",
            RuntimeWarning,
            stacklevel=3,
        )
        return limit
    return value


def default_num_threads() -> int:
    """Threads used unless set: ``TVM_NUM_THREADS``, else ``OMP_NUM_THREADS``, else the CPUs.

    Without either: :func:`physical_cores` (TVM v0.19 halves the CPU count on x86-64; see
    the module documentation).
    """
    for var in ("TVM_NUM_THREADS", "OMP_NUM_THREADS"):
        value = parse_num_threads(var, os.environ.get(var, ""))
        if value is not None:
            return value
    return min(physical_cores(), _HARD_LIMIT)

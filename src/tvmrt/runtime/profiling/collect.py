"""``profile_function`` and its metric collectors (``tvm.runtime.profiling``).

TVM v0.19's ``profile_function(mod, dev, collectors, func_name=None, warmup_iters=10)``
(``ProfileFunction``, ``src/runtime/profiling.cc``) returns a function that, called with
the arguments of ``mod[func_name]``, runs it ``warmup_iters`` times, then once more between
each collector's ``start`` and ``stop``, and returns the collectors' metrics as one dict.
TVM's collectors are C++ objects (its one implementation reads PAPI hardware counters);
tvmrt's :class:`MetricCollector` is the same three calls in Python, to subclass.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from tvmrt.error import ArgumentTypeError, InvalidArgumentError
from tvmrt.runtime.device import Device
from tvmrt.runtime.object_base import Object
from tvmrt.runtime.profiling.metrics import Metric

__all__ = ["DeviceWrapper", "MetricCollector", "profile_function"]


class DeviceWrapper(Object):
    """A device as an object (TVM wraps ``Device`` so collectors can be told of devices).

    Parameters
    ----------
    dev
        The device.
    """

    __slots__ = ("device",)

    def __init__(self, dev: Device) -> None:
        if not isinstance(dev, Device):
            raise ArgumentTypeError(f"DeviceWrapper takes a Device, got {type(dev).__name__}")
        self.device = dev

    def __repr__(self) -> str:
        return f"DeviceWrapper({self.device!r})"


class MetricCollector(Object):
    """Collects metrics of one run for :func:`profile_function` (``tvm.runtime.profiling``).

    Subclasses override the three calls TVM's C++ collectors implement:
    :meth:`init` once with the devices, :meth:`start` before the run (a state, or None when
    this collector cannot measure that device), :meth:`stop` after it (metric name ->
    ``Count``, ``Duration``, ``Percent``, ``Ratio`` or ``str``). The base class measures
    nothing: ``start`` returns None, as TVM's collectors do for a device they cannot time.
    """

    __slots__ = ()

    def init(self, devices: Sequence[DeviceWrapper]) -> None:
        """Called once, before :meth:`start`, with the devices to be measured."""

    def start(self, dev: Device) -> object | None:
        """Begin measuring on ``dev``; a state for :meth:`stop`, or None: not measured."""
        return None

    def stop(self, state: object) -> Mapping[str, Metric]:
        """End the measurement begun by :meth:`start` (which returned ``state``)."""
        return {}


class _Module(Protocol):
    entry_name: str

    def get_function(self, name: str, query_imports: bool = False) -> Callable[..., Any]: ...


def profile_function(
    mod: _Module,
    dev: Device,
    collectors: Sequence[MetricCollector],
    func_name: str | None = None,
    warmup_iters: int = 10,
) -> Callable[..., dict[str, Metric]]:
    """A function that runs ``mod[func_name]`` with the collectors around it.

    Parameters
    ----------
    mod
        The module holding the function.
    dev
        The device the function runs on (handed to the collectors).
    collectors
        :class:`MetricCollector` instances.
    func_name
        The function's name; None: the module's entry function (``mod.entry_name``).
    warmup_iters
        Runs before the measured run.

    Returns
    -------
    ``prof(*args)``: runs the function ``warmup_iters + 1`` times on ``args`` and returns
    the metrics every collector reported for the last run, in one dict (a collector whose
    ``start`` returned None reports nothing; with no collectors the dict is empty).

    Raises
    ------
    ArgumentTypeError
        If ``dev`` is not a Device or a collector is not a MetricCollector.
    InvalidArgumentError
        If ``warmup_iters`` is negative.
    """
    if not isinstance(dev, Device):
        raise ArgumentTypeError(f"profile_function: dev must be a Device, got {dev!r}")
    found = list(collectors or ())
    for collector in found:
        if not isinstance(collector, MetricCollector):
            raise ArgumentTypeError(
                f"profile_function: collectors must be MetricCollectors, got {collector!r}"
            )
    if isinstance(warmup_iters, bool) or not isinstance(warmup_iters, int) or warmup_iters < 0:
        raise InvalidArgumentError(
            f"profile_function: warmup_iters must be an int >= 0, got {warmup_iters!r}"
        )
    name = mod.entry_name if func_name is None else func_name

    def prof(*args: Any) -> dict[str, Metric]:
        func = mod.get_function(name)  # looked up on each call, as TVM does
        for _ in range(warmup_iters):
            func(*args)
        for collector in found:
            collector.init([DeviceWrapper(dev)])
        started = [(c, c.start(dev)) for c in found]
        func(*args)
        metrics: dict[str, Metric] = {}
        for collector, state in started:
            if state is not None:
                metrics.update(collector.stop(state))
        return metrics

    return prof

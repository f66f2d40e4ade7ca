"""Device backends, one module per kind of device: ``cpu``, ``opencl``, ``null``.

Each module defines a :class:`~tvmrt.runtime.device_api.DeviceAPI` subclass and registers
it for its DLPack device type when imported (``null`` is registered only on request, by
:func:`tvmrt.testing.null_device`). :mod:`tvmrt.runtime.device_api` imports ``cpu`` and
``opencl`` on first use of their device type.
"""

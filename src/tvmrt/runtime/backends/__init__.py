"""Device backends, one module per kind of device: ``cpu``, ``opencl``, ``cuda``, ``null``.

Each module defines a :class:`~tvmrt.runtime.device_api.DeviceAPI` subclass and a
``backend()`` function that makes one. The backend table of :mod:`tvmrt.runtime.device`
imports ``cpu``, ``opencl`` and ``cuda`` (the driver API through ctypes, bound in
``_cuda_driver``) and calls their ``backend()`` on first use of their device type;
``null`` is registered only on request, by :func:`tvmrt.testing.null_device`.
"""

"""What the runtime knows of a remote (RPC) session: its work folder and its module loader.

A device of an RPC session is an ordinary :class:`~tvmrt.runtime.device.Device` whose
type carries the session (``(table_index + 1) * RPC_SESS_MASK + device_type``, as TVM's
``RPC_SESS_MASK`` means). The DeviceAPI registered for that type (``tvmrt.rpc``'s
``RemoteDeviceAPI``) offers the session as a :class:`RemoteSession`, so code below
``rpc`` (the artifact layer) can send a library to the server and load it there without
importing ``rpc``: :func:`remote_session` finds it from the device alone.
"""

from __future__ import annotations

import os
from typing import Protocol, runtime_checkable

from tvmrt.error import DeviceUnavailableError, InvalidArgumentError
from tvmrt.runtime.device import RPC_SESS_MASK, Device, find_device_api
from tvmrt.runtime.module import Module

__all__ = ["RemoteSession", "is_remote", "local_type", "remote_session"]


@runtime_checkable
class RemoteSession(Protocol):
    """The files and modules of one RPC session (implemented by ``tvmrt.rpc``)."""

    def upload(
        self, data: str | os.PathLike[str] | bytes | bytearray, target: str | None = None
    ) -> None:
        """Write a local file (or bytes named ``target``) into the server's work folder."""
        ...

    def load_module(self, path: str) -> Module:
        """Load ``path`` (uploaded before) on the server; the remote module (type ``rpc``)."""
        ...

    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        """Device ``dev_type``/``dev_id`` of the server, encoded with this session."""
        ...


def is_remote(dev: Device) -> bool:
    """Whether ``dev`` is a device of an RPC session."""
    return dev.device_type >= RPC_SESS_MASK


def local_type(dev: Device) -> int:
    """``dev``'s device type on the machine that runs it (the session bits removed)."""
    return dev.device_type % RPC_SESS_MASK


def remote_session(dev: Device) -> RemoteSession:
    """The session ``dev`` belongs to.

    Raises
    ------
    InvalidArgumentError
        If ``dev`` is a local device.
    DeviceUnavailableError
        If its session is closed (its devices are no longer served).
    """
    if not is_remote(dev):
        raise InvalidArgumentError(f"device {dev} is not a device of an RPC session")
    session = getattr(find_device_api(dev.device_type), "session", None)
    if not isinstance(session, RemoteSession):
        raise DeviceUnavailableError(
            f"device {dev} belongs to no open RPC session (it was closed, or the device "
            "was not made by session.device(...))"
        )
    return session

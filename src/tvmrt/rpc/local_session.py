"""TVM's ``rpc.LocalSession``: the ``RPCSession`` interface over this process.

Code written for a remote board (``remote.upload``, ``remote.load_module``,
``remote.cpu()``, ``remote.get_function``) runs unchanged on the local machine: files go
to a private temporary folder (removed by ``close``, or when the session is garbage) and
are loaded from there, devices are this process's, functions its global ones. It shares
the server's functions (:class:`~tvmrt.rpc.server_env.ServerEnv`), so what a session can
ask of a board it can ask here. As in TVM, ``load_module`` also takes an absolute path.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from tvmrt.error import FunctionNotFoundError, InvalidArgumentError
from tvmrt.rpc.client import NamedDevices
from tvmrt.rpc.server_env import ServerEnv
from tvmrt.runtime.device import Device, device
from tvmrt.runtime.module import Module, load_module, system_lib

__all__ = ["LocalSession"]


class LocalSession(NamedDevices):
    """An RPC session whose "server" is this process (TVM's ``rpc.LocalSession``)."""

    def __init__(self) -> None:
        self._temp = tempfile.TemporaryDirectory(prefix="tvmrt-local-session-")
        self._env = ServerEnv(Path(self._temp.name))

    def __enter__(self) -> LocalSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove the session's folder (its uploads)."""
        self._temp.cleanup()

    def __repr__(self) -> str:
        return f"LocalSession({self._temp.name})"

    # -- functions and devices -----------------------------------------------------------
    def get_function(self, name: str) -> Any:
        """The global function ``name`` (or one of the server's, such as ``upload``)."""
        found = self._env.lookup(name)
        if found is None:
            raise FunctionNotFoundError(f"Cannot find global function {name}")
        return found

    def system_lib(self) -> Module:
        """This process's system library."""
        return system_lib()

    def device(self, dev_type: int | str, dev_id: int = 0) -> Device:
        """This process's device (no RPC session bits: it is local)."""
        return device(dev_type, dev_id)

    # -- files ---------------------------------------------------------------------------
    def upload(
        self, data: str | os.PathLike[str] | bytes | bytearray, target: str | None = None
    ) -> None:
        """Copy a local file, or bytes named by ``target``, into the session's folder."""
        if isinstance(data, bytes | bytearray):
            if not target:
                raise InvalidArgumentError("target must present when file is a bytearray")
            self._env.upload(target, bytes(data))
            return
        path = Path(os.fspath(data))
        self._env.upload(target or path.name, path.read_bytes())

    def download(self, path: str) -> bytes:
        return self._env.download(path)

    def remove(self, path: str) -> None:
        self._env.remove(path)

    def listdir(self, path: str) -> str:
        return self._env.listdir(path)

    def load_module(self, path: str, options: str = "", cc: str = "g++") -> Module:
        """Load ``path``: a name uploaded before, or (as TVM's) an absolute path."""
        if os.path.isabs(path):
            return load_module(path)
        return self._env.load_module(path)

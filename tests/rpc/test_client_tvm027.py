"""tvmrt's client and TVM 0.27's own RPC server (``apache-tvm``), which speaks the tvm-ffi
dialect: the client tells it from the kInitServer reply; files and remote arrays work.

(TVM 0.27 has no graph executor, so the graph session runs against TVM 0.16 and tvmrt.)
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from support.tvm016_rpc import HOST, tvm016_rpc_server
from tvmrt import nd, rpc
from tvmrt.error import GlobalFunctionNotFoundError
from tvmrt.rpc.codec import Dialect


def test_files_and_arrays_on_tvm027(tmp_path: Path) -> None:
    pytest.importorskip("tvm", reason="apache-tvm (TVM 0.27) is a test dependency")
    with (
        tvm016_rpc_server(tmp_path, python=Path(sys.executable)) as server,
        rpc.connect(HOST, server.port, session_timeout=60) as remote,
    ):
        assert remote._endpoint.dialect is Dialect.FFI
        blob = bytes(range(256)) * 9
        remote.upload(blob, "blob.bin")
        assert remote.download("blob.bin") == blob
        dev = remote.cpu()
        host = np.arange(24, dtype="float32").reshape(2, 3, 4)
        arr = nd.array(host, dev)
        np.testing.assert_array_equal(arr.numpy(), host)
        other = nd.empty((2, 3, 4), "float32", dev)
        arr.copyto(other)
        np.testing.assert_array_equal(other.numpy(), host)
        with pytest.raises(GlobalFunctionNotFoundError, match="no_such_function"):
            remote.get_function("no_such_function")

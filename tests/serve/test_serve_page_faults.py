"""A serving process reuses freed request memory instead of faulting its pages in again.

glibc returns blocks of 128 KiB and more to the kernel when they are freed, so each
MobileNet request (a 600 KB body, read 256 KiB at a time) touched ~300 fresh pages. The
count comes from the server's own ``/proc/PID/stat``, so it does not depend on timing.
"""

from __future__ import annotations

import json
import os
import sys

import numpy as np
import pytest

from tvmrt.serve.server import _MALLOC_ENV

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="page-fault counts come from /proc"
)

REQUESTS = 20


def _minor_faults(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[7])  # minflt: the 10th field, the 8th after the command name


def _faults_per_request(served: object) -> float:
    shape = [1, 3, 224, 224]
    data = np.random.default_rng(0).standard_normal(shape).astype("<f4").tobytes()
    inputs = [
        {
            "name": "data",
            "shape": shape,
            "datatype": "FP32",
            "parameters": {"binary_data_size": len(data)},
        }
    ]
    header = json.dumps({"inputs": inputs}).encode()
    headers = {"Inference-Header-Content-Length": str(len(header))}

    def infer() -> None:
        status, _, _ = served.request("POST", "/v2/models/mb/infer", header + data, headers)  # type: ignore[attr-defined]
        assert status == 200

    for _ in range(3):  # the first requests grow the heap
        infer()
    before = _minor_faults(served.proc.pid)  # type: ignore[attr-defined]
    for _ in range(REQUESTS):
        infer()
    return (_minor_faults(served.proc.pid) - before) / REQUESTS  # type: ignore[attr-defined]


@pytest.mark.skipif(
    any(name in os.environ for name in _MALLOC_ENV),
    reason=f"the environment tunes malloc ({', '.join(_MALLOC_ENV)}): the server leaves it so",
)
def test_request_memory_is_reused_not_faulted_in_again(mobilenet_server):
    with mobilenet_server() as served:
        kept = _faults_per_request(served)
    # a 600 KB body is 147 pages; before, each request faulted ~300
    assert kept < 40, f"{kept:.0f} page faults per request"


def test_the_users_malloc_settings_are_left_alone(artifacts):
    from support.serve import tvmrt_serve

    # glibc's own default trim threshold, set by the user: the server must not override it
    env = {"MALLOC_TRIM_THRESHOLD_": "131072"}
    args = (str(artifacts / "mobilenet_v1"), "--name", "mb", "--threads", "1")
    with tvmrt_serve(*args, env=env) as served:
        faulted = _faults_per_request(served)
    assert faulted > 100, f"only {faulted:.0f} page faults per request: the setting was overridden"

"""MetaSchedule (TVM 0.27) tunes through tvmrt: its RPCRunner asks a tvmrt tracker for a
tvmrt server and measures every candidate kernel there.

A 128x128 matmul, two trials (replay-trace, random cost model: no xgboost needed), each
candidate built by TVM on the host, uploaded, filled with ``random_fill_for_measure``,
timed with the cache-flush preprocessor; the best schedule must compute ``A @ B``.
About 25 s on a loaded 2-core machine (it was 2-11 minutes before the client sped up
TVM 0.27's import of its tensor intrinsics: see ``fast_stack`` in the client).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from support.rpc_server import run_peer, tvmrt_rpc

pytestmark = pytest.mark.slow

pytest.importorskip("tvm.s_tir.meta_schedule", reason="apache-tvm (TVM 0.27) with MetaSchedule")

CLIENT = r"""
import inspect, json, linecache, sys, tempfile


def fast_stack(context=1):
    # inspect.stack() minus what TVMScript's parser never reads. Importing TVM 0.27's
    # tvm.s_tir.tensor_intrin (TuneContext and every builder worker do) parses ~500
    # TVMScript functions, each calling inspect.stack(), whose per-frame source lookups
    # make the import take ~50 s per process on Python 3.11 (~4 s with this).
    out, frame = [], sys._getframe(1)
    while frame is not None:
        code, line = frame.f_code, frame.f_lineno
        text = [linecache.getline(code.co_filename, line, frame.f_globals)] if context else None
        out.append(inspect.FrameInfo(frame, code.co_filename, line, code.co_name, text, 0))
        frame = frame.f_back
    return out


def use_fast_stack():
    inspect.stack = fast_stack


use_fast_stack()
import numpy as np
import tvm
from tvm import te
from tvm.s_tir import meta_schedule as ms

port, key, out_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
N = 128
A = te.placeholder((N, N), name="A")
B = te.placeholder((N, N), name="B")
k = te.reduce_axis((0, N), name="k")
C = te.compute((N, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
mod = tvm.IRModule({"main": te.create_prim_func([A, B, C])})
target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
runner = ms.runner.RPCRunner(
    rpc_config=ms.runner.RPCConfig(
        tracker_host="127.0.0.1", tracker_port=port, tracker_key=key, session_timeout_sec=120
    ),
    evaluator_config=ms.runner.EvaluatorConfig(
        number=2, repeat=2, min_repeat_ms=0, enable_cpu_cache_flush=True
    ),
    max_workers=1,
)
with tempfile.TemporaryDirectory() as work:
    db = ms.tune_tir(
        mod, target, work, max_trials_global=2, num_trials_per_iter=2,
        builder=ms.builder.LocalBuilder(
            max_workers=1, timeout_sec=600, initializer=use_fast_stack
        ),
        runner=runner, cost_model="random", strategy="replay-trace", num_tuning_cores=1,
    )
    records = db.get_all_tuning_records()
    run_secs = [[float(s) for s in (r.run_secs or [])] for r in records]
    sch = ms.tir_integration.compile_tir(db, mod, target)
    lib = tvm.compile(sch.mod, target=target)
rng = np.random.RandomState(0)
a = rng.standard_normal((N, N)).astype("float32")
b = rng.standard_normal((N, N)).astype("float32")
dev = tvm.cpu()
c = tvm.runtime.tensor(np.zeros((N, N), "float32"), dev)
lib["main"](tvm.runtime.tensor(a, dev), tvm.runtime.tensor(b, dev), c)
np.savez(out_path, a=a, b=b, c=c.numpy())
print(json.dumps({"run_secs": run_secs}))
"""


def test_metaschedule_rpc_runner_tunes_through_tvmrt_tracker_and_server(tmp_path: Path) -> None:
    out = tmp_path / "out.npz"
    with (
        tvmrt_rpc("tracker") as (_, tport),
        tvmrt_rpc("server", "--tracker", f"127.0.0.1:{tport}", "--key", "ms"),
    ):
        done = run_peer(sys.executable, CLIENT, str(tport), "ms", str(out), timeout=1500)
    assert done.returncode == 0, done.stderr[-4000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    measured = [secs for secs in report["run_secs"] if secs]
    assert measured, f"no candidate was measured: {report}"
    # a failed run is recorded by MetaSchedule as 1e10 seconds
    assert all(0 < s < 1 for secs in measured for s in secs), report
    got = np.load(out)
    np.testing.assert_allclose(got["c"], got["a"] @ got["b"], rtol=1e-4, atol=1e-4)

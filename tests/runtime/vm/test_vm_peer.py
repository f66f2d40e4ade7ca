"""Against a live TVM 0.16: an executable it builds now runs bitwise the same in tvmrt, and
an executable tvmrt saves (with its constants moved out as late-bound) runs in TVM.

The model has a dynamic batch, an ``If`` whose branches give different lengths and an
``argwhere``; TVM runs it at batch 1, 2 and 7 in the peer (tests/support/peers.py).
"""

from __future__ import annotations

import subprocess
import textwrap

import numpy as np

import tvmrt.runtime as rt
from support.peers import tvm016_python
from support.relayvm_cases import same_bits
from tvmrt.runtime import vm as vm_rt

BUILD = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tvm
    from tvm import relay
    from tvm.runtime import vm as vm_rt

    out = sys.argv[1]
    x = relay.var("x", shape=(relay.Any(), 4), dtype="float32")
    w = relay.const(np.random.RandomState(0).randn(3, 4).astype("float32"))
    y = relay.nn.relu(relay.nn.dense(x, w))
    z = relay.If(
        relay.greater(relay.sum(y), relay.const(1.0)),
        y * relay.const(2.0),
        relay.concatenate([y, y], axis=0),
    )
    idx = relay.argwhere(relay.greater(z, relay.const(0.5)))
    mod = tvm.IRModule.from_expr(relay.Function([x], relay.Tuple([z, idx])))
    with tvm.transform.PassContext(opt_level=3):
        target = tvm.target.Target("llvm -mtriple=x86_64-linux-gnu")
        exe = relay.vm.compile(mod, target=target)
    code, lib = exe.save()
    open(f"{out}/code.ro", "wb").write(code)
    lib.export_library(f"{out}/lib.so")
    vm = vm_rt.VirtualMachine(exe, tvm.cpu())
    rs = np.random.RandomState(1)
    res = {}
    for b in (1, 2, 7):
        xv = rs.randn(b, 4).astype("float32") * (0.1 if b == 2 else 1.0)
        r = vm.invoke("main", xv)
        res[f"x_{b}"], res[f"z_{b}"], res[f"idx_{b}"] = xv, r[0].numpy(), r[1].numpy()
    np.savez(f"{out}/tvm.npz", **res)
    """
)

RUN_SAVED = textwrap.dedent(
    """
    import sys
    import numpy as np
    import tvm
    from tvm.runtime import vm as vm_rt

    out = sys.argv[1]
    lib = tvm.runtime.load_module(f"{out}/lib.so")
    exe = vm_rt.Executable.load_exec(bytearray(open(f"{out}/saved.ro", "rb").read()), lib)
    exe.load_late_bound_consts(f"{out}/late.params")
    x = np.load(f"{out}/tvm.npz")["x_7"]
    z, idx = vm_rt.VirtualMachine(exe, tvm.cpu()).invoke("main", x)
    np.savez(f"{out}/tvm_saved.npz", z=z.numpy(), idx=idx.numpy())
    """
)


def _peer(script: str, folder) -> None:
    done = subprocess.run(
        [str(tvm016_python()), "-c", script, str(folder)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]


def test_tvm_builds_tvmrt_runs_and_tvm_runs_what_tvmrt_saved(tmp_path):
    _peer(BUILD, tmp_path)
    lib = rt.load_module(str(tmp_path / "lib.so"))
    exe = vm_rt.Executable.load_exec((tmp_path / "code.ro").read_bytes(), lib)
    vm = vm_rt.VirtualMachine(exe, rt.cpu())
    with np.load(tmp_path / "tvm.npz") as tvm_out:
        for b in (1, 2, 7):
            z, idx = vm.invoke("main", tvm_out[f"x_{b}"])
            assert same_bits(z.numpy(), tvm_out[f"z_{b}"]), b
            assert same_bits(idx.numpy(), tvm_out[f"idx_{b}"]), b
        want_z, want_idx = tvm_out["z_7"], tvm_out["idx_7"]
    exe.move_late_bound_consts(str(tmp_path / "late.params"), 16)
    code, _ = exe.save()
    (tmp_path / "saved.ro").write_bytes(bytes(code))
    assert "late-bound" in exe.constants
    _peer(RUN_SAVED, tmp_path)
    with np.load(tmp_path / "tvm_saved.npz") as saved:
        assert same_bits(saved["z"], want_z)
        assert same_bits(saved["idx"], want_idx)

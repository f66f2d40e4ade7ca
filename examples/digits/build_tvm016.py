"""Rebuild ``examples/digits/tvm016/``: the example model as TVM 0.16 (Relay) built it.

The same digits MLP as ``examples/digits/model/`` (its weights are read from that
folder's ``deploy.params``), written as a Relay function and built by TVM 0.16 for any
x86-64 machine, then saved under the file names of TVM's deployment tutorials:
``deploy_lib.so`` (legacy packed-function ABI), ``deploy_graph.json`` and
``deploy_param.params``. It shows tvmrt running an artifact of the TVM era whose runtime
no longer installs. Run it with a Python that has TVM 0.16 (the test suite's peer venv,
``tests/support/peers.py``, has one):

    PYTHON_WITH_TVM016 examples/digits/build_tvm016.py [OUT_DIR]
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import tvm
from tvm import relay

HERE = Path(__file__).resolve().parent
TARGET = "llvm -mtriple=x86_64-linux-gnu -mcpu=x86-64"


def build(out: Path) -> None:
    """Build the Relay MLP from the committed weights and save TVM's three files."""
    blob = (HERE / "model" / "deploy.params").read_bytes()
    weights = {k: v.numpy() for k, v in tvm.runtime.load_param_dict(blob).items()}
    batch, features = np.load(HERE / "model" / "heldout.npz")["image"].shape
    image = relay.var("image", shape=(batch, features), dtype="float32")
    params = {
        "w1": weights["p0"].T.copy(),  # Relay's dense takes (units, in)
        "b1": weights["p1"],
        "w2": weights["p2"].T.copy(),
        "b2": weights["p3"],
    }
    v = {k: relay.var(k, shape=a.shape, dtype="float32") for k, a in params.items()}
    hidden = relay.nn.relu(relay.nn.bias_add(relay.nn.dense(image, v["w1"]), v["b1"]))
    logits = relay.nn.bias_add(relay.nn.dense(hidden, v["w2"]), v["b2"])
    func = relay.Function([image, *v.values()], relay.nn.softmax(logits, axis=1))
    mod = tvm.IRModule.from_expr(func)
    with tvm.transform.PassContext(opt_level=3):
        lib = relay.build(mod, target=TARGET, params=params)
    out.mkdir(parents=True, exist_ok=True)
    lib.export_library(str(out / "deploy_lib.so"))
    (out / "deploy_graph.json").write_text(lib.get_graph_json())
    (out / "deploy_param.params").write_bytes(tvm.runtime.save_param_dict(lib.get_params()))
    print(
        f"wrote {out}: deploy_lib.so, deploy_graph.json, deploy_param.params "
        f"(TVM {tvm.__version__})"
    )


if __name__ == "__main__":
    build(Path(sys.argv[1] if len(sys.argv) > 1 else HERE / "tvm016"))

"""Issue 23 item 9: ``tvmrt inspect`` of a big graph peaks at a small multiple of its file.

The graph is bench/scale.py's chain (N/2 weights, N/2 ``add`` kernels) with its params and
MobileNet's kernel library, made here; inspect runs in a child process that reports its
peak RSS (``VmHWM``) beyond what it held before inspecting (imports included before). The bound:
peak growth <= 8 x the graph file + 32 MiB (tvmrt <= 0.x: about 15x). N is
``$TVMRT_INSPECT_NODES`` (default 100,000: a 14 MB graph, a few seconds); run with
``TVMRT_INSPECT_NODES=1000000 pytest -s tests/artifact/test_inspect_memory.py`` for the
figures in the commit notes (printed with -s).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from tvmrt.runtime.params import save_param_dict
from tvmrt.testing import GraphBuilder

NODES = int(os.environ.get("TVMRT_INSPECT_NODES", "100000"))
RATIO = 8
SLACK = 32 << 20

_CHILD = r"""
import sys
from tvmrt.artifact import find_artifact, inspect_artifact

def status(field):
    with open("/proc/self/status") as lines:
        for line in lines:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no " + field)

files = find_artifact(sys.argv[1])
before = status("VmRSS")
report = inspect_artifact(files).to_dict()
peak = status("VmHWM")  # not ru_maxrss: that keeps the parent's peak across vfork + exec
assert report["graph"]["nodes"] == int(sys.argv[2]), report["problems"]
assert report["graph"]["storage"] is not None, report["problems"]
print(peak - before)
"""


def _chain(folder: Path, n: int) -> Path:
    b = GraphBuilder()
    ref = b.input("data", (4,))
    names = [f"p{i}" for i in range((n - 1) // 2)]
    for i, name in enumerate(names):
        (ref,) = b.op(f"add{i}", "add", [ref, b.input(name, (4,))], [(4,)])
    b.output(ref)
    graph = folder / "deploy_graph.json"
    graph.write_text(b.to_json())
    del b
    blob = save_param_dict({k: np.full(4, i, "float32") for i, k in enumerate(names)})
    (folder / "deploy_param.params").write_bytes(blob)
    return graph


def test_inspect_peak_is_a_small_multiple_of_the_graph_file(
    artifacts: Path, tmp_path: Path
) -> None:
    graph = _chain(tmp_path, NODES)
    (tmp_path / "deploy_lib.so").symlink_to(artifacts / "mobilenet_v1" / "deploy_lib.so")
    nodes = 1 + 2 * ((NODES - 1) // 2)
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path), str(nodes)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    growth = int(done.stdout.split()[-1])
    size = graph.stat().st_size
    print(
        f"\n{nodes} nodes: graph {size / 1e6:.1f} MB, inspect peak growth "
        f"{growth / 1e6:.0f} MB = {growth / size:.1f}x the graph file"
    )
    assert growth <= RATIO * size + SLACK, (growth, size)

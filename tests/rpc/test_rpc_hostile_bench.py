"""A short run of ``bench/rpc_hostile.py``: the tracker and a registered server under hostile
connections of every kind stay alive, serve every honest client, and do not grow.

``TVMRT_RPC_HOSTILE_CONNS`` (default 10 per kind) and ``TVMRT_RPC_HOSTILE_S`` (default 5)
size it; the bench's own defaults (200, 60 s) are the figures in the README.
"""

from __future__ import annotations

import importlib.util
import os

from support.paths import REPO


def test_tracker_and_server_under_hostile_connections() -> None:
    spec = importlib.util.spec_from_file_location("rpc_hostile", REPO / "bench" / "rpc_hostile.py")
    assert spec is not None
    assert spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    conns = int(os.environ.get("TVMRT_RPC_HOSTILE_CONNS", "10"))
    seconds = float(os.environ.get("TVMRT_RPC_HOSTILE_S", "5"))
    report = bench.run(conns, seconds)
    assert report["alive"] == {"tracker": True, "server": True}
    for honest in ("tracker_ping", "rpc_session"):
        assert report[honest]["failed"] == 0, report[honest]
        assert report[honest]["ok"] > 0, report[honest]
    for name in ("tracker", "server"):
        grown = report["rss_mb_after"][name] - report["rss_mb_before"][name]
        assert grown < 64, f"{name} grew by {grown} MB"

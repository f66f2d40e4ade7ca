"""tvmrt's tracker on the wire: TVM's scheduling rules and hostile peers (no TVM needed).

TVM's tracker hands out the oldest free slot of a key to the highest-priority, earliest
request, makes a request wait until a slot is put, forgets the slots of a server whose
connection closes, and drops a connection that breaks the protocol, nothing more.
"""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator

import pytest

from tvmrt.error import RPCError
from tvmrt.rpc import wire
from tvmrt.rpc.tracker import Tracker
from tvmrt.rpc.tracker_client import MAX_FRAME, TrackerConnection, recv_json, send_json


@pytest.fixture
def tracker() -> Iterator[int]:
    t = Tracker("127.0.0.1", 0, 0)
    thread = threading.Thread(target=t.serve_forever, daemon=True)
    thread.start()
    yield t.port
    t.stop()
    thread.join(5)


def _conn(port: int) -> TrackerConnection:
    return TrackerConnection(("127.0.0.1", port), timeout=10)


def test_request_gets_a_slot_once_and_waits_for_the_next(tracker: int) -> None:
    server, client = _conn(tracker), _conn(tracker)
    server.update_info("board", None, 9000)
    server.put("board", 9000, "board:1", None)
    assert server.pending_matchkeys() == ["board:1"]
    assert client.request("board") == ("127.0.0.1", 9000, "board:1")
    assert server.pending_matchkeys() == []  # handed out: gone from the server's pending keys
    # the next request waits until the server puts a fresh slot
    send_json(client.sock, [4, "board", "", 1])
    client.sock.settimeout(0.5)
    with pytest.raises(socket.timeout):
        client.sock.recv(1)
    client.sock.settimeout(10)
    server.put("board", 9000, "board:2", "10.0.0.7")
    assert recv_json(client.sock) == [0, ["10.0.0.7", 9000, "board:2"]]
    summary = client.summary()
    assert summary["queue_info"] == {"board": {"free": 0, "pending": 0}}
    assert summary["server_info"] == [{"key": "server:board", "addr": ["127.0.0.1", 9000]}]
    server.close()
    client.close()


def test_a_closed_server_loses_its_slots_and_its_key(tracker: int) -> None:
    server, client = _conn(tracker), _conn(tracker)
    server.put("gone", 9001, "gone:1", None)
    assert client.summary()["queue_info"]["gone"]["free"] == 1
    server.close()
    for _ in range(100):
        if "gone" not in client.summary()["queue_info"]:
            break
    # no open connection uses the key any more: it is forgotten, not kept empty
    assert client.summary()["queue_info"] == {}
    client.close()


@pytest.mark.parametrize(
    "garbage",
    [
        struct.pack("<i", 0x12345),  # not the tracker magic
        struct.pack("<ii", wire.TRACKER_MAGIC, MAX_FRAME + 1),  # frame above the limit
        struct.pack("<ii", wire.TRACKER_MAGIC, -5),
        struct.pack("<ii", wire.TRACKER_MAGIC, 3) + b"{x]",  # not JSON
        struct.pack("<ii", wire.TRACKER_MAGIC, 4) + b"[99]",  # unknown code
        struct.pack("<ii", wire.TRACKER_MAGIC, 8) + b'{"a": 1}',  # not a list
    ],
)
def test_protocol_breakers_are_dropped_and_the_tracker_goes_on(
    tracker: int, garbage: bytes
) -> None:
    with socket.create_connection(("127.0.0.1", tracker), timeout=10) as s:
        s.sendall(garbage)
        data = b""
        while True:
            part = s.recv(4096)
            if not part:
                break
            data += part
        assert len(data) <= 4  # at most the magic came back before it closed
    client = _conn(tracker)
    assert client.summary()["queue_info"] == {}
    client.close()


def test_stop_needs_the_stop_key() -> None:
    t = Tracker("127.0.0.1", 0, 0, stop_key="secret")
    thread = threading.Thread(target=t.serve_forever, daemon=True)
    thread.start()
    c = _conn(t.port)
    assert c.call(2, "wrong") == -1
    assert c.call(2, "secret") == 0
    thread.join(5)
    assert not thread.is_alive()
    c.close()
    with pytest.raises((RPCError, OSError)):
        _conn(t.port).summary()

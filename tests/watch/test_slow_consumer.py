"""Flow control: a socket that stops reading is cut off; the others keep receiving
everything, in order, without waiting for it."""

from __future__ import annotations

from .conftest import SUBPROTOCOL, Closed, Live, events_of, eventually

EVENTS = 600
BLOB = "x" * 32_000  # ~32 kB per event: the slow socket's buffers fill up quickly


def test_a_reader_that_stops_reading_is_cut_off(live: Live, admin: str) -> None:
    sim = live.sim
    sim.add_pod("default", "busy", ["app"])
    healthy = live.ws(token=admin)
    healthy.watch("pods", namespace="default")
    healthy.synced("pods")

    # A tab that reads its snapshot, then never reads again (small receive buffer).
    slow = live.raw_ws("/agents/prod/watch", {"Authorization": f"Bearer {admin}",
                                              "Sec-WebSocket-Protocol": SUBPROTOCOL},
                       rcvbuf=4096)
    assert slow.status == 101
    slow.send_json({"type": "watch", "watchId": "pods",
                    "watchParams": {"version": "v1", "resource": "pods",
                                    "namespace": "default"}})
    while slow.recv()["type"] != "synced":
        pass
    [upstream] = live.hub_watches()
    assert upstream.subscriber_count == 2

    for i in range(EVENTS):
        sim.patch("pods", "busy", {"metadata": {"annotations": {"n": str(i), "blob": BLOB}}})
    got = healthy.events(EVENTS, timeout=60)
    assert [int(m["event"]["object"]["metadata"]["annotations"]["n"]) for m in got] == \
        list(range(EVENTS)), "the healthy socket missed or reordered events"

    # The server drops the slow one (4429 if the close frame fits, else it cuts the TCP).
    eventually(lambda: upstream.subscriber_count == 1, timeout=30,
               message="the slow subscriber is still subscribed")
    code = None
    slow.sock.settimeout(10)
    try:
        while True:
            slow.recv()
    except Closed as closed:
        code = closed.code
    except (EOFError, ConnectionResetError):
        pass
    assert code in (None, 4429)

    # The healthy socket carries on.
    sim.add_pod("default", "after", ["app"])
    assert events_of(healthy.events(1)) == [("ADDED", "after")]
    assert upstream.subscriber_count == 1

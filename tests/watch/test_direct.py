"""Events written straight to idle sockets (webapp/watch/direct.py, _fanout.c): whole
frames with each subscriber's prefix, partial writes finished by the sender before anything
else, queued messages never overtaken, and the same stream whichever path a message took."""

from __future__ import annotations

import errno
import os
import socket
import time
from collections.abc import Callable, Iterator
from types import SimpleNamespace

import pytest

from webapp.watch import direct
from webapp.watch.hub import Subscription
from webapp.watch.outbox import Outbox
from webapp.watch.sender import Connection

from .conftest import Live, events_of
from .test_frames import parse

# Built by `pip install` wherever a C compiler is; CI has one, so there it must be built.
needs_compiled = pytest.mark.skipif(not direct.available() and not os.environ.get("CI"),
                                    reason="webapp.watch._fanout was not built (no compiler)")


@pytest.fixture
def pairs() -> Iterator[Callable[[], tuple[socket.socket, socket.socket]]]:
    made: list[socket.socket] = []

    def make() -> tuple[socket.socket, socket.socket]:
        ours, theirs = socket.socketpair()
        made.extend((ours, theirs))
        return ours, theirs

    yield make
    for sock in made:
        sock.close()


def read_all(sock: socket.socket, expected: int, timeout: float = 10) -> bytes:
    sock.settimeout(timeout)
    data = b""
    while len(data) < expected:
        chunk = sock.recv(1 << 20)
        assert chunk, f"closed after {len(data)} of {expected} bytes"
        data += chunk
    return data


@needs_compiled
def test_one_call_writes_a_whole_frame_to_each_socket(pairs) -> None:
    # Payload sizes on both sides of the three length encodings (125/126, 65535/65536).
    prefixes = [b'{"w":"a",', b'{"w":"bb",', b'{"w":"c",', b'{"w":"d",']
    for body_size in (0, 100, 116, 65_526, 65_600):
        body = b'"x":"' + b"y" * body_size + b'"}'
        sockets = [pairs() for _ in prefixes]
        assert direct.send_text is not None
        sent = direct.send_text([ours.fileno() for ours, _ in sockets], prefixes, body)
        for (_, theirs), prefix, written in zip(sockets, prefixes, sent, strict=True):
            frames = parse(read_all(theirs, written))
            assert frames == [(0x1, prefix + body)]


@needs_compiled
def test_a_full_socket_is_reported_not_waited_for(pairs) -> None:
    ours, theirs = pairs()
    ours.setblocking(False)
    for size in (65536, 4096, 1):  # until not even one byte fits
        with pytest.raises(BlockingIOError):
            while True:
                ours.send(b"z" * size)
    assert direct.send_text is not None
    started = time.monotonic()
    assert direct.send_text([ours.fileno()], [b"{"], b"}") == [-errno.EAGAIN]
    assert time.monotonic() - started < 1

    closed, peer = pairs()
    peer.close()
    [result] = direct.send_text([closed.fileno()], [b"{"], b"}")
    assert result in (-errno.EPIPE, -errno.ECONNRESET)


@needs_compiled
def test_bad_arguments_raise_instead_of_writing(pairs) -> None:
    ours, theirs = pairs()
    assert direct.send_text is not None
    with pytest.raises(ValueError, match="differ in length"):
        direct.send_text([ours.fileno()], [], b"x")
    with pytest.raises(TypeError):
        direct.send_text([ours.fileno()], ["not bytes"], b"x")  # type: ignore[list-item]
    with pytest.raises(TypeError):
        direct.send_text(["3"], [b"x"], b"x")  # type: ignore[list-item]
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(10)  # nothing was written


def connection(sock: socket.socket) -> tuple[Connection, Outbox]:
    outbox = Outbox(limit=100)
    conn = Connection(SimpleNamespace(sock=sock), outbox)
    conn.start()
    return conn, outbox


@needs_compiled
def test_an_idle_socket_gets_it_at_once_and_a_busy_one_through_its_outbox(pairs) -> None:
    idle_sock, idle_peer = pairs()
    busy_sock, busy_peer = pairs()
    idle, idle_box = connection(idle_sock)
    busy, busy_box = connection(busy_sock)
    try:
        first = Subscription("a", idle_box)
        second = Subscription("b", busy_box)
        with busy.lock:  # the sender is writing to it
            rest = direct.send_now([first, second], b'"n":1}')
        assert rest == [second]
        assert parse(read_all(idle_peer, idle.written)) == [
            (0x1, first.prefix + b'"n":1}')]
        assert len(idle_box) == 0

    finally:
        idle.stop()
        busy.stop()


@needs_compiled
def test_a_message_never_overtakes_one_queued_for_the_same_socket(pairs) -> None:
    ours, theirs = pairs()
    outbox = Outbox(limit=100)
    conn = Connection(SimpleNamespace(sock=ours), outbox)  # not started: nothing drains it
    subscription = Subscription("a", outbox)
    outbox.send(subscription.prefix + b'"n":1}')
    assert direct.send_now([subscription], b'"n":2}') == [subscription]
    assert conn.written == 0
    theirs.setblocking(False)
    with pytest.raises(BlockingIOError):
        theirs.recv(10)


@needs_compiled
def test_the_rest_of_a_partly_written_frame_goes_out_before_the_next_message(pairs) -> None:
    ours, theirs = pairs()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    theirs.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn, outbox = connection(ours)
    try:
        subscription = Subscription("big", outbox)
        body = b'"blob":"' + b"q" * 300_000 + b'"}'
        assert direct.send_now([subscription], body) == []
        assert conn.pending, "the kernel took the whole frame: the test needs a partial write"
        # Not idle: the next message queues behind the unsent part.
        assert direct.send_now([subscription], b'"n":2}') == [subscription]
        # The sender finishes the frame as the reader makes room, with nothing else queued.
        first = read_all(theirs, 10 + len(subscription.prefix) + len(body))
        assert parse(first) == [(0x1, subscription.prefix + body)]
        outbox.send(subscription.prefix + b'"n":2}')
        second = read_all(theirs, 2 + len(subscription.prefix) + 6)
        assert parse(second) == [(0x1, subscription.prefix + b'"n":2}')]
    finally:
        conn.stop()


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "outbox-only"])
def test_a_page_sees_the_same_events_whichever_way_they_were_written(
        live: Live, admin: str, monkeypatch: pytest.MonkeyPatch, compiled: bool) -> None:
    if compiled and not direct.available() and not os.environ.get("CI"):
        pytest.skip("webapp.watch._fanout was not built (no compiler)")
    calls = []
    real = direct.send_text
    if compiled:
        assert real is not None

        def counting(fds: list[int], prefixes: list[bytes], body: bytes) -> list[int]:
            calls.append(len(fds))
            return real(fds, prefixes, body)

        monkeypatch.setattr(direct, "send_text", counting)
    else:
        monkeypatch.setattr(direct, "send_text", None)

    live.sim.add_pod("default", "web", ["app"])
    pages = [live.ws(token=admin) for _ in range(3)]
    for page in pages:
        page.watch("pods", namespace="default")
        page.synced("pods")
    for n in range(30):
        live.sim.patch("pods", "web", {"metadata": {"labels": {"n": str(n)}}})
        time.sleep(0.01)  # paced: the relay is not behind, so it writes at once
    live.sim.delete("pods", "web", grace_period=0)
    for page in pages:
        got = page.recv_until(lambda m: events_of([m]) == [("DELETED", "web")])
        labels = [m["event"]["object"]["metadata"]["labels"].get("n") for m in got[:-1]]
        assert labels == [str(n) for n in range(30)]
        assert all(m["watchId"] == "pods" for m in got)
    if compiled:
        assert calls, "no event was written at once"
        assert max(calls) == 3
    else:
        assert calls == []


def test_a_watch_that_falls_behind_queues_its_events_for_a_while() -> None:
    from webapp.watch.hub import _Pace

    pace, now = _Pace(), 100.0
    for _ in range(200):  # 2 ms between events, 0.7 ms to write each: keeping up
        now += 0.0013
        assert pace.at_once(0.0013, now)
        now += 0.0007
        pace.done(now)
    for _ in range(200):  # the same rate in pairs: half of them already waiting
        for waited in (0.003, 0.00003):
            now += waited
            assert pace.at_once(waited, now), "queued while half the time is idle"
            now += 0.001
            pace.done(now)
    decided = []
    for _ in range(40):  # events already waiting, 3 ms to write each: behind
        decided.append(pace.at_once(0.00001, now))
        now += 0.003
        pace.done(now)
    assert decided[0] and not decided[-1]
    assert decided.index(False) < 20, "too slow to notice"
    now += _Pace.QUEUE_SECONDS / 2
    assert not pace.at_once(0.002, now)
    pace.done(now + 0.0003)
    now += _Pace.QUEUE_SECONDS
    assert pace.at_once(0.002, now), "never writes at once again"

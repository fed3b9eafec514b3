"""What the sender writes is a sequence of well-formed WebSocket text frames, whatever the
message size (the three length encodings of RFC 6455)."""

from __future__ import annotations

import socket
from types import SimpleNamespace

from webapp.watch.outbox import Outbox
from webapp.watch.sender import Connection


def parse(data: bytes) -> list[tuple[int, bytes]]:
    frames, pos = [], 0
    while pos < len(data):
        first, second = data[pos], data[pos + 1]
        assert first & 0x80, "fragmented frame"
        assert not second & 0x80, "a server frame must not be masked"
        length, pos = second & 0x7F, pos + 2
        if length == 126:
            length, pos = int.from_bytes(data[pos:pos + 2], "big"), pos + 2
        elif length == 127:
            length, pos = int.from_bytes(data[pos:pos + 8], "big"), pos + 8
        frames.append((first & 0x0F, data[pos:pos + length]))
        pos += length
    return frames


def test_messages_of_every_size_are_framed_whole() -> None:
    ours, theirs = socket.socketpair()
    try:
        outbox = Outbox(limit=100)
        conn = Connection(SimpleNamespace(sock=ours), outbox)
        messages = [b"x" * n for n in (0, 1, 125, 126, 65535, 65536, 200_000)]
        for message in messages:
            outbox.send(message)
        conn.ping = True
        assert parse(conn.next_batch()) == [(0x1, m) for m in messages] + [(0x9, b"")]
    finally:
        ours.close()
        theirs.close()

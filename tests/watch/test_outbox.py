"""The outbox between the hub's watch threads and a connection's consumer: no message is
lost or left waiting, whatever the interleaving, and a full outbox gives up on its reader."""

from __future__ import annotations

import threading
import time

from webapp.watch.outbox import Outbox

PRODUCERS = 4
EACH = 5_000


def test_every_message_reaches_a_consumer_that_waits_between_batches() -> None:
    outbox = Outbox(limit=PRODUCERS * EACH)
    got: list[bytes] = []

    def produce(n: int) -> None:
        for i in range(EACH):
            assert outbox.send(f"{n}:{i}".encode())
            if i % 500 == 0:
                time.sleep(0.001)  # let the consumer catch up and wait again

    producers = [threading.Thread(target=produce, args=(n,)) for n in range(PRODUCERS)]
    for p in producers:
        p.start()
    deadline = time.monotonic() + 60
    waited_out = 0
    while len(got) < PRODUCERS * EACH and time.monotonic() < deadline:
        started = time.monotonic()
        batch = outbox.take(timeout=5)
        # Waiting out the whole timeout and then finding messages is a lost wake-up.
        if batch and time.monotonic() - started >= 5:
            waited_out += 1
        got.extend(data for data, _ in batch)
    for p in producers:
        p.join()
    assert waited_out == 0, "the consumer slept through messages"
    assert len(got) == PRODUCERS * EACH
    for n in range(PRODUCERS):
        mine = [int(m.split(b":")[1]) for m in got if m.startswith(f"{n}:".encode())]
        assert mine == list(range(EACH)), "a producer's messages were lost or reordered"


def test_a_consumer_is_woken_once_per_batch_not_per_message() -> None:
    wakes: list[int] = []
    outbox = Outbox(limit=100, on_ready=lambda: wakes.append(len(outbox)))
    for i in range(10):
        outbox.send(str(i).encode())
    assert len(wakes) == 1, "woken for every message"
    assert [d for d, _ in outbox.take_nowait(100)] == [str(i).encode() for i in range(10)]
    outbox.send(b"next")
    assert len(wakes) == 2, "not woken for a message after the drain"


def test_a_full_outbox_refuses_and_marks_its_reader_too_slow() -> None:
    outbox = Outbox(limit=3)
    assert all(outbox.send(b"x") for _ in range(3))
    assert not outbox.send(b"one too many")
    assert outbox.overflowed and not outbox.send(b"later")
    assert outbox.take(timeout=0.1) == [(b"x", None)] * 3

"""A followed log's lines between the cluster's readers and the page: bounded by bytes (a
page that stops reading made the server hold 20,000 lines of up to 4 MiB each), one long line
always passes, and a reader waiting for room is let go when the stream ends."""

from __future__ import annotations

import queue
import threading

import pytest

from webapp.watch.line_queue import LineQueue


def test_room_is_counted_in_bytes_and_a_long_line_still_passes() -> None:
    lines: LineQueue[bytes] = LineQueue(max_items=100, max_bytes=10)
    assert lines.put(b"x" * 6, 6)
    added = threading.Event()

    def put_more() -> None:
        lines.put(b"y" * 6, 6)  # 12 bytes would pass the bound: waits for room
        added.set()

    waiter = threading.Thread(target=put_more, daemon=True)
    waiter.start()
    assert not added.wait(0.3)
    assert lines.queued_bytes == 6
    assert lines.get(timeout=1) == b"x" * 6
    assert added.wait(5)
    assert lines.get_nowait() == b"y" * 6
    # Alone, a line longer than the bound is taken: nothing would ever make room for it.
    assert lines.put(b"z" * 50, 50)
    assert lines.get(timeout=1) == b"z" * 50
    with pytest.raises(queue.Empty):
        lines.get(timeout=0.05)


def test_closing_lets_a_waiting_reader_go() -> None:
    lines: LineQueue[bytes] = LineQueue(max_items=1, max_bytes=1000)
    assert lines.put(b"a", 1)
    answers: list[bool] = []
    waiter = threading.Thread(target=lambda: answers.append(lines.put(b"b", 1)), daemon=True)
    waiter.start()
    waiter.join(0.3)
    assert waiter.is_alive()  # full by count
    lines.close()
    waiter.join(5)
    assert answers == [False] and lines.queued_bytes == 0
    assert lines.put(b"c", 1) is False

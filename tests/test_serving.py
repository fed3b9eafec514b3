"""The server model's parts on their own: where a request ends (framing.py), and the request
pool that long-lived connections leave (pool.py)."""

from __future__ import annotations

import threading

import pytest

from webapp.serving import pool
from webapp.serving.framing import RequestReader

HEAD = b"POST /api/v1/agent/events HTTP/1.1\r\nHost: a\r\n"


def _fed(data: bytes, *, max_head: int = 65536, max_body: int = 1000,
         step: int = 1) -> RequestReader:
    """A reader given `data` `step` bytes at a time, as a slow client sends it."""
    reader = RequestReader(max_head, max_body)
    for at in range(0, len(data), step):
        if reader.feed(data[at:at + step]):
            break
    return reader


def test_a_request_without_body_is_whole_once_its_head_is() -> None:
    assert not _fed(b"GET / HTTP/1.1\r\nHost: a\r\n").complete
    reader = _fed(b"GET / HTTP/1.1\r\nHost: a\r\n\r\n")
    assert reader.complete and not reader.body_left_unread


def test_a_body_of_known_length_is_read_whole() -> None:
    assert not _fed(HEAD + b"Content-Length: 5\r\n\r\nabcd").complete
    reader = _fed(HEAD + b"Content-Length: 5\r\n\r\nabcde")
    assert reader.complete and bytes(reader.buffer).endswith(b"abcde")


def test_a_chunked_body_is_read_to_its_last_chunk() -> None:
    body = b"Transfer-Encoding: chunked\r\n\r\n5;x=y\r\nhello\r\n3\r\nabc\r\n0\r\n\r\n"
    assert not _fed(HEAD + body[:-2]).complete
    assert _fed(HEAD + body).complete
    trailers = body[:-2] + b"X-Checksum: 1\r\n\r\n"
    assert _fed(HEAD + trailers).complete


def test_a_chunked_body_over_the_limit_is_refused() -> None:
    chunk = b"%x\r\n%s\r\n" % (600, b"x" * 600)
    reader = _fed(HEAD + b"Transfer-Encoding: chunked\r\n\r\n" + chunk * 2, step=4096)
    assert reader.refusal is not None and reader.refusal.status == 413


def test_a_head_over_the_limit_is_refused() -> None:
    reader = _fed(b"GET / HTTP/1.1\r\nX-Big: " + b"a" * 2000, max_head=1024, step=512)
    assert reader.refusal is not None and reader.refusal.status == 431


@pytest.mark.parametrize("headers", [
    b"Content-Length: 5000\r\n",  # larger than the server takes: the app says 413
    b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n",  # ambiguous: gunicorn says 400
    b"Transfer-Encoding: gzip, chunked\r\n",
    b"Content-Length: 5\r\nContent-Length: 6\r\n",
    b"Content-Length: -1\r\n",
])
def test_what_is_not_framed_here_is_handed_on_and_closes_after(headers: bytes) -> None:
    reader = _fed(HEAD + headers + b"\r\n")
    assert reader.complete and reader.body_left_unread


def test_expect_continue_is_answered_by_the_reader_not_passed_on() -> None:
    reader = _fed(HEAD + b"Expect: 100-continue\r\nContent-Length: 3\r\n\r\n")
    assert reader.expects_continue and not reader.complete
    reader.feed(b"abc")
    assert reader.complete
    assert b"expect" not in bytes(reader.buffer).lower()
    assert bytes(reader.buffer).endswith(b"\r\n\r\nabc")


def test_an_upgrade_is_marked() -> None:
    reader = _fed(b"GET /agents/a/watch HTTP/1.1\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\n\r\n")
    assert reader.complete and reader.upgrade


def test_a_detached_thread_leaves_its_place_to_another() -> None:
    requests = pool.RequestPool(2)
    release = threading.Event()
    started = threading.Barrier(3)

    def long_lived() -> str:
        pool.detach()
        started.wait(5)
        release.wait(10)
        return "closed"

    def short() -> str:
        return "answered"

    streams = [requests.submit(long_lived) for _ in range(2)]
    started.wait(5)  # both pool threads serve long-lived connections now
    # The pool's two places are free all the same.
    assert [requests.submit(short).result(5) for _ in range(4)] == ["answered"] * 4
    assert requests.detached == 2
    release.set()
    assert [s.result(5) for s in streams] == ["closed", "closed"]
    requests.shutdown()


def test_detach_outside_a_pool_does_nothing() -> None:
    pool.detach()  # the development server, a test client: no pool to leave

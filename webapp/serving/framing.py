"""Where an HTTP/1.1 request ends, read from the bytes a client has sent so far.

The server's main loop reads each request whole, head and body, before a thread takes it
(worker.py), so that a client that sends slowly, or stops half-way, holds no thread. This
module only finds the request's end: gunicorn's parser still reads and checks the request
itself from these bytes, so a request judged wrongly here is refused there (400), never
served differently. Anything it cannot frame (an odd `Transfer-Encoding`, a body larger
than the server takes) is handed on as it is, marked so that its connection closes after
the answer instead of reading on.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_HEAD_END = b"\r\n\r\n"
_CHUNK_LINE_MAX = 1024  # a chunk-size line with its extensions
_HEX = re.compile(rb"[0-9A-Fa-f]{1,16}")
_CONTINUE = b"100-continue"


@dataclass(frozen=True)
class Refusal:
    """An answer the main loop gives itself, and closes the connection after."""

    status: int
    reason: str
    message: str


class RequestReader:
    """Feed it what a connection sends; it says when one whole request is there.

    `max_head`: bytes of request line and headers; beyond, 431. `max_body`: body bytes
    buffered; a declared larger body is not buffered (the app refuses it, 413, without
    reading it) and a chunked one that grows past it is refused here (413)."""

    def __init__(self, max_head: int, max_body: int) -> None:
        self.max_head = max_head
        self.max_body = max_body
        self.buffer = bytearray()
        self.head_end: int | None = None
        self.complete = False
        self.refusal: Refusal | None = None
        self.expects_continue = False  # the client waits for "100 Continue" to send its body
        self.upgrade = False  # a WebSocket (or other) upgrade: the socket outlives the request
        self.body_left_unread = False  # the connection must close after the answer
        self._length: int | None = None
        self._chunked = False
        self._chunk_at = 0  # where the next chunk-size line starts
        self._chunk_total = 0

    def feed(self, data: bytes) -> bool:
        """Take more bytes; True once the request is complete or refused."""
        self.buffer += data
        if self.head_end is None:
            self._find_head()
        if self.head_end is not None and not self.complete and self.refusal is None:
            self._find_body_end()
        return self.complete or self.refusal is not None

    # --- head ----------------------------------------------------------------------------

    def _find_head(self) -> None:
        # Empty lines before a request line are allowed (RFC 9112 section 2.2).
        start = 0
        while self.buffer.startswith(b"\r\n", start):
            start += 2
        end = self.buffer.find(_HEAD_END, start)
        if end < 0:
            if len(self.buffer) - start > self.max_head:
                self.refusal = Refusal(431, "Request Header Fields Too Large",
                                       f"the request's head is over {self.max_head} bytes")
            return
        if end - start > self.max_head:
            self.refusal = Refusal(431, "Request Header Fields Too Large",
                                   f"the request's head is over {self.max_head} bytes")
            return
        self.head_end = end + len(_HEAD_END)
        self._read_headers(start, end)

    def _read_headers(self, start: int, end: int) -> None:
        lines = bytes(self.buffer[start:end]).split(b"\r\n")
        request_line = lines[0].split(b" ")
        http10 = len(request_line) == 3 and request_line[2] == b"HTTP/1.0"
        lengths: set[bytes] = set()
        encodings: list[bytes] = []
        expect_span: tuple[int, int] | None = None
        at = start + len(lines[0]) + 2
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            name, value = name.strip().lower(), value.strip()
            if name == b"content-length":
                lengths.add(value)
            elif name == b"transfer-encoding":
                encodings.append(value.lower())
            elif name == b"expect" and value.lower() == _CONTINUE and not http10:
                expect_span = (at, at + len(line) + 2)
            elif name == b"upgrade" and value:
                self.upgrade = True
            at += len(line) + 2
        if encodings:
            if lengths or encodings != [b"chunked"]:
                # Both, or a coding we do not frame: gunicorn refuses or reads it itself.
                self._hand_on()
                return
            self._chunked = True
            self._chunk_at = self.head_end or 0
        elif lengths:
            value = lengths.pop() if len(lengths) == 1 else b""
            if not value.isdigit() or len(value) > 18:
                self._hand_on()  # gunicorn answers 400
                return
            self._length = int(value)
            if self._length > self.max_body:
                self._hand_on()  # the app answers 413 without reading it
                return
        else:
            self._length = 0
        if expect_span is not None and (self._chunked or self._length):
            # The main loop answers "100 Continue" itself (it reads the body, not the app):
            # the header goes, so that gunicorn does not send a second one later.
            self.expects_continue = True
            del self.buffer[expect_span[0]:expect_span[1]]
            self.head_end = (self.head_end or 0) - (expect_span[1] - expect_span[0])
            self._chunk_at = self.head_end

    # --- body ----------------------------------------------------------------------------

    def _find_body_end(self) -> None:
        head_end = self.head_end or 0
        if self._length is not None:
            if len(self.buffer) - head_end >= self._length:
                self.complete = True
            return
        if self._chunked:
            self._scan_chunks()

    def _scan_chunks(self) -> None:
        while True:
            at = self._chunk_at
            line_end = self.buffer.find(b"\r\n", at)
            if line_end < 0:
                if len(self.buffer) - at > _CHUNK_LINE_MAX:
                    self._hand_on()
                return
            size_text = bytes(self.buffer[at:line_end]).split(b";", 1)[0].strip()
            if not _HEX.fullmatch(size_text):
                self._hand_on()  # gunicorn answers 400
                return
            size = int(size_text, 16)
            if size == 0:
                self._scan_trailers(line_end + 2)
                return
            self._chunk_total += size
            if self._chunk_total > self.max_body or \
                    len(self.buffer) - (self.head_end or 0) > 2 * self.max_body + 65536:
                self.refusal = Refusal(413, "Content Too Large",
                                       f"the request body is over {self.max_body} bytes")
                return
            data_end = line_end + 2 + size
            if len(self.buffer) < data_end + 2:
                return
            if self.buffer[data_end:data_end + 2] != b"\r\n":
                self._hand_on()
                return
            self._chunk_at = data_end + 2

    def _scan_trailers(self, at: int) -> None:
        if self.buffer.startswith(b"\r\n", at):
            self.complete = True
            return
        end = self.buffer.find(_HEAD_END, at)
        if end >= 0:
            self.complete = True
        elif len(self.buffer) - at > self.max_head:
            self.refusal = Refusal(431, "Request Header Fields Too Large",
                                   "the request's trailers are too large")

    def _hand_on(self) -> None:
        """Complete as far as this reader goes; what follows stays on the socket."""
        self.complete = True
        self.body_left_unread = True

"""Every answer read from a cluster, or from an agent on its behalf, is bounded in size and
in time: an agent is not trusted to answer as a cluster would (docs/security.md, "Answers
from an agent").

A whole answer (a LIST page, a GET, discovery) holds at most `max_bytes` and ends within
`seconds` of the request. A streamed one (a watch, a followed log) is read line by line:
each line holds at most `line_bytes`, and a line once started ends within `line_seconds`;
a stream may stay quiet between lines (a watch says nothing for minutes). Past a bound
the answer is shut, its connection too (through a tunnel, the stream is reset and the
agent stops the request), and `AnswerExceeded` names the bound in words a page shows.

Time is kept by one watchdog thread: a read blocks in its socket, and an answer that
trickles a byte at a time never lets a per-read timeout fire.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
import weakref
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

MiB = 1024 * 1024
# The reasons of the errors below: a page shows their message as it is (faults.sentence).
TOO_LARGE, TOO_SLOW = "AnswerTooLarge", "AnswerTooSlow"
LINE_TOO_LONG, LINE_TOO_SLOW = "LineTooLong", "LineTooSlow"
REASONS = frozenset({TOO_LARGE, TOO_SLOW, LINE_TOO_LONG, LINE_TOO_SLOW})


@dataclass(frozen=True)
class Bounds:
    max_bytes: int = 32 * MiB
    seconds: float = 120.0
    line_bytes: int = 4 * MiB
    line_seconds: float = 60.0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Bounds:
        return cls(int(config["ANSWER_MAX_BYTES"]), float(config["ANSWER_SECONDS"]),
                   int(config["ANSWER_LINE_MAX_BYTES"]), float(config["ANSWER_LINE_SECONDS"]))


class AnswerExceeded(Exception):
    """An answer went past one of its bounds (a Kubernetes-like code, reason, message)."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message


def size(count: int) -> str:
    """4 MiB, 512 KiB, 1000 bytes: as a person reads a bound."""
    for unit, name in ((MiB, "MiB"), (1024, "KiB")):
        if count >= unit and count % unit == 0:
            return f"{count // unit} {name}"
    return f"{count} bytes"


def seconds(value: float) -> str:
    return f"{value:g} s"


class BoundedResponse:
    """A urllib3 response read within `bounds`: `read` for a whole answer, `stream` for
    chunks as they come (line by line when `streaming`). Everything else (status,
    headers, closing) is the response's own.

    `whose` names the sender in messages ("the agent's", "the cluster's"); `what` names
    a streamed answer's lines ("watch", "log"); `started` is when the request was sent
    (monotonic), so a whole answer's time counts from there."""

    def __init__(self, response: Any, bounds: Bounds, *, streaming: bool, whose: str,
                 what: str, started: float) -> None:
        self._response = response
        self._bounds = bounds
        self._streaming = streaming
        self._whose = whose
        self._what = what
        self._size = 0
        self._line = 0  # bytes of the line begun and not ended yet
        self._expired: AnswerExceeded | None = None
        # When the watchdog shuts this answer (monotonic), or None: a streamed answer has
        # one only while a line is begun.
        self.due: float | None = None if streaming else started + bounds.seconds
        WATCHDOG.watch(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._response, name)

    def read(self, *_args: Any, **_kwargs: Any) -> bytes:
        """The whole answer (at most max_bytes)."""
        return b"".join(self.stream(65536, decode_content=True))

    def stream(self, amt: int = 65536, decode_content: bool | None = None) -> Iterator[bytes]:
        try:
            for chunk in self._response.stream(amt, decode_content=decode_content):
                if self._streaming:
                    self._lines(chunk)
                else:
                    self._whole(chunk)
                yield chunk
        except AnswerExceeded:
            self._shut()
            raise
        except Exception:
            if self._expired is not None:  # the watchdog woke the read: say why
                self._shut()
                raise self._expired from None
            raise
        finally:
            self.due = None
            WATCHDOG.forget(self)
        if self._expired is not None:  # woken, and the read took that for an end
            self._shut()
            raise self._expired

    def _whole(self, chunk: bytes) -> None:
        self._size += len(chunk)
        if self._size > self._bounds.max_bytes:
            raise AnswerExceeded(502, TOO_LARGE, (
                f"{self._whose.capitalize()} answer exceeded {size(self._bounds.max_bytes)} "
                "and was cut off (AGENTWATCH_ANSWER_MAX_BYTES)"))

    def _lines(self, chunk: bytes) -> None:
        limit = self._bounds.line_bytes
        first = chunk.find(b"\n")
        if first < 0:
            self._line += len(chunk)
            if self.due is None:  # a line begins here
                self.due = time.monotonic() + self._bounds.line_seconds
            if self._line > limit:
                raise self._line_too_long()
            return
        if self._line + first > limit:
            raise self._line_too_long()
        last = chunk.rfind(b"\n")
        if last - first > limit and any(len(line) > limit for line in
                                        chunk[first + 1:last].split(b"\n")):
            raise self._line_too_long()
        self._line = len(chunk) - last - 1
        self.due = time.monotonic() + self._bounds.line_seconds if self._line else None

    def _line_too_long(self) -> AnswerExceeded:
        return AnswerExceeded(502, LINE_TOO_LONG, (
            f"A line of {self._whose} {self._what} exceeded "
            f"{size(self._bounds.line_bytes)} and the stream was cut off "
            "(AGENTWATCH_ANSWER_LINE_MAX_BYTES)"))

    def expire(self) -> None:
        """Called by the watchdog once `due` passed: wake the read blocked in its socket
        (the reading thread closes the answer), and say why."""
        if self._expired is None:
            if self._streaming:
                self._expired = AnswerExceeded(504, LINE_TOO_SLOW, (
                    f"A line of {self._whose} {self._what} did not end within "
                    f"{seconds(self._bounds.line_seconds)} and the stream was cut off "
                    "(AGENTWATCH_ANSWER_LINE_SECONDS)"))
            else:
                self._expired = AnswerExceeded(504, TOO_SLOW, (
                    f"{self._whose.capitalize()} answer did not end within "
                    f"{seconds(self._bounds.seconds)} and was cut off "
                    "(AGENTWATCH_ANSWER_SECONDS)"))
        self.due = None
        with contextlib.suppress(Exception):
            self._response.shutdown()

    def _shut(self) -> None:
        """Close the connection, by the thread reading it: it is never reused with part of
        an answer still in it."""
        with contextlib.suppress(Exception):
            self._response.shutdown()
        with contextlib.suppress(Exception):
            self._response.close()


class _Watchdog:
    """Shuts the answers whose time is up, a few times a second, in a thread of its own
    that runs while there are answers to watch (one per process: started again after a
    fork)."""

    TICK = 0.2

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._answers: weakref.WeakSet[BoundedResponse] = weakref.WeakSet()
        self._running_in = 0  # the pid whose thread runs, 0: none

    def watch(self, answer: BoundedResponse) -> None:
        with self._lock:
            self._answers.add(answer)
            if self._running_in != os.getpid():
                self._running_in = os.getpid()
                threading.Thread(target=self._run, daemon=True,
                                 name="answer-watchdog").start()

    def forget(self, answer: BoundedResponse) -> None:
        with self._lock:
            self._answers.discard(answer)

    def _run(self) -> None:
        while True:
            time.sleep(self.TICK)
            now = time.monotonic()
            with self._lock:
                if not self._answers:
                    self._running_in = 0
                    return
                late = [a for a in self._answers if a.due is not None and a.due <= now]
            for answer in late:
                self.forget(answer)
                answer.expire()


WATCHDOG = _Watchdog()

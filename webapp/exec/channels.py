"""Kubernetes' exec channel protocols as agentwatch speaks them to an API server.

Every binary WebSocket message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 the
error channel, 4 resize (`{"Width", "Height"}`), and in v5 255, the close of one channel.
v5 is asked for first, v4 and v3 after it, for older API servers. The error channel ends
a command: v4 and v5 send a `Status` (Success, or NonZeroExitCode with the code in
`details.causes`), v3 the failure's message as text (the code is read from its end).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

V5, V4, V3 = "v5.channel.k8s.io", "v4.channel.k8s.io", "v3.channel.k8s.io"
PROTOCOLS = (V5, V4, V3)
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
MAX_TERMINAL = 1000  # columns or rows a resize may ask for
_V3_CODE = re.compile(r"exit code (\d{1,3})$")


@dataclass(frozen=True)
class Ending:
    """How a command ended, from its error channel: its exit code when it ran to its end
    (None when it could not start), and the API server's message when not a success."""

    exit_code: int | None
    message: str = ""


def ending(protocol: str, payload: bytes) -> Ending:
    """The error channel's message (without its channel byte) read as `protocol` sends it."""
    text = payload.decode(errors="replace")
    if protocol == V3:
        if not text:
            return Ending(0)
        found = _V3_CODE.search(text.strip())
        return Ending(int(found.group(1)) if found else None, text[:1000])
    try:
        status = json.loads(text)
    except ValueError:
        return Ending(None, text[:1000])
    if not isinstance(status, dict):
        return Ending(None, text[:1000])
    if status.get("status") == "Success":
        return Ending(0)
    message = str(status.get("message") or "")[:1000]
    if status.get("reason") == "NonZeroExitCode":
        causes = (status.get("details") or {}).get("causes") or []
        for cause in causes if isinstance(causes, list) else []:
            if isinstance(cause, dict) and cause.get("reason") == "ExitCode":
                try:
                    return Ending(int(str(cause.get("message"))), message)
                except (TypeError, ValueError):
                    break
    return Ending(None, message or "the command failed")


def resize(cols: int, rows: int) -> bytes:
    """A resize message for the terminal's new size."""
    return bytes((RESIZE,)) + json.dumps({"Width": cols, "Height": rows},
                                         separators=(",", ":")).encode()


def checked_resize(payload: bytes) -> bytes | None:
    """A page's resize (`{"Width", "Height"}`, whole numbers within MAX_TERMINAL) as sent
    on; None for anything else."""
    try:
        size = json.loads(payload)
        cols, rows = size["Width"], size["Height"]
    except (ValueError, KeyError, TypeError, RecursionError):  # deep nesting: not a size
        return None
    if not all(type(v) is int and 0 < v <= MAX_TERMINAL for v in (cols, rows)):
        return None
    return resize(cols, rows)

"""`agentwatch report`: one event through the agent API, for pipelines."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any


class ReportError(Exception):
    pass


def report(url: str, token: str, event: dict[str, Any], timeout: float = 30) -> dict[str, Any]:
    """Post one event; the server's answer, or ReportError with the server's message."""
    endpoint = url.rstrip("/") + "/api/v1/agent/events"
    body = json.dumps({k: v for k, v in event.items() if v is not None}).encode()
    request = urllib.request.Request(endpoint, data=body, method="POST", headers={
        "Authorization": f"Bearer {token}", "Content-Type": "application/json",
        "User-Agent": "agentwatch-report"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return json.load(response)
    except urllib.error.HTTPError as exc:
        with exc:
            raw = exc.read()
        # A 429 (the token's quota) says when the server takes events again.
        retry = exc.headers.get("Retry-After", "")
        later = f" (retry in {retry} s)" if retry.isdigit() else ""
        try:
            error = json.loads(raw)["error"]
            raise ReportError(f"{exc.code} {error['code']}: {error['message']}{later}") \
                from None
        except (ValueError, KeyError, TypeError):
            text = raw[:200].decode(errors="replace")
            raise ReportError(f"{exc.code} {exc.reason}: {text}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ReportError(f"cannot reach {endpoint}: {reason}") from None

"""A WebSocket route's upgrade that the handshake refuses (no key or one that is not 16
bytes in base64, a version other than 13) is a 4xx saying why, before any sign-in is asked
for: never a 500 (what production runs, gunicorn)."""

from __future__ import annotations

import json
import socket

import pytest

from . import served

app_config, database_url, live, serve, sim, watch_timing = (  # fixtures
    served.app_config, served.database_url, served.live, served.serve, served.sim,
    served.watch_timing)

ROUTES = ["/agents/prod/watch", "/agents/prod/exec", "/api/v1/agent/tunnel"]


def upgrade(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], bytes]:
    lines = [f"GET {path} HTTP/1.1", f"Host: 127.0.0.1:{port}", "Upgrade: websocket",
             "Connection: Upgrade", *[f"{k}: {v}" for k, v in headers.items()], "", ""]
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall("\r\n".join(lines).encode())
        data = b""
        while b"\r\n\r\n" not in data or len(data) < _expected(data):
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status_line, *header_lines = head.decode("latin-1").split("\r\n")
    found = {k.lower(): v.strip() for k, _, v in (h.partition(":") for h in header_lines)}
    return int(status_line.split()[1]), found, body


def _expected(data: bytes) -> int:
    head, _, _ = data.partition(b"\r\n\r\n")
    for line in head.decode("latin-1").split("\r\n"):
        if line.lower().startswith("content-length:"):
            return len(head) + 4 + int(line.split(":")[1])
    return 0


@pytest.mark.parametrize("path", ROUTES)
def test_a_refused_upgrade_is_a_4xx_that_says_why(serve, path):
    server = serve(threads=8)
    good = "dGhlIHNhbXBsZSBub25jZQ=="  # 16 bytes, RFC 6455's example
    for version, key, status in (("99", good, 426), ("", good, 400), (None, good, 400),
                                 ("13", "bad", 400), ("13", "c2hvcnQ=", 400)):
        headers = {"Sec-WebSocket-Key": key}
        if version is not None:
            headers["Sec-WebSocket-Version"] = version
        code, found, body = upgrade(server.port, path, headers)
        assert code == status, (version, key, body)
        assert found["sec-websocket-version"] == "13"
        assert "Not a WebSocket handshake this server accepts" in \
            json.loads(body)["error"]["message"]
    assert "Traceback" not in server.log.read_text()

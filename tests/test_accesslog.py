"""Every request leaves one log line: method, path, status, duration, and no credentials."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from conftest import Helpers, bearer
from flask.testing import FlaskClient

from webapp import server


def access_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "agentwatch.access"]


def test_a_request_is_logged_with_method_path_status_and_duration(
        client: FlaskClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentwatch.access")
    client.get("/login")
    client.get("/no-such-page")
    lines = access_lines(caplog)
    assert lines[0].startswith("GET /login 200 ") and lines[0].endswith("ms")
    assert lines[1].startswith("GET /no-such-page 404 ")


def test_the_access_log_can_be_turned_off(app_config: dict, caplog: pytest.LogCaptureFixture,
                                          ) -> None:
    from webapp import create_app
    quiet = create_app({**app_config, "ACCESS_LOG": False})
    caplog.set_level(logging.INFO, logger="agentwatch.access")
    assert quiet.test_client().get("/login").status_code == 200
    assert access_lines(caplog) == []


def test_tokens_never_reach_the_log(client: FlaskClient, h: Helpers,
                                    caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="agentwatch.access")
    token = h.agent_with_token()
    client.post("/api/v1/agent/heartbeat?token=" + token, headers=bearer(token))
    client.post("/api/v1/agent/heartbeat", headers=bearer("awa_wrong"))
    lines = access_lines(caplog)
    assert lines == [lines[0], lines[1]]
    assert lines[0].startswith("POST /api/v1/agent/heartbeat 204 ")
    assert lines[1].startswith("POST /api/v1/agent/heartbeat 401 ")
    assert all(token not in line and "awa_" not in line for line in lines)


# --- under `agentwatch serve` ---------------------------------------------------------------

ACCESS_LINE = re.compile(
    r"^\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d [+-]\d{4}\] \[\d+\] \[INFO\] agentwatch\.access: "
    r"GET /login 200 \d+\.\dms$", re.MULTILINE)


@pytest.fixture
def served(tmp_path: Path, sqlite_template: Path) -> Iterator[tuple[str, Path]]:
    """`agentwatch serve` in a child process on a migrated SQLite copy; (base URL, the file
    its stderr goes to, apart from its stdout)."""
    database = tmp_path / "agentwatch.db"
    shutil.copy(sqlite_template, database)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AGENTWATCH_")}
    env.update({"AGENTWATCH_INSTANCE_PATH": str(tmp_path / "instance"),
                "AGENTWATCH_DATABASE_URL": f"sqlite:///{database}",
                "AGENTWATCH_SECRET_KEY": "test-secret", "AGENTWATCH_SCHEDULER_ENABLED": "false"})
    stderr = tmp_path / "stderr.log"
    with (tmp_path / "stdout.log").open("wb") as out, stderr.open("wb") as err:
        proc = subprocess.Popen(
            [str(Path(sys.executable).with_name("agentwatch")), "serve", "--host", "127.0.0.1",
             "--port", str(port), "--threads", "4"], env=env, stdout=out, stderr=err)
    try:
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, f"agentwatch serve exited: {stderr.read_text()[-2000:]}"
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
                break
            assert time.monotonic() < deadline, f"not listening: {stderr.read_text()[-2000:]}"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}", stderr
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def test_the_served_app_writes_access_lines_on_stderr(served: tuple[str, Path]) -> None:
    base_url, stderr = served
    secret = "awp_not-a-real-token-but-looks-like-one"
    response = requests.get(f"{base_url}/login?token={secret}&next=/private",
                            headers={"Authorization": f"Bearer {secret}"}, timeout=30)
    assert response.status_code == 200
    deadline = time.monotonic() + 10
    while not ACCESS_LINE.search(stderr.read_text()):
        assert time.monotonic() < deadline, f"no access line on stderr: {stderr.read_text()}"
        time.sleep(0.05)
    text = stderr.read_text()
    assert secret not in text and "token=" not in text and "/private" not in text


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """configure_logging changes process-wide loggers: put them back for the next tests."""
    names = [*server.LOGGERS, ""]
    kept = {n: (logging.getLogger(n).level, logging.getLogger(n).propagate,
                list(logging.getLogger(n).handlers)) for n in names}
    yield
    for name, (level, propagate, handlers) in kept.items():
        logger = logging.getLogger(name)
        logger.setLevel(level)
        logger.propagate = propagate
        logger.handlers[:] = handlers


def test_our_loggers_and_only_ours_are_configured(restored_logging: None) -> None:
    root_level = logging.getLogger().level
    out = io.StringIO()
    server.configure_logging(out)
    server.configure_logging(out)  # twice: still one line per record
    logging.getLogger("agentwatch.access").info("GET /x 200 1.0ms")
    logging.getLogger("webapp.watch.hub").info("watch relisting")  # modules' __name__ loggers
    logging.getLogger("urllib3.connectionpool").info("not ours")
    lines = out.getvalue().splitlines()
    assert [line.split("] ", 2)[2] for line in lines] == [
        "[INFO] agentwatch.access: GET /x 200 1.0ms", "[INFO] webapp.watch.hub: watch relisting"]
    assert logging.getLogger().level == root_level
    assert logging.getLogger("urllib3").level == logging.NOTSET

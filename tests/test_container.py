"""The Dockerfile's command line, run for real: gunicorn serving the app over HTTP."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent


def dockerfile_command() -> tuple[list[str], dict[str, str]]:
    text = (ROOT / "Dockerfile").read_text()
    command = json.loads(re.search(r"^CMD (\[.*\])$", text, re.M).group(1))
    env_block = re.search(r"^ENV ((?:.*\\\n)*.*)$", text, re.M).group(1)
    env = dict(pair.split("=", 1) for pair in shlex.split(env_block.replace("\\\n", " ")))
    return command, env


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def served(tmp_path, database_url):
    command, env = dockerfile_command()
    assert command[:2] == ["agentwatch", "serve"]
    port = free_port()
    command = [str(Path(sys.executable).parent / "agentwatch"), *command[1:]]
    command[command.index("--port") + 1] = str(port)
    command[command.index("--host") + 1] = "127.0.0.1"  # tests stay on loopback
    env = {**os.environ, **env, "AGENTWATCH_INSTANCE_PATH": str(tmp_path / "data"),
           "AGENTWATCH_DATABASE_URL": database_url}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):  # 30 s: a loaded 2-core machine boots gunicorn slowly
            try:
                urllib.request.urlopen(f"{url}/login", timeout=1).close()
                break
            except OSError:  # refused, reset or timed out while it boots
                time.sleep(0.1)
        else:
            raise AssertionError("server did not start")
        yield url, env
    finally:
        process.terminate()
        output = process.communicate(timeout=20)[0].decode()
        assert process.returncode == 0, output


def test_the_container_command_serves_the_app(served):
    url, env = served
    cli = str(Path(sys.executable).parent / "agentwatch")
    subprocess.run([cli, "agents", "create", "box"], env=env, check=True, capture_output=True)
    token = subprocess.run([cli, "tokens", "create", "box", "--name", "t"], env=env,
                           check=True, capture_output=True, text=True).stdout.split()[-1]
    request = urllib.request.Request(
        f"{url}/api/v1/agent/events", method="POST",
        data=json.dumps({"type": "config_commit_received", "commit": "abc1234"}).encode(),
        headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:  # a busy machine
        assert response.status == 201
        assert json.load(response)["duplicate"] is False
    assert (Path(env["AGENTWATCH_INSTANCE_PATH"]) / "secret_key").exists()

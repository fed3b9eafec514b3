"""A shell in a container, over the served app's WebSocket (`/agents/NAME/exec`) to the
simulated cluster's pods/exec, directly (the server's kubeconfig): the terminal's bytes
both ways, resize, the exit code, the keys that must all turn, the per-user cap, the idle
timeout, and the Activity event of every session."""

from __future__ import annotations

import contextlib
import json
import time
from typing import Any

import pytest
from simple_websocket import Client, ConnectionClosed

from .conftest import WAIT, Closed, Live, eventually

SUBPROTOCOL = "agentwatch.exec.v1"
GRANTED = {"access_as": "agent", "view": {"role": "viewer", "users": []},
           "act": {"role": "maintainer", "users": []},
           "exec": {"role": "admin", "users": [], "groups": []}}


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "EXEC_DIRECT_AGENTS": "prod", "EXEC_IDLE_SECONDS": 30,
            "EXEC_MAX_PER_USER": 2, "RECHECK_SECONDS": 0.3}


class Shell:
    """The page's side of a shell: binary channel messages out, output and JSON in."""

    def __init__(self, client: Client) -> None:
        self.client = client
        self.out = b""
        self.messages: list[dict[str, Any]] = []

    def type(self, text: str) -> None:
        self.client.send(b"\x00" + text.encode())

    def resize(self, cols: int, rows: int) -> None:
        self.client.send(b"\x04" + json.dumps({"Width": cols, "Height": rows}).encode())

    def _read(self, timeout: float) -> bool:
        data = self.client.receive(timeout=timeout)
        if data is None:
            return False
        if isinstance(data, str):
            self.messages.append(json.loads(data))
        elif data[:1] in (b"\x01", b"\x02"):
            self.out += data[1:]
        return True

    def until(self, text: str) -> str:
        deadline = time.monotonic() + WAIT
        while text.encode() not in self.out:
            left = deadline - time.monotonic()
            assert left > 0, f"no {text!r} in {self.out!r}"
            self._read(left)
        return self.out.decode()

    def message(self, kind: str) -> dict[str, Any]:
        deadline = time.monotonic() + WAIT
        while True:
            found = [m for m in self.messages if m["type"] == kind]
            if found:
                return found[0]
            left = deadline - time.monotonic()
            assert left > 0, f"no {kind} message in {self.messages}"
            try:
                self._read(left)
            except ConnectionClosed:
                raise AssertionError(f"closed before a {kind} message: "
                                     f"{self.client.close_reason} {self.client.close_message}"
                                     ) from None

    def close_code(self) -> tuple[int, str]:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            try:
                self._read(0.2)
            except ConnectionClosed:
                return int(self.client.close_reason), str(self.client.close_message)
        raise AssertionError("still open")


def open_shell(live: Live, token: str, agent: str = "prod", **params: str) -> Shell:
    from urllib.parse import urlencode
    query = urlencode({"namespace": "default", "pod": "web-1", **params})
    client = Client.connect(f"{live.ws_base}/agents/{agent}/exec?{query}",
                            subprotocols=[SUBPROTOCOL],
                            headers={"Authorization": f"Bearer {token}"},
                            receive_bytes=65536)

    def close() -> None:
        with contextlib.suppress(Exception):  # already closed by the server
            client.close()
        client.thread.join(timeout=5)

    live._track(close)
    return Shell(client)


def refusal(live: Live, token: str, agent: str = "prod", **params: str) -> tuple[int, str]:
    """The close code and reason a refused shell gets, read from the wire (a client library
    may miss a close frame that arrives with the handshake)."""
    from urllib.parse import urlencode
    query = urlencode({"namespace": "default", "pod": "web-1", **params})
    raw = live.raw_ws(f"/agents/{agent}/exec?{query}", {
        "Sec-WebSocket-Protocol": SUBPROTOCOL, "Authorization": f"Bearer {token}"})
    assert raw.status == 101, raw.status
    try:
        message = raw.recv()
    except Closed as closed:
        return int(closed.code or 0), closed.reason
    finally:
        raw.close()
    raise AssertionError(f"a message instead of a close: {message}")


def first_message(live: Live, token: str, agent: str = "prod", **params: str
                  ) -> dict[str, Any]:
    """The first JSON message of a shell, read from the wire (see refusal())."""
    from urllib.parse import urlencode
    query = urlencode({"namespace": "default", "pod": "web-1", **params})
    raw = live.raw_ws(f"/agents/{agent}/exec?{query}", {
        "Sec-WebSocket-Protocol": SUBPROTOCOL, "Authorization": f"Bearer {token}"})
    assert raw.status == 101, raw.status
    try:
        return raw.recv()
    finally:
        raw.close()


def endings(live: Live) -> list[Any]:
    """The sessions' records of how they ended (each open session has one of its opening
    before), once there is one."""
    return eventually(lambda: [e for e in live.events() if e.details.get("phase") != "opened"])


@pytest.fixture
def granted(live: Live) -> str:
    """alice (admin) with a token, agent `prod` granting exec to admins, pod web-1."""
    live.user("alice", "admin")
    live.agent("prod", access=GRANTED)
    live.sim.add_pod("default", "web-1", ["app"])
    live.sim.settle()
    return live.token("alice")


def test_a_shell_runs_resizes_and_ends_with_its_exit_code_in_activity(
        live: Live, granted: str) -> None:
    shell = open_shell(live, granted, container="app")
    started = shell.message("started")
    assert started["protocol"] == "v5.channel.k8s.io"
    assert started["command"] == ["sh"]
    shell.until("/ # ")
    shell.type("echo hello $HOSTNAME\r")
    shell.until("hello web-1")
    shell.resize(100, 30)
    shell.type("stty size\r")
    shell.until("30 100")
    shell.type("exit 7\r")
    ended = shell.message("exit")
    assert (ended["exitCode"], ended["reason"]) == (7, "exited")
    assert shell.close_code()[0] == 1000
    event = endings(live)[0]
    assert event.user_name == "alice"
    details = event.details
    assert (details["action"], details["object"], details["container"], details["command"],
            details["exit_code"], details["reason"]) == \
        ("exec", "Pod/default/web-1", "app", ["sh"], 7, "exited")
    assert details["started_at"] <= details["ended_at"]
    assert "hello" not in json.dumps(details) and "hello" not in (event.message or "")
    assert live.app.extensions["exec_sessions"].count() == 0


def test_a_command_runs_once_and_its_output_and_code_come_back(live: Live,
                                                               granted: str) -> None:
    shell = open_shell(live, granted, command="cat /etc/hostname")
    shell.until("web-1")
    assert shell.message("exit")["exitCode"] == 0


def test_a_shell_is_recorded_when_it_opens_too(live: Live, granted: str) -> None:
    """A server stopped or killed under a session leaves no end to record: the opening
    says who opened what, where, before anything is typed."""
    shell = open_shell(live, granted, container="app")
    shell.until("/ # ")
    (opening,) = live.events()
    assert opening.user_name == "alice"
    assert opening.message == "opened a shell: `sh` in pod default/web-1 (container app)"
    assert (opening.details["phase"], opening.details["command"],
            opening.details["object"]) == ("opened", ["sh"], "Pod/default/web-1")
    shell.type("exit\r")
    shell.message("exit")
    assert [e.details.get("phase") for e in eventually(
        lambda: live.events() if len(live.events()) == 2 else [])] == ["opened", None]


def test_a_commands_words_are_quoted_in_its_activity_line(live: Live, granted: str) -> None:
    """One argument cannot make the line read as another session's ("x` in pod ...")."""
    crafted = "echo 'x` in pod payments/db-0: closed. alice ran `ls'"
    shell = open_shell(live, granted, command=crafted)
    shell.message("exit")
    event = endings(live)[0]
    assert event.details["command"] == ["echo", "x` in pod payments/db-0: closed. alice ran `ls"]
    assert event.message == ("ran `echo 'x` in pod payments/db-0: closed. alice ran `ls'` "
                             "in pod default/web-1: exit code 0")


def test_no_shell_without_the_configurations_grant(live: Live) -> None:
    live.user("alice", "admin")
    live.agent("prod")  # the default access grants exec to no one
    live.sim.add_pod("default", "web-1", ["app"])
    code, reason = refusal(live, live.token("alice"))
    assert code == 4403
    assert "grants a shell to no one" in reason


def test_no_shell_for_a_user_the_grant_does_not_name(live: Live, granted: str) -> None:
    live.user("bob", "maintainer")
    code, reason = refusal(live, live.token("bob"))
    assert code == 4403
    assert "bob may not open a shell" in reason


def test_no_shell_when_the_server_does_not_allow_the_direct_cluster(
        live: Live, granted: str) -> None:
    live.app.config["EXEC_DIRECT_AGENTS"] = ""
    code, reason = refusal(live, granted)
    assert code == 4403
    assert "AGENTWATCH_EXEC_DIRECT_AGENTS" in reason


def test_the_api_servers_refusal_is_said_and_recorded(live: Live, granted: str) -> None:
    error = first_message(live, granted, container="nope")
    assert error["type"] == "error"
    assert error["code"] == 400
    assert "container nope is not valid for pod web-1" in error["message"]
    event = endings(live)[0]
    assert (event.details["result"], event.details["reason"]) == ("failed", "refused")


def test_bad_parameters_are_refused_before_anything_opens(live: Live, granted: str) -> None:
    code, reason = refusal(live, granted, pod="Not_A_Pod")
    assert code == 4400
    assert "Not_A_Pod" in reason
    code, reason = refusal(live, granted, command="sh -c 'unclosed")
    assert code == 4400
    assert "command" in reason
    for controls in ("sh \u0085", "sh \u2028", "sh \u202e", "sh\t-i"):  # not only ASCII's
        code, reason = refusal(live, granted, command=controls)
        assert code == 4400 and "control characters" in reason, controls
    assert not [r for r in live.sim.stats.requests if "exec" in r.path]


def test_a_user_holds_at_most_the_cap_of_shells(live: Live, granted: str) -> None:
    first, second = open_shell(live, granted), open_shell(live, granted)
    first.message("started"), second.message("started")
    code, reason = refusal(live, granted)
    assert code == 4429
    assert "EXEC_MAX_PER_USER" in reason
    first.type("exit\r")
    first.message("exit")
    eventually(lambda: live.app.extensions["exec_sessions"].count() == 1)
    open_shell(live, granted).message("started")


def test_an_idle_shell_is_closed(live: Live, granted: str) -> None:
    live.app.config["EXEC_IDLE_SECONDS"] = 0.6
    shell = open_shell(live, granted)
    shell.until("/ # ")
    ended = shell.message("exit")
    assert ended["reason"] == "idle"
    assert "AGENTWATCH_EXEC_IDLE_SECONDS" in ended["message"]
    event = endings(live)[0]
    assert event.details["reason"] == "idle"


def test_a_revoked_token_ends_its_shell_and_no_thread_stays(live: Live, granted: str) -> None:
    import threading

    from webapp import users
    shell = open_shell(live, granted)
    shell.until("/ # ")
    assert [t for t in threading.enumerate() if t.name == "exec-upstream"]
    with live.app.app_context():
        alice = users.get("alice")
        users.revoke_token(alice, users.personal_tokens(alice)[0].id)
    assert shell.message("exit")["reason"] == "ended"
    assert endings(live)[0].details["reason"] == "ended"
    eventually(lambda: live.app.extensions["exec_sessions"].count() == 0)
    eventually(lambda: not [t for t in threading.enumerate() if t.name == "exec-upstream"])


def test_a_read_only_token_opens_no_shell(live: Live, granted: str) -> None:
    """A shell changes things though its handshake is a GET: a token made to read is
    refused, as for any other change."""
    from webapp import users
    with live.app.app_context():
        read_only = users.issue_token(users.get("alice"), "reader", scope="read")
    code, reason = refusal(live, read_only)
    assert code == 4403
    assert "read-only" in reason
    assert not [r for r in live.sim.stats.requests if "exec" in r.path]


def test_a_user_no_longer_granted_a_shell_loses_the_open_one(live: Live, granted: str) -> None:
    """The grant is checked again while the shell is open (every RECHECK_SECONDS), not
    only when it opens: alice, demoted below the role exec is granted to, still views the
    cluster but her shell ends, recorded."""
    from webapp import users
    live.user("root", "admin")  # the last admin cannot be demoted
    shell = open_shell(live, granted)
    shell.until("/ # ")
    with live.app.app_context():
        users.set_role(users.get("alice"), "maintainer")
    ended = shell.message("exit")
    assert ended["reason"] == "ended"
    assert "alice may no longer open a shell in this cluster" in ended["message"]
    assert endings(live)[0].details["reason"] == "ended"


def test_the_manifest_allows_exec_only_when_asked() -> None:
    from webapp.tunnel import manifest

    def parts(allow: bool) -> tuple[list[str], list[dict[str, Any]]]:
        docs = manifest.documents("prod", "https://aw.example", "t", allow_exec=allow)
        role = next(d for d in docs if d["kind"] == "ClusterRole")
        args = docs[-1]["spec"]["template"]["spec"]["containers"][0]["args"]
        return args, [r for r in role["rules"] if "pods/exec" in r["resources"]]

    args, rules = parts(False)
    assert "--allow-exec" not in args and rules == []
    args, rules = parts(True)
    assert "--allow-exec" in args
    assert rules == [{"apiGroups": [""], "resources": ["pods/exec"],
                      "verbs": ["create", "get"]}]


def test_a_message_the_protocol_does_not_have_ends_the_shell_with_4400(
        live: Live, granted: str) -> None:
    shell = open_shell(live, granted)
    shell.until("/ # ")
    shell.client.send(b"\x07what")
    assert shell.close_code()[0] == 4400
    eventually(lambda: live.app.extensions["exec_sessions"].count() == 0)
    assert endings(live)[0].details["reason"] == "closed"


@pytest.mark.parametrize("resize", [b"[" * 5000 + b"]" * 5000,
                                    b'{"Width":' + b'{"a":' * 3000 + b"1" + b"}" * 3000 +
                                    b',"Height":1}'])
def test_a_resize_nested_too_deep_is_a_bad_message_and_the_session_is_recorded(
        live: Live, granted: str, resize: bytes) -> None:
    shell = open_shell(live, granted)
    shell.until("/ # ")
    shell.client.send(b"\x04" + resize)
    assert shell.close_code()[0] == 4400
    eventually(lambda: live.app.extensions["exec_sessions"].count() == 0)
    assert endings(live)[0].details["reason"] == "closed"

"""Plumbing of the tunnel benchmark (bench/cluster_tunnel.py), on top of cluster_common.

* `Transports`: on one `Rig` (one server, one simulator), two agents on the same simulated
  cluster: `direct` (the server's kubernetes client with the simulator's kubeconfig) and
  `tunneled` (registered with `--tunnel`; a real `agentwatch agent` process started here
  dials the server's `/api/v1/agent/tunnel` and carries its requests to the simulator).
* `agent_subscribers_main`: cluster_common's fan-out subscribers, watching through a
  chosen agent instead of the Rig's own.
* `sse_follower_main`: a followed pod log over the server's SSE endpoint, any agent, each
  line's lag measured as in bench/cluster_logs.py.
* `open_sse`: a followed log whose reader never reads (a stalled stream), or an idle one.
* `unread_bytes`: bytes a process's TCP connections to a port hold unread (the kernel's
  receive queue): the agent stops reading its API server when a stream's window is full.
* `vm_status`: RSS, peak RSS and threads of a process.
"""

from __future__ import annotations

import contextlib
import functools
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import cluster_common  # noqa: E402
from cluster_common import HOST, Rig  # noqa: E402
from cluster_logs import _Lines  # noqa: E402
from common import AGENTWATCH, Client, clean_environ, log  # noqa: E402

DIRECT = "direct"
TUNNELED = "tunneled"
TRANSPORTS = (DIRECT, TUNNELED)


# --- the two transports ------------------------------------------------------------------

class Transports:
    """Registers `direct` and `tunneled` on the rig's server and runs the tunneled agent's
    `agentwatch agent` process (its own session; stopped by its pid)."""

    def __init__(self, rig: Rig, webapp: str | None = None) -> None:
        self.rig = rig
        inst = rig.instance
        inst.cli("agents", "create", DIRECT, "--kubeconfig", rig.kubeconfig)
        inst.cli("agents", "create", TUNNELED, "--tunnel")
        out = inst.cli("tokens", "create", TUNNELED, "--name", "bench-agent")
        self._token = out.strip().splitlines()[-1].strip()
        self.log_path = os.path.join(inst.path, "agent.log")
        self._webapp = webapp
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_agent()

    def start_agent(self) -> None:
        env = clean_environ()
        env["AGENTWATCH_AGENT_TOKEN"] = self._token  # not on the command line (ps)
        env["AGENTWATCH_AGENT_HEALTH_PORT"] = "0"  # no probes port: nothing to collide with
        if self._webapp:
            env["PYTHONPATH"] = self._webapp
        logfile = open(self.log_path, "ab")  # noqa: SIM115 - the child holds it
        self.proc = subprocess.Popen(
            [AGENTWATCH, "agent", "--url", f"http://{HOST}:{self.rig.port}",
             "--kubeconfig", self.rig.kubeconfig, "--context", "sim"],
            env=env, stdout=logfile, stderr=subprocess.STDOUT, cwd=self.rig.instance.path,
            start_new_session=True)
        logfile.close()
        self.wait_connected()
        log(f"agent process pid={self.proc.pid} connected through the tunnel")

    @property
    def agent_pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def status(self) -> dict[str, Any]:
        client = Client(self.rig.port)
        try:
            code, body, _ = client.get(f"/api/v1/agents/{TUNNELED}",
                                       headers={"Authorization": f"Bearer {self.rig.token}"})
        finally:
            client.close()
        if code != 200:
            raise RuntimeError(f"/api/v1/agents/{TUNNELED} answered {code}: {body[:200]!r}")
        return dict(json.loads(body)["connection"])

    def wait_connected(self, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(f"agentwatch agent exited ({self.proc.returncode}):\n"
                                   + Path(self.log_path).read_text()[-2000:])
            if self.status().get("status") == "connected":
                return
            time.sleep(0.2)
        raise RuntimeError(f"the agent did not connect in {timeout:.0f} s; see {self.log_path}")

    def stop_agent(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> Transports:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop_agent()


# --- helpers in their own processes ------------------------------------------------------

def agent_subscribers_main(conn: Any, agent: str, *args: Any) -> None:
    """cluster_common.fanout_clients_main, its WebSockets opened on `agent`'s watch
    endpoint (it connects to the Rig's agent; this process is spawned, so rebinding the
    module's WsConn here changes nothing elsewhere)."""
    cluster_common.WsConn = functools.partial(cluster_common.WsConn,  # type: ignore[misc]
                                              agent=agent)
    cluster_common.fanout_clients_main(conn, *args)


def log_path(agent: str, namespace: str, pod: str, container: str) -> str:
    return (f"/agents/{agent}/cluster/logs?namespace={namespace}&pod={pod}"
            f"&container={container}&follow=true&timestamps=true&tailLines=0")


def sse_follower_main(conn: Any, port: int, token: str, agent: str, namespace: str,
                      pod: str, container: str) -> None:
    """Follow a log through the server (SSE, personal token); report each line's lag."""
    try:
        lines = _Lines()
        http_conn = http.client.HTTPConnection(HOST, port, timeout=60)
        http_conn.request("GET", log_path(agent, namespace, pod, container),
                          headers={"Authorization": f"Bearer {token}",
                                   "Accept": "text/event-stream"})
        resp = http_conn.getresponse()
        if resp.status != 200:
            conn.send(("err", f"{resp.status} {resp.read()[:300]!r}"))
            return
        stop = threading.Event()
        errors: list[str] = []
        mark = b'"line":"'

        def run() -> None:
            pending = b""
            while not stop.is_set():
                chunk = resp.read1(1 << 20)
                if not chunk:
                    errors.append("the stream closed")
                    return
                now_ns = time.time_ns()
                pending += chunk
                *events, pending = pending.split(b"\n\n")
                for event in events:
                    i = event.find(mark)
                    if i >= 0:
                        j = event.rfind(b'"')
                        lines.line(event[i + len(mark):j], now_ns)
                    elif b'"type":"error"' in event or b'"type":"end"' in event:
                        errors.append(event.decode(errors="replace"))

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        conn.send(("ready", {}))
        assert conn.recv()[0] == "stop"
        stop.set()
        conn.send(("done", {**lines.result(), "errors": errors[:3]}))
        http_conn.close()
    except Exception:  # noqa: BLE001 - reported to the parent
        conn.send(("err", traceback.format_exc()))


# --- streams held open from this process -------------------------------------------------

def open_sse(port: int, token: str, path: str, rcvbuf: int | None = None,
             timeout: float = 60) -> socket.socket:
    """GET `path` as an event stream; returns the socket once the 200 head has arrived
    (its body is left unread: with a small `rcvbuf`, a reader that has stopped)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    if rcvbuf:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    sock.settimeout(timeout)
    sock.connect((HOST, port))
    sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {HOST}:{port}\r\n"
                  f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode())
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)  # byte by byte: nothing of the body is taken
        if not chunk:
            raise RuntimeError(f"{path}: closed before the head: {head!r}")
        head += chunk
    if not head.startswith(b"HTTP/1.1 200"):
        sock.close()
        raise RuntimeError(f"{path}: {head.splitlines()[0].decode(errors='replace')}")
    return sock


def close_all(socks: list[socket.socket]) -> None:
    for sock in socks:
        with contextlib.suppress(OSError):
            sock.close()


# --- /proc -------------------------------------------------------------------------------

def _socket_inodes(pid: int) -> set[int]:
    out = set()
    fd_dir = f"/proc/{pid}/fd"
    for fd in os.listdir(fd_dir):
        with contextlib.suppress(OSError):
            target = os.readlink(os.path.join(fd_dir, fd))
            if target.startswith("socket:["):
                out.add(int(target[8:-1]))
    return out


def unread_bytes(pid: int, remote_port: int) -> list[int]:
    """Receive queues (bytes arrived, not read yet) of `pid`'s TCP connections to
    127.0.0.1:`remote_port`, largest first."""
    inodes = _socket_inodes(pid)
    want = f"0100007F:{remote_port:04X}"
    out = []
    with open("/proc/net/tcp") as handle:
        next(handle)
        for line in handle:
            parts = line.split()
            if parts[2] == want and int(parts[9]) in inodes:
                out.append(int(parts[4].split(":")[1], 16))
    return sorted(out, reverse=True)


def vm_status(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM (peak RSS) in KiB, and the thread count, of a live process."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "Threads"):
            out[key] = int(value.split()[0])
    return {"rss_kib": out.get("VmRSS", -1), "peak_rss_kib": out.get("VmHWM", -1),
            "threads": out.get("Threads", -1)}


def other_benchmarks() -> list[str]:
    """Command lines of other bench/*.py processes running now (not this one's)."""
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) == me:
            continue
        with contextlib.suppress(OSError):
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            text = " ".join(a.decode(errors="replace") for a in argv if a)
            if "bench/" in text and ".py" in text and "cluster_tunnel" not in text:
                found.append(f"{entry}: {text[:120]}")
    return found

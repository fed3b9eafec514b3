"""``pods/exec``: a command in a container, over the WebSocket channel protocols.

The request is checked as kube-apiserver checks it (a command, at least one stream, the
pod bound to a node and not completed, a container it has and that runs), then upgraded
(exec_socket.py) and served by a small shell (exec_shell.py). When the command ends, the
error channel carries its Status (v4, v5: ``Success``, or ``NonZeroExitCode`` with the
code in ``details.causes``; v3: the message as text) and the server closes.
"""

from __future__ import annotations

import json
from urllib.parse import parse_qs

from . import exec_shell, exec_socket
from .errors import ApiError
from .exchange import Exchange
from .exec_shell import Exited, Shell
from .exec_socket import ERROR, RESIZE, STDIN, V3, Closed, ServerSocket
from .resources import PODS
from .routes import Route
from .util import JSON

_TRUE = {"1", "true", "True", "TRUE", "t", "T"}


def _flag(query: dict[str, list[str]], name: str) -> bool:
    values = query.get(name) or []
    return bool(values) and values[0] in _TRUE


class Exec(Exchange):
    def _exec(self, route: Route, raw_query: str) -> None:
        assert route.name is not None
        query = parse_qs(raw_query, keep_blank_values=True)
        command = query.get("command") or []
        if not command:
            raise ApiError(400, "you must specify at least 1 command")
        stdin, stdout, stderr, tty = (_flag(query, n) for n in
                                      ("stdin", "stdout", "stderr", "tty"))
        if not (stdin or stdout or stderr):
            raise ApiError(400, "you must specify at least one of stdin, stdout, stderr")
        ns = route.namespace or ""
        pod = self.cluster.store.get(PODS, ns, route.name).obj
        container = self._exec_container(pod, route.name, (query.get("container") or [""])[0])
        if (self.headers.get("Upgrade") or "").lower() != "websocket":
            raise ApiError(400, "Upgrade request required")
        protocol = exec_socket.choose(self.headers.get("Sec-WebSocket-Protocol") or "")
        if protocol is None:
            raise ApiError(400, "unable to upgrade: no supported subprotocol was requested; "
                                f"supported: {', '.join(exec_socket.SUPPORTED)}")
        self.send_response(101, "Switching Protocols")
        for name, value in exec_socket.handshake_answer(
                self.headers.get("Sec-WebSocket-Key") or "", protocol):
            self.send_header(name, value)
        self.end_headers()
        self.close_connection = True
        ws = ServerSocket(self.connection, self.rfile)
        with self.server.sim.streaming(self.connection):
            self._exec_session(ws, protocol, pod, container, command, stdin, tty)

    def _exec_container(self, pod: JSON, name: str, container: str) -> str:
        spec, status = pod.get("spec") or {}, pod.get("status") or {}
        names = [c["name"] for c in spec.get("containers") or []]
        if not container:
            if len(names) != 1:
                raise ApiError(400, f"a container name must be specified for pod {name}, "
                                    f"choose one of: [{' '.join(names)}]")
            container = names[0]
        if container not in names:
            raise ApiError(400, f"container {container} is not valid for pod {name}")
        if not spec.get("nodeName"):
            raise ApiError(400, f"pod {name} does not have a host assigned")
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            raise ApiError(400, "cannot exec into a container in a completed pod; current "
                                f"phase is {phase}")
        state = next((s.get("state") or {} for s in status.get("containerStatuses") or []
                      if s.get("name") == container), {})
        if "running" not in state:
            raise ApiError(400, f'unable to upgrade connection: container not found '
                                f'("{container}")')
        return container

    def _exec_session(self, ws: ServerSocket, protocol: str, pod: JSON, container: str,
                      command: list[str], stdin: bool, tty: bool) -> None:
        meta = pod.get("metadata") or {}
        spec = next(c for c in pod["spec"]["containers"] if c["name"] == container)
        env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
               "HOSTNAME": str(meta.get("name")), "HOME": "/root",
               **({"TERM": "xterm"} if tty else {}),
               **{str(e["name"]): str(e["value"]) for e in spec.get("env") or []
                  if "value" in e},
               "KUBERNETES_SERVICE_HOST": "10.96.0.1", "KUBERNETES_SERVICE_PORT": "443"}

        def write(channel: int, data: bytes) -> None:
            ws.send(bytes((channel,)) + data)

        shell = Shell(str(meta.get("name")), env, write, tty)
        try:
            ws.send(bytes((exec_socket.STDOUT,)))  # the stream is established
            try:
                done = exec_shell.start(shell, command)
                shell.flush()
            except exec_shell.NotFound as exc:
                self._exec_failed(ws, protocol, f'OCI runtime exec failed: exec failed: '
                                  f'unable to start container process: exec: "{exc}": '
                                  "executable file not found in $PATH: unknown")
                return
            while done is None:
                if not stdin:
                    done = Exited(shell.status)
                    break
                opcode, message = ws.receive()
                if opcode != exec_socket.OP_BINARY or not message:
                    continue
                channel, data = message[0], message[1:]
                if channel == STDIN:
                    done = shell.feed(data)
                elif channel == RESIZE:
                    self._exec_resize(shell, data)
                elif channel == exec_socket.CLOSE and protocol == exec_socket.V5 \
                        and data[:1] == bytes((STDIN,)):
                    done = shell.end_of_input()
                shell.flush()
            self._exec_status(ws, protocol, command, done.code)
        except (Closed, OSError):
            return
        finally:
            ws.close(1000, "")

    @staticmethod
    def _exec_resize(shell: Shell, data: bytes) -> None:
        try:
            size = json.loads(data)
            shell.cols, shell.rows = int(size["Width"]), int(size["Height"])
        except (ValueError, KeyError, TypeError):
            pass  # kubelet drops a resize it cannot read

    @staticmethod
    def _exec_status(ws: ServerSocket, protocol: str, command: list[str], code: int) -> None:
        if code == 0:
            if protocol != V3:
                ws.send(bytes((ERROR,)) + json.dumps(
                    {"metadata": {}, "status": "Success"}, separators=(",", ":")).encode())
            return
        message = (f"command terminated with non-zero exit code: error executing command "
                   f"[{' '.join(command)}], exit code {code}")
        if protocol == V3:
            ws.send(bytes((ERROR,)) + message.encode())
            return
        ws.send(bytes((ERROR,)) + json.dumps({
            "metadata": {}, "status": "Failure", "message": message,
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": str(code)}]}},
            separators=(",", ":")).encode())

    @staticmethod
    def _exec_failed(ws: ServerSocket, protocol: str, message: str) -> None:
        if protocol == V3:
            ws.send(bytes((ERROR,)) + message.encode())
            return
        ws.send(bytes((ERROR,)) + json.dumps({
            "metadata": {}, "status": "Failure", "message": message,
            "reason": "InternalError", "code": 500}, separators=(",", ":")).encode())

"""The agent's tunnel: `agentwatch agent` dials out to the server and carries the server's
Kubernetes API requests to its cluster (docs/tunnel-protocol.md, docs/agent.md).

`frames` and `mux` are the protocol (both ends); `endpoint`, `wsserver`, `connections`,
`registry`, `proxy`, `listener` and `heads` the server's side; `agent`, `allowlist` and
`wsclient` the agent's.
"""

from __future__ import annotations

from flask import Flask


def init_app(app: Flask) -> None:
    from flask_sock import Sock

    from .endpoint import tunnel_socket
    from .proxy import LoopbackProxy
    from .registry import Tunnels
    from .wsserver import PATH

    tunnels = Tunnels()
    app.extensions["tunnels"] = tunnels
    app.extensions["tunnel_proxy"] = LoopbackProxy(app, tunnels)
    Sock(app).route(PATH)(tunnel_socket)

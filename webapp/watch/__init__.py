"""Live cluster overview: Kubernetes watches relayed to the browser.

`kube` talks to clusters, `hub` shares upstream watches, `ws` and `stream` carry them to
pages, `rows` renders table rows, `logs` and `actions` do the rest of the Cluster tab.
The Cluster tab's larger features are packages of their own, whose endpoints join this
one's blueprint (`routes.bp`) or its WebSocket server: webapp/usage (CPU and memory usage
from metrics.k8s.io), webapp/apply (edit, dry run, diff and apply), webapp/nodes (cordon,
uncordon, drain) and webapp/exec (a shell in a container).
"""

from __future__ import annotations

from flask import Flask

from .. import agents


def init_app(app: Flask) -> None:
    from ..apply import routes as apply_routes
    from ..exec import page_socket as exec_socket
    from ..nodes import routes as node_routes
    from ..usage import routes as usage_routes
    from . import routes, table_rows, ws
    from .discovery import Discovery
    from .hub import Hub
    from .kube import ClusterClient
    from .registry import Clusters
    from .summaries import Summaries
    from .upstream import Timing

    clusters = Clusters()

    def client_for(agent_name: str) -> ClusterClient:
        return clusters.client(agents.get(agent_name))

    timing = Timing(**app.config.get("WATCH_TIMING", {}))
    app.extensions["clusters"] = clusters
    discovery = Discovery(client_for)
    app.extensions["discovery"] = discovery
    hub = Hub(client_for, timing, table_rows.hub_row,
              check=lambda agent, params: discovery.kind(agent, params))
    app.extensions["watch_hub"] = hub
    app.extensions["cluster_summaries"] = Summaries(
        hub, float(app.config["SUMMARY_KEEP_SECONDS"]))
    # The features' endpoints join routes.bp as their modules are imported (above), before
    # it is registered.
    usage_routes.init_app(app, client_for, hub)  # resource usage
    apply_routes.init_app(app)  # edit and apply, create from YAML
    app.register_blueprint(routes.bp)
    node_routes.init_app(app)  # cordon, uncordon, drain
    ws.init_app(app)
    exec_socket.init_app(app)  # a shell in a container: after ws, whose options it shares

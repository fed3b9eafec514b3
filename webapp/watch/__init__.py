"""Live cluster overview: Kubernetes watches relayed to the browser.

`kube` talks to clusters, `hub` shares upstream watches, `ws` and `stream` carry them to
pages, `rows` renders table rows, `logs` and `actions` do the rest of the Cluster tab.
"""

from __future__ import annotations

from flask import Flask

from .. import agents


def init_app(app: Flask) -> None:
    from . import node_routes, routes, table_rows, ws
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
    from . import usage_routes  # resource usage: its endpoints join routes.bp
    usage_routes.init_app(app, client_for, hub)
    from . import apply_routes  # edit and apply, create from YAML: routes on routes.bp
    apply_routes.init_app(app)
    app.register_blueprint(routes.bp)
    node_routes.init_app(app)  # cordon, uncordon, drain (on routes.bp, imported above)
    ws.init_app(app)
    from . import exec_socket
    exec_socket.init_app(app)  # a shell in a container

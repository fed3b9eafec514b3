"""A simulated Kubernetes cluster that speaks the Kubernetes HTTP API on loopback.

For tests, benchmarks and demos of code that uses the real ``kubernetes`` client: pods,
services, events, namespaces and the Flux Kustomization/HelmRelease/GitRepository kinds,
with LIST/WATCH (resourceVersion, bookmarks, 410 Gone), CRUD and PATCH, pod logs
(follow/tail/timestamps/previous), a small Flux controller, impersonation + RBAC, and
request counters.  Stdlib + PyYAML only.

    from webapp.simcluster import SimCluster
    with SimCluster(history_size=1000, bookmark_interval=5.0) as cluster:
        server = cluster.serve()                  # http://127.0.0.1:<port>
        cluster.write_kubeconfig(path)            # kubernetes.config.new_client_from_config
        cluster.add_pod("default", "web-1", ["app"], state="Running")

Modules: ``cluster`` (Python API), ``http`` (server/routing), ``store`` (objects, RV,
watch history), ``selectors``, ``patch``, ``pods`` (object builders, kubectl states),
``events``, ``logs``, ``flux``, ``rbac``, ``stats``, ``scheduler``, ``demo`` (seed data +
churn), ``__main__`` (CLI).
"""

from .cluster import SimCluster
from .demo import Churn, Demo
from .errors import ApiError
from .flux import inventory_entry, inventory_id
from .http import SimServer
from .pods import STATES, kubectl_status

__all__ = [
    "STATES",
    "ApiError",
    "Churn",
    "Demo",
    "SimCluster",
    "SimServer",
    "inventory_entry",
    "inventory_id",
    "kubectl_status",
]

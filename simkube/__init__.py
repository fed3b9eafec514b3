"""A simulated Kubernetes cluster that speaks the Kubernetes HTTP API on loopback, answering
as kube-apiserver 1.37 does (tests/simulator/test_parity.py runs against both).

For tests, benchmarks and demos of code that uses the real ``kubernetes`` client: the kinds
of a full dashboard (Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs, CronJobs,
Pods, Services, Ingresses, EndpointSlices, NetworkPolicies, ConfigMaps, Secrets, PVCs, PVs,
StorageClasses, Nodes, Namespaces, Events) and the CRDs of ``crds/`` (Flux's
Kustomization/HelmRelease/GitRepository, the demo Backup), found by discovery (legacy and
aggregated ``APIGroupDiscoveryList``) and printed as the server's ``as=Table`` (columns and
cells of its printers, CRD printer columns, ``includeObject``, Table watches), with
LIST/WATCH (resourceVersion, selectors, bookmarks, 410 Gone, and versions ahead of
the store as the watch cache answers them: reads wait ``block_timeout`` (3 s) then 504
"Too large resource version", a watch-list gets that in-stream, a plain watch stays
silent), Exact lists, ListOptions validation, CRUD and PATCH, pod
logs (follow/tail/timestamps/previous), a small Flux controller, a miniature
controller-manager (Deployment → ReplicaSet → Pods with rollouts, StatefulSet, DaemonSet,
Job, CronJob, Service → EndpointSlice, garbage collection) and the scale subresource,
impersonation + RBAC, and request counters.  Stdlib + PyYAML only.

Python API (all in ``SimCluster`` unless noted)::

    cluster = SimCluster(history_size=1000, bookmark_interval=5.0, *, token=None,
                         flux_delay=0.2, log_max_lines=50_000, block_timeout=3.0,
                         start_rv=1)
    server = cluster.serve(host="127.0.0.1", port=0)   # SimServer: .url .port .stop()
    cluster.write_kubeconfig(path, context="sim", *, namespace="default", token=None)
    cluster.close()                                    # also: with SimCluster() as cluster

    # objects (resource = plural, kind or short name; copies in, copies out)
    cluster.create(obj) / get(resource, name, namespace="default") / find(...) -> obj|None
    cluster.list(resource, namespace=None, label_selector=None, field_selector=None)
    cluster.update(resource, name, obj_or_fn, namespace="default")
    cluster.patch(resource, name, body, namespace="default", content_type=MERGE)
    cluster.delete(resource, name, namespace="default", grace_period=None)

    # realistic objects
    cluster.add_namespace(name, labels=None)
    cluster.add_pod(namespace, name, containers=None, *, state=None, phase=None,
                    labels=None, node="sim-worker", owner=None, restarts=0,
                    image_id=True, events=True, logs=(), restart_policy="Always",
                    grace_period=30, annotations=None)        # states: pods.STATES
    cluster.set_pod_state(namespace, name, state, container=None, *, restarts=None)
    cluster.restart_container(namespace, pod, container=None, *, reason="Error",
                              exit_code=1, crashloop=True)
    cluster.add_service(namespace, name, type="ClusterIP", ports=None, selector=None,
                        labels=None, lb_ingress=True)
    cluster.add_gitrepository / add_kustomization / add_helmrelease(namespace, name, ...)
    cluster.record_event(obj, reason, message, type="Normal", component=None)
    cluster.run_cronjob(namespace, name, job_name=None, scheduled_at=None)  # a Job from it
    cluster.settle(timeout=10.0)     # controllers idle, every pod started
    cluster.workloads.pause() / resume()     # as a control plane without controller-manager
    builders.node / deployment / statefulset / daemonset / cronjob / job / service / ...
    # pod templates may say simcluster.agentwatch.dev/state: CrashLoopBackOff (or another
    # pods.STATES value): the kubelet starts their pods so; a Job's "Error" fails it

    # logs
    cluster.append_log(namespace, pod, container, line_or_lines) -> int
    cluster.generate_logs(namespace, pod, container, rate, seed=None) -> LogGenerator

    # Flux (cluster.flux)
    flux.fail_next(namespace, name, reason="ReconciliationFailed", message=None,
                   kind="Kustomization", times=1)
    flux.set_failing(...) / flux.clear_failure(namespace, name, kind=...)
    flux.set_source_revision(namespace, name, revision=None) -> "main@sha1:<40 hex>"
    flux.request_reconcile(namespace, name, kind="Kustomization") -> requestedAt
    flux.set_inventory(namespace, name, entries)     # inventory_entry(ns, name, kind, ...)

    # tests and benchmarks
    cluster.stats            # lists(r), watches(r), open_watches(r), wait_open_watches(r, n),
                             # count(verb, r), requests (with headers), snapshot(), reset()
    cluster.rbac             # allow(users=, groups=, verbs=, resources=, namespaces=),
                             # add_token(token, user, groups), clear()
    cluster.expire_history(changes=None) -> new resourceVersion
    cluster.expire_watches()                 # open watches: in-stream 410, versions stay valid
    cluster.faults.fail_next(verb, error=410, times=1, resource=None)   # injected Status
    cluster.replace(populate=None, start_rv=1) -> rv   # recreated behind the same address:
                             # versions restart lower, new objects, connections cut
    server.cut_streams() / cut_connections()   # closed mid-stream, no final chunk
    server.go_down() / come_back() / outage(seconds)   # connection refused, same port
    cluster.wait_for(predicate, timeout=30.0)
    cluster.errors           # exceptions from background callbacks (should stay [])
    demo = seed_demo(cluster, seed=0)
    Churn(cluster, demo=None, *, rate=2.0, log_rate=20.0, seed=None).start() / .stop()

CLI: ``python -m simkube --port 8001 --kubeconfig PATH [--demo] [--churn]``;
SIGHUP replaces the cluster, SIGUSR1 is an outage, SIGUSR2 cuts every stream.

Modules: ``cluster`` (Python API; ``kubelet`` its pods' lives, ``seeding`` its ``add_*``
helpers), ``http`` (routes a request to ``reads``, ``writes`` or ``subresources``, over
``exchange``: replies, errors, streams), ``server``, ``negotiation`` (Accept:
Table, aggregated discovery), ``representation`` (Tables and metadata-only answers),
``store`` (objects, RV, watch history), ``selectors`` (``label_selector``: apimachinery's
parser), ``patch``, ``pods`` (object builders, kubectl states), ``builders`` (nodes,
workloads, config, storage), ``defaults`` (what the server defaults on create),
``workloads`` (the controllers, fed by store events: ``controller_base`` their queue and
helpers, ``apps_controllers``, ``batch_controllers``, ``endpointslices``), ``scale``,
``printers`` (Table cells; ``columns.json``: the server's column definitions), ``events``,
``logs``, ``flux``, ``rbac``, ``stats``, ``scheduler``, ``resources`` (kinds, CRDs,
discovery), ``faults``, ``errors``, ``demo`` (seed data + churn), ``__main__`` (CLI).
"""

from .cluster import SimCluster
from .demo import Churn, Demo, seed_demo
from .errors import ApiError
from .flux import inventory_entry, inventory_id
from .pods import STATES, kubectl_status
from .server import SimServer

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
    "seed_demo",
]

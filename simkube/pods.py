"""Builders for realistic Pod and Service objects, and kubectl-style pod states.

A pod's ``state`` is the value ``kubectl get pods`` prints in STATUS, and the status built
for it is what a kubelet would report: ``phase``, ``conditions`` and per-container
``containerStatuses`` with ``state``/``lastState``, ``ready``, ``started``,
``restartCount``, ``image``/``imageID``/``containerID``.  States:

  Pending                 unschedulable: no node, PodScheduled=False
  ContainerCreating       scheduled, containers waiting (phase Pending)
  Running                 all containers running and ready
  NotReady                running but the readiness probe fails (0/1 READY)
  CrashLoopBackOff        waiting after restarts, lastState terminated (Error)
  OOMKilled               terminated with reason OOMKilled, will restart
  Error                   terminated with a non-zero exit (phase Failed)
  Completed               terminated with exit 0 (phase Succeeded)
  ImagePullBackOff / ErrImagePull / CreateContainerConfigError   waiting, never started
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Sequence
from typing import Any

from .util import JSON, json_copy, rfc3339, stable_hex

STATES = (
    "Pending", "ContainerCreating", "Running", "NotReady", "CrashLoopBackOff", "OOMKilled",
    "Error", "Completed", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError",
)
PHASE_DEFAULT_STATE = {
    "Pending": "ContainerCreating", "Running": "Running", "Succeeded": "Completed",
    "Failed": "Error", "Unknown": "Running",
}
NODES = ("sim-control-plane", "sim-worker", "sim-worker2", "sim-worker3")
_WAITING_NEVER_STARTED = {"ContainerCreating", "ImagePullBackOff", "ErrImagePull",
                          "CreateContainerConfigError"}

_ip_lock = threading.Lock()
_pod_ips = itertools.count(2)
_svc_ips = itertools.count(10)
_node_ports = itertools.count(30080)


def _next(counter: itertools.count[int]) -> int:
    with _ip_lock:
        return next(counter)


def pod_ip() -> str:
    n = _next(_pod_ips)
    return f"10.244.{(n // 250) % 250}.{n % 250 + 2}"


def node_ip(node: str) -> str:
    return f"172.18.0.{NODES.index(node) + 2 if node in NODES else 9}"


def image_id(image: str) -> str:
    repo = image.split(":", 1)[0]
    if "/" not in repo:
        repo = f"docker.io/library/{repo}"
    elif "." not in repo.split("/", 1)[0]:
        repo = f"docker.io/{repo}"
    return f"{repo}@sha256:{stable_hex(image, 64)}"


def container_spec(c: str | JSON) -> JSON:
    """A container from a name (image guessed) or a dict with at least ``name``."""
    if isinstance(c, str):
        c = {"name": c}
    spec: JSON = {
        "name": c["name"],
        "image": c.get("image") or f"ghcr.io/example/{c['name']}:1.4.2",
        "imagePullPolicy": "IfNotPresent",
        "resources": {},
        "terminationMessagePath": "/dev/termination-log",
        "terminationMessagePolicy": "File",
    }
    for key in ("ports", "env", "args", "command", "readinessProbe", "resources"):
        if key in c:
            spec[key] = c[key]
    return spec


def build_pod(
    namespace: str, name: str, *, containers: Sequence[str | JSON] | None = None,
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None,
    node: str | None = "sim-worker", owner: tuple[str, str] | None = None,
    restart_policy: str = "Always", grace_period: int = 30,
) -> JSON:
    """A Pod object without status; ``owner`` is (kind, name), e.g. ("ReplicaSet", "web-5d8")."""
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [{
            "apiVersion": "batch/v1" if owner[0] == "Job" else "apps/v1",
            "kind": owner[0], "name": owner[1], "uid": stable_hex(f"{namespace}/{owner}", 32),
            "controller": True, "blockOwnerDeletion": True,
        }]
    spec: JSON = {
        "containers": [container_spec(c) for c in (containers or ["app"])],
        "restartPolicy": restart_policy,
        "terminationGracePeriodSeconds": grace_period,
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
        "enableServiceLinks": True,
        "preemptionPolicy": "PreemptLowerPriority",
        "priority": 0,
    }
    if node:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def _container_status(
    pod: JSON, c: JSON, state: str, restarts: int, now: str, with_image_id: bool,
    last: JSON | None = None,
) -> JSON:
    meta = pod["metadata"]
    image = c["image"]
    seed = f"{meta.get('uid')}/{c['name']}/{restarts}"
    cid = f"containerd://{stable_hex(seed, 64)}"
    st: JSON = {
        "name": c["name"], "image": image, "imageID": image_id(image),
        "containerID": cid, "ready": False, "started": False,
        "restartCount": restarts, "state": {}, "lastState": {},
    }
    prev_term: JSON = last or {
        "exitCode": 1, "reason": "Error", "startedAt": now, "finishedAt": now,
        "containerID": f"containerd://{stable_hex(f'{cid}/prev', 64)}",
    }
    if state in ("Running", "NotReady"):
        st["state"] = {"running": {"startedAt": now}}
        st["ready"] = state == "Running"
        st["started"] = True
        if restarts:
            st["lastState"] = {"terminated": prev_term}
    elif state == "CrashLoopBackOff":
        back = min(10 * 2 ** max(restarts - 1, 0), 300)
        backoff = f"{back // 60}m{back % 60}s" if back >= 60 else f"{back}s"
        st["state"] = {"waiting": {
            "reason": "CrashLoopBackOff",
            "message": f"back-off {backoff} restarting failed container={c['name']} "
                       f"pod={meta['name']}_{meta['namespace']}({meta.get('uid', '')})",
        }}
        st["lastState"] = {"terminated": prev_term}
    elif state in ("Error", "Completed", "OOMKilled"):
        code, reason = {"Error": (1, "Error"), "Completed": (0, "Completed"),
                        "OOMKilled": (137, "OOMKilled")}[state]
        st["state"] = {"terminated": {
            "exitCode": code, "reason": reason, "startedAt": now, "finishedAt": now,
            "containerID": cid,
        }}
        if restarts:
            st["lastState"] = {"terminated": prev_term}
    else:
        message = {
            "ContainerCreating": None,
            "ImagePullBackOff": f'Back-off pulling image "{image}"',
            "ErrImagePull": f'failed to pull and unpack image "{image}": failed to resolve '
                            f'reference "{image}": not found',
            "CreateContainerConfigError": 'secret "app-credentials" not found',
        }.get(state)
        waiting: JSON = {"reason": state}
        if message:
            waiting["message"] = message
        st["state"] = {"waiting": waiting}
        st["imageID"] = ""
        del st["containerID"]
        if restarts:
            st["lastState"] = {"terminated": prev_term}
    if not with_image_id:
        st.pop("imageID", None)
    return st


def _condition(type_: str, ok: bool, now: str, reason: str | None = None,
               message: str | None = None) -> JSON:
    cond: JSON = {"type": type_, "status": "True" if ok else "False",
                  "lastProbeTime": None, "lastTransitionTime": now}
    if reason:
        cond["reason"] = reason
    if message:
        cond["message"] = message
    return cond


def build_status(
    pod: JSON, states: dict[str, str], *, restarts: dict[str, int] | None = None,
    with_image_id: bool = True, old: JSON | None = None,
    last_terminated: dict[str, JSON] | None = None,
) -> JSON:
    """The status a kubelet reports for per-container kubectl ``states``.

    Containers missing from ``states`` keep the state derived from ``old`` (or Running).
    ``last_terminated`` gives a container's ``lastState.terminated`` (after a restart);
    otherwise the one in ``old`` is kept.  Condition ``lastTransitionTime`` is kept from
    ``old`` when the condition's status is unchanged.
    """
    now = rfc3339()
    spec = pod["spec"]
    restarts = dict(restarts or {})
    old_statuses = {s["name"]: s for s in ((old or {}).get("containerStatuses") or [])}
    node = spec.get("nodeName")
    statuses: list[JSON] = []
    st_by: dict[str, str] = {}
    for c in spec["containers"]:
        name = c["name"]
        state = states.get(name) or state_of_container(old_statuses.get(name)) or "Running"
        count = restarts.get(name, old_statuses.get(name, {}).get("restartCount", 0))
        if state in ("CrashLoopBackOff", "OOMKilled") and count == 0:
            count = 1
        st_by[name] = state
        last = (last_terminated or {}).get(name) or (
            (old_statuses.get(name) or {}).get("lastState") or {}).get("terminated")
        statuses.append(_container_status(pod, c, state, count, now, with_image_id, last))
    names = list(st_by)
    status: JSON = {"qosClass": "BestEffort"}
    if not node:
        status["phase"] = "Pending"
        status["conditions"] = [_condition(
            "PodScheduled", False, now, "Unschedulable",
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are "
            "available: 3 No preemption victims found for incoming pod.")]
        return _keep_transition_times(status, old)
    all_ready = all(s["ready"] for s in statuses)
    terminated = [s for s in statuses if "terminated" in s["state"]]
    never_started = all(st_by[n] in _WAITING_NEVER_STARTED for n in names) and not any(
        s["restartCount"] for s in statuses)
    if len(terminated) == len(statuses) and spec.get("restartPolicy") != "Always":
        ok = all(s["state"]["terminated"]["exitCode"] == 0 for s in terminated)
        status["phase"] = "Succeeded" if ok else "Failed"
    elif never_started:
        status["phase"] = "Pending"
    else:
        status["phase"] = "Running"
    unready = [s["name"] for s in statuses if not s["ready"]]
    if status["phase"] == "Succeeded":
        ready_reason, ready_msg = "PodCompleted", None
    elif unready:
        ready_reason = "ContainersNotReady"
        ready_msg = f"containers with unready status: [{' '.join(unready)}]"
    else:
        ready_reason, ready_msg = None, None
    sandbox = not all(st_by[n] == "ContainerCreating" for n in names)
    status["conditions"] = [
        _condition("PodReadyToStartContainers", sandbox, now),
        _condition("Initialized", True, now),
        _condition("Ready", all_ready, now, ready_reason, ready_msg),
        _condition("ContainersReady", all_ready, now, ready_reason, ready_msg),
        _condition("PodScheduled", True, now),
    ]
    old_status = old or {}
    status["hostIP"] = old_status.get("hostIP") or node_ip(node)
    status["hostIPs"] = [{"ip": status["hostIP"]}]
    ip = old_status.get("podIP") or pod_ip()
    status["podIP"] = ip
    status["podIPs"] = [{"ip": ip}]
    status["startTime"] = old_status.get("startTime") or now
    status["containerStatuses"] = statuses
    return _keep_transition_times(status, old)


def _keep_transition_times(status: JSON, old: JSON | None) -> JSON:
    before = {c["type"]: c for c in ((old or {}).get("conditions") or [])}
    for cond in status.get("conditions", []):
        prev = before.get(cond["type"])
        if prev is not None and prev.get("status") == cond["status"]:
            cond["lastTransitionTime"] = prev.get("lastTransitionTime", cond["lastTransitionTime"])
    return status


def state_of_container(cs: JSON | None) -> str | None:
    """The kubectl state name for one containerStatus."""
    if not cs:
        return None
    state = cs.get("state") or {}
    if "running" in state:
        return "Running" if cs.get("ready") else "NotReady"
    if "terminated" in state:
        reason = state["terminated"].get("reason")
        if reason in ("Completed", "Error", "OOMKilled"):
            return str(reason)
        return "Completed" if state["terminated"].get("exitCode") == 0 else "Error"
    if "waiting" in state:
        reason = state["waiting"].get("reason") or "ContainerCreating"
        return str(reason) if reason in STATES else "ContainerCreating"
    return None


def kubectl_status(pod: JSON) -> str:
    """What ``kubectl get pods`` prints in STATUS (used by tests and the demo)."""
    meta = pod.get("metadata") or {}
    status = pod.get("status") or {}
    if meta.get("deletionTimestamp"):
        return "Terminating"
    reason = status.get("phase", "Pending")
    for cs in status.get("containerStatuses") or []:
        state = cs.get("state") or {}
        if state.get("waiting", {}).get("reason"):
            reason = state["waiting"]["reason"]
        elif state.get("terminated", {}).get("reason"):
            reason = state["terminated"]["reason"]
    return str(reason)


# --- services -----------------------------------------------------------------------------

def build_service(
    namespace: str, name: str, *, type: str = "ClusterIP",  # noqa: A002 - k8s field name
    ports: list[int | JSON] | None = None, selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None, lb_ingress: list[JSON] | None | bool = True,
) -> JSON:
    """A Service with allocated clusterIP / nodePorts; ``lb_ingress=False``: LB pending."""
    n = _next(_svc_ips)
    cluster_ip = f"10.96.{(n // 250) % 250}.{n % 250 + 1}"
    port_specs: list[JSON] = []
    for p in ports or [80]:
        spec: JSON = {"name": "http", "port": p, "protocol": "TCP", "targetPort": p} \
            if isinstance(p, int) else dict(p)
        spec.setdefault("protocol", "TCP")
        spec.setdefault("targetPort", spec["port"])
        if type in ("NodePort", "LoadBalancer"):
            spec.setdefault("nodePort", _next(_node_ports))
        port_specs.append(spec)
    svc_spec: JSON = {
        "type": type, "ports": port_specs, "clusterIP": cluster_ip, "clusterIPs": [cluster_ip],
        "ipFamilies": ["IPv4"], "ipFamilyPolicy": "SingleStack", "sessionAffinity": "None",
        "internalTrafficPolicy": "Cluster",
    }
    if selector:
        svc_spec["selector"] = dict(selector)
    if type in ("NodePort", "LoadBalancer"):
        svc_spec["externalTrafficPolicy"] = "Cluster"
    if type == "LoadBalancer":
        svc_spec["allocateLoadBalancerNodePorts"] = True
    status: JSON = {"loadBalancer": {}}
    if type == "LoadBalancer" and lb_ingress:
        ingress: Any = lb_ingress if isinstance(lb_ingress, list) else [
            {"ip": f"172.18.255.{200 + n % 50}", "ipMode": "VIP"}]
        status["loadBalancer"] = {"ingress": ingress}
    return {
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
        "spec": svc_spec, "status": status,
    }


# What the API server's defaulting (and the DefaultTolerationSeconds admission plugin) add
# to a pod created through the API, so field selectors such as spec.restartPolicy match.
_POD_DEFAULTS: JSON = {
    "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
    "dnsPolicy": "ClusterFirst", "securityContext": {}, "schedulerName": "default-scheduler",
    "tolerations": [{"key": f"node.kubernetes.io/{taint}", "operator": "Exists",
                     "effect": "NoExecute", "tolerationSeconds": 300}
                    for taint in ("not-ready", "unreachable")],
    "priority": 0, "enableServiceLinks": True, "preemptionPolicy": "PreemptLowerPriority",
}


def _pull_policy(image: str) -> str:
    """Always for an image without a tag or tagged latest (and no digest), else IfNotPresent."""
    if "@" in image:
        return "IfNotPresent"
    last = image.rsplit("/", 1)[-1]
    tag = last.split(":", 1)[1] if ":" in last else ""
    return "Always" if tag in ("", "latest") else "IfNotPresent"


def default_pod(obj: JSON) -> JSON:
    """An API-created Pod with the fields the API server defaults, where they are unset."""
    merged = json_copy(obj)
    spec = merged.setdefault("spec", {})
    for key, value in _POD_DEFAULTS.items():
        spec.setdefault(key, json_copy(value))
    for key in ("initContainers", "containers"):
        for container in spec.get(key) or []:
            if not isinstance(container, dict):
                continue
            container.setdefault("resources", {})
            container.setdefault("terminationMessagePath", "/dev/termination-log")
            container.setdefault("terminationMessagePolicy", "File")
            image = str(container.get("image") or "")
            container.setdefault("imagePullPolicy", _pull_policy(image))
    return merged


def default_service(obj: JSON) -> JSON:
    """Allocate clusterIP/nodePorts for an API-created Service like the allocator does."""
    spec = obj.get("spec") or {}
    meta = obj["metadata"]
    built = build_service(meta["namespace"], meta["name"], type=spec.get("type", "ClusterIP"),
                          ports=spec.get("ports") or [80], selector=spec.get("selector"),
                          lb_ingress=False)
    merged = json_copy(obj)
    merged["spec"] = {**built["spec"], **spec, "ports": built["spec"]["ports"]}
    if spec.get("clusterIP") == "None":
        merged["spec"]["clusterIPs"] = ["None"]
    merged["status"] = {"loadBalancer": {}}
    return merged

"""Builders for the objects of a realistic cluster: nodes, workloads, config and storage.

Plain dicts to pass to ``SimCluster.create``; the workload controllers then create the pods.
``state`` (a kubectl pod state, e.g. CrashLoopBackOff) is what the simulated kubelet starts
the pods in, through the template annotation ``simcluster.agentwatch.dev/state``.
"""

from __future__ import annotations

import base64
from typing import Any

from .pods import node_ip
from .util import JSON
from .workloads import STATE_ANNOTATION

Labels = dict[str, str]


def node(name: str, *, roles: tuple[str, ...] = (), ready: bool = True,
         unschedulable: bool = False, labels: Labels | None = None) -> JSON:
    all_labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux",
                  "kubernetes.io/arch": "amd64", **(labels or {})}
    for role in roles:
        all_labels[f"node-role.kubernetes.io/{role}"] = ""
    spec: JSON = {"podCIDR": "10.244.0.0/24"}
    if unschedulable:
        spec["unschedulable"] = True
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": all_labels},
        "spec": spec,
        "status": {
            "conditions": [{"type": "Ready", "status": "True" if ready else "False",
                            "reason": "KubeletReady" if ready else "KubeletNotReady",
                            "message": "kubelet is posting ready status" if ready else
                            "container runtime network not ready"}],
            "addresses": [{"type": "InternalIP", "address": node_ip(name)},
                          {"type": "Hostname", "address": name}],
            "capacity": {"cpu": "8", "memory": "16318000Ki", "pods": "110"},
            "allocatable": {"cpu": "8", "memory": "16215600Ki", "pods": "110"},
            "nodeInfo": {"kubeletVersion": "v1.37.2", "osImage": "Debian GNU/Linux 13 (trixie)",
                         "kernelVersion": "6.12.48", "containerRuntimeVersion": "containerd://2.1.4",
                         "operatingSystem": "linux", "architecture": "amd64",
                         "kubeProxyVersion": "", "machineID": "", "systemUUID": "",
                         "bootID": ""},
        },
    }


def pod_template(labels: Labels, containers: list[JSON], *, state: str | None = None,
                 annotations: dict[str, str] | None = None, grace_period: int = 2,
                 restart_policy: str = "Always", node_selector: Labels | None = None) -> JSON:
    meta: JSON = {"labels": dict(labels)}
    notes = dict(annotations or {})
    if state:
        notes[STATE_ANNOTATION] = state
    if notes:
        meta["annotations"] = notes
    spec: JSON = {"containers": containers, "terminationGracePeriodSeconds": grace_period,
                  "restartPolicy": restart_policy}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {"metadata": meta, "spec": spec}


def container(name: str, image: str, port: int | None = None, **extra: Any) -> JSON:
    c: JSON = {"name": name, "image": image, **extra}
    if port is not None:
        c["ports"] = [{"containerPort": port, "name": "http", "protocol": "TCP"}]
    return c


def _meta(namespace: str, name: str, labels: Labels | None,
          annotations: dict[str, str] | None = None) -> JSON:
    meta: JSON = {"name": name, "namespace": namespace, "labels": dict(labels or {})}
    if annotations:
        meta["annotations"] = dict(annotations)
    return meta


def deployment(namespace: str, name: str, containers: list[JSON], replicas: int = 1, *,
               labels: Labels | None = None, state: str | None = None,
               annotations: dict[str, str] | None = None) -> JSON:
    selector = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": _meta(namespace, name, {**selector, **(labels or {})}, annotations),
            "spec": {"replicas": replicas, "selector": {"matchLabels": selector},
                     "template": pod_template({**selector, **(labels or {})}, containers,
                                              state=state)}}


def statefulset(namespace: str, name: str, containers: list[JSON], replicas: int = 1, *,
                labels: Labels | None = None, storage: str | None = "1Gi",
                state: str | None = None) -> JSON:
    selector = {"app.kubernetes.io/name": name}
    spec: JSON = {"replicas": replicas, "serviceName": name,
                  "selector": {"matchLabels": selector},
                  "template": pod_template({**selector, **(labels or {})}, containers,
                                           state=state)}
    if storage:
        spec["volumeClaimTemplates"] = [{"metadata": {"name": "data"}, "spec": {
            "accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": storage}}}}]
    return {"apiVersion": "apps/v1", "kind": "StatefulSet",
            "metadata": _meta(namespace, name, {**selector, **(labels or {})}), "spec": spec}


def daemonset(namespace: str, name: str, containers: list[JSON], *,
              labels: Labels | None = None) -> JSON:
    selector = {"app.kubernetes.io/name": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": _meta(namespace, name, {**selector, **(labels or {})}),
            "spec": {"selector": {"matchLabels": selector},
                     "template": pod_template({**selector, **(labels or {})}, containers,
                                              node_selector={"kubernetes.io/os": "linux"})}}


def job_template(containers: list[JSON], state: str | None = None) -> JSON:
    return {"spec": {"backoffLimit": 1, "template": pod_template(
        {}, containers, state=state, restart_policy="Never")}}


def cronjob(namespace: str, name: str, schedule: str, containers: list[JSON], *,
            labels: Labels | None = None, state: str | None = None,
            suspend: bool = False) -> JSON:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": _meta(namespace, name, labels),
            "spec": {"schedule": schedule, "suspend": suspend,
                     "jobTemplate": job_template(containers, state)}}


def job(namespace: str, name: str, containers: list[JSON], *, labels: Labels | None = None,
        state: str | None = None) -> JSON:
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": _meta(namespace, name, labels), **job_template(containers, state)}


def service(namespace: str, name: str, port: int, *, selector: Labels | None,
            type: str = "ClusterIP", target: int | str | None = None,  # noqa: A002
            labels: Labels | None = None, headless: bool = False) -> JSON:
    spec: JSON = {"type": type, "ports": [{"name": "http", "port": port, "protocol": "TCP",
                                           "targetPort": target or port}]}
    if selector:
        spec["selector"] = dict(selector)
    if headless:
        spec["clusterIP"] = "None"
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": _meta(namespace, name, labels), "spec": spec}


def ingress(namespace: str, name: str, host: str, service: str, port: int, *,
            labels: Labels | None = None, tls: bool = True) -> JSON:
    spec: JSON = {"ingressClassName": "nginx", "rules": [{"host": host, "http": {"paths": [{
        "path": "/", "pathType": "Prefix",
        "backend": {"service": {"name": service, "port": {"number": port}}}}]}}]}
    if tls:
        spec["tls"] = [{"hosts": [host], "secretName": f"{name}-tls"}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "Ingress",
            "metadata": _meta(namespace, name, labels), "spec": spec,
            "status": {"loadBalancer": {"ingress": [{"ip": "172.18.255.200"}]}}}


def configmap(namespace: str, name: str, data: dict[str, str], *,
              labels: Labels | None = None) -> JSON:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(namespace, name, labels),
            "data": dict(data)}


def secret(namespace: str, name: str, data: dict[str, str], *, type: str = "Opaque",  # noqa: A002
           labels: Labels | None = None) -> JSON:
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in data.items()}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(namespace, name, labels),
            "type": type, "data": encoded}


def network_policy(namespace: str, name: str, pod_selector: Labels, *,
                   from_labels: Labels | None = None, labels: Labels | None = None) -> JSON:
    spec: JSON = {"podSelector": {"matchLabels": dict(pod_selector)} if pod_selector else {},
                  "policyTypes": ["Ingress"]}
    if from_labels is not None:
        spec["ingress"] = [{"from": [{"podSelector": {"matchLabels": dict(from_labels)}}]}]
    return {"apiVersion": "networking.k8s.io/v1", "kind": "NetworkPolicy",
            "metadata": _meta(namespace, name, labels), "spec": spec}


def storage_class(name: str, provisioner: str, *, default: bool = False,
                  expansion: bool = False) -> JSON:
    meta: JSON = {"name": name}
    if default:
        meta["annotations"] = {"storageclass.kubernetes.io/is-default-class": "true"}
    return {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": meta,
            "provisioner": provisioner, "reclaimPolicy": "Delete",
            "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": expansion}


def pvc(namespace: str, name: str, size: str, *, labels: Labels | None = None,
        storage_class: str = "standard") -> JSON:
    """A claim still waiting for its volume (Pending)."""
    return {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": _meta(namespace, name, labels),
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": storage_class,
                     "resources": {"requests": {"storage": size}}},
            "status": {"phase": "Pending"}}


def backup(namespace: str, name: str, schedule: str, target: str, *,
           phase: str | None = None, size: int | None = None, ratio: float | None = None,
           last: str | None = None, suspend: bool = False) -> JSON:
    """The demo custom resource (crds/demo.agentwatch.dev_backups.yaml)."""
    status: JSON = {}
    for key, value in (("phase", phase), ("sizeBytes", size), ("ratio", ratio),
                       ("lastBackupTime", last)):
        if value is not None:
            status[key] = value
    obj: JSON = {"apiVersion": "demo.agentwatch.dev/v1", "kind": "Backup",
                 "metadata": {"name": name, "namespace": namespace},
                 "spec": {"schedule": schedule, "target": target, "suspend": suspend}}
    if status:
        obj["status"] = status
    return obj


def kustomize_labels(kustomization: str, namespace: str = "flux-system") -> Labels:
    """What kustomize-controller stamps on every object it applies."""
    return {"kustomize.toolkit.fluxcd.io/name": kustomization,
            "kustomize.toolkit.fluxcd.io/namespace": namespace}


def helm_labels(release: str, namespace: str, chart: str, version: str) -> Labels:
    """What Helm (and helm-controller's post-renderer) put on a release's objects."""
    return {"app.kubernetes.io/managed-by": "Helm", "app.kubernetes.io/instance": release,
            "helm.sh/chart": f"{chart}-{version}", "helm.toolkit.fluxcd.io/name": release,
            "helm.toolkit.fluxcd.io/namespace": namespace}


def helm_annotations(release: str, namespace: str) -> dict[str, str]:
    return {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": namespace}


def pod_disruption_budget(namespace: str, name: str, selector: Labels, *,
                          min_available: int | str | None = None,
                          max_unavailable: int | str | None = None) -> JSON:
    """A policy/v1 PodDisruptionBudget over the pods labelled `selector`."""
    spec: JSON = {"selector": {"matchLabels": dict(selector)}}
    if min_available is not None:
        spec["minAvailable"] = min_available
    if max_unavailable is not None:
        spec["maxUnavailable"] = max_unavailable
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": namespace}, "spec": spec}

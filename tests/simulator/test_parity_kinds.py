"""The full dashboard's kinds, held to the real server: discovery (legacy and aggregated),
the server-side Table of every kind (columns and cells, a CRD's printer columns), the scale
subresource, a rollout restart and a Job made from a CronJob. Each test runs against the
simulator and the real kube-apiserver (``target``); where the real tier has no
controller-manager, the simulator's controllers are paused (``bare_target``)."""

from __future__ import annotations

import re
from typing import Any

import kubernetes
import pytest
from clusters import Target

from .wire import AGGREGATED, MERGE, STRATEGIC, TABLE, call, ok

ALL = ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"]
CRD_VERBS = ["delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"]
STATUS = ["get", "patch", "update"]

# What kube-apiserver 1.37 lists for each kind the dashboard shows (APIResourceList entries).
DISCOVERY: dict[str, dict[str, dict[str, Any]]] = {
    "/api/v1": {
        "pods": {"kind": "Pod", "namespaced": True, "shortNames": ["po"], "categories": ["all"]},
        "pods/log": {"kind": "Pod", "verbs": ["get"]},
        "services": {"kind": "Service", "namespaced": True, "shortNames": ["svc"],
                     "categories": ["all"]},
        "configmaps": {"kind": "ConfigMap", "namespaced": True, "shortNames": ["cm"]},
        "secrets": {"kind": "Secret", "namespaced": True},
        "persistentvolumeclaims": {"kind": "PersistentVolumeClaim", "namespaced": True,
                                   "shortNames": ["pvc"]},
        "persistentvolumes": {"kind": "PersistentVolume", "namespaced": False,
                              "shortNames": ["pv"]},
        "nodes": {"kind": "Node", "namespaced": False, "shortNames": ["no"]},
        "namespaces": {"kind": "Namespace", "namespaced": False, "shortNames": ["ns"],
                       "verbs": [v for v in ALL if v != "deletecollection"]},
        "events": {"kind": "Event", "namespaced": True, "shortNames": ["ev"]},
    },
    "/apis/apps/v1": {
        "deployments": {"kind": "Deployment", "shortNames": ["deploy"], "categories": ["all"]},
        "deployments/scale": {"kind": "Scale", "group": "autoscaling", "version": "v1",
                              "verbs": STATUS},
        "statefulsets": {"kind": "StatefulSet", "shortNames": ["sts"], "categories": ["all"]},
        "statefulsets/scale": {"kind": "Scale", "group": "autoscaling", "version": "v1",
                               "verbs": STATUS},
        "daemonsets": {"kind": "DaemonSet", "shortNames": ["ds"], "categories": ["all"]},
        "replicasets": {"kind": "ReplicaSet", "shortNames": ["rs"], "categories": ["all"]},
    },
    "/apis/batch/v1": {
        "jobs": {"kind": "Job", "categories": ["all"]},
        "cronjobs": {"kind": "CronJob", "shortNames": ["cj"], "categories": ["all"]},
    },
    "/apis/networking.k8s.io/v1": {
        "ingresses": {"kind": "Ingress", "shortNames": ["ing"]},
        "networkpolicies": {"kind": "NetworkPolicy", "shortNames": ["netpol"]},
    },
    "/apis/discovery.k8s.io/v1": {"endpointslices": {"kind": "EndpointSlice"}},
    "/apis/storage.k8s.io/v1": {
        "storageclasses": {"kind": "StorageClass", "namespaced": False, "shortNames": ["sc"]},
    },
    "/apis/apiextensions.k8s.io/v1": {
        "customresourcedefinitions": {"kind": "CustomResourceDefinition", "namespaced": False,
                                      "shortNames": ["crd", "crds"],
                                      "categories": ["api-extensions"]},
    },
    "/apis/kustomize.toolkit.fluxcd.io/v1": {
        "kustomizations": {"kind": "Kustomization", "shortNames": ["ks"], "verbs": CRD_VERBS},
    },
    "/apis/helm.toolkit.fluxcd.io/v2": {
        "helmreleases": {"kind": "HelmRelease", "shortNames": ["hr"], "verbs": CRD_VERBS},
    },
    "/apis/source.toolkit.fluxcd.io/v1": {
        "gitrepositories": {"kind": "GitRepository", "shortNames": ["gitrepo"],
                            "categories": ["all", "fluxcd", "fluxcd-sources"],
                            "verbs": CRD_VERBS},
    },
    "/apis/demo.agentwatch.dev/v1": {
        "backups": {"kind": "Backup", "shortNames": ["bk"], "categories": ["demo"],
                    "verbs": CRD_VERBS},
    },
}
STORAGE_HASHES = {
    "pods": "xPOwRZ+Yhw8=", "deployments": "8aSe+NMegvE=", "jobs": "mudhfqk/qZY=",
    "ingresses": "39NQlfNR+bo=", "endpointslices": "qgS0xkrxYAI=", "storageclasses": "K+m6uJwbjGY=",
    "customresourcedefinitions": "jfWCUB31mvA=", "kustomizations": "GozwzC4McTQ=",
    "helmreleases": "BzFiNEBrMqU=", "gitrepositories": "agejlvI8FcU=", "backups": "C4XDk5lYDzM=",
}
GROUP_ORDER = ["apps", "batch", "networking.k8s.io", "storage.k8s.io", "apiextensions.k8s.io",
               "discovery.k8s.io",
               "demo.agentwatch.dev", "kustomize.toolkit.fluxcd.io",
               "source.toolkit.fluxcd.io", "helm.toolkit.fluxcd.io"]


def _expected_entry(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    sub = "/" in name
    entry: dict[str, Any] = {"name": name, "singularName": "" if sub else spec["kind"].lower(),
                             "namespaced": spec.get("namespaced", True)}
    for key in ("group", "version"):
        if key in spec:
            entry[key] = spec[key]
    entry["kind"] = spec["kind"]
    entry["verbs"] = spec.get("verbs", ALL)
    for key in ("shortNames", "categories"):
        if key in spec:
            entry[key] = spec[key]
    return entry


def test_discovery_lists_every_kind_as_the_server_does(
        target: Target, target_api: kubernetes.client.ApiClient) -> None:
    groups = [g["name"] for g in ok(target, "GET", "/apis")["groups"]]
    assert [g for g in groups if g in GROUP_ORDER] == GROUP_ORDER, target.name
    for path, kinds in DISCOVERY.items():
        listed = {r["name"]: r for r in ok(target, "GET", path)["resources"]}
        for name, spec in kinds.items():
            got = dict(listed[name])
            got.pop("storageVersionHash", None)
            assert got == _expected_entry(name, spec), (target.name, path, name)
        # sha256("group/<storage version>/Kind")[:8]; CRDs are still stored as v1beta1.
        first = next(iter(kinds))
        assert listed[first]["storageVersionHash"] == STORAGE_HASHES[first], target.name


def test_aggregated_discovery_when_the_client_asks_for_it(
        target: Target, target_api: kubernetes.client.ApiClient) -> None:
    answer = call(target, "GET", "/apis", accept=f"{AGGREGATED},application/json")
    assert answer.status == 200 and answer.content_type == AGGREGATED, target.name
    doc = answer.body
    assert (doc["kind"], doc["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    apps = next(g for g in doc["items"] if g["metadata"]["name"] == "apps")
    [v1] = apps["versions"]
    deployments = next(r for r in v1["resources"] if r["resource"] == "deployments")
    assert deployments == {
        "resource": "deployments",
        "responseKind": {"group": "", "version": "", "kind": "Deployment"},
        "scope": "Namespaced", "singularResource": "deployment", "verbs": ALL,
        "shortNames": ["deploy"], "categories": ["all"], "subresources": [
            {"subresource": "scale", "responseKind": {"group": "autoscaling", "version": "v1",
                                                      "kind": "Scale"}, "verbs": STATUS},
            {"subresource": "status", "responseKind": {"group": "", "version": "",
                                                       "kind": "Deployment"}, "verbs": STATUS}]}
    assert v1["freshness"] == "Current"
    backups = next(g for g in doc["items"] if g["metadata"]["name"] == "demo.agentwatch.dev")
    [entry] = backups["versions"][0]["resources"]
    assert entry["responseKind"] == {"group": "demo.agentwatch.dev", "version": "v1",
                                     "kind": "Backup"}
    assert (entry["scope"], entry["categories"]) == ("Namespaced", ["demo"])
    core = call(target, "GET", "/api", accept=AGGREGATED).body
    [legacy] = core["items"]
    assert legacy["metadata"] == {} and {"pods", "nodes", "configmaps"} <= {
        r["resource"] for r in legacy["versions"][0]["resources"]}
    # Only /api and /apis serve the aggregated form: elsewhere it is not acceptable.
    refused = call(target, "GET", "/apis/apps", accept=AGGREGATED)
    assert (refused.status, refused.body["reason"]) == (406, "NotAcceptable"), target.name
    assert call(target, "GET", "/apis/apps/v1",
                accept=f"{AGGREGATED},application/json").body["kind"] == "APIResourceList"


# --- Table ----------------------------------------------------------------------------------

AGE = re.compile(r"^(\d+[smhdy])+$")
AGE_COLUMNS = {"Age", "Last Seen", "First Seen", "Last Backup", "Last Schedule"}
IP = re.compile(r"^\d+\.\d+\.\d+\.\d+$")


def _objects(ns: str) -> list[tuple[str, dict[str, Any], dict[str, Any] | None]]:
    """(collection path, object, status written through /status) of each kind."""
    app = {"matchLabels": {"app": "web"}}
    tmpl = {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [
        {"name": "app", "image": "nginx:1.27"}, {"name": "side", "image": "busybox:1.36"}]}}
    job_tmpl = {"spec": {"restartPolicy": "Never", "containers": [
        {"name": "job", "image": "busybox:1.36"}]}}
    apps, batch = f"/apis/apps/v1/namespaces/{ns}", f"/apis/batch/v1/namespaces/{ns}"
    core, net = f"/api/v1/namespaces/{ns}", f"/apis/networking.k8s.io/v1/namespaces/{ns}"
    return [
        (f"{apps}/deployments", {"metadata": {"name": "web"}, "spec": {
            "replicas": 3, "selector": app, "template": tmpl}},
         {"replicas": 3, "readyReplicas": 2, "updatedReplicas": 3, "availableReplicas": 2}),
        (f"{apps}/replicasets", {"metadata": {"name": "web-5d8f9c7b6"}, "spec": {
            "replicas": 3, "selector": app, "template": tmpl}},
         {"replicas": 3, "readyReplicas": 2, "availableReplicas": 2}),
        (f"{apps}/statefulsets", {"metadata": {"name": "db"}, "spec": {
            "replicas": 2, "serviceName": "db", "selector": app, "template": tmpl}},
         {"replicas": 2, "readyReplicas": 1}),
        (f"{apps}/daemonsets", {"metadata": {"name": "logs"}, "spec": {
            "selector": app, "template": {**tmpl, "spec": {
                **tmpl["spec"], "nodeSelector": {"kubernetes.io/os": "linux"}}}}},
         {"desiredNumberScheduled": 3, "currentNumberScheduled": 3, "numberReady": 2,
          "updatedNumberScheduled": 3, "numberAvailable": 2, "numberMisscheduled": 0}),
        (f"{batch}/jobs", {"metadata": {"name": "migrate"}, "spec": {"template": job_tmpl}},
         None),
        (f"{batch}/cronjobs", {"metadata": {"name": "nightly"}, "spec": {
            "schedule": "0 3 * * *", "timeZone": "Europe/Berlin", "suspend": True,
            "jobTemplate": {"spec": {"template": job_tmpl}}}}, None),
        (f"{core}/services", {"metadata": {"name": "web"}, "spec": {
            "selector": {"app": "web"}, "ports": [{"name": "http", "port": 80},
                                                  {"name": "https", "port": 443}]}}, None),
        (f"{core}/services", {"metadata": {"name": "ext"}, "spec": {
            "type": "ExternalName", "externalName": "db.example.com"}}, None),
        (f"{core}/services", {"metadata": {"name": "headless"}, "spec": {
            "clusterIP": "None", "selector": {"app": "db"}, "ports": [{"port": 5432}]}}, None),
        (f"{net}/ingresses", {"metadata": {"name": "web"}, "spec": {
            "ingressClassName": "nginx", "tls": [{"hosts": ["web.example.com"]}],
            "rules": [{"host": h, "http": {"paths": [{"path": "/", "pathType": "Prefix",
                                                      "backend": {"service": {
                                                          "name": "web",
                                                          "port": {"number": 80}}}}]}}
                      for h in ("web.example.com", "api.example.com")]}},
         {"loadBalancer": {"ingress": [{"ip": "203.0.113.20"}]}}),
        (f"{net}/networkpolicies", {"metadata": {"name": "deny"}, "spec": {
            "podSelector": {"matchLabels": {"app": "db"}}}}, None),
        (f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", {
            "metadata": {"name": "web-abc12"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 8080}],
            "endpoints": [{"addresses": ["10.244.0.5"]}, {"addresses": ["10.244.0.6"]}]}, None),
        (f"{core}/configmaps", {"metadata": {"name": "app-config"}, "data": {"a": "1", "b": "2"},
                                "binaryData": {"c": "AAE="}}, None),
        (f"{core}/secrets", {"metadata": {"name": "tls"}, "type": "kubernetes.io/tls",
                             "data": {"tls.crt": "YQ==", "tls.key": "Yg=="}}, None),
        (f"{core}/persistentvolumeclaims", {"metadata": {"name": "pending"}, "spec": {
            "accessModes": ["ReadWriteMany"], "resources": {"requests": {"storage": "1Gi"}}}},
         None),
        (f"{core}/events", {"metadata": {"name": "web.1"}, "involvedObject": {
            "kind": "Deployment", "name": "web", "namespace": ns, "apiVersion": "apps/v1"},
            "reason": "ScalingReplicaSet", "message": "Scaled up ", "type": "Normal",
            "source": {"component": "deployment-controller"}, "count": 2,
            "firstTimestamp": "2026-01-01T00:00:00Z", "lastTimestamp": "2026-01-01T00:10:00Z"},
         None),
        (f"/apis/demo.agentwatch.dev/v1/namespaces/{ns}/backups", {
            "apiVersion": "demo.agentwatch.dev/v1", "kind": "Backup",
            "metadata": {"name": "nightly"},
            "spec": {"schedule": "0 2 * * *", "target": "s3://b", "suspend": False}},
         {"phase": "Succeeded", "sizeBytes": 123456789, "ratio": 0.42,
          "lastBackupTime": "2026-01-01T02:00:00Z"}),
    ]


# Columns (name, type, priority) and the cells of the objects above, as 1.37 prints them.
TABLES: dict[str, tuple[list[tuple[str, str, int]], list[list[Any]]]] = {
    "deployments": ([("Name", "string", 0), ("Ready", "string", 0), ("Up-to-date", "string", 0),
                     ("Available", "string", 0), ("Age", "string", 0),
                     ("Containers", "string", 1), ("Images", "string", 1),
                     ("Selector", "string", 1)],
                    [["web", "2/3", 3, 2, "<age>", "app,side", "nginx:1.27,busybox:1.36",
                      "app=web"]]),
    "replicasets": ([("Name", "string", 0), ("Desired", "integer", 0),
                     ("Current", "integer", 0), ("Ready", "integer", 0), ("Age", "string", 0),
                     ("Containers", "string", 1), ("Images", "string", 1),
                     ("Selector", "string", 1)],
                    [["web-5d8f9c7b6", 3, 3, 2, "<age>", "app,side", "nginx:1.27,busybox:1.36",
                      "app=web"]]),
    "statefulsets": ([("Name", "string", 0), ("Ready", "string", 0), ("Age", "string", 0),
                      ("Containers", "string", 1), ("Images", "string", 1)],
                     [["db", "1/2", "<age>", "app,side", "nginx:1.27,busybox:1.36"]]),
    "daemonsets": ([("Name", "string", 0), ("Desired", "integer", 0), ("Current", "integer", 0),
                    ("Ready", "integer", 0), ("Up-to-date", "integer", 0),
                    ("Available", "integer", 0), ("Node Selector", "string", 0),
                    ("Age", "string", 0), ("Containers", "string", 1), ("Images", "string", 1),
                    ("Selector", "string", 1)],
                   [["logs", 3, 3, 2, 3, 2, "kubernetes.io/os=linux", "<age>", "app,side",
                     "nginx:1.27,busybox:1.36", "app=web"]]),
    "jobs": ([("Name", "string", 0), ("Status", "string", 0), ("Completions", "string", 0),
              ("Duration", "string", 0), ("Age", "string", 0), ("Containers", "string", 1),
              ("Images", "string", 1), ("Selector", "string", 1)],
             [["migrate", "Running", "0/1", "", "<age>", "job", "busybox:1.36",
               "batch.kubernetes.io/controller-uid=<uid>"]]),
    "cronjobs": ([("Name", "string", 0), ("Schedule", "string", 0), ("Timezone", "string", 0),
                  ("Suspend", "boolean", 0), ("Active", "integer", 0),
                  ("Last Schedule", "string", 0), ("Age", "string", 0),
                  ("Containers", "string", 1), ("Images", "string", 1),
                  ("Selector", "string", 1)],
                 [["nightly", "0 3 * * *", "Europe/Berlin", "True", 0, "<none>", "<age>", "job",
                   "busybox:1.36", "<none>"]]),
    "services": ([("Name", "string", 0), ("Type", "string", 0), ("Cluster-IP", "string", 0),
                  ("External-IP", "string", 0), ("Port(s)", "string", 0), ("Age", "string", 0),
                  ("Selector", "string", 1)],
                 [["ext", "ExternalName", "<none>", "db.example.com", "<none>", "<age>",
                   "<none>"],
                  ["headless", "ClusterIP", "None", "<none>", "5432/TCP", "<age>", "app=db"],
                  ["web", "ClusterIP", "<ip>", "<none>", "80/TCP,443/TCP", "<age>",
                   "app=web"]]),
    "ingresses": ([("Name", "string", 0), ("Class", "string", 0), ("Hosts", "string", 0),
                   ("Address", "string", 0), ("Ports", "string", 0), ("Age", "string", 0)],
                  [["web", "nginx", "web.example.com,api.example.com", "203.0.113.20", "80, 443",
                    "<age>"]]),
    "networkpolicies": ([("Name", "string", 0), ("Pod-Selector", "string", 0),
                         ("Age", "string", 0)], [["deny", "app=db", "<age>"]]),
    "endpointslices": ([("Name", "string", 0), ("AddressType", "string", 0),
                        ("Ports", "string", 0), ("Endpoints", "string", 0), ("Age", "string", 0)],
                       [["web-abc12", "IPv4", "8080", "10.244.0.5,10.244.0.6", "<age>"]]),
    "configmaps": ([("Name", "string", 0), ("Data", "string", 0), ("Age", "string", 0)],
                   [["app-config", 3, "<age>"]]),
    "secrets": ([("Name", "string", 0), ("Type", "string", 0), ("Data", "string", 0),
                 ("Age", "string", 0)], [["tls", "kubernetes.io/tls", 2, "<age>"]]),
    "persistentvolumeclaims": (
        [("Name", "string", 0), ("Status", "string", 0), ("Volume", "string", 0),
         ("Capacity", "string", 0), ("Access Modes", "string", 0), ("StorageClass", "string", 0),
         ("VolumeAttributesClass", "string", 0), ("Age", "string", 0),
         ("VolumeMode", "string", 1)],
        [["pending", "Pending", "", "", "", "", "<unset>", "<age>", "Filesystem"]]),
    "events": ([("Last Seen", "string", 0), ("Type", "string", 0), ("Reason", "string", 0),
                ("Object", "string", 0), ("Subobject", "string", 1), ("Source", "string", 1),
                ("Message", "string", 0), ("First Seen", "string", 1), ("Count", "string", 1),
                ("Name", "string", 1)],
               [["<age>", "Normal", "ScalingReplicaSet", "deployment/web", "",
                 "deployment-controller", "Scaled up", "<age>", 2, "web.1"]]),
    "backups": ([("Name", "string", 0), ("Schedule", "string", 0), ("Target", "string", 0),
                 ("Phase", "string", 0), ("Size", "integer", 0), ("Ratio", "number", 1),
                 ("Suspended", "boolean", 0), ("Last Backup", "date", 0), ("Age", "date", 0)],
                [["nightly", "0 2 * * *", "s3://b", "Succeeded", 123456789, 0.42, False, "<age>",
                  "<age>"]]),
}


def _masked(table: dict[str, Any], uids: dict[str, str]) -> list[list[Any]]:
    names = [c["name"] for c in table["columnDefinitions"]]
    rows = []
    for row in table["rows"]:
        cells = []
        for name, cell in zip(names, row["cells"], strict=True):
            if name in AGE_COLUMNS and isinstance(cell, str) and AGE.match(cell):
                cell = "<age>"
            elif name == "Cluster-IP" and isinstance(cell, str) and IP.match(cell):
                cell = "<ip>"
            elif isinstance(cell, str):
                for uid in uids.values():
                    cell = cell.replace(uid, "<uid>")
            cells.append(cell)
        rows.append(cells)
    return rows


def test_every_kind_prints_the_servers_table(
        bare_target: Target, target_api: kubernetes.client.ApiClient,
        target_namespace: str) -> None:
    uids: dict[str, str] = {}
    for path, obj, status in _objects(target_namespace):
        created = ok(bare_target, "POST", path, obj)
        uids[obj["metadata"]["name"]] = created["metadata"]["uid"]
        if status is not None:
            ok(bare_target, "PATCH", f"{path}/{obj['metadata']['name']}/status",
               {"status": status}, content_type=MERGE)
    paths = {path.rsplit("/", 1)[-1]: path for path, _, _ in _objects(target_namespace)}
    for plural, (columns, cells) in TABLES.items():
        table = ok(bare_target, "GET", paths[plural], accept=TABLE)
        assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
        got = [(c["name"], c["type"], c["priority"]) for c in table["columnDefinitions"]]
        assert got == columns, (bare_target.name, plural)
        if plural == "events":
            # The real server's own controllers may add events of their own to the
            # namespace (a busy machine gave the IP allocator's repair one): the test's.
            table["rows"] = [r for r in table["rows"]
                             if r["object"]["metadata"]["name"] in uids]
        assert _masked(table, uids) == cells, (bare_target.name, plural)
        assert all(r["object"]["kind"] == "PartialObjectMetadata" for r in table["rows"])


def test_cluster_scoped_kinds_print_the_servers_table(
        bare_target: Target, target_api: kubernetes.client.ApiClient,
        target_namespace: str) -> None:
    ns = target_namespace  # the real server outlives the test: names of its own
    ready = {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
                             "message": "ok", "lastHeartbeatTime": "2026-01-01T00:00:00Z",
                             "lastTransitionTime": "2026-01-01T00:00:00Z"}],
             "nodeInfo": {"kubeletVersion": "v1.37.2", "osImage": "Debian GNU/Linux 13",
                          "kernelVersion": "6.12.0", "containerRuntimeVersion": "containerd://2.1",
                          "machineID": "", "systemUUID": "", "bootID": "",
                          "kubeProxyVersion": "", "operatingSystem": "linux",
                          "architecture": "amd64"},
             "addresses": [{"type": "InternalIP", "address": "172.18.0.2"}]}
    made = [
        ("/api/v1/nodes", {"metadata": {"name": f"{ns}-cp", "labels": {
            "node-role.kubernetes.io/control-plane": ""}}}, ready),
        ("/api/v1/nodes", {"metadata": {"name": f"{ns}-off"}, "spec": {"unschedulable": True}},
         {"conditions": [{**ready["conditions"][0], "status": "False"}]}),
        ("/apis/storage.k8s.io/v1/storageclasses", {"metadata": {
            "name": f"{ns}-std", "annotations": {
                "storageclass.kubernetes.io/is-default-class": "true"}},
            "provisioner": "rancher.io/local-path", "volumeBindingMode": "WaitForFirstConsumer"},
         None),
        ("/api/v1/persistentvolumes", {"metadata": {"name": f"{ns}-pv"}, "spec": {
            "capacity": {"storage": "5Gi"}, "accessModes": ["ReadWriteMany", "ReadWriteOnce"],
            "hostPath": {"path": "/tmp/pv"}}}, None),
    ]
    try:
        for path, obj, status in made:
            ok(bare_target, "POST", path, obj)
            if status is not None:
                ok(bare_target, "PATCH", f"{path}/{obj['metadata']['name']}/status",
                   {"status": status}, content_type=MERGE)

        def rows(path: str, *names: str) -> list[list[Any]]:
            out = []
            for name in names:
                table = ok(bare_target, "GET", path, accept=TABLE,
                           query={"fieldSelector": f"metadata.name={name}"})
                out += _masked(table, {})
            return out

        assert rows("/api/v1/nodes", f"{ns}-cp", f"{ns}-off") == [
            [f"{ns}-cp", "Ready", "control-plane", "<age>", "v1.37.2", "172.18.0.2", "<none>",
             "Debian GNU/Linux 13", "6.12.0 (amd64)", "containerd://2.1"],
            [f"{ns}-off", "NotReady,SchedulingDisabled", "<none>", "<age>", "", "<none>",
             "<none>", "<unknown>", "<unknown>", "<unknown>"]], bare_target.name
        assert rows("/apis/storage.k8s.io/v1/storageclasses", f"{ns}-std") == [
            [f"{ns}-std (default)", "rancher.io/local-path", "Delete", "WaitForFirstConsumer",
             False, "<age>"]], bare_target.name
        crd = ok(bare_target, "GET", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                 accept=TABLE, query={"fieldSelector": "metadata.name=backups.demo.agentwatch.dev"})
        assert [(c["name"], c["type"], c["priority"]) for c in crd["columnDefinitions"]] == [
            ("Name", "string", 0), ("Scope", "string", 0), ("Versions", "string", 0),
            ("Created At", "date", 0), ("Group", "string", 1), ("Kind", "string", 1),
            ("ShortNames", "string", 1), ("Established", "boolean", 1)]
        [row] = crd["rows"]
        assert re.match(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$", row["cells"][3])  # not an age
        assert row["cells"][:3] + row["cells"][4:] == [
            "backups.demo.agentwatch.dev", "Namespaced", "v1(storage)", "demo.agentwatch.dev",
            "Backup", "bk", True], bare_target.name
        assert rows("/api/v1/persistentvolumes", f"{ns}-pv") == [
            [f"{ns}-pv", "5Gi", "RWO,RWX", "Retain", "Pending", "", "", "<unset>", "", "<age>",
             "Filesystem"]], bare_target.name
    finally:
        for path, obj, _ in made:
            call(bare_target, "DELETE", f"{path}/{obj['metadata']['name']}")


def test_table_watch_and_include_object(
        target: Target, target_api: kubernetes.client.ApiClient,
        target_namespace: str) -> None:
    path = f"/api/v1/namespaces/{target_namespace}/configmaps"
    ok(target, "POST", path, {"metadata": {"name": "one"}, "data": {"a": "1"}})
    full = ok(target, "GET", path, accept=TABLE, query={"includeObject": "Object"})
    [row] = full["rows"]
    assert (row["object"]["kind"], row["object"]["data"]) == ("ConfigMap", {"a": "1"})
    bare = ok(target, "GET", path, accept=TABLE, query={"includeObject": "None"})
    assert bare["rows"] == [{"cells": ["one", 1, bare["rows"][0]["cells"][2]], "object": None}]
    one = ok(target, "GET", f"{path}/one", accept=TABLE)
    assert [r["cells"][0] for r in one["rows"]] == ["one"] and one["columnDefinitions"]
    refused = call(target, "GET", path, accept=TABLE, query={"includeObject": "Bogus"})
    assert refused.status == 400 and refused.body["message"] == (
        "Unable to convert to Table as requested: includeObject: Invalid value: \"Bogus\": "
        "must be 'Metadata', 'Object', 'None', or empty"), target.name
    # A watch in Table form: one row per event, the columns in the first event only.
    rv = full["metadata"]["resourceVersion"]
    ok(target, "POST", path, {"metadata": {"name": "two"}, "data": {"a": "1", "b": "2"}})
    events = call(target, "GET", path, accept=TABLE, query={
        "watch": "1", "resourceVersion": "0", "timeoutSeconds": "2"}).lines
    assert [(e["type"], e["object"]["rows"][0]["cells"][:2]) for e in events] == [
        ("ADDED", ["one", 1]), ("ADDED", ["two", 2])], target.name
    assert events[0]["object"]["columnDefinitions"] and \
        events[1]["object"]["columnDefinitions"] is None
    assert rv


# --- the dashboard's actions ---------------------------------------------------------------

def _deployment(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {
        "replicas": 3, "selector": {"matchLabels": {"app": name}},
        "template": {"metadata": {"labels": {"app": name}}, "spec": {"containers": [
            {"name": "app", "image": "nginx:1.27"}]}}}}


def test_scale_subresource(bare_target: Target, target_api: kubernetes.client.ApiClient,
                           target_namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{target_namespace}"
    created = ok(bare_target, "POST", f"{base}/deployments", _deployment("web"))
    scale = ok(bare_target, "GET", f"{base}/deployments/web/scale")
    assert {k: scale[k] for k in ("kind", "apiVersion", "spec", "status")} == {
        "kind": "Scale", "apiVersion": "autoscaling/v1", "spec": {"replicas": 3},
        "status": {"replicas": 0, "selector": "app=web"}}, bare_target.name
    assert scale["metadata"]["uid"] == created["metadata"]["uid"]
    patched = ok(bare_target, "PATCH", f"{base}/deployments/web/scale",
                 {"spec": {"replicas": 5}}, content_type=MERGE)
    assert patched["spec"] == {"replicas": 5}
    deployment = ok(bare_target, "GET", f"{base}/deployments/web")
    assert (deployment["spec"]["replicas"], deployment["metadata"]["generation"]) == (5, 2)
    assert patched["metadata"]["resourceVersion"] == deployment["metadata"]["resourceVersion"]
    put = ok(bare_target, "PUT", f"{base}/deployments/web/scale", {
        "apiVersion": "autoscaling/v1", "kind": "Scale",
        "metadata": {"name": "web", "namespace": target_namespace}, "spec": {"replicas": 1}})
    assert put["spec"] == {"replicas": 1}
    refused = call(bare_target, "PATCH", f"{base}/deployments/web/scale",
                   {"spec": {"replicas": -1}}, content_type=MERGE)
    assert (refused.status, refused.body["message"]) == (
        422, 'Scale.autoscaling "web" is invalid: spec.replicas: Invalid value: -1: must be '
             'greater than or equal to 0'), bare_target.name
    stale = call(bare_target, "PUT", f"{base}/deployments/web/scale", {
        "apiVersion": "autoscaling/v1", "kind": "Scale", "metadata": {
            "name": "web", "namespace": target_namespace,
            "resourceVersion": created["metadata"]["resourceVersion"]},
        "spec": {"replicas": 2}})
    assert (stale.status, stale.body["reason"]) == (409, "Conflict"), bare_target.name
    missing = call(bare_target, "GET", f"{base}/deployments/nope/scale")
    assert (missing.status, missing.body["message"]) == (
        404, 'deployments.apps "nope" not found'), bare_target.name
    ok(bare_target, "POST", f"{base}/statefulsets", {**_deployment("db"), "spec": {
        **_deployment("db")["spec"], "serviceName": "db"}})
    sts = ok(bare_target, "PATCH", f"{base}/statefulsets/db/scale", {"spec": {"replicas": 0}},
             content_type=STRATEGIC)
    # Zero replicas leave the Scale's spec empty (omitempty); its status keeps the count.
    assert sts["spec"] == {} and sts["status"] == {"replicas": 0, "selector": "app=db"}


def test_rollout_restart_is_a_template_annotation(
        bare_target: Target, target_api: kubernetes.client.ApiClient,
        target_namespace: str) -> None:
    base = f"/apis/apps/v1/namespaces/{target_namespace}/deployments"
    ok(bare_target, "POST", base, _deployment("web"))
    when = "2026-12-03T17:00:00Z"
    restarted = ok(bare_target, "PATCH", f"{base}/web", {"spec": {"template": {"metadata": {
        "annotations": {"kubectl.kubernetes.io/restartedAt": when}}}}},
        content_type=STRATEGIC)
    template = restarted["spec"]["template"]
    assert template["metadata"]["annotations"] == {"kubectl.kubernetes.io/restartedAt": when}
    assert template["metadata"]["labels"] == {"app": "web"}
    assert [c["name"] for c in template["spec"]["containers"]] == ["app"]
    assert restarted["metadata"]["generation"] == 2, bare_target.name
    assert restarted["spec"]["strategy"] == {
        "type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": "25%"}}


def test_a_job_created_from_a_cronjob(bare_target: Target,
                                      target_api: kubernetes.client.ApiClient,
                                      target_namespace: str) -> None:
    base = f"/apis/batch/v1/namespaces/{target_namespace}"
    cronjob = ok(bare_target, "POST", f"{base}/cronjobs", {"metadata": {"name": "report"}, "spec": {
        "schedule": "*/5 * * * *", "jobTemplate": {"metadata": {"labels": {"team": "a"}}, "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "job", "image": "busybox:1.36"}]}}}}}})
    assert cronjob["spec"]["concurrencyPolicy"] == "Allow"
    # What `kubectl create job --from=cronjob/report manual-1` sends.
    owner = {"apiVersion": "batch/v1", "kind": "CronJob", "name": "report",
             "uid": cronjob["metadata"]["uid"], "controller": True}
    job = ok(bare_target, "POST", f"{base}/jobs", {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {
            "name": "manual-1", "labels": {"team": "a"},
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
            "ownerReferences": [owner]},
        "spec": cronjob["spec"]["jobTemplate"]["spec"]})
    uid = job["metadata"]["uid"]
    assert job["metadata"]["ownerReferences"] == [owner]
    assert job["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    controller_labels = {"batch.kubernetes.io/controller-uid": uid,
                         "batch.kubernetes.io/job-name": "manual-1", "controller-uid": uid,
                         "job-name": "manual-1"}
    # Its own labels stay as sent (only a Job without labels takes its template's).
    assert job["metadata"]["labels"] == {"team": "a"}, bare_target.name
    assert job["spec"]["selector"] == {
        "matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert job["spec"]["template"]["metadata"]["labels"] == controller_labels
    assert {k: job["spec"][k] for k in ("parallelism", "completions", "backoffLimit",
                                        "completionMode", "suspend", "manualSelector")} == {
        "parallelism": 1, "completions": 1, "backoffLimit": 6, "completionMode": "NonIndexed",
        "suspend": False, "manualSelector": False}
    table = ok(bare_target, "GET", f"{base}/jobs", accept=TABLE)
    assert [r["cells"][:3] for r in table["rows"]] == [["manual-1", "Running", "0/1"]]
    listed = ok(bare_target, "GET", f"{base}/jobs",
                query={"fieldSelector": "status.successful=0"})
    assert [j["metadata"]["name"] for j in listed["items"]] == ["manual-1"]


@pytest.mark.parametrize("path, selector, message", [
    ("/apis/apps/v1/namespaces/{ns}/deployments", "spec.replicas=1",
     '"spec.replicas" is not a known field selector: only "metadata.name", '
     '"metadata.namespace"'),
    ("/api/v1/namespaces/{ns}/secrets", "spec.x=1", "field label not supported: spec.x"),
    ("/apis/batch/v1/namespaces/{ns}/jobs", "spec.x=1",
     'field label "spec.x" not supported for Job'),
    ("/apis/demo.agentwatch.dev/v1/namespaces/{ns}/backups", "spec.x=1",
     "field label not supported: spec.x"),
])
def test_unsupported_field_selectors_are_refused_in_the_servers_words(
        target: Target, target_api: kubernetes.client.ApiClient, target_namespace: str,
        path: str, selector: str, message: str) -> None:
    refused = call(target, "GET", path.format(ns=target_namespace),
                   query={"fieldSelector": selector})
    assert (refused.status, refused.body["message"]) == (400, message), target.name


def test_metadata_only_reads(bare_target: Target, target_namespace: str) -> None:
    target = bare_target
    path = f"/apis/apps/v1/namespaces/{target_namespace}/deployments"
    created = ok(target, "POST", path, _deployment("web"))
    partial_list = "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io"
    partial = "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io"
    listed = ok(target, "GET", path, accept=partial_list)
    assert (listed["kind"], listed["apiVersion"]) == ("PartialObjectMetadataList",
                                                      "meta.k8s.io/v1")
    [item] = listed["items"]
    assert set(item) == {"kind", "apiVersion", "metadata"}, target.name
    assert (item["kind"], item["metadata"]["uid"]) == ("PartialObjectMetadata",
                                                       created["metadata"]["uid"])
    one = ok(target, "GET", f"{path}/web", accept=partial)
    assert set(one) == {"kind", "apiVersion", "metadata"} and one["metadata"]["name"] == "web"
    refused = call(target, "GET", path, accept=partial)
    assert (refused.status, refused.body["message"]) == (
        406, "you requested PartialObjectMetadata, but the requested object is a list "
             "(*apps.DeploymentList)"), target.name
    refused = call(target, "GET", f"{path}/web", accept=partial_list)
    assert (refused.status, refused.body["message"]) == (
        406, "you requested PartialObjectMetadataList, but the requested object is not a list "
             "(*apps.Deployment)"), target.name
    events = call(target, "GET", path, accept=partial, query={
        "watch": "1", "resourceVersion": "0", "timeoutSeconds": "1"}).lines
    assert [(e["type"], e["object"]["kind"], set(e["object"])) for e in events] == [
        ("ADDED", "PartialObjectMetadata", {"kind", "apiVersion", "metadata"})], target.name

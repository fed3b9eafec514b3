"""The EndpointSlice controller: one slice per Service with a selector, listing the ready
(and terminating) pods it selects."""

from __future__ import annotations

from .controller_base import ControllerBase, is_terminating, owner_ref, pod_ready, random_suffix
from .label_selector import labels_match, parse_labels
from .printers import format_label_selector
from .resources import (
    ENDPOINTSLICES,
    PODS,
    SERVICES,
)
from .util import JSON


class EndpointSliceController(ControllerBase):
    def _endpoints(self, ns: str, name: str) -> None:
        svc = self._find(SERVICES, ns, name)
        uid = svc["metadata"]["uid"] if svc else None
        selector = ((svc or {}).get("spec") or {}).get("selector") or {}
        existing = self._owned(ENDPOINTSLICES, ns, uid) if uid else []
        if svc is None or not selector or is_terminating(svc):
            return
        reqs = parse_labels(format_label_selector({"matchLabels": selector}))
        _, pods = self.store.list_objects(PODS, ns)
        endpoints = []
        for s in pods:
            p = s.obj
            ip = (p.get("status") or {}).get("podIP")
            if not ip or not labels_match(reqs, p):
                continue
            terminating = is_terminating(p)
            ready = pod_ready(p) and not terminating
            ep: JSON = {"addresses": [ip], "conditions": {
                "ready": ready, "serving": pod_ready(p), "terminating": terminating}}
            ep["targetRef"] = {"kind": "Pod", "namespace": ns, "name": p["metadata"]["name"],
                               "uid": p["metadata"]["uid"]}
            if p["spec"].get("nodeName"):
                ep["nodeName"] = p["spec"]["nodeName"]
            endpoints.append(ep)
        ports = []
        for port in svc["spec"].get("ports") or []:
            target = port.get("targetPort", port.get("port"))
            ports.append({"name": port.get("name", ""), "protocol": port.get("protocol", "TCP"),
                          "port": target if isinstance(target, int) else port.get("port")})
        labels = {**(svc["metadata"].get("labels") or {}),
                  "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
                  "kubernetes.io/service-name": name}
        if existing:
            slice_name = existing[0]["metadata"]["name"]

            def put(o: JSON) -> JSON | None:
                new = dict(o)
                new["endpoints"], new["ports"] = endpoints, ports
                new["metadata"] = {**o["metadata"], "labels": labels}
                return None if new == o else new
            self.store.update(ENDPOINTSLICES, ns, slice_name, put)
            return
        self.store.create(ENDPOINTSLICES, {
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": f"{name}-{random_suffix()}", "namespace": ns,
                         "labels": labels, "ownerReferences": [owner_ref(svc)],
                         "generateName": f"{name}-"},
            "addressType": "IPv4", "endpoints": endpoints, "ports": ports})

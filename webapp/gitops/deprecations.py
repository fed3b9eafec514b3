"""Kubernetes API versions that are deprecated or removed, with their replacements.

Source: the Kubernetes Deprecated API Migration Guide,
https://kubernetes.io/docs/reference/using-api/deprecation-guide/ (reviewed for releases up
to v1.32). Keep it in step with that page; each entry names the release that removed it.
"""

from __future__ import annotations

from dataclasses import dataclass

GUIDE = "https://kubernetes.io/docs/reference/using-api/deprecation-guide/"


@dataclass(frozen=True)
class Deprecation:
    group_version: str
    kind: str
    removed_in: str
    replacement: str
    anchor: str

    @property
    def link(self) -> str:
        return f"{GUIDE}#{self.anchor}"

    def message(self) -> str:
        return (f"{self.kind} {self.group_version} is removed in Kubernetes {self.removed_in}; "
                f"use {self.replacement}")


_TABLE = [
    # v1.32
    Deprecation("flowcontrol.apiserver.k8s.io/v1beta3", "FlowSchema", "v1.32",
                "flowcontrol.apiserver.k8s.io/v1", "v1-32"),
    Deprecation("flowcontrol.apiserver.k8s.io/v1beta3", "PriorityLevelConfiguration", "v1.32",
                "flowcontrol.apiserver.k8s.io/v1", "v1-32"),
    # v1.29
    Deprecation("flowcontrol.apiserver.k8s.io/v1beta2", "FlowSchema", "v1.29",
                "flowcontrol.apiserver.k8s.io/v1", "v1-29"),
    Deprecation("flowcontrol.apiserver.k8s.io/v1beta2", "PriorityLevelConfiguration", "v1.29",
                "flowcontrol.apiserver.k8s.io/v1", "v1-29"),
    # v1.27
    Deprecation("storage.k8s.io/v1beta1", "CSIStorageCapacity", "v1.27", "storage.k8s.io/v1",
                "v1-27"),
    # v1.26
    Deprecation("flowcontrol.apiserver.k8s.io/v1beta1", "FlowSchema", "v1.26",
                "flowcontrol.apiserver.k8s.io/v1", "v1-26"),
    Deprecation("autoscaling/v2beta2", "HorizontalPodAutoscaler", "v1.26", "autoscaling/v2",
                "v1-26"),
    # v1.25
    Deprecation("batch/v1beta1", "CronJob", "v1.25", "batch/v1", "v1-25"),
    Deprecation("discovery.k8s.io/v1beta1", "EndpointSlice", "v1.25", "discovery.k8s.io/v1",
                "v1-25"),
    Deprecation("events.k8s.io/v1beta1", "Event", "v1.25", "events.k8s.io/v1", "v1-25"),
    Deprecation("autoscaling/v2beta1", "HorizontalPodAutoscaler", "v1.25", "autoscaling/v2",
                "v1-25"),
    Deprecation("policy/v1beta1", "PodDisruptionBudget", "v1.25", "policy/v1", "v1-25"),
    Deprecation("policy/v1beta1", "PodSecurityPolicy", "v1.25",
                "Pod Security Admission", "v1-25"),
    Deprecation("node.k8s.io/v1beta1", "RuntimeClass", "v1.25", "node.k8s.io/v1", "v1-25"),
    # v1.22
    Deprecation("admissionregistration.k8s.io/v1beta1", "MutatingWebhookConfiguration",
                "v1.22", "admissionregistration.k8s.io/v1", "v1-22"),
    Deprecation("admissionregistration.k8s.io/v1beta1", "ValidatingWebhookConfiguration",
                "v1.22", "admissionregistration.k8s.io/v1", "v1-22"),
    Deprecation("apiextensions.k8s.io/v1beta1", "CustomResourceDefinition", "v1.22",
                "apiextensions.k8s.io/v1", "v1-22"),
    Deprecation("networking.k8s.io/v1beta1", "Ingress", "v1.22", "networking.k8s.io/v1",
                "v1-22"),
    Deprecation("extensions/v1beta1", "Ingress", "v1.22", "networking.k8s.io/v1", "v1-22"),
    Deprecation("rbac.authorization.k8s.io/v1beta1", "ClusterRole", "v1.22",
                "rbac.authorization.k8s.io/v1", "v1-22"),
    Deprecation("rbac.authorization.k8s.io/v1beta1", "Role", "v1.22",
                "rbac.authorization.k8s.io/v1", "v1-22"),
    # v1.16
    Deprecation("extensions/v1beta1", "Deployment", "v1.16", "apps/v1", "v1-16"),
    Deprecation("apps/v1beta1", "Deployment", "v1.16", "apps/v1", "v1-16"),
    Deprecation("apps/v1beta2", "Deployment", "v1.16", "apps/v1", "v1-16"),
    Deprecation("extensions/v1beta1", "DaemonSet", "v1.16", "apps/v1", "v1-16"),
    Deprecation("apps/v1beta2", "StatefulSet", "v1.16", "apps/v1", "v1-16"),
]

BY_KEY = {(d.group_version, d.kind): d for d in _TABLE}


def lookup(group: str, version: str, kind: str) -> Deprecation | None:
    group_version = f"{group}/{version}" if group else version
    return BY_KEY.get((group_version, kind))

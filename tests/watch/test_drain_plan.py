"""What a drain does with each pod of its node, as `kubectl drain --ignore-daemonsets`
decides: DaemonSet and static pods skipped (and said so), pods no controller manages and
pods with emptyDir data refused unless chosen, finished pods taken whatever they hold."""

from __future__ import annotations

from typing import Any

from webapp.nodes.drain import Options, plan


def pod(name: str, owner: str | None = "ReplicaSet", phase: str = "Running",
        emptydir: bool = False, mirror: bool = False) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "shop"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": f"{name}-owner", "controller": True}]
    if mirror:
        meta["annotations"] = {"kubernetes.io/config.mirror": "abc"}
    spec: dict[str, Any] = {"containers": [{"name": "app"}]}
    if emptydir:
        spec["volumes"] = [{"name": "cache", "emptyDir": {}}]
    return {"metadata": meta, "spec": spec, "status": {"phase": phase}}


PODS = [pod("web"), pod("logs", owner="DaemonSet"), pod("etcd", owner=None, mirror=True),
        pod("lone", owner=None), pod("cache", emptydir=True),
        pod("done", owner=None, phase="Succeeded", emptydir=True)]


def names(items: list[Any]) -> list[str]:
    return [i["pod"] if "pod" in i else f"shop/{i['metadata']['name']}" for i in items]


def test_by_default_unmanaged_and_emptydir_pods_are_refused() -> None:
    chosen = plan(PODS, Options())
    assert names(chosen.evict) == ["shop/web", "shop/done"]
    assert names(chosen.skipped) == ["shop/logs", "shop/etcd"]
    assert "DaemonSet logs-owner" in chosen.skipped[0]["reason"]
    assert [(r["pod"], r["option"]) for r in chosen.refused] == [
        ("shop/lone", "force"), ("shop/cache", "delete_emptydir_data")]
    assert "emptyDir data (cache)" in chosen.refused[1]["reason"]


def test_each_choice_lets_its_pods_go_and_only_those() -> None:
    forced = plan(PODS, Options(force=True))
    assert names(forced.evict) == ["shop/web", "shop/lone", "shop/done"]
    assert [r["pod"] for r in forced.refused] == ["shop/cache"]
    both = plan(PODS, Options(force=True, delete_emptydir_data=True))
    assert names(both.evict) == ["shop/web", "shop/lone", "shop/cache", "shop/done"]
    assert both.refused == []
    assert names(both.skipped) == ["shop/logs", "shop/etcd"]  # never evicted

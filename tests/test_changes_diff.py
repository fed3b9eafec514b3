"""A change's parts without a cluster: what is desired state, the difference and its bounds,
who made it from managedFields, and how it reads in one line."""

from __future__ import annotations

from types import SimpleNamespace

from webapp.changes import diff, managers, tracked, wording


def test_status_and_bookkeeping_are_not_desired_state() -> None:
    obj = {"metadata": {"name": "web", "resourceVersion": "9", "generation": 3,
                        "labels": {"app": "web"},
                        "annotations": {"deployment.kubernetes.io/revision": "4",
                                        "team": "shop"}},
           "spec": {"replicas": 2}, "status": {"readyReplicas": 1}}
    assert tracked.desired(obj, "Deployment") == {
        "spec": {"replicas": 2},
        "metadata": {"labels": {"app": "web"}, "annotations": {"team": "shop"}}}


def test_a_secret_is_its_keys() -> None:
    obj = {"type": "Opaque", "data": {"b": None, "a": None}, "metadata": {"name": "s"}}
    assert tracked.desired(obj, "Secret") == {"type": "Opaque", "data": ["a", "b"]}


def test_named_items_are_compared_by_name_and_paths_read_as_written() -> None:
    old = {"spec": {"containers": [{"name": "web", "image": "a"}, {"name": "log", "image": "l"}]},
           "metadata": {"labels": {"app.kubernetes.io/name": "x"}}}
    new = {"spec": {"containers": [{"name": "log", "image": "l"}, {"name": "web", "image": "b"}]},
           "metadata": {"labels": {"app.kubernetes.io/name": "y"}}}
    found = [(diff.path_text(e.path), e.old, e.new) for e in diff.changes(old, new)]
    assert found == [('metadata.labels["app.kubernetes.io/name"]', "x", "y"),
                     ("spec.containers[web].image", "a", "b")]


def test_a_huge_value_is_summarised_and_entries_are_bounded() -> None:
    before = "\n".join(f"line {i}" for i in range(2000))
    after = before + "\nline new"
    entries = diff.changes({"data": {"big": before, **{f"k{i}": i for i in range(10)}}},
                           {"data": {"big": after, **{f"k{i}": i + 1 for i in range(10)}}})
    stored, omitted = diff.bounded(entries, diff.Limits(value_bytes=100, entries=5,
                                                        total_bytes=4096))
    assert len(stored) == 5 and omitted == 6
    big = stored[0]
    assert big["path"] == "data.big"
    assert big["new"].startswith("‹") and "2,001 lines (+1 −0" in big["new"]
    assert len(str(big)) < 400


def test_the_manager_owning_the_changed_field_and_latest_wins() -> None:
    fields = [
        {"manager": "kubectl-scale", "operation": "Update", "time": "2026-01-01T10:00:00Z",
         "fieldsV1": {"f:spec": {"f:replicas": {}}}},
        {"manager": "flux", "operation": "Apply", "time": "2026-01-01T09:00:00Z",
         "fieldsV1": {"f:spec": {"f:template": {"f:spec": {"f:containers": {
             'k:{"name":"web"}': {".": {}, "f:image": {}, "f:name": {}}}}}}}},
        {"manager": "kube-controller-manager", "operation": "Update", "subresource": "status",
         "time": "2026-01-01T11:00:00Z", "fieldsV1": {"f:status": {}}},
    ]
    image = ("spec", "template", "spec", ("containers", "web"), "image")
    assert managers.who(fields, [image]) == managers.Manager("flux", "Apply",
                                                            "2026-01-01T09:00:00Z")
    assert managers.who(fields, [("spec", "replicas")]).name == "kubectl-scale"
    # A removed field has no owner: the last to change the object (status aside).
    assert managers.who(fields, [("spec", "paused")]).name == "kubectl-scale"
    assert managers.who([], [image]) is None


def test_a_change_reads_in_one_line() -> None:
    event = SimpleNamespace(
        user_name=None, commit_sha="1a2b3c4d5e6f7a8b9c0d1a2b3c4d5e6f7a8b9c0d",
        details={"object": "Deployment/shop/web", "manager": "flux", "change": "updated",
                 "diff": [{"path": "spec.template.spec.containers[web].image",
                           "old": "web:1.8", "new": "web:1.9"},
                          {"path": "spec.replicas", "old": 2, "new": 3}], "omitted": 1})
    assert wording.sentence(event) == (
        "Deployment shop/web: spec.template.spec.containers[web].image web:1.8 → web:1.9 "
        "and 2 more changes by flux (commit 1a2b3c4d)")
    person = SimpleNamespace(user_name="alice", commit_sha=None,
                             details={"object": "ConfigMap/shop/settings",
                                      "manager": "agentwatch", "change": "created",
                                      "diff": []})
    assert wording.sentence(person) == "ConfigMap shop/settings created by alice (agentwatch)"


def test_the_configuration_names_the_kinds_or_turns_recording_off() -> None:
    from webapp.agentconfig.validate import check
    from webapp.changes import kinds
    assert kinds.named(None) == (*kinds.DEFAULT_KINDS, kinds.FLUX)
    good = check("changes:\n  kinds: [Deployment, ConfigMap, flux]\n")
    assert not good.problems and kinds.named(good.document) == ("Deployment", "ConfigMap",
                                                                "flux")
    off = check("changes:\n  enabled: false\n")
    assert not off.problems and kinds.named(off.document) is None
    for bad in ("changes:\n  kinds: [deployments/../secrets]\n",
                "changes:\n  kinds: Deployment\n", "changes:\n  every: true\n"):
        assert check(bad).problems, bad

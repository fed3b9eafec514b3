"""`access_as: user` and a grant in some namespaces only: the person's index lists what they
may not list cluster-wide namespace by namespace, so they find their namespace's objects
and never another's."""

from __future__ import annotations

from .conftest import Live, eventually
from .test_fleet import _deployment
from .test_search import _found

AS_USER = {"access_as": "user", "view": {"role": "viewer"}, "act": {"role": "maintainer"}}


def test_a_person_granted_one_namespace_finds_its_objects_and_no_others(live: Live) -> None:
    live.user("bob", "viewer")
    live.agent("prod", access=AS_USER)
    for namespace in ("team-a", "team-b"):
        live.sim.add_namespace(namespace)
    live.sim.create(_deployment("team-a", "ledger-api"))
    live.sim.create(_deployment("team-b", "ledger-billing"))
    live.sim.rbac.allow(users=["agentwatch:bob"], verbs=["get", "list", "watch"],
                        namespaces=["team-a"])
    bob = live.browser("bob")
    wanted = ("prod", "Deployment", "team-a", "ledger-api")

    def has() -> list[tuple[str, str, str, str]] | None:
        found = _found(live, bob, "ledger")
        return found if wanted in found else None

    found = eventually(has, timeout=30)
    assert found is not None
    assert {namespace for _, _, namespace, _ in found} == {"team-a"}

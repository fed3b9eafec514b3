"""Whom `access_as: user` impersonates: the person, their role, and their groups at their
identity provider, each behind the configured prefix; a local account has no provider
groups."""

from __future__ import annotations

from typing import Any

import pytest

from webapp import agents, clock, db, users
from webapp.oidc.models import UserIdentity
from webapp.watch import access
from webapp.watch.resources import AGENT


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    return {**app_config, "IMPERSONATE_PREFIX": "corp:"}


def test_the_person_their_role_and_their_provider_groups_behind_the_prefix(app, h):
    h.user("ann", "viewer")
    h.user("bob", "maintainer")
    h.agent()
    with app.app_context():
        ann = users.get("ann")
        now = clock.now()
        with db.write_transaction() as session:
            session.add(UserIdentity(user_id=ann.id, provider="oidc", issuer="https://sso",
                                     subject="s-1", groups=["team-a", "devs", "Équipe"],
                                     created_at=now, checked_at=now))
        prod = agents.get("prod")
        assert access.identity(ann, prod) is AGENT  # access_as: agent by default
        with db.write_transaction():
            prod.cluster_access = {"access_as": "user"}
        ann_as = access.identity(ann, prod)
        assert (ann_as.user, ann_as.groups) == (
            "corp:ann", ("corp:viewer", "corp:users", "corp:devs", "corp:team-a"))
        bob_as = access.identity(users.get("bob"), prod)
        assert (bob_as.user, bob_as.groups) == ("corp:bob", ("corp:maintainer", "corp:users"))
        assert access.impersonate_prefix(prod) == "corp:"

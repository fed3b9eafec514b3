"""The identity providers' settings: one, several, and a wrong one refused at start with the
setting's name."""

from __future__ import annotations

import pytest

from webapp.oidc.settings import SettingsError, providers


def test_one_provider_from_the_unnamed_settings() -> None:
    [one] = providers({"OIDC_ISSUER": "https://sso.example.com/realms/ops",
                       "OIDC_CLIENT_ID": "aw", "OIDC_CLIENT_SECRET": "s",
                       "OIDC_ROLES": "admins=admin, sre=maintainer,devs=viewer"})
    assert (one.name, one.display_name, one.scopes) == ("oidc", "sso.example.com",
                                                        "openid profile email")
    assert one.metadata_url == ("https://sso.example.com/realms/ops/"
                                ".well-known/openid-configuration")
    assert one.role_for(["devs", "sre"]) == "maintainer"
    assert one.role_for(["marketing"]) is None
    assert providers({}) == []


def test_several_providers_fall_back_to_the_unnamed_settings() -> None:
    corp, partners = providers({
        "OIDC_PROVIDERS": "corp, partners", "OIDC_GROUPS_CLAIM": "roles",
        "OIDC_CORP_ISSUER": "https://corp.okta.com", "OIDC_CORP_CLIENT_ID": "a",
        "OIDC_CORP_CLIENT_SECRET": "b", "OIDC_CORP_GROUPS_CLAIM": "groups",
        "OIDC_PARTNERS_ISSUER": "https://sso.partner.example", "OIDC_PARTNERS_CLIENT_ID": "c",
        "OIDC_PARTNERS_CLIENT_SECRET": "d", "OIDC_PARTNERS_DEFAULT_ROLE": "viewer"})
    assert (corp.name, corp.groups_claim, corp.default_role) == ("corp", "groups", None)
    assert (partners.name, partners.groups_claim, partners.role_for([])) == (
        "partners", "roles", "viewer")


@pytest.mark.parametrize(("config", "message"), [
    ({"OIDC_ISSUER": "https://x.example"}, "AGENTWATCH_OIDC_CLIENT_ID is required"),
    ({"OIDC_ISSUER": "http://sso.example.com", "OIDC_CLIENT_ID": "a",
      "OIDC_CLIENT_SECRET": "b"}, "AGENTWATCH_OIDC_ISSUER must be an https URL"),
    ({"OIDC_ISSUER": "https://x.example", "OIDC_CLIENT_ID": "a", "OIDC_CLIENT_SECRET": "b",
      "OIDC_ROLES": "admins=root"}, "'admins=root' must be GROUP=ROLE"),
    ({"OIDC_ISSUER": "https://x.example", "OIDC_CLIENT_ID": "a", "OIDC_CLIENT_SECRET": "b",
      "OIDC_SCOPES": "profile email"}, "AGENTWATCH_OIDC_SCOPES must include openid"),
    ({"OIDC_PROVIDERS": "Corp"}, "'Corp' must be 1-31 lower-case letters"),
    ({"OIDC_PROVIDERS": "corp"}, "AGENTWATCH_OIDC_CORP_ISSUER is required"),
    ({"OIDC_ISSUER": "https://x.example", "OIDC_CLIENT_ID": "a", "OIDC_CLIENT_SECRET": "b",
      "OIDC_USERNAME_PREFIX": "partner:"}, "AGENTWATCH_OIDC_USERNAME_PREFIX must be 1-32"),
    ({"OIDC_ISSUER": "https://x.example", "OIDC_CLIENT_ID": "a", "OIDC_CLIENT_SECRET": "b",
      "OIDC_GROUPS_PREFIX": "p q"}, "AGENTWATCH_OIDC_GROUPS_PREFIX must be 1-32"),
])
def test_a_wrong_setting_is_named(config: dict[str, str], message: str) -> None:
    with pytest.raises(SettingsError, match=message.replace("(", r"\(")) as refused:
        providers(config)
    assert message in str(refused.value)

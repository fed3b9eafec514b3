"""The configured providers, read from the app's settings (docs/identity.md, "Settings").

One provider: AGENTWATCH_OIDC_ISSUER, _CLIENT_ID, _CLIENT_SECRET, and optionally _SCOPES,
_USERNAME_CLAIM, _GROUPS_CLAIM, _ROLES, _DEFAULT_ROLE, _DISPLAY_NAME, _CA_FILE. Several:
AGENTWATCH_OIDC_PROVIDERS=corp,partners, then AGENTWATCH_OIDC_CORP_ISSUER and so on; a
named provider's optional settings default to the unnamed ones."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlparse

from ..users import ROLES, has_role_rank

SINGLE = "oidc"
_NAME = re.compile(r"^[a-z0-9][a-z0-9-]{0,30}$")
_OPTIONAL = {"SCOPES": "openid profile email", "USERNAME_CLAIM": "preferred_username",
             "GROUPS_CLAIM": "groups", "ROLES": "", "DEFAULT_ROLE": "", "DISPLAY_NAME": "",
             "CA_FILE": "", "USERNAME_PREFIX": "", "GROUPS_PREFIX": ""}
# What a provider's people's names and groups may be prefixed with (its own name space beside
# another provider's: see docs/identity.md, "Several providers").
_USERNAME_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@-]{0,31}")
_GROUPS_PREFIX = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:@/-]{0,31}")


class SettingsError(ValueError):
    """A provider's settings are wrong: the app does not start, and says which."""


@dataclass(frozen=True)
class Provider:
    name: str
    issuer: str
    client_id: str
    client_secret: str
    scopes: str
    username_claim: str
    groups_claim: str
    # group -> role, in the order given
    roles: tuple[tuple[str, str], ...]
    default_role: str | None
    display_name: str
    # Trust this CA (PEM) for the provider, as a private Keycloak's; None: the system's.
    ca_file: str | None = None
    # Put before its people's user names and groups, so that they never stand for another
    # provider's (an exec grant to a group, a cluster's RoleBinding of an impersonated name).
    username_prefix: str = ""
    groups_prefix: str = ""

    @property
    def metadata_url(self) -> str:
        return self.issuer.rstrip("/") + "/.well-known/openid-configuration"

    def role_for(self, groups: list[str]) -> str | None:
        """The highest role any of the groups maps to, else the default (None: no role,
        the person may not sign in)."""
        best = self.default_role
        for group, role in self.roles:
            if self.groups_prefix + group in groups and \
                    (best is None or has_role_rank(role, best)):
                best = role
        return best


def providers(config: dict[str, Any]) -> list[Provider]:
    names = [n.strip() for n in str(config.get("OIDC_PROVIDERS") or "").split(",") if n.strip()]
    if not names:
        return [_read(config, SINGLE, "OIDC_")] if config.get("OIDC_ISSUER") else []
    found = []
    for name in names:
        if not _NAME.fullmatch(name):
            raise SettingsError(f"AGENTWATCH_OIDC_PROVIDERS: {name!r} must be 1-31 lower-case "
                                "letters, digits or '-'")
        found.append(_read(config, name, f"OIDC_{name.upper().replace('-', '_')}_"))
    return found


def _read(config: dict[str, Any], name: str, prefix: str) -> Provider:
    def value(key: str) -> str:
        own = config.get(prefix + key)
        return str(own if own is not None else config.get("OIDC_" + key, _OPTIONAL[key]))

    required = {}
    for key in ("ISSUER", "CLIENT_ID", "CLIENT_SECRET"):
        raw = str(config.get(prefix + key) or "").strip()
        if not raw:
            raise SettingsError(f"AGENTWATCH_{prefix}{key} is required for provider {name!r}")
        required[key] = raw
    issuer = required["ISSUER"]
    parsed = urlparse(issuer)
    # Plain http only on loopback (a test's provider): elsewhere keys and tokens could be
    # swapped on the way.
    loopback = parsed.hostname in ("127.0.0.1", "localhost", "::1")
    if not parsed.netloc or not (parsed.scheme == "https"
                                 or (parsed.scheme == "http" and loopback)):
        raise SettingsError(f"AGENTWATCH_{prefix}ISSUER must be an https URL, not {issuer!r}")
    scopes = value("SCOPES").replace(",", " ")
    if "openid" not in scopes.split():
        raise SettingsError(f"AGENTWATCH_{prefix}SCOPES must include openid")
    default_role = value("DEFAULT_ROLE").strip() or None
    if default_role is not None and default_role not in ROLES:
        raise SettingsError(f"AGENTWATCH_{prefix}DEFAULT_ROLE must be one of "
                            f"{', '.join(ROLES)} or empty")
    ca_file = value("CA_FILE").strip() or None
    if ca_file is not None and not os.path.isfile(ca_file):
        raise SettingsError(f"AGENTWATCH_{prefix}CA_FILE: no file {ca_file!r}")
    name_prefix, groups_prefix = value("USERNAME_PREFIX").strip(), value("GROUPS_PREFIX").strip()
    if name_prefix and not _USERNAME_PREFIX.fullmatch(name_prefix):
        raise SettingsError(f"AGENTWATCH_{prefix}USERNAME_PREFIX must be 1-32 letters, digits "
                            f"or . _ @ -, starting with a letter or digit, not {name_prefix!r}")
    if groups_prefix and not _GROUPS_PREFIX.fullmatch(groups_prefix):
        raise SettingsError(f"AGENTWATCH_{prefix}GROUPS_PREFIX must be 1-32 letters, digits "
                            f"or . _ : @ / -, starting with a letter or digit, not "
                            f"{groups_prefix!r}")
    return Provider(
        ca_file=ca_file, name=name, issuer=issuer, client_id=required["CLIENT_ID"],
        client_secret=required["CLIENT_SECRET"], scopes=scopes,
        username_claim=value("USERNAME_CLAIM").strip(),
        groups_claim=value("GROUPS_CLAIM").strip(),
        roles=parse_roles(value("ROLES"), f"AGENTWATCH_{prefix}ROLES"),
        default_role=default_role,
        display_name=value("DISPLAY_NAME").strip() or parsed.netloc,
        username_prefix=name_prefix, groups_prefix=groups_prefix)


def parse_roles(raw: str, setting: str) -> tuple[tuple[str, str], ...]:
    """`admins=admin,sre=maintainer`: a group, '=', a role; comma separated."""
    pairs = []
    for item in raw.split(","):
        if not item.strip():
            continue
        group, sep, role = item.rpartition("=")
        group, role = group.strip(), role.strip()
        if not sep or not group or role not in ROLES:
            raise SettingsError(f"{setting}: {item.strip()!r} must be GROUP=ROLE with a role "
                                f"among {', '.join(ROLES)}")
        pairs.append((group, role))
    return tuple(pairs)

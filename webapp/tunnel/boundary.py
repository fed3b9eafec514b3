"""The agent does not trust what the server asks: a stream's head is checked whole —
method and path (allowlist.py), query (query.py), headers and impersonation
(impersonation.py), how much of Secrets it reads (secret_reads.py) — before anything
reaches the API server, and what is sent upstream is
what was checked, rebuilt here, never the server's bytes. Bodies are checked once read
(bodies.py).

Headers: only `Accept` and `Content-Type` with values the product sends for that request,
and the impersonation headers its setting allows. Anything else (another header, a second
Accept, protobuf, YAML) is refused, not dropped: a request the product would never make
says something is wrong with the server.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..search.listing import PARTIAL_ACCEPT
from ..watch.discovery import AGGREGATED_ACCEPT
from ..watch.kube import TABLE_ACCEPT
from . import allowlist, bodies, query
from .allowlist import Action, Target
from .impersonation import Impersonation, ImpersonationRefused
from .secret_reads import SecretReads

JSON = "application/json"
_IMPERSONATE_USER = "impersonate-user"
_IMPERSONATE_GROUP = "impersonate-group"
# What ClusterClient (watch/kube.py) and discovery (watch/discovery.py) ask for; the
# search's light listing asks for metadata only (search/listing.py).
_ACCEPT: dict[Action, set[str]] = {Action.DISCOVERY_ROOT: {JSON, AGGREGATED_ACCEPT},
                                   Action.LIST: {JSON, TABLE_ACCEPT, PARTIAL_ACCEPT}}


class Refused(ValueError):
    pass


@dataclass(frozen=True)
class Upstream:
    """A request the agent performs, as it sends it."""

    method: str
    target: Target
    query: str
    headers: list[tuple[str, str]]
    watch: bool
    streaming: bool  # a watch or a followed log: no read timeout

    @property
    def path(self) -> str:
        return self.target.path


def screen(head: dict[str, Any], impersonation: Impersonation,
           secrets: SecretReads = SecretReads.NAMES) -> Upstream:
    """The request a stream's OPEN asks for, or Refused saying why."""
    method, path, raw_query = head.get("method"), head.get("path"), head.get("query") or ""
    if not (isinstance(method, str) and isinstance(path, str) and isinstance(raw_query, str)):
        raise Refused("a request's method, path and query are text")
    verdict = allowlist.check(method, path, _content_type(head.get("headers")))
    if verdict.target is None:
        raise Refused(verdict.reason)
    target = verdict.target
    try:
        params = query.parse(raw_query)
        query.check(target.action, params)
    except query.QueryRefused as exc:
        raise Refused(str(exc)) from None
    headers = _headers(head.get("headers"), target.action, impersonation)
    if headers[0][1] == PARTIAL_ACCEPT and query.watches(params):
        raise Refused("agentwatch lists metadata only in pages, never watches it")
    refusal = secrets.refusal(target, headers[0][1], params)
    if refusal is not None:
        raise Refused(refusal)
    return Upstream(method, target, query.encode(params), headers, query.watches(params),
                    query.streams(params))


def _content_type(raw: Any) -> str | None:
    """The one Content-Type a head names (an apply is told from a patch by it; _headers
    checks the rest)."""
    given = [pair[1] for pair in raw if isinstance(pair, list) and len(pair) == 2
             and isinstance(pair[0], str) and pair[0].lower() == "content-type"] \
        if isinstance(raw, list) else []
    return given[0] if len(given) == 1 and isinstance(given[0], str) else None


def _headers(raw: Any, action: Action, impersonation: Impersonation) -> list[tuple[str, str]]:
    if not isinstance(raw, list):
        raise Refused("a request's headers are a list of [name, value]")
    given: dict[str, list[str]] = {}
    for pair in raw:
        if not (isinstance(pair, list) and len(pair) == 2
                and all(isinstance(part, str) for part in pair)):
            raise Refused("a request's headers are a list of [name, value]")
        given.setdefault(pair[0].lower(), []).append(pair[1])
    unknown = sorted(set(given) - {"accept", "content-type", _IMPERSONATE_USER,
                                   _IMPERSONATE_GROUP})
    if unknown:
        raise Refused(f"the header {unknown[0][:64]!r} is not one agentwatch sends")
    accept = given.get("accept", [])
    if len(accept) != 1 or accept[0] not in _ACCEPT.get(action, {JSON}):
        raise Refused(f"Accept {', '.join(accept)[:200]!r} is not what agentwatch asks of "
                      f"{action}")
    content_type = given.get("content-type", [])
    expected = bodies.content_type(action)
    # A pod's delete may come without its options (and then without a Content-Type).
    if content_type != ([expected] if expected else []) and not \
            (action is Action.DELETE_POD and not content_type):
        raise Refused(f"Content-Type {', '.join(content_type)[:200]!r} is not what "
                      f"agentwatch sends with {action}")
    users, groups = given.get(_IMPERSONATE_USER, []), given.get(_IMPERSONATE_GROUP, [])
    try:
        impersonation.check(users, groups)
    except ImpersonationRefused as exc:
        raise Refused(str(exc)) from None
    return [("Accept", accept[0])] + [("Content-Type", value) for value in content_type] + \
        [("Impersonate-User", value) for value in users] + \
        [("Impersonate-Group", value) for value in groups]

"""The API server's own record of the requests it served (its audit log), read as the
simulator's request counters are: how many lists and watches reached the server, from whom,
as whom, with which query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs, urlsplit

from .cluster import RealCluster


@dataclass(frozen=True)
class Request:
    verb: str  # get, list, watch, create, patch, delete, ...
    stage: str  # ResponseStarted (a watch began streaming) or ResponseComplete
    user: str  # the credentials' user
    as_user: str | None  # Impersonate-User, if any
    as_groups: tuple[str, ...]  # Impersonate-Group headers, in order
    resource: str
    subresource: str | None
    namespace: str | None
    name: str | None
    query: dict[str, str]
    code: int | None

    @classmethod
    def of(cls, event: dict[str, Any]) -> Request:
        ref = event.get("objectRef") or {}
        impersonated = event.get("impersonatedUser") or {}
        url = urlsplit(event.get("requestURI", ""))
        return cls(event["verb"], event["stage"], event["user"]["username"],
                   impersonated.get("username"), tuple(impersonated.get("groups") or ()),
                   ref.get("resource", ""), ref.get("subresource"), ref.get("namespace"),
                   ref.get("name"), {k: v[-1] for k, v in parse_qs(url.query).items()},
                   (event.get("responseStatus") or {}).get("code"))


def requests(cluster: RealCluster, namespace: str, resource: str = "pods",
             verb: str | None = None) -> list[Request]:
    """Finished requests (and watches that started) on ``resource`` in ``namespace``."""
    found = []
    for event in cluster.audit():
        request = Request.of(event)
        if request.namespace != namespace or request.resource != resource:
            continue
        if verb is not None and request.verb != verb:
            continue
        # A watch is recorded when it starts streaming and again when it ends; count starts.
        wanted_stage = "ResponseStarted" if request.verb == "watch" else "ResponseComplete"
        if request.stage == wanted_stage:
            found.append(request)
    return found


def open_watches(cluster: RealCluster, namespace: str, resource: str = "pods") -> int:
    """Watches on ``resource`` in ``namespace`` that started and have not ended."""
    started = ended = 0
    for event in cluster.audit():
        request = Request.of(event)
        if (request.verb, request.namespace, request.resource) != ("watch", namespace,
                                                                     resource):
            continue
        started += request.stage == "ResponseStarted"
        ended += request.stage == "ResponseComplete"
    return started - ended

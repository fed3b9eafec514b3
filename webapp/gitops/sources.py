"""Where a Flux object's commits live: the URL of the GitRepository it deploys from, read
now and then by the observer and kept in each GitOps event's details (`source_url`), so an
event's commit links to its Git host ("https://github.com/org/repo/commit/SHA")."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import quote, urlsplit

from ..watch.kube import ClusterClient, KubeError
from ..watch.resources import AGENT, WatchParams

JSON = dict[str, Any]
GIT_REPOSITORIES = WatchParams("source.toolkit.fluxcd.io", "v1", "gitrepositories")
TTL_SECONDS = 300.0  # a source's URL rarely changes: read again after this long
_SCP_LIKE = re.compile(r"^(?:[\w.-]+@)?(?P<host>[\w.-]+):(?P<path>[^/].*)$")
_SHA = re.compile(r"^[0-9a-f]{7,64}$")


class SourceURLs:
    """The GitRepository URL of Flux objects, per agent, cached for TTL_SECONDS."""

    def __init__(self, client_for: Callable[[str], ClusterClient]) -> None:
        self._client_for = client_for
        self._lock = threading.Lock()
        self._known: dict[tuple[str, str, str], tuple[float, str | None]] = {}

    def url_of(self, agent: str, obj: JSON) -> str | None:
        spec = obj.get("spec") or {}
        meta = obj.get("metadata") or {}
        ref = spec.get("sourceRef") or {}
        if not isinstance(ref, dict) or ref.get("kind") != "GitRepository" or \
                not isinstance(ref.get("name"), str):
            return None  # a chart repository, an OCI source…: no commits to link
        namespace = str(ref.get("namespace") or meta.get("namespace") or "")
        key = (agent, namespace, str(ref["name"]))
        now = time.monotonic()
        with self._lock:
            known = self._known.get(key)
        if known is not None and known[0] > now:
            return known[1]
        url: str | None = None
        try:
            repo = self._client_for(agent).get(GIT_REPOSITORIES, key[2], AGENT, namespace)
            value = (repo.get("spec") or {}).get("url")
            url = value if isinstance(value, str) and len(value) <= 2048 else None
        except (KubeError, ValueError):
            url = None  # not readable now: the commit links to the event instead
        with self._lock:
            if len(self._known) > 10_000:
                self._known.clear()
            self._known[key] = (now + TTL_SECONDS, url)
        return url


def commit_url(source_url: Any, sha: str | None) -> str | None:
    """The page of commit `sha` on the Git host of `source_url` (https, ssh or scp-like
    `git@host:org/repo.git`), None when it cannot be made safely."""
    if not isinstance(source_url, str) or not sha or not _SHA.fullmatch(sha):
        return None
    text = source_url.strip()
    scp = _SCP_LIKE.match(text) if "://" not in text else None
    if scp:
        host, path = scp["host"], scp["path"]
    else:
        parts = urlsplit(text)
        if parts.scheme not in ("https", "http", "ssh", "git") or not parts.hostname:
            return None
        host, path = parts.hostname, parts.path
    path = path.strip("/").removesuffix(".git")
    if not path or not re.fullmatch(r"[\w.~/-]+", path) or ".." in path or \
            not re.fullmatch(r"[\w.-]+", host):
        return None
    # GitLab writes a commit's page under /-/; GitHub, Gitea, Codeberg and others do not.
    middle = "/-/commit/" if "gitlab" in host else "/commit/"
    return f"https://{host}/{quote(path)}{middle}{sha}"

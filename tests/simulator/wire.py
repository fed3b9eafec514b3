"""Raw API requests to a ``Target`` (its address, CA and token), for what the typed client
cannot ask for: an ``Accept`` of its own (Table, aggregated discovery), a subresource without
a typed call, a watch's lines."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import urllib3
from clusters import Target

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
AGGREGATED = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
MERGE = "application/merge-patch+json"
STRATEGIC = "application/strategic-merge-patch+json"

_pools: dict[Target, urllib3.PoolManager] = {}


def _pool(target: Target) -> urllib3.PoolManager:
    pool = _pools.get(target)
    if pool is None:
        pool = _pools[target] = urllib3.PoolManager(
            ca_certs=str(target.ca_file) if target.ca_file else None)
    return pool


@dataclass
class Answer:
    status: int
    content_type: str
    body: Any
    lines: list[Any]  # a watch's events


def call(target: Target, method: str, path: str, body: Any = None, *,
         accept: str = "application/json", content_type: str = "application/json",
         query: dict[str, str] | None = None) -> Answer:
    """One request; an error status is answered, not raised."""
    url = target.server + path + (f"?{urlencode(query)}" if query else "")
    headers = {"Authorization": f"Bearer {target.token}", "Accept": accept}
    data = None
    if body is not None:
        headers["Content-Type"] = content_type
        data = json.dumps(body).encode()
    resp = _pool(target).request(method, url, body=data, headers=headers, timeout=30)
    text = resp.data
    ctype = resp.headers.get("Content-Type", "")
    if query and query.get("watch"):
        return Answer(resp.status, ctype, None,
                      [json.loads(line) for line in text.splitlines() if line.strip()])
    return Answer(resp.status, ctype, json.loads(text) if text else None, [])


def ok(target: Target, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    answer = call(target, method, path, body, **kw)
    assert 200 <= answer.status < 300, (target.name, method, path, answer.status, answer.body)
    return answer.body if answer.body is not None else answer.lines

"""Raw API requests to a ``Target`` (its address, CA and token), for what the typed client
cannot ask for: an ``Accept`` of its own (Table, aggregated discovery), a subresource without
a typed call, a watch's lines."""

from __future__ import annotations

import json
from collections.abc import Callable
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
         query: dict[str, str] | None = None,
         until: Callable[[list[Any]], bool] | None = None) -> Answer:
    """One request; an error status is answered, not raised. A watch's lines are read until
    the server ends it or, with `until`, until they are what is waited for."""
    url = target.server + path + (f"?{urlencode(query)}" if query else "")
    headers = {"Authorization": f"Bearer {target.token}", "Accept": accept}
    data = None
    if body is not None:
        headers["Content-Type"] = content_type
        data = json.dumps(body).encode()
    if until is not None:
        return _watched(target, method, url, data, headers, until)
    resp = _pool(target).request(method, url, body=data, headers=headers, timeout=30)
    text = resp.data
    ctype = resp.headers.get("Content-Type", "")
    if query and query.get("watch"):
        return Answer(resp.status, ctype, None,
                      [json.loads(line) for line in text.splitlines() if line.strip()])
    return Answer(resp.status, ctype, json.loads(text) if text else None, [])


def _watched(target: Target, method: str, url: str, data: bytes | None,
             headers: dict[str, str], until: Callable[[list[Any]], bool]) -> Answer:
    resp = _pool(target).request(method, url, body=data, headers=headers, timeout=30,
                                 preload_content=False)
    lines: list[Any] = []
    try:
        buffered = b""
        for chunk in resp.stream(amt=None, decode_content=False):
            *whole, buffered = (buffered + chunk).split(b"\n")
            lines += [json.loads(line) for line in whole if line.strip()]
            if lines and until(lines):
                break
    finally:
        resp.close()  # hang up first: a half-read stream must not go back to the pool
        resp.release_conn()
    return Answer(resp.status, resp.headers.get("Content-Type", ""), None, lines)


def ok(target: Target, method: str, path: str, body: Any = None, **kw: Any) -> Any:
    answer = call(target, method, path, body, **kw)
    assert 200 <= answer.status < 300, (target.name, method, path, answer.status, answer.body)
    return answer.body if answer.body is not None else answer.lines

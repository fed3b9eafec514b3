"""What the real server says, as the wire carries it: watch events as JSON lines, error bodies as
``Status`` objects, and raw requests for what the typed client cannot express (repeated
``Impersonate-Group`` headers, ``as=Table`` content negotiation)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import kubernetes
import urllib3

from .cluster import Identity, RealCluster

TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io"
JSON = dict[str, Any]


def status_of(error: kubernetes.client.ApiException) -> JSON:
    """The ``Status`` body of a refused request, with the HTTP code beside it."""
    body = json.loads(error.body) if error.body else {}
    body.setdefault("httpStatus", error.status)
    return dict(body)


def events(response: Any) -> Iterator[JSON]:
    """Watch events from a streamed (``_preload_content=False``) response until the server ends
    the stream; the connection is closed when the caller stops early."""
    try:
        buffered = b""
        for chunk in response.stream(amt=None, decode_content=False):
            buffered += chunk
            while b"\n" in buffered:
                line, buffered = buffered.split(b"\n", 1)
                if line.strip():
                    yield json.loads(line)
    finally:
        response.close()
        response.release_conn()


def watch(list_call: Callable[..., Any], namespace: str, **params: Any) -> Iterator[JSON]:
    """A watch through a typed client's list method, e.g. ``v1.list_namespaced_config_map``."""
    return events(list_call(namespace, watch=True, _preload_content=False, **params))


def watch_pods(v1: kubernetes.client.CoreV1Api, namespace: str, **params: Any) -> Iterator[JSON]:
    return watch(v1.list_namespaced_pod, namespace, **params)


def collect(stream: Iterator[JSON], until: Callable[[list[JSON]], bool] | None = None,
            ) -> list[JSON]:
    """Events until ``until`` holds for what arrived, or until the server ends the stream."""
    seen: list[JSON] = []
    for event in stream:
        seen.append(event)
        if until is not None and until(seen):
            break
    return seen


def after(delay: float, fn: Callable[[], Any]) -> threading.Thread:
    """Run ``fn`` after ``delay`` in a thread, so a change lands while a watch is open."""
    def run() -> None:
        time.sleep(delay)
        fn()
    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


class Raw:
    """HTTPS straight to the API server as one identity, headers exactly as given."""

    def __init__(self, cluster: RealCluster, identity: Identity) -> None:
        self.server = cluster.server
        self.pool = urllib3.PoolManager(ca_certs=str(cluster.ca_file), headers={
            "Authorization": f"Bearer {cluster.tokens[identity.name]}"})

    def request(self, method: str, path: str, headers: list[tuple[str, str]] | None = None,
                body: JSON | None = None, content_type: str = "application/json",
                ) -> tuple[int, JSON]:
        merged = urllib3.HTTPHeaderDict(self.pool.headers)
        for name, value in headers or []:
            merged.add(name, value)
        data = None
        if body is not None:
            merged["Content-Type"] = content_type
            data = json.dumps(body).encode()
        resp = self.pool.request(method, f"{self.server}{path}", headers=merged, body=data)
        return resp.status, (json.loads(resp.data) if resp.data else {})

    def close(self) -> None:
        self.pool.clear()

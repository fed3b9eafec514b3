"""The subresources with answers of their own: ``scale`` (an autoscaling/v1 Scale over
``spec.replicas``) and ``pods/log`` (tail, since, previous, and follow as a chunked stream).
"""

from __future__ import annotations

import time

from . import errors, scale
from . import patch as patching
from .errors import ApiError
from .exchange import POLL, Exchange, int_param
from .logs import LogBuffer
from .routes import Route
from .util import JSON, TRUE, dumps, parse_rfc3339


class Subresources(Exchange):
    def _scale(self, verb: str, route: Route, body: bytes) -> None:
        """GET/PUT/PATCH of ``{deployments,statefulsets,replicasets}/scale``: an
        autoscaling/v1 Scale that reads and writes the object's ``spec.replicas``."""
        assert route.name is not None
        store, rt, ns, name = self.cluster.store, route.rt, route.namespace or "", route.name
        if verb == "get":
            self._send(200, dumps(scale.of(store.get(rt, ns, name).obj)))
            return
        ctype = self.headers.get("Content-Type") or ""
        doc = self._json_body(body, ctype)

        def change(cur: JSON) -> JSON:
            current = scale.of(cur)
            wanted = doc if verb == "update" else patching.apply(ctype, current, doc)
            replicas = scale.replicas_of(wanted, name)
            expect = ((wanted or {}).get("metadata") or {}).get("resourceVersion")
            if expect and expect != cur["metadata"]["resourceVersion"]:
                raise errors.conflict(rt, name)
            cur["spec"]["replicas"] = replicas
            return cur

        result = store.update(rt, ns, name, change)
        self._send(200, dumps(scale.of(result)))

    # --- logs --------------------------------------------------------------------------------

    def _log(self, route: Route, query: dict[str, str]) -> None:
        assert route.name is not None
        cluster = self.cluster
        ns = route.namespace or ""
        tail = int_param(query, "tailLines")
        since = int_param(query, "sinceSeconds")
        since_ns = None
        if since is not None:
            if since < 1:
                raise ApiError(422, 'PodLogOptions "" is invalid: sinceSeconds: Invalid value: '
                                    f"{since}: must be greater than 0")
            since_ns = time.time_ns() - since * 1_000_000_000
        if query.get("sinceTime"):
            try:
                since_ns = int(parse_rfc3339(query["sinceTime"]) * 1_000_000_000)
            except ValueError:
                raise ApiError(400, f"invalid sinceTime {query['sinceTime']!r}") from None
        limit_bytes = int_param(query, "limitBytes")
        stamps = query.get("timestamps") in TRUE
        follow = query.get("follow") in TRUE
        _, buf = cluster.log_source(ns, route.name, query.get("container"),
                                    query.get("previous") in TRUE)
        pos = buf.start_position(tail, since_ns)
        if not follow:
            parts = []
            while True:
                data, pos = buf.read(pos, stamps)
                if not data:
                    break
                parts.append(data)
            out = b"".join(parts)
            if limit_bytes is not None:
                out = out[:limit_bytes]
            self._send(200, out, "text/plain")
            return
        self._start_stream("text/plain")
        with self.server.sim.streaming(self.connection):
            self._follow(buf, pos, stamps, limit_bytes)

    def _follow(self, buf: LogBuffer, pos: int, stamps: bool, limit_bytes: int | None) -> None:
        cluster = self.cluster
        sent = 0
        while True:
            data, pos = buf.read(pos, stamps)
            if data:
                if limit_bytes is not None:
                    data = data[: max(limit_bytes - sent, 0)]
                self._chunk(data)
                sent += len(data)
                if limit_bytes is not None and sent >= limit_bytes:
                    break
                continue
            if buf.closed or self._stream_over() or cluster.closed.is_set():
                break
            buf.wait(pos, POLL)
        self._end_stream()

"""The Kubernetes HTTP API over loopback: each request (LIST/WATCH/CRUD, logs,
discovery) served from the store. Who is asking is ``rbac``'s to decide, which verb a
request is ``routes``', and the server's lifecycle ``server``'s.

Watch and log-follow responses are chunked; each chunk is one ``sendall`` so events reach
the client immediately. Watch lines are the store's cached encodings, shared by every
watcher.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import select
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import yaml

from . import defaults, errors, scale
from . import patch as patching
from .errors import ApiError
from .logs import LogBuffer
from .negotiation import PLAIN, Representation, negotiate
from .rbac import Identity, Request
from .representation import WatchLines, check_partial, partial, table
from .resources import NAMESPACES, ResourceType
from .routes import Route, discovery_document, parse_route, verb_of
from .selectors import compile_selector
from .stats import RequestRecord
from .store import Cursor, Expired, Stored, WatchEvent
from .util import JSON, TRUE, dumps, parse_rfc3339

if TYPE_CHECKING:
    from .cluster import SimCluster
    from .server import HTTPServer

log = logging.getLogger(__name__)

_POLL = 0.5  # longest sleep of a stream before it checks for shutdown / client hang-up


class _ClientGone(Exception):
    pass


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    rep: Representation = PLAIN  # this request's answer: plain objects or a Table
    server: HTTPServer
    server_version = "simcluster"
    sys_version = ""

    def setup(self) -> None:
        super().setup()
        # Streams write one small chunk per event: without this, Nagle + delayed ACK hold
        # the next chunk for up to 40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
        pass  # the stats/request log records requests; stderr noise helps nobody

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_PATCH(self) -> None:
        self._dispatch("PATCH")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    # --- plumbing ----------------------------------------------------------------------------

    @property
    def cluster(self) -> SimCluster:
        return self.server.sim.cluster

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        self.wfile.write(body)

    def _send_error(self, err: ApiError) -> None:
        body = dumps(err.status())
        retry = (err.details or {}).get("retryAfterSeconds")
        self.send_response(err.code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Cache-Control", "no-cache, private")
        if retry:  # as the API server's responsewriters do for a Status with a retry hint
            self.send_header("Retry-After", str(retry))
        self.end_headers()
        self.wfile.write(body)

    def _start_stream(self, ctype: str) -> None:
        self.send_response(200)
        self.send_header("Content-Type", ctype)
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()

    def _chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(b"%x\r\n%b\r\n" % (len(data), data))

    def _end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")

    def _client_gone(self) -> bool:
        """During a stream the client sends nothing: readable means it hung up."""
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            if readable:
                return self.connection.recv(1, socket.MSG_PEEK) == b""
        except (OSError, ValueError):
            return True
        return False

    def _stream_over(self) -> bool:
        return self.server.sim.stopping.is_set() or self._client_gone()

    def _read_body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _identity(self, on: Request | None = None) -> Identity:
        auth = self.headers.get("Authorization") or ""
        return self.cluster.rbac.authenticate(
            auth[7:].strip() if auth.lower().startswith("bearer ") else None,
            self.cluster.token, self.headers.get_all("Impersonate-User") or [],
            self.headers.get_all("Impersonate-Group") or [], on)

    # --- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        try:
            self._handle(method)
        except _ClientGone:
            self.close_connection = True
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except OSError:
            self.close_connection = True

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = self._read_body()
        try:
            target = parse_route(url.path)
            if not isinstance(target, Route):
                if url.path.rstrip("/") in ("/healthz", "/readyz", "/livez"):
                    self._send(200, b"ok", "text/plain; charset=utf-8")
                    return
                if method != "GET":
                    raise ApiError(405, f"the server does not allow this method on the "
                                        f"requested resource ({method})")
                doc, ctype = discovery_document(url.path, target, self.headers.get("Accept"))
                self._send(200, dumps(doc), ctype)
                return
            route = target
            verb = verb_of(method, route, query)
            resource = route.rt.plural + (f"/{route.sub}" if route.sub else "")
            self._authorize(verb, route, resource, method, url.path, query)
            injected = self.cluster.faults.take(verb, route.rt.plural,
                                                query.get("resourceVersion"),
                                                self.cluster.store.resource_version)
            if injected is not None:
                raise injected
            _check_list_options(verb, query)
            self.rep = negotiate(self.headers.get("Accept"), query.get("includeObject")) \
                if verb in ("get", "list", "watch") and route.sub is None else PLAIN
            if verb == "watch":
                self._watch(route, query)
            elif verb == "list":
                self._list(route, query)
            elif route.sub == "log":
                self._log(route, query)
            elif route.sub == "scale":
                self._scale(verb, route, body)
            elif verb == "get":
                self._get(route, query)
            elif verb == "create":
                self._create(route, body)
            elif verb == "update":
                self._update(route, body)
            elif verb == "patch":
                self._patch(route, body, query)
            elif verb == "delete":
                self._delete(route, body, query)
            else:
                self._delete_collection(route, query)
        except Expired as exc:
            self._send_error(exc.error)
        except ApiError as exc:
            self._send_error(exc)
        except patching.PatchError as exc:
            self._send_error(ApiError(exc.code, exc.message))
        except (OSError, _ClientGone):
            raise
        except Exception as exc:  # a simulator bug: answer 500 and keep it for tests
            log.exception("simcluster handler failed")
            self.server.sim.errors.append(exc)
            self._send_error(ApiError(500, f"internal error: {exc!r}"))

    def _authorize(self, verb: str, route: Route, resource: str, method: str,
                   path: str, query: dict[str, str]) -> Identity:
        """Authenticate, record the request (also refused ones), then check RBAC."""
        cluster = self.cluster
        ident: Identity | None = None
        try:
            ident = self._identity(Request(verb, route.rt, resource, route.namespace,
                                           route.name))
        finally:
            headers = {k.lower(): ", ".join(self.headers.get_all(k) or [])
                       for k in self.headers}
            counted = "log" if route.sub == "log" else verb
            cluster.stats.record(RequestRecord(
                method, path, query, headers, counted, route.rt.plural, route.namespace,
                route.name, ident.user if ident else "", ident.groups if ident else ()))
        assert ident is not None
        if not cluster.rbac.allowed(ident, verb, resource, route.namespace):
            raise errors.forbidden(route.rt, resource, verb, ident.user, route.namespace,
                                   name=route.name, group=route.rt.group)
        return ident

    # --- reads -------------------------------------------------------------------------------

    def _wait_fresh(self, query: dict[str, str]) -> int | None:
        """A read at a version ("not older than" it): wait until the store has it, like
        the watch cache, or raise its 504. None when no version was asked for."""
        requested = query.get("resourceVersion") or ""
        if requested in ("", "0"):
            return None
        rv = _resource_version(requested)
        self.cluster.store.wait_until_fresh(rv, self.cluster.block_timeout)
        return rv

    def _get(self, route: Route, query: dict[str, str]) -> None:
        assert route.name is not None
        self._wait_fresh(query)
        stored = self.cluster.store.get(route.rt, route.namespace or "", route.name)
        if self.rep.partial:
            check_partial(route.rt, self.rep, listed=False)
            self._send(200, dumps(partial(self.rep, stored.obj)))
            return
        if self.rep.table:
            meta = {"resourceVersion": stored.obj["metadata"].get("resourceVersion", "")}
            self._send(200, dumps(table(route.rt, self.rep, meta, [stored.obj])))
            return
        self._send(200, stored.encoded)

    def _list(self, route: Route, query: dict[str, str]) -> None:
        rt = route.rt
        pred = compile_selector(rt, query.get("labelSelector"), query.get("fieldSelector"))
        at = self._wait_fresh(query)
        store = self.cluster.store
        if at is not None and query.get("resourceVersionMatch") == "Exact":
            rv, items = at, store.list_at(rt, at, route.namespace, pred)
        else:
            rv, items = store.list_objects(rt, route.namespace, pred)
        meta: JSON = {"resourceVersion": str(rv)}
        limit = _int_param(query, "limit")
        token = query.get("continue")
        if token:
            try:
                cont = json.loads(base64.urlsafe_b64decode(token.encode()))
                start_key = (cont["ns"], cont["name"])
                meta["resourceVersion"] = str(cont["rv"])
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise ApiError(400, "continue key is not valid: incorrect encoded start "
                                    "resourceVersion (version meta.k8s.io/v1)") from None
            items = [s for s in items if (s.namespace, s.obj["metadata"]["name"]) > start_key]
        if limit and limit > 0 and len(items) > limit:
            last = items[limit - 1]
            meta["continue"] = base64.urlsafe_b64encode(dumps({
                "rv": int(meta["resourceVersion"]), "ns": last.namespace,
                "name": last.obj["metadata"]["name"]})).decode()
            meta["remainingItemCount"] = len(items) - limit
            items = items[:limit]
        if self.rep.partial:
            check_partial(rt, self.rep, listed=True)
            self._send(200, dumps({
                "kind": "PartialObjectMetadataList",
                "apiVersion": f"meta.k8s.io/{self.rep.partial_version}", "metadata": meta,
                "items": [partial(self.rep, s.obj) for s in items]}))
            return
        if self.rep.table:
            self._send(200, dumps(table(rt, self.rep, meta, [s.obj for s in items])))
            return
        head = (b'{"kind":"' + rt.list_kind.encode() + b'","apiVersion":"'
                + rt.api_version.encode() + b'","metadata":' + dumps(meta) + b',"items":[')
        # A custom resource's list items keep kind and apiVersion; built-in kinds' do not.
        body = b",".join(s.encoded if rt.crd else s.listed for s in items)
        self._send(200, head + body + b"]}")

    def _watch(self, route: Route, query: dict[str, str]) -> None:
        cluster = self.cluster
        rt = route.rt
        pred = compile_selector(rt, query.get("labelSelector"), query.get("fieldSelector"))
        initial_events = query.get("sendInitialEvents") in TRUE
        if initial_events:
            # A watch-list waits for the version it asked for, like a LIST; failing that,
            # the watch is still accepted and its only event is the 504 (an errWatcher).
            try:
                self._wait_fresh(query)
            except ApiError as exc:
                self._start_stream("application/json")
                self._chunk(b'{"type":"ERROR","object":' + dumps(exc.status()) + b"}\n")
                self._end_stream()
                return
        rv = "0" if initial_events else query.get("resourceVersion")
        cursor = cluster.store.open_watch(rt, rv)  # may raise Expired: HTTP 410
        timeout = _int_param(query, "timeoutSeconds")
        bookmarks = query.get("allowWatchBookmarks") in TRUE
        ns = route.namespace
        self._start_stream("application/json")
        cluster.stats.watch_opened(rt.plural)
        try:
            with self.server.sim.streaming(self.connection):
                self._watch_loop(cursor, rt, ns, pred, timeout, bookmarks, initial_events)
        finally:
            cluster.stats.watch_closed(rt.plural)

    def _watch_loop(
        self, cursor: Cursor, rt: ResourceType, ns: str | None,
        pred: Callable[[JSON], bool] | None, timeout: int | None, bookmarks: bool,
        initial_events: bool,
    ) -> None:
        store = self.cluster.store
        interval = self.cluster.bookmark_interval
        now = time.monotonic()
        deadline = now + timeout if timeout else None
        next_bookmark = now + interval if bookmarks else None
        lines = WatchLines(rt, self.rep)
        batch = [lines.event("ADDED", s.obj, s.encoded)
                 for s in cursor.initial if _wanted(s, ns, pred)]
        if batch:
            self._chunk(b"".join(batch))
        if initial_events:
            self._chunk(lines.bookmark(cursor.position, initial_end=True))
        while True:
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                break
            wait = _POLL
            if deadline is not None:
                wait = min(wait, deadline - now)
            if next_bookmark is not None:
                wait = min(wait, max(next_bookmark - now, 0))
            try:
                events = store.wait_events(cursor, wait)
            except Expired as exc:
                self._chunk(b'{"type":"ERROR","object":' + dumps(exc.error.status()) + b"}\n")
                break
            out = [lines.of(ev, sent) for ev in events if ev.rt is rt
                   for sent in (_event_type(ev, ns, pred),) if sent]
            if out:
                self._chunk(b"".join(out))
            if next_bookmark is not None and time.monotonic() >= next_bookmark:
                # A watch ahead of the store hears nothing, bookmarks included, until the
                # store passes its version (the watch cache's "RV+1" case).
                if cursor.position <= store.resource_version:
                    self._chunk(lines.bookmark(cursor.position))
                next_bookmark = time.monotonic() + interval
            if self._stream_over() or store.closed:
                break
        self._end_stream()

    # --- writes ------------------------------------------------------------------------------

    def _json_body(self, body: bytes, ctype: str | None = None) -> Any:
        if not body:
            raise ApiError(400, "the body of the request was empty")
        try:
            if ctype and "yaml" in ctype:
                return yaml.safe_load(body)
            return json.loads(body)
        except (ValueError, yaml.YAMLError) as exc:
            raise ApiError(400, f"the object provided is unrecognized: {exc}") from None

    def _check_body(self, route: Route, obj: Any) -> JSON:
        if not isinstance(obj, dict):
            raise ApiError(400, "the object provided is unrecognized (must be an object)")
        rt = route.rt
        if obj.get("apiVersion") not in (None, rt.api_version) or \
                obj.get("kind") not in (None, rt.kind):
            raise ApiError(400, f"the API version in the data ({obj.get('apiVersion')}) does "
                                f"not match the expected API version ({rt.api_version})")
        meta = obj.setdefault("metadata", {})
        if not isinstance(meta, dict):
            raise ApiError(400, "metadata must be an object")
        if rt.namespaced:
            if meta.get("namespace") and meta["namespace"] != route.namespace:
                raise ApiError(400, "the namespace of the provided object does not match the "
                                    "namespace sent on the request")
            meta["namespace"] = route.namespace
        return obj

    def _create(self, route: Route, body: bytes) -> None:
        obj = self._check_body(route, self._json_body(body))
        rt = route.rt
        if rt.status_subresource:
            obj.pop("status", None)  # creates ignore status, like the API server
        if rt is NAMESPACES:
            obj["metadata"].pop("namespace", None)
        obj["metadata"].pop("uid", None)
        if rt.plural == "jobs" and obj["metadata"].get("generateName") \
                and not obj["metadata"].get("name"):
            self.cluster.store.generate_name(rt, obj)  # the Job's labels name it
        created = self.cluster.store.create(rt, defaults.apply(rt.plural, obj), keep_uid=True)
        self._send(201, dumps(created))

    def _update(self, route: Route, body: bytes) -> None:
        assert route.name is not None
        obj = self._check_body(route, self._json_body(body))
        expect = (obj.get("metadata") or {}).get("resourceVersion") or None
        scope = "status" if route.sub == "status" else "main"
        result = self.cluster.store.update(route.rt, route.namespace or "", route.name,
                                           lambda _cur: obj, scope=scope, expect_rv=expect)
        self._send(200, dumps(result))

    def _patch(self, route: Route, body: bytes, query: dict[str, str]) -> None:
        assert route.name is not None
        ctype = self.headers.get("Content-Type") or ""
        doc = self._json_body(body, ctype)
        rt = route.rt
        name = route.name

        def apply(cur: JSON) -> JSON:
            rv = cur["metadata"]["resourceVersion"]
            new = patching.apply(ctype, cur, doc, custom=rt.crd)
            if not isinstance(new, dict):
                raise ApiError(422, "the patched object is not an object")
            if (new.get("metadata") or {}).get("resourceVersion", rv) != rv:
                raise errors.conflict(rt, name)  # a resourceVersion in a patch is a precondition
            return new

        scope = "status" if route.sub == "status" else "main"
        result = self.cluster.store.update(rt, route.namespace or "", name, apply, scope=scope)
        self._send(200, dumps(result))

    def _delete_options(self, body: bytes, query: dict[str, str]) -> tuple[int | None, JSON]:
        opts: JSON = {}
        if body:
            parsed = self._json_body(body)
            if isinstance(parsed, dict):
                opts = parsed
        grace = opts.get("gracePeriodSeconds")
        if "gracePeriodSeconds" in query:
            grace = _int_param(query, "gracePeriodSeconds")
        if grace is not None and int(grace) < 0:
            grace = 1  # the API server turns negative grace into 1 second
        return (None if grace is None else int(grace)), (opts.get("preconditions") or {})

    def _delete(self, route: Route, body: bytes, query: dict[str, str]) -> None:
        assert route.name is not None
        grace, pre = self._delete_options(body, query)
        ns = route.namespace or ""
        result = self.cluster.delete_object(route.rt, ns, route.name, grace, pre)
        # 200 even while a pod terminates: the API server answers 202 only to
        # `orphanDependents: false`, which nothing here asks for.
        self._send(200, dumps(result))

    def _delete_collection(self, route: Route, query: dict[str, str]) -> None:
        rt = route.rt
        pred = compile_selector(rt, query.get("labelSelector"), query.get("fieldSelector"))
        _, items = self.cluster.store.list_objects(rt, route.namespace, pred)
        grace = _int_param(query, "gracePeriodSeconds")
        deleted = []
        for s in items:
            try:
                deleted.append(self.cluster.delete_object(
                    rt, s.namespace, s.obj["metadata"]["name"], grace))
            except ApiError as exc:
                if exc.code != 404:
                    raise
        self._send(200, dumps({"kind": rt.list_kind, "apiVersion": rt.api_version,
                               "metadata": {"resourceVersion": self.cluster.resource_version},
                               "items": deleted}))

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
        tail = _int_param(query, "tailLines")
        since = _int_param(query, "sinceSeconds")
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
        limit_bytes = _int_param(query, "limitBytes")
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
            buf.wait(pos, _POLL)
        self._end_stream()


def _resource_version(raw: str) -> int:
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f'invalid resource version "{raw}"') from None


def _check_list_options(verb: str, query: dict[str, str]) -> None:
    """apimachinery's ValidateListOptions for LIST and WATCH: a 422 on misuse of
    resourceVersionMatch and sendInitialEvents."""
    if verb not in ("list", "watch"):
        return
    match = query.get("resourceVersionMatch") or ""
    rv = query.get("resourceVersion") or ""
    initial = "sendInitialEvents" in query
    forbidden = "FieldValueForbidden"
    causes: list[tuple[str, str, str]] = []
    if verb == "watch":
        if initial and match != "NotOlderThan":
            causes.append(("resourceVersionMatch", forbidden, "Forbidden: sendInitialEvents "
                           "requires setting resourceVersionMatch to NotOlderThan"))
        if match:
            if not initial:
                causes.append(("resourceVersionMatch", forbidden, "Forbidden: "
                               "resourceVersionMatch is forbidden for watch unless "
                               "sendInitialEvents is provided"))
            if match != "NotOlderThan":
                causes.append(("resourceVersionMatch", "FieldValueNotSupported",
                               f'Unsupported value: "{match}": supported values: '
                               '"NotOlderThan"'))
    else:
        if match:
            if not rv:
                causes.append(("resourceVersionMatch", forbidden, "Forbidden: "
                               "resourceVersionMatch is forbidden unless resourceVersion is "
                               "provided"))
            if query.get("continue"):
                causes.append(("resourceVersionMatch", forbidden, "Forbidden: "
                               "resourceVersionMatch is forbidden when continue is provided"))
            if match not in ("Exact", "NotOlderThan"):
                causes.append(("resourceVersionMatch", "FieldValueNotSupported",
                               f'Unsupported value: "{match}": supported values: "Exact", '
                               '"NotOlderThan", ""'))
            if match == "Exact" and rv == "0":
                causes.append(("resourceVersionMatch", forbidden, 'Forbidden: '
                               'resourceVersionMatch "exact" is forbidden for resourceVersion '
                               '"0"'))
        if initial:
            causes.append(("sendInitialEvents", forbidden,
                           "Forbidden: sendInitialEvents is forbidden for list"))
    if causes:
        raise errors.invalid_list_options(causes)


def _int_param(query: dict[str, str], key: str) -> int | None:
    raw = query.get(key)
    if raw is None or raw == "":
        return None
    try:
        return int(raw)
    except ValueError:
        raise ApiError(400, f'invalid value for {key}: "{raw}"') from None


def _wanted(s: Stored, ns: str | None, pred: Callable[[JSON], bool] | None) -> bool:
    if ns is not None and s.namespace != ns:
        return False
    return pred is None or pred(s.obj)


def _event_type(ev: WatchEvent, ns: str | None,
                pred: Callable[[JSON], bool] | None) -> str | None:
    """The event type this watcher sees, if any: selector transitions turn into
    ADDED/DELETED."""
    if ns is not None and ev.namespace != ns:
        return None
    if pred is None:
        return ev.type
    now = pred(ev.new.obj)
    if ev.type != "MODIFIED" or ev.old is None:
        return ev.type if now else None
    before = pred(ev.old.obj)
    if now and before:
        return ev.type
    if now:
        return "ADDED"
    if before:
        return "DELETED"
    return None

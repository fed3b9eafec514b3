"""The one place that talks to Kubernetes, through the official client over HTTP.

Responses are read as raw JSON (never the client's typed models): objects from real
clusters miss fields the models require, and building models for thousands of objects
costs time the relay does not have.
"""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

import kubernetes
import urllib3
from urllib3 import HTTPHeaderDict

from . import kubeconfig, names, node_columns, rawjson, redact, serverpaths
from .answers import AnswerExceeded, BoundedResponse, Bounds
from .resources import Identity, WatchParams

JSON = dict[str, Any]
# The kind as kubectl prints it (its columns, CRDs' printer columns included); a server that
# has no Table for a kind answers the plain list instead.
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"
POOL_SIZE = 64  # watches and log streams of one agent share this pool


class KubeError(Exception):
    """A Kubernetes Status failure, or a transport error (code 0)."""

    def __init__(self, code: int, reason: str, message: str, *,
                 retry_in: float | None = None, since: str | None = None,
                 details: dict[str, Any] | None = None) -> None:
        super().__init__(f"{code} {reason}: {message}")
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details  # the Status's details (an apply's conflicts: apply/server_side.py)
        self.retry_in = retry_in  # seconds until the next try, when one is planned
        self.since = since  # when the watch stopped being live (ISO 8601)

    @classmethod
    def from_response(cls, status: int, body: bytes) -> KubeError:
        try:
            payload = json.loads(body)
            details = payload.get("details")
            return cls(int(payload.get("code") or status), str(payload.get("reason") or ""),
                       str(payload.get("message") or body[:200].decode(errors="replace")),
                       details=details if isinstance(details, dict) else None)
        except (ValueError, AttributeError):
            return cls(status, "", body[:200].decode(errors="replace") or f"HTTP {status}")

    @classmethod
    def exceeded(cls, exc: AnswerExceeded) -> KubeError:
        return cls(exc.code, exc.reason, exc.message)

    def to_json(self) -> dict[str, Any]:
        fields: dict[str, Any] = {"code": self.code, "reason": self.reason,
                                  "message": self.message}
        if self.retry_in is not None:
            fields["retryInSeconds"] = self.retry_in
        if self.since is not None:
            fields["since"] = self.since
        return fields


@dataclass(frozen=True)
class Connection:
    """How to reach an agent's cluster."""

    kubeconfig: str | None = None
    context: str | None = None
    in_cluster: bool = False
    allow_exec: bool = False  # may the kubeconfig's user run a command for credentials?
    # Through the agent's tunnel: the server's loopback endpoint for it (tunnel/proxy.py).
    tunnel_url: str | None = None
    tunnel_secret: str | None = field(default=None, repr=False)


# (item, its JSON text) pairs, resourceVersion
RawPage = tuple[list[tuple[JSON, "rawjson.JSONText"]], str]
# (rows as table_row objects, resourceVersion, the printed columns or None)
TablePage = tuple[Iterable[JSON], str, "list[JSON] | None"]


def table_row(row: Any) -> JSON:
    """One Table row as an object of the relay: the object's metadata (without
    managedFields and the last-applied copy, which no list reads and which weigh more than
    the rest: rawjson.lean_metadata) and `cells`, the values the server printed, in the
    order of the Table's columns."""
    row = row if isinstance(row, dict) else {}
    obj = row.get("object") if isinstance(row.get("object"), dict) else {}
    meta = obj.get("metadata")
    meta = dict(rawjson.lean_metadata(meta)) if isinstance(meta, dict) else {}
    namespace = meta.get("namespace")
    if type(namespace) is str:
        # One string per namespace, not per row: the hub keeps each row's (namespace, name).
        meta["namespace"] = sys.intern(namespace)
    out = {"kind": obj.get("kind") or "PartialObjectMetadata",
           "apiVersion": obj.get("apiVersion") or "meta.k8s.io/v1",
           "metadata": meta, "cells": row.get("cells") or []}
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("suspend"), bool):
        out["suspend"] = spec["suspend"]  # Flux prints no column for it; the page shows it
    kind = obj.get("kind")
    if kind == "Event":
        last_seen = _last_seen(obj)
        if last_seen:
            out["lastSeen"] = last_seen  # LAST SEEN, printed as an age: sorted by time
    elif kind == "Node" and isinstance(out["cells"], list):
        out["cells"] = [*out["cells"], *node_columns.cells(obj)]  # what it can hold
    return out


def _last_seen(obj: JSON) -> str | None:
    """When an Event last happened, as kubectl's LAST SEEN reads it."""
    series = obj.get("series")
    for value in ((series or {}).get("lastObservedTime") if isinstance(series, dict) else None,
                  obj.get("lastTimestamp"), obj.get("eventTime")):
        if isinstance(value, str) and value:
            return value
    return None


def _readable_rows(rows: Iterator[Any]) -> Iterator[JSON]:
    """A Table page's rows as the relay's objects, as they are decoded; a row that cannot be
    read ends the LIST as a bad response."""
    try:
        for row in rows:
            yield table_row(row)
    except rawjson.MALFORMED as exc:
        raise KubeError(0, "BadResponse", f"unreadable LIST response: {exc}") from None


def include_object(params: WatchParams) -> str:
    """What a Table's rows carry of each object: its metadata, or the whole object for
    Flux's kinds (few, small: it says whether one is suspended), Events (small: when each
    last happened, which the list sorts by) and Nodes (few: what each can hold)."""
    whole = params.group.endswith(".toolkit.fluxcd.io") or params.resource == "events" or \
        node_columns.applies(params.group, params.resource)
    return "Object" if whole else "Metadata"


def table_rows(doc: JSON) -> tuple[list[JSON], list[JSON] | None]:
    """The rows of a Table answer and its columns (None in a watch event after the first);
    a plain list (a server without a Table for this kind) gives rows without cells."""
    if doc.get("kind") != "Table":
        return [table_row({"object": item, "cells": []}) for item in doc.get("items") or []
                if isinstance(item, dict)], ([] if "items" in doc else None)
    return [table_row(row) for row in doc.get("rows") or []], \
        _printed_columns(doc.get("columnDefinitions"))


def _printed_columns(columns: Any) -> list[JSON] | None:
    """A Table's column definitions, those that are objects; None if it has none."""
    return [c for c in columns if isinstance(c, dict)] if isinstance(columns, list) else None


def read_whole(response: Any) -> bytes:
    """A whole answer, within its bounds; its connection goes back to the pool (or is
    closed when the answer was cut). Raises KubeError."""
    try:
        return bytes(response.read())
    except AnswerExceeded as exc:
        raise KubeError.exceeded(exc) from None
    except redact.Unredactable as exc:
        raise KubeError(0, "BadResponse", f"unreadable Secret answer: {exc}") from None
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError(0, "Unreachable", f"Cannot reach the cluster: {exc}") from None
    finally:
        response.release_conn()


Page = TypeVar("Page")


def _read_ahead(fetch: Callable[[str], tuple[Page, str]]) -> Iterator[Page]:
    """The pages of a LIST (`fetch(continue token)` -> the page, the next token), the next
    one requested while the caller handles this one: the API server's work on page k+1
    overlaps ours on page k (a 5,000-pod namespace is 10 pages). `fetch` only reads (its
    thread waits on the socket, not for the interpreter); the caller decodes. At most two
    pages are held at once; a caller that stops early waits for the page in flight, then
    drops it."""
    page, token = fetch("")
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="list-ahead") as ahead:
        while True:
            upcoming = ahead.submit(fetch, token) if token else None
            yield page
            if upcoming is None:
                return
            page, token = upcoming.result()


class ClusterClient:
    def __init__(self, api_client: Any, where: str = "", bounds: Bounds | None = None,
                 whose: str = "the cluster's") -> None:
        self.api = api_client
        # How a page names the way to this cluster: "at https://10.0.0.1:6443", or
        # "through the agent's connection".
        self.where = where or f"at {getattr(api_client.configuration, 'host', '')}"
        self.bounds = bounds or Bounds()  # of every answer read (answers.py)
        self.whose = whose  # who answers, as errors name it: "the agent's"

    @classmethod
    def connect(cls, connection: Connection, bounds: Bounds | None = None) -> ClusterClient:
        configuration = kubernetes.client.Configuration()
        if connection.tunnel_url:
            configuration.host = connection.tunnel_url
            configuration.api_key = {"authorization": connection.tunnel_secret or ""}
            configuration.api_key_prefix = {"authorization": "Bearer"}
            configuration.connection_pool_maxsize = POOL_SIZE
            return cls(kubernetes.client.ApiClient(configuration),
                       "through the agent's connection", bounds, "the agent's")
        if connection.in_cluster:
            kubernetes.config.load_incluster_config(client_configuration=configuration)
        elif connection.kubeconfig:
            # Before loading: loading is what runs the command.
            refusal = None if connection.allow_exec else \
                kubeconfig.command_user(connection.kubeconfig, connection.context)
            if refusal:
                raise KubeError(0, "ExecRefused", refusal)
            kubernetes.config.load_kube_config(config_file=connection.kubeconfig,
                                               context=connection.context,
                                               client_configuration=configuration)
        else:
            raise KubeError(0, "NotConfigured", "This agent has no cluster connection")
        configuration.connection_pool_maxsize = POOL_SIZE
        return cls(kubernetes.client.ApiClient(configuration), bounds=bounds)

    def close(self) -> None:
        self.api.close()

    def _files(self) -> list[str]:
        """The server's files this client reads per connection (TLS material): a transport
        error may name them, and viewers see those errors."""
        configuration = getattr(self.api, "configuration", None)
        found = [getattr(configuration, name, None)
                 for name in ("ssl_ca_cert", "cert_file", "key_file")]
        return [path for path in found if isinstance(path, str)]

    # --- transport ----------------------------------------------------------------------

    def request(self, method: str, path: str, identity: Identity,
                query: list[tuple[str, str]] | None = None, body: Any = None,
                content_type: str | None = None,
                timeout: float | tuple[float, float | None] = 30,
                accept: str = "application/json",
                ) -> urllib3.BaseHTTPResponse:
        """Send a request; return the open response (2xx), read within the client's
        bounds, or raise KubeError."""
        headers: dict[str, str] = {"Accept": accept}
        if content_type:
            headers["Content-Type"] = content_type
        method, url, header_params, body, _ = self.api.param_serialize(
            method, path, query_params=query or [], header_params=headers, body=body,
            auth_settings=["BearerToken"])
        # Impersonate-Group may repeat: a plain dict would keep only one.
        all_headers = HTTPHeaderDict(header_params)
        for name, value in identity.headers():
            all_headers.add(name, value)
        started = time.monotonic()
        try:
            raw = self.api.call_api(method, url, header_params=all_headers, body=body,
                                    _request_timeout=timeout).response
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            text = serverpaths.without_files(str(exc), self._files())
            raise KubeError(0, "Unreachable", f"Cannot reach the cluster: {text}") from None
        except kubernetes.client.ApiException as exc:
            raise KubeError(exc.status or 0, "Unreachable", str(exc.reason)) from None
        watch = ("watch", "true") in (query or [])
        streaming = watch or ("follow", "true") in (query or [])
        response = BoundedResponse(raw, self.bounds, streaming=streaming, whose=self.whose,
                                   what="watch" if watch else "log", started=started)
        if not 200 <= response.status < 300:
            raise KubeError.from_response(response.status, read_whole(response))
        # A Secret's values stop here, before the relay's cache or a page sees them.
        return redact.wrap(path, watch, response)

    def request_json(self, method: str, path: str, identity: Identity, **kwargs: Any) -> JSON:
        return json.loads(read_whole(self.request(method, path, identity, **kwargs)))

    # --- reading ------------------------------------------------------------------------

    def _page_text(self, params: WatchParams, identity: Identity, query: list[Any],
                   accept: str = "application/json") -> tuple[str, str]:
        """One page of a LIST as the server sent it (not decoded: see _read_ahead), and the
        next page's continue token."""
        response = self.request("GET", params.collection_path(), identity, query=query,
                                accept=accept)
        try:
            text = read_whole(response).decode()
            meta = rawjson.list_metadata(text)
        except rawjson.MALFORMED as exc:
            raise KubeError(0, "BadResponse", f"unreadable LIST response: {exc}") from None
        return text, str(meta.get("continue") or "")

    def list_pages(self, params: WatchParams, identity: Identity,
                   limit: int = 500) -> Iterator[RawPage]:
        """A LIST in pages of `limit` (limit/continue): one consistent snapshot at the first
        page's resourceVersion, never the whole list decoded at once. Each item comes with
        its JSON text as sent."""
        def fetch(token: str) -> tuple[str, str]:
            query = params.query() + [("limit", str(limit))]
            return self._page_text(params, identity,
                                   query + [("continue", token)] if token else query)

        resource_version = ""
        for text in _read_ahead(fetch):
            try:
                items, meta = rawjson.list_items(text)
            except rawjson.MALFORMED as exc:
                raise KubeError(0, "BadResponse", f"unreadable LIST response: {exc}") from None
            resource_version = resource_version or str(meta.get("resourceVersion", ""))
            yield items, resource_version

    def list_table_pages(self, params: WatchParams, identity: Identity,
                         limit: int = 500) -> Iterator[TablePage]:
        """A LIST of the kind's Table, in pages: each row as a `table_row` object (the
        object's metadata and the printed cells), with the columns the server prints."""
        def fetch(token: str) -> tuple[str, str]:
            query = params.query() + [("limit", str(limit)),
                                      ("includeObject", include_object(params))]
            return self._page_text(params, identity,
                                   query + [("continue", token)] if token else query,
                                   accept=TABLE_ACCEPT)

        resource_version = ""
        rows: Iterable[JSON]
        columns: list[JSON] | None
        for text in _read_ahead(fetch):
            try:
                page = rawjson.table_page(text)
                if page is None:  # not as the API server writes a Table: decoded whole
                    doc = rawjson.loads(text)
                    rows, columns = table_rows(doc)
                    meta = doc.get("metadata") or {}
                else:
                    meta, printed, raw_rows = page
                    rows = _readable_rows(raw_rows)
                    columns = _printed_columns(printed)
            except (*rawjson.MALFORMED, AttributeError) as exc:
                raise KubeError(0, "BadResponse", f"unreadable LIST response: {exc}") from None
            resource_version = resource_version or str(meta.get("resourceVersion", ""))
            if node_columns.applies(params.group, params.resource):
                columns = node_columns.with_columns(columns)
            yield rows, resource_version, columns

    def current_version(self, params: WatchParams, identity: Identity) -> str:
        """The collection's resourceVersion now: a LIST of one item, read from storage."""
        text, _token = self._page_text(params, identity, params.query() + [("limit", "1")])
        try:
            return str(rawjson.list_metadata(text).get("resourceVersion", ""))
        except rawjson.MALFORMED as exc:
            raise KubeError(0, "BadResponse", f"unreadable LIST response: {exc}") from None

    def watch(self, params: WatchParams, identity: Identity, resource_version: str,
              timeout_seconds: int) -> WatchStream:
        query = params.query() + [
            ("watch", "true"), ("resourceVersion", resource_version),
            ("allowWatchBookmarks", "true"), ("timeoutSeconds", str(timeout_seconds))]
        if params.table:
            query.append(("includeObject", include_object(params)))
        # Read timeout a little past the server's: a dead connection still ends.
        response = self.request("GET", params.collection_path(), identity, query=query,
                                timeout=(10, timeout_seconds + 30),
                                accept=TABLE_ACCEPT if params.table else "application/json")
        if not params.table:
            return WatchStream(response)
        stream = TableWatchStream(response)
        stream.extra_columns = node_columns.applies(params.group, params.resource)
        return stream

    def get(self, params: WatchParams, name: str, identity: Identity,
            namespace: str | None = None) -> JSON:
        return self.request_json("GET", params.object_path(name, namespace), identity)

    # --- acting -------------------------------------------------------------------------

    def delete(self, params: WatchParams, name: str, identity: Identity,
               namespace: str | None = None, grace_seconds: int | None = None) -> JSON:
        body = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if grace_seconds is not None:
            body["gracePeriodSeconds"] = grace_seconds  # type: ignore[assignment]
        return self.request_json("DELETE", params.object_path(name, namespace), identity,
                                 body=body, content_type="application/json")

    def merge_patch(self, params: WatchParams, name: str, patch: JSON, identity: Identity,
                    namespace: str | None = None) -> JSON:
        return self.request_json("PATCH", params.object_path(name, namespace), identity,
                                 body=patch, content_type="application/merge-patch+json")

    def logs(self, namespace: str, pod: str, identity: Identity, *, container: str | None,
             follow: bool, tail_lines: int | None, timestamps: bool,
             previous: bool) -> LineStream:
        # Checked here too, whoever the caller: these become a path and its query.
        path = (f"/api/v1/namespaces/{names.segment(names.namespace(namespace))}"
                f"/pods/{names.segment(names.object_name('pods', pod, 'pod'))}/log")
        query = [("follow", str(follow).lower()), ("timestamps", str(timestamps).lower()),
                 ("previous", str(previous).lower())]
        if container:
            query.append(("container", names.container(container)))
        if tail_lines is not None:
            query.append(("tailLines", str(tail_lines)))
        response = self.request("GET", path, identity, query=query,
                                timeout=(10, None) if follow else 60)
        return LineStream(response)


class LineStream:
    """Lines of a streamed response, as they arrive; close() ends it from any thread."""

    def __init__(self, response: urllib3.BaseHTTPResponse) -> None:
        self.response = response
        self._closed = threading.Event()  # closed by its reader's owner: nothing to say
        self._released = threading.Lock()  # taken once the response is let go
        self.cut = False  # ended without its final chunk: the connection was cut

    def __iter__(self) -> Iterator[bytes]:
        pending = b""
        try:
            for chunk in self.response.stream(65536, decode_content=True):
                if self._closed.is_set():
                    return
                pending += chunk
                if b"\n" not in chunk:
                    continue
                *lines, pending = pending.split(b"\n")
                for line in lines:
                    if line.strip():
                        yield line
            if pending.strip() and not self._closed.is_set():
                yield pending
        except AnswerExceeded as exc:  # past a bound (answers.py): an error, said as such
            if not self._closed.is_set():
                raise KubeError.exceeded(exc) from None
        except urllib3.exceptions.ProtocolError:
            # Cut without its final chunk (proxy, network, a server gone): an end, that
            # the caller may tell from a clean one.
            self.cut = not self._closed.is_set()
            return
        except (urllib3.exceptions.HTTPError, OSError, ValueError, AttributeError):
            if not self._closed.is_set():
                raise
        finally:
            self._release()

    def close(self) -> None:
        """End the stream from any thread: its reader stops, quietly."""
        self._closed.set()
        self._release()

    def _release(self) -> None:
        if not self._released.acquire(blocking=False):
            return
        # shutdown() wakes a thread blocked in a read; close() alone may not.
        # Raises when the stream already finished and its connection is back in the pool.
        with contextlib.suppress(AttributeError, OSError, RuntimeError, ValueError):
            self.response.shutdown()
        with contextlib.suppress(OSError, ValueError):
            self.response.close()
            self.response.release_conn()

    @property
    def closed(self) -> bool:
        """Closed by its owner (not ended by itself, nor failed)."""
        return self._closed.is_set()


# An event as (type, object, the object's JSON text as the strict decoder read it, or
# None for an object made here, which whoever relays it encodes).
Event = tuple[str, JSON, "rawjson.JSONText | None"]


class WatchStream(LineStream):
    """Watch events, each read strictly (rawjson.watch_event): a line that is not an event
    of a known type ends the watch as an unreadable answer, never reaches a page."""

    def events(self) -> Iterator[Event]:
        for line in self:
            try:
                kind, obj, text = rawjson.watch_event(line)
            except rawjson.MALFORMED as exc:
                raise KubeError(0, "BadResponse", f"unreadable watch event: {exc}") from None
            yield kind, obj, text


class TableWatchStream(WatchStream):
    """A watch of a kind's Table: each event carries one row, as a `table_row` object; the
    first names the columns (`columns` keeps the latest seen)."""

    columns: list[JSON] | None = None
    extra_columns = False  # Nodes: node_columns's, after the printed ones

    def events(self) -> Iterator[Event]:
        for kind, obj, text in super().events():
            if kind in ("ERROR",) or obj.get("kind") not in ("Table", None) and \
                    "rows" not in obj:
                yield kind, obj, text
                continue
            rows, columns = table_rows(obj) if obj.get("kind") == "Table" else ([], None)
            if columns:
                self.columns = node_columns.with_columns(columns) if self.extra_columns \
                    else columns
            if not rows:  # a bookmark: only its version matters
                yield kind, {"metadata": obj.get("metadata") or {}}, None
                continue
            for row in rows:
                yield kind, row, None

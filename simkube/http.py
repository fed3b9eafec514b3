"""The Kubernetes HTTP API over loopback: each request's route (``routes``: a kind,
namespace, name and subresource, or a discovery document), verb and caller (``rbac``)
decide which handler answers it: ``reads`` (GET, LIST, WATCH), ``writes`` (create, update,
patch, delete) or ``subresources`` (scale, logs). ``exchange`` holds what they share: replies,
errors and streams; ``server`` the server's lifecycle.
"""

from __future__ import annotations

import logging
from urllib.parse import parse_qs, urlsplit

from . import errors
from . import patch as patching
from .errors import ApiError
from .eviction import Eviction
from .exec_handler import Exec
from .negotiation import PLAIN, negotiate
from .rbac import Identity, Request
from .reads import Reads, check_list_options
from .routes import Route, discovery_document, parse_route, verb_of
from .stats import RequestRecord
from .store import Expired
from .subresources import Subresources
from .util import dumps
from .writes import Writes

log = logging.getLogger(__name__)


class Handler(Reads, Writes, Subresources, Eviction, Exec):
    """One connection's requests, each routed to the handler of its verb or subresource."""

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

    # --- dispatch ----------------------------------------------------------------------------

    def _dispatch(self, method: str) -> None:
        try:
            self._handle(method)
        except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True
        except OSError:
            self.close_connection = True

    def _handle(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        body = self._read_body()
        try:
            if self.cluster.metrics.serves(url.path):  # an aggregated API (metrics.py)
                self._identity()
                self._send(200, self.cluster.metrics.answer(method, url.path, query))
                return
            target = parse_route(url.path)
            if not isinstance(target, Route):
                if url.path.rstrip("/") in ("/healthz", "/readyz", "/livez"):
                    self._send(200, b"ok", "text/plain; charset=utf-8")
                    return
                if method != "GET":
                    raise ApiError(405, f"the server does not allow this method on the "
                                        f"requested resource ({method})")
                doc, ctype = discovery_document(url.path, target, self.headers.get("Accept"))
                doc = self.cluster.metrics.discovery(url.path, doc)
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
            check_list_options(verb, query)
            self.rep = negotiate(self.headers.get("Accept"), query.get("includeObject")) \
                if verb in ("get", "list", "watch") and route.sub is None else PLAIN
            if verb == "watch":
                self._watch(route, query)
            elif verb == "list":
                self._list(route, query)
            elif route.sub == "log":
                self._log(route, query)
            elif route.sub == "exec":
                self._exec(route, url.query)
            elif route.sub == "scale":
                self._scale(verb, route, body)
            elif route.sub == "eviction":
                self._evict(route, body)
            elif verb == "get":
                self._get(route, query)
            elif verb == "create":
                self._create(route, body, query)
            elif verb == "update":
                self._update(route, body, query)
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
        except OSError:
            raise
        except Exception as exc:  # a simulator bug: answer 500 and keep it for tests
            log.exception("simkube handler failed")
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

"""Create, update, patch and delete over HTTP: the body checked against the route (kind,
apiVersion, namespace) as the API server checks it, then written through the store, whose
admission and defaults apply.
"""

from __future__ import annotations

from typing import Any

from . import apply as applying
from . import defaults, errors, typed
from . import patch as patching
from .errors import ApiError
from .exchange import Exchange, int_param
from .resources import NAMESPACES
from .routes import Route
from .selectors import compile_selector
from .util import JSON, dumps, json_copy


class Writes(Exchange):
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

    def _manager(self, query: dict[str, str], patch: bool = False) -> str:
        """Who a write is recorded for; a patch's options are checked as the server checks
        PatchOptions (a create's or an update's have no `force` to refuse)."""
        if patch:
            applying.check_options(query, applying=False)
        return applying.manager_of(query, self.headers.get("User-Agent"))

    def _create(self, route: Route, body: bytes, query: dict[str, str] | None = None) -> None:
        manager = self._manager(query or {})
        dry = (query or {}).get("dryRun") == "All"
        obj = self._check_body(route, self._json_body(body))
        rt = route.rt
        typed.check_write(rt, obj)
        if rt.status_subresource:
            obj.pop("status", None)  # creates ignore status, like the API server
        if rt is NAMESPACES:
            obj["metadata"].pop("namespace", None)
        obj["metadata"].pop("uid", None)
        if rt.plural == "jobs" and obj["metadata"].get("generateName") \
                and not obj["metadata"].get("name"):
            self.cluster.store.generate_name(rt, obj)  # the Job's labels name it
        obj = defaults.apply(rt.plural, obj)
        applying.record_update(rt, None, obj, manager)
        store = self.cluster.store
        created = store.dry_create(rt, obj) if dry else store.create(rt, obj, keep_uid=True)
        self._send(201, dumps(created))

    def _update(self, route: Route, body: bytes, query: dict[str, str] | None = None) -> None:
        assert route.name is not None
        manager = self._manager(query or {})
        obj = self._check_body(route, self._json_body(body))
        typed.check_write(route.rt, obj)
        expect = (obj.get("metadata") or {}).get("resourceVersion") or None
        scope = "status" if route.sub == "status" else "main"

        def replace(cur: JSON) -> JSON:
            new = json_copy(obj)
            new.setdefault("metadata", {})["managedFields"] = \
                cur["metadata"].get("managedFields")
            applying.record_update(route.rt, cur, new, manager, route.sub)
            return new

        result = self.cluster.store.update(route.rt, route.namespace or "", route.name,
                                           replace, scope=scope, expect_rv=expect)
        self._send(200, dumps(result))

    def _patch(self, route: Route, body: bytes, query: dict[str, str]) -> None:
        assert route.name is not None
        ctype = self.headers.get("Content-Type") or ""
        if ctype.split(";", 1)[0].strip().lower() == patching.APPLY_YAML and not route.sub:
            self._apply(route, body, query)
            return
        manager = self._manager(query, patch=True)
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
            applying.record_update(rt, cur, new, manager, route.sub)
            return new

        scope = "status" if route.sub == "status" else "main"
        result = self.cluster.store.update(rt, route.namespace or "", name, apply, scope=scope)
        self._send(200, dumps(result))

    def _apply(self, route: Route, body: bytes, query: dict[str, str]) -> None:
        """Server-side apply (apply.py): creates the object when it does not exist."""
        assert route.name is not None
        manager, force, dry = applying.check_options(query, applying=True)
        assert manager is not None
        rt, ns, name = route.rt, route.namespace or "", route.name
        applied = applying.check_applied(rt, self._json_body(body, patching.APPLY_YAML),
                                         name, route.namespace)
        typed.check_apply(rt, applied, route.namespace, name)
        store = self.cluster.store
        current = store.find(rt, ns, name)
        if current is None:
            obj = applying.apply(rt, None, applied, manager, force)
            if rt.namespaced:
                obj["metadata"]["namespace"] = ns
            obj = defaults.apply(rt.plural, obj)
            self._send(201, dumps(store.dry_create(rt, obj) if dry else
                                  store.create(rt, obj)))
            return

        def apply(cur: JSON) -> JSON:
            return applying.apply(rt, cur, applied, manager, force)

        self._send(200, dumps(store.dry_update(rt, ns, name, apply) if dry else
                              store.update(rt, ns, name, apply, scope="main")))

    def _delete_options(self, body: bytes, query: dict[str, str]) -> tuple[int | None, JSON]:
        opts: JSON = {}
        if body:
            parsed = self._json_body(body)
            if isinstance(parsed, dict):
                opts = parsed
        grace = opts.get("gracePeriodSeconds")
        if "gracePeriodSeconds" in query:
            grace = int_param(query, "gracePeriodSeconds")
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
        grace = int_param(query, "gracePeriodSeconds")
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

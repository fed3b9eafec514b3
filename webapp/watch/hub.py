"""Shared upstream watches: one per (agent, identity, resource, namespace, selectors),
fanned out to every subscriber (upstream.py keeps each alive)."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Hashable, Mapping

from .faults import Reachability
from .kube import ClusterClient, KubeError
from .limits import LimitReached
from .resources import Identity, WatchParams
from .subscriptions import (
    KindCheck,
    Owner,
    RowRenderer,
    Snapshot,
    Subscription,
    WatchKey,
    no_rows,
)
from .upstream import Timing, UpstreamWatch
from .view import Cached, Listener, View, ViewSpec, Window

# A view is shared by every page with the same list: its watches, order and filter.
ViewKey = tuple[str, Identity, tuple[WatchParams, ...], ViewSpec]


class Hub:
    """Every upstream watch of this process."""

    def __init__(self, client_for: Callable[[str], ClusterClient],
                 timing: Timing | None = None, render_row: RowRenderer = no_rows,
                 check: KindCheck | None = None) -> None:
        self._client_for = client_for
        self.timing = timing or Timing()
        self._render_row = render_row
        # Whether an agent's cluster serves a kind (discovery.Discovery.kind): no watch of
        # anything else is started, for any caller.
        self._check = check
        self._lock = threading.Lock()
        self._watches: dict[WatchKey, UpstreamWatch] = {}
        self._views: dict[ViewKey, View] = {}
        # A view's spec with the values its rows do not carry (a usage column: usage/views.py)
        self.joins: Callable[[str, Identity, list[WatchParams], ViewSpec], ViewSpec] | None = \
            None
        self.reachability = Reachability("live view")
        self._closed = False  # shut down: no watch starts any more

    def _upstream(self, key: WatchKey,
                  client_for: Callable[[str], ClusterClient] | None = None) -> UpstreamWatch:
        with self._lock:
            upstream = self._watches.get(key)
            if upstream is None:
                if self._closed:  # a request that raced the shutdown: no watch left behind
                    raise KubeError(503, "ServiceUnavailable", "agentwatch is stopping")
                client = (client_for or self._client_for)(key.agent)
                upstream = UpstreamWatch(key, client, self.timing,
                                         self._forget, self._render_row, self.reachability)
                self._watches[key] = upstream
                upstream.start()
            return upstream

    def subscribe(self, agent: str, identity: Identity, params: WatchParams,
                  subscription: Subscription, resume_from: str | None = None) -> Subscription:
        if self._check is not None:
            self._check(agent, params)
        key = WatchKey(agent, identity, params)
        if subscription.owner is not None:
            subscription.owner.acquire(key)  # limits.LimitReached: over the user's cap
            subscription.held = key
        try:
            while True:
                upstream = self._upstream(key)
                if upstream.subscribe(subscription, resume_from):
                    return subscription
                self._forget(upstream)  # it was stopping: start a new one
        except BaseException:
            subscription.cancel()
            raise

    def follow(self, agent: str, identity: Identity, params: WatchParams,
               listener: Listener) -> tuple[UpstreamWatch, Mapping[str, Cached] | None]:
        """Follow a shared watch as objects with no page (the changes recorder): the same
        watch pages of the same key read, kept while followed (detach() to let go). Also
        the cached state when the watch has listed already."""
        if self._check is not None:
            self._check(agent, params)
        key = WatchKey(agent, identity, params)
        while True:
            upstream = self._upstream(key)
            attached, cache, _ = upstream.attach(listener)
            if attached:
                return upstream, cache
            self._forget(upstream)  # it was stopping: start a new one

    def subscribe_view(self, agent: str, identity: Identity, sources: list[WatchParams],
                       spec: ViewSpec, window: Window, owner: Owner | None = None) -> Window:
        """A page's window on a list (view.py): the list made of `sources` (one watch per
        namespace shown), ordered and filtered as `spec` says. Each source counts against
        `owner`'s watches as a subscription to it would."""
        if self._check is not None:
            for params in sources:
                self._check(agent, params)
        if self.joins is not None:
            spec = self.joins(agent, identity, sources, spec)
        keys = [WatchKey(agent, identity, params) for params in sources]
        view_key: ViewKey = (agent, identity, tuple(sources), spec)
        # A view's order is memory of its own (an entry per object): each distinct view
        # counts against the user's watches too, beside the watches it reads.
        held: list[Hashable] = []

        def release() -> None:
            for key in held:
                if owner is not None:
                    self._release_after_grace(key, owner)
            held.clear()

        window.on_cancel = release
        try:
            if owner is not None:
                for key in [*keys, ("view", *view_key)]:
                    owner.acquire(key)  # limits.LimitReached: over the user's cap
                    held.append(key)
            while True:
                with self._lock:
                    view = self._views.get(view_key)
                if view is None:
                    view = self._new_view(view_key, keys, spec)
                    if view is None:
                        continue  # a watch was stopping: made again
                if view.add(window):
                    return window
                self._forget_view(view)  # closed meanwhile
        except BaseException:
            window.cancel()
            raise

    def _new_view(self, view_key: ViewKey, keys: list[WatchKey],
                  spec: ViewSpec) -> View | None:
        upstreams = [self._upstream(key) for key in keys]
        view = View(spec, upstreams, self._forget_view)
        with self._lock:
            existing = self._views.get(view_key)
            if existing is not None:
                return existing
            self._views[view_key] = view
            view.key = view_key
        if view.start():
            return view
        self._forget_view(view)
        for upstream in upstreams:
            if upstream.stopping:
                self._forget(upstream)
        return None

    def _forget_view(self, view: View) -> None:
        with self._lock:
            if view.key is not None and self._views.get(view.key) is view:
                del self._views[view.key]

    def snapshot(self, agent: str, identity: Identity, params: WatchParams,
                 timeout: float = 10.0, objects: bool = True,
                 owner: Owner | None = None) -> Snapshot:
        """The current state through the shared watch (started if needed; it stops after
        the grace period unless the page's live connection subscribes meanwhile)."""
        return self.snapshots(agent, identity, [(params, objects)], timeout, owner)[0]

    def snapshots(self, agent: str, identity: Identity,
                  wanted: list[tuple[WatchParams, bool]], timeout: float = 10.0,
                  owner: Owner | None = None) -> list[Snapshot]:
        """Several watches' state, as snapshot() (params, objects) each: every watch is
        started first, so that their LISTs run at once (each watch lists in its own
        thread), then each is waited for within one deadline: a slow cluster costs one
        timeout, not one per watch. A watch the cluster refuses is a Snapshot of its error.

        With `owner` (the user whose page this is), each watch counts against the user's
        watches until a page subscribes to it or it stops: one over the user's cap is a
        Snapshot of a 429 error, and nothing is started for it."""
        # The agent's client is looked up once (a database read), not once per new watch.
        client_for = functools.cache(self._client_for)
        started: list[UpstreamWatch | KubeError] = []
        for params, _ in wanted:
            try:
                if self._check is not None:
                    self._check(agent, params)
                key = WatchKey(agent, identity, params)
                started.append(self._claimed(key, client_for, owner))
            except KubeError as exc:
                started.append(exc)
        deadline = time.monotonic() + timeout
        taken: list[Snapshot] = []
        for (_, objects), one in zip(wanted, started, strict=True):
            if isinstance(one, KubeError):
                taken.append(Snapshot([], one))
                continue
            taken.append(one.snapshot(max(0.0, deadline - time.monotonic()), objects))
            if not one.subscriber_count:
                one.unsubscribe_idle()
        return taken

    def _claimed(self, key: WatchKey, client_for: Callable[[str], ClusterClient],
                 owner: Owner | None) -> UpstreamWatch:
        """The shared watch of `key`, held for `owner`'s page (see snapshots)."""
        if owner is None:
            return self._upstream(key, client_for)
        try:
            owner.acquire(key)
        except LimitReached as exc:
            raise KubeError(429, "TooManyWatches", exc.message) from None
        try:
            upstream = self._upstream(key, client_for)
        except BaseException:
            owner.release(key)
            raise
        upstream.claim(owner)
        return upstream

    def _release_after_grace(self, key: Hashable, owner: Owner) -> None:
        """Give `owner`'s hold on `key` back once its watch stops (after its grace period)
        or a page takes it again, as a cancelled subscription does; a view's own key now
        (a view closes with its last window)."""
        with self._lock:
            upstream = self._watches.get(key) if isinstance(key, WatchKey) else None
        if upstream is None:
            owner.release(key)
        else:
            upstream.claim(owner)

    def _forget(self, upstream: UpstreamWatch) -> None:
        with self._lock:
            if self._watches.get(upstream.key) is upstream:
                del self._watches[upstream.key]

    def watches(self) -> list[UpstreamWatch]:
        with self._lock:
            return list(self._watches.values())

    def shutdown(self) -> None:
        with self._lock:
            self._closed = True
        for upstream in self.watches():
            upstream.stop()
        for upstream in self.watches():
            upstream.join(5)


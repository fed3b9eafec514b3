"""What a watch is and who listens to it: a watch's key, its subscribers and their sinks,
the rows the page draws from it, the snapshot a page is rendered from, and the relay's
messages. The watches themselves are upstream.py's; the hub (hub.py) shares them."""

from __future__ import annotations

import json
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .kube import KubeError
from .resources import Identity, WatchParams

JSON = dict[str, Any]


class RenderedRow(Protocol):
    """What the page needs of an object's row (table_rows.Row): its HTML (drawn when first
    asked for), the values it sorts
    by, the text the filter reads, and whether it needs attention (failing, unavailable)."""

    @property
    def html(self) -> str: ...

    @property
    def sort(self) -> dict[str, str]: ...

    @property
    def text(self) -> str: ...

    @property
    def attention(self) -> bool: ...

    @property
    def key(self) -> tuple[str, str]: ...  # (namespace, name)

    @property
    def order(self) -> tuple[str, str]: ...  # (namespace, cells.natural(name)): a list's order


# (params, object, the Table's columns when the watch is of a Table, the object's JSON as
# cached) -> the row
RowRenderer = Callable[[WatchParams, JSON, "list[JSON] | None", bytes],
                       "RenderedRow | None"]
# (agent, params): Invalid when the agent's cluster does not serve that kind
KindCheck = Callable[[str, WatchParams], object]


def no_rows(_params: WatchParams, _obj: JSON, _columns: list[JSON] | None,
            _raw: bytes) -> None:
    return None


@dataclass
class Snapshot:
    """The cached state of a watch, for a server-rendered first page."""

    objects: list[JSON]
    error: KubeError | None
    entries: list[RenderedRow] = field(default_factory=list)  # every row, in kubectl's order
    columns: list[JSON] | None = None  # the Table's columns, for a watch of a Table


class Sink(Protocol):
    def send(self, message: bytes, position: str | None = None) -> bool:
        """Queue a message; False when the subscriber cannot take more (it is dropped).

        `position` is the resourceVersion the subscriber has seen once this message is
        read (events and `synced`), for resuming an HTTP stream with Last-Event-ID.
        """

    def room(self) -> int:
        """How many more messages it takes now (a snapshot bigger than this is refused)."""


@dataclass(frozen=True)
class WatchKey:
    agent: str
    identity: Identity
    params: WatchParams


class Owner(Protocol):
    """Whom a subscription counts against (limits.WatchOwner): acquire refuses a watch
    over the user's cap (limits.LimitReached)."""

    def acquire(self, key: Hashable) -> None: ...

    def release(self, key: Hashable) -> None: ...


class Feed(Protocol):
    """What feeds a subscription (upstream.UpstreamWatch): it stops when asked."""

    def unsubscribe(self, subscription: Subscription) -> None: ...

    def claim(self, owner: Owner) -> None: ...


@dataclass(eq=False)
class Subscription:
    watch_id: str
    sink: Sink
    upstream: Feed | None = None
    owner: Owner | None = None
    prefix: bytes = field(init=False)
    held: WatchKey | None = field(default=None, init=False)  # counted against `owner`

    def __post_init__(self) -> None:
        self.prefix = b'{"type":"event","watchId":' + json.dumps(self.watch_id).encode() + \
            b',"event":'

    def cancel(self) -> None:
        upstream, self.upstream = self.upstream, None
        if upstream is not None:
            upstream.unsubscribe(self)
        held, self.held = self.held, None
        if self.owner is not None and held is not None:
            if upstream is not None:
                # Counted until the watch stops after its grace period (or a page takes
                # it): watching and unwatching in a loop must not run more watches at
                # once than the user's cap.
                upstream.claim(self.owner)
            else:
                self.owner.release(held)


def message(kind: str, watch_id: str, **fields: Any) -> bytes:
    return json.dumps({"type": kind, "watchId": watch_id, **fields},
                      separators=(",", ":")).encode()


"""What a list-then-watch loop does after each way a watch can end, in one place for the
relay's shared watches (upstream.py) and the GitOps observer's (gitops/reflector.py).

Like client-go's reflector, and one step safer, because a cluster recreated behind the
same address (or restored from a backup) starts its resourceVersions again lower, and a
watch at a version it has not reached is accepted and stays silent:

- a stream that ends cleanly (at its timeoutSeconds, or earlier: a server shutting down
  ends its watches) resumes from the last version seen; one that lasted its time and heard
  nothing at all (not even a bookmark) relists, as it may be such a silent watch; one cut
  without its final chunk (a connection reset, a server gone) is a transport failure:
  relist;
- any transport failure or error answer ends the watch, backs off (doubling, capped,
  jittered) and relists before watching again;
- a 410 Expired or a "Too large resource version" answer relists at once, from scratch;
- after a clean end, before watching again, one LIST of a single item asks the cluster's
  current resourceVersion: lower than the one the watch holds means the cluster was
  replaced or restored, and the watch relists. (resourceVersions are opaque to clients in
  general; this compares them only when both are integers, as etcd's are. Without it, a
  watch resumed on a replaced cluster stays silent until the new cluster's versions pass
  the old one, then goes on as if nothing was missed.)
"""

from __future__ import annotations

import enum
import logging
import threading
import time

from . import answers
from .kube import ClusterClient, KubeError
from .resources import Identity, WatchParams

log = logging.getLogger(__name__)


# A tunneled agent with no connection open (tunnel/proxy.py): the cluster may be fine.
AGENT_NOT_CONNECTED = "AgentNotConnected"


class End(enum.Enum):
    """How one watch stream ended."""

    NORMAL = "ended"  # cleanly, having heard something or early: resume
    SILENT = "silent"  # lasted its time but heard nothing, not even a bookmark: relist
    CUT = "cut"  # without its final chunk: a transport failure: relist
    CUT_AT_ONCE = "cut at once"  # cut as soon as it opened: relist, after a pause
    STOPPED = "stopped"  # we closed it


def ending(lasted: float, timeout: float, heard: bool, cut: bool, stopping: bool) -> End:
    """Classify a stream that ran `lasted` seconds of its server-side `timeout`."""
    if stopping:
        return End.STOPPED
    if cut:
        return End.CUT_AT_ONCE if lasted < 1 else End.CUT
    if heard or lasted < timeout * 0.9 - 1:
        return End.NORMAL
    return End.SILENT


def went_back(client: ClusterClient, params: WatchParams, identity: Identity,
              version: str) -> str | None:
    """The cluster's current resourceVersion if it is lower than `version` (the cluster
    was replaced or restored from a backup), else None."""
    current = client.current_version(params, identity)
    if current.isdigit() and version.isdigit() and int(current) < int(version):
        return current
    return None


def needs_fresh_list(exc: KubeError) -> bool:
    """410 Expired, or the watch cache's 504 "Too large resource version": the version
    this watch holds means nothing to the server any more."""
    return exc.code == 410 or (exc.code == 504 and "too large resource version"
                               in exc.message.lower())


def is_unreachable(exc: KubeError) -> bool:
    """No answer from the cluster (transport failure) or a server-side failure (5xx): the
    watch is not live. A 403 or 404 is an answer, shown where it applies."""
    return exc.code == 0 or exc.code >= 500


_TRANSPORT = (("connection refused", "connection refused"),
              ("name or service not known", "DNS lookup failed"),
              ("temporary failure in name resolution", "DNS lookup failed"),
              ("nodename nor servname", "DNS lookup failed"),
              ("certificate", "TLS error"), ("ssl", "TLS error"),
              ("timed out", "timed out"), ("reset by peer", "connection reset"),
              ("no route to host", "no route to host"),
              ("network is unreachable", "network unreachable"),
              ("ended prematurely", "connection closed mid-stream"),
              ("remote end closed", "connection closed"))


def describe(exc: KubeError) -> str:
    """A short, readable reason (never headers, so never a token; never a library's
    exception text for a transport failure)."""
    text = exc.message
    lowered = text.lower()
    if exc.code == 0:
        for needle, said in _TRANSPORT:
            if needle in lowered:
                return said
        if exc.reason not in ("", "Unreachable"):
            return text[:200]
        return "no answer"
    return f"HTTP {exc.code} {exc.reason}: {text[:200]}".strip()


def sentence(exc: KubeError, where: str) -> str:
    """What a page's banner says: "Cannot reach the cluster at https://10.0.0.1:6443:
    connection refused". `where`: "at https://..." or "through the agent's connection"."""
    where = f" {where}" if where else ""
    if exc.reason == AGENT_NOT_CONNECTED or exc.reason in answers.REASONS:
        return exc.message[:300]  # a whole sentence already, naming the bound passed
    if exc.code == 0:
        return f"Cannot reach the cluster{where}: {describe(exc)}"
    if exc.code >= 500:
        return f"The cluster{where} failed to answer: {describe(exc)}"
    return exc.message[:300] or describe(exc)


def seconds(value: float) -> str:
    return f"{value:.1f} s" if value < 10 else f"{value:.0f} s"


class Reachability:
    """Whether each agent's cluster answers, logged once per change, with the reason.

    `what` names the user of the cluster in the log lines ("gitops", "live view").
    `agent_away`: the agent's own connection is not open (a tunnel's agent not connected
    yet, or gone): the tunnel's log already says so, and a process that starts before its
    agents connect would otherwise warn of each; said at INFO then."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._lock = threading.Lock()
        self._down_since: dict[str, float] = {}
        self._reason: dict[str, str] = {}
        self._level: dict[str, int] = {}  # the level of the outage's first line

    def report(self, agent: str, reason: str | None, retry_in: float,
               agent_away: bool = False) -> None:
        with self._lock:
            if reason is None:
                since = self._down_since.pop(agent, None)
                self._reason.pop(agent, None)
                level = self._level.pop(agent, logging.WARNING)
                if since is not None:
                    log.log(level, "%s: the cluster of agent %s is reachable again "
                            "(unreachable for %s)", self._what, agent,
                            seconds(time.monotonic() - since))
                return
            level = logging.INFO if agent_away else logging.WARNING
            if agent not in self._down_since:
                self._down_since[agent] = time.monotonic()
                self._level[agent] = level
                log.log(level, "%s: cannot reach the cluster of agent %s: %s; retrying in "
                        "%s, and on until it answers", self._what, agent, reason,
                        seconds(retry_in))
            elif self._reason.get(agent) != reason:
                self._level[agent] = max(self._level.get(agent, level), level)
                log.log(level, "%s: the cluster of agent %s is still unreachable: %s",
                        self._what, agent, reason)
            self._reason[agent] = reason

    def unreachable(self) -> dict[str, str]:
        with self._lock:
            return dict(self._reason)

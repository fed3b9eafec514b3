"""Why a pod is in the state it is: each container's image, state, readiness, restarts and
last termination, its requests and limits, the pod's node, IP and QoS class — what
`kubectl describe pod` prints first, read from the pod object alone.

`crash_reason` says in one line why a crashing container last stopped ("OOMKilled: memory
limit 128Mi", "Error: exit code 1"), for the pod's health and "What is broken".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .cells import as_dict, as_list, parse_time
from .rows import normalize

JSON = dict[str, Any]


@dataclass(frozen=True)
class Termination:
    reason: str  # OOMKilled, Error, Completed, ... ("" when the kubelet gave none)
    exit_code: int | None
    signal: int | None
    finished: datetime | None
    message: str

    def summary(self, memory_limit: str = "") -> str:
        """One line: the reason, and what tells most about it."""
        reason = self.reason or ("Signal" if self.signal else "Exited")
        if reason == "OOMKilled":
            return f"OOMKilled: memory limit {memory_limit}" if memory_limit else reason
        if self.signal:
            return f"{reason}: signal {self.signal}"
        if self.exit_code is not None and reason != "Completed":
            return f"{reason}: exit code {self.exit_code}"
        return reason


@dataclass(frozen=True)
class Container:
    name: str
    image: str
    init: bool
    state: str  # Running, Waiting, Terminated (or "" before the kubelet reports)
    state_reason: str  # CrashLoopBackOff, ImagePullBackOff, Completed, ...
    state_message: str
    since: datetime | None
    ready: bool
    restarts: int
    ended: Termination | None  # the current state, when it is Terminated
    last: Termination | None  # the termination before the current state
    requests: dict[str, str]
    limits: dict[str, str]

    @property
    def crashing(self) -> bool:
        return self.state_reason in ("CrashLoopBackOff", "Error", "OOMKilled") or \
            (self.state == "Terminated" and self.state_reason not in ("", "Completed"))

    def crash_summary(self) -> str | None:
        """Why it last stopped, when it keeps stopping (None otherwise)."""
        if not self.crashing:
            return None
        stopped = self.ended or self.last
        if stopped is not None:
            return stopped.summary(self.limits.get("memory", ""))
        return self.state_reason or None


@dataclass(frozen=True)
class PodFacts:
    node: str
    ip: str
    qos: str
    phase: str
    containers: list[Container]


def read(obj: JSON) -> PodFacts:
    obj = normalize(obj)
    spec, status = obj["spec"], obj["status"]
    statuses = {str(as_dict(s).get("name")): as_dict(s)
                for s in [*as_list(status.get("initContainerStatuses")),
                          *as_list(status.get("containerStatuses"))]}
    containers = [_container(as_dict(c), statuses, init=True)
                  for c in as_list(spec.get("initContainers"))]
    containers += [_container(as_dict(c), statuses, init=False)
                   for c in as_list(spec.get("containers"))]
    return PodFacts(node=str(spec.get("nodeName") or ""), ip=str(status.get("podIP") or ""),
                    qos=str(status.get("qosClass") or ""), phase=str(status.get("phase") or ""),
                    containers=containers)


def crash_reason(obj: JSON) -> str | None:
    """Why the pod's first crashing container last stopped, with how often it restarted."""
    for container in read(obj).containers:
        summary = container.crash_summary()
        if summary:
            count = container.restarts
            restarts = f", {count} restart{'s' if count != 1 else ''}" if count else ""
            return f"{summary} (container {container.name}{restarts})"
    return None


def restarted(obj: JSON) -> str | None:
    """The container whose last run is the one to read first: one that crashes (its
    current run has barely started, so its previous log says why), else None."""
    return next((c.name for c in read(obj).containers if c.crashing and c.restarts), None)


def _container(spec: JSON, statuses: dict[str, JSON], init: bool) -> Container:
    name = str(spec.get("name") or "")
    status = statuses.get(name, {})
    state = as_dict(status.get("state"))
    resources = as_dict(spec.get("resources"))
    current, detail = next(((key, as_dict(state[key])) for key in
                            ("running", "waiting", "terminated") if key in state), ("", {}))
    since = parse_time(detail.get("startedAt") or detail.get("finishedAt"))
    last = as_dict(as_dict(status.get("lastState")).get("terminated"))
    return Container(
        name=name, image=str(status.get("image") or spec.get("image") or ""), init=init,
        state=current.capitalize(), state_reason=str(detail.get("reason") or ""),
        state_message=str(detail.get("message") or "")[:500], since=since,
        ready=status.get("ready") is True, restarts=_count(status.get("restartCount")),
        ended=_termination(detail) if current == "terminated" else None,
        last=_termination(last) if last else None,
        requests=_quantities(resources.get("requests")),
        limits=_quantities(resources.get("limits")))


def _termination(term: JSON) -> Termination:
    return Termination(reason=str(term.get("reason") or ""),
                       exit_code=_maybe_int(term.get("exitCode")),
                       signal=_maybe_int(term.get("signal")) or None,
                       finished=parse_time(term.get("finishedAt")),
                       message=str(term.get("message") or "")[:500])


def _quantities(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in as_dict(value).items() if k in ("cpu", "memory")}


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _maybe_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None

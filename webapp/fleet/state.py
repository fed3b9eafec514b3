"""What the fleet home read of a cluster (kept as its last known state: last_known.py), and
how it is written down and read back."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import Any

from ..usage.samples import cpu_text, memory_text


@dataclass(frozen=True)
class Attention:
    ref: str  # the kind as a Cluster tab URL names it: deployments.apps
    title: str  # Deployments
    kind: str  # Deployment
    count: int

    @property
    def text(self) -> str:
        return f"{self.count} {self.kind if self.count == 1 else self.title}"


@dataclass(frozen=True)
class ClusterState:
    """What was read from the cluster (kept as the last known state)."""

    version: str | None = None
    nodes_ready: int | None = None
    nodes_total: int | None = None
    pods: int = 0
    attention: tuple[Attention, ...] = ()
    cpu: tuple[float, float] | None = None  # cores used, allocatable
    memory: tuple[float, float] | None = None  # bytes used, allocatable
    usage_problem: str | None = None
    usage_pending: bool = False  # its first reading is under way (not kept as last known)

    @property
    def needing(self) -> int:
        return sum(a.count for a in self.attention)

    def cpu_text(self) -> str:
        return "" if self.cpu is None else \
            f"{_percent(*self.cpu)} · {cpu_text(self.cpu[0])} of {cpu_text(self.cpu[1])}"

    def memory_text(self) -> str:
        return "" if self.memory is None else f"{_percent(*self.memory)} · " \
            f"{memory_text(self.memory[0])} of {memory_text(self.memory[1])}"


def _percent(used: float, of: float) -> str:
    return f"{round(100 * used / of)}%" if of else "—"


def to_json(state: ClusterState) -> str:
    kept = {k: v for k, v in asdict(state).items() if k != "usage_pending"}
    return json.dumps(kept, separators=(",", ":"))


def _pair(value: Any) -> tuple[float, float] | None:
    if isinstance(value, list) and len(value) == 2 and \
            all(isinstance(v, int | float) for v in value):
        return float(value[0]), float(value[1])
    return None


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def from_json(text: str) -> ClusterState | None:
    """The state written by to_json; None for anything else (never an error: a row written
    by another version is simply not shown)."""
    try:
        doc = json.loads(text)
        attention = tuple(Attention(str(a["ref"]), str(a["title"]), str(a["kind"]),
                                    int(a["count"])) for a in doc.get("attention") or ())
        version, problem = doc.get("version"), doc.get("usage_problem")
        return ClusterState(
            version=str(version) if version is not None else None,
            nodes_ready=_number(doc.get("nodes_ready")),
            nodes_total=_number(doc.get("nodes_total")),
            pods=_number(doc.get("pods")) or 0, attention=attention,
            cpu=_pair(doc.get("cpu")), memory=_pair(doc.get("memory")),
            usage_problem=str(problem) if problem is not None else None)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None

"""What a node can hold, beside the columns the API server prints for Nodes: its allocatable
CPU (cores), memory (GiB) and pods, read from each node's status (the Table's rows carry the
whole object for this kind). Usage comes with metrics.k8s.io; until then the list says what
each node offers.

They are added as printed columns, so the list sorts, filters and draws them as any other.
"""

from __future__ import annotations

import re
from typing import Any

from .cells import as_dict

JSON = dict[str, Any]

COLUMNS: list[JSON] = [
    {"name": "CPU", "type": "number", "format": "", "priority": 0,
     "description": "Allocatable CPU, in cores"},
    {"name": "Memory (GiB)", "type": "number", "format": "", "priority": 0,
     "description": "Allocatable memory, in GiB"},
    {"name": "Pods", "type": "integer", "format": "", "priority": 0,
     "description": "How many pods the node takes"},
]
_QUANTITY = re.compile(r"^([0-9.]+)([a-zA-Z]*)$")
_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15,
           "Ki": 1024, "Mi": 1024 ** 2, "Gi": 1024 ** 3, "Ti": 1024 ** 4, "Pi": 1024 ** 5}


def applies(group: str, resource: str) -> bool:
    return (group, resource) == ("", "nodes")


def with_columns(columns: list[JSON] | None) -> list[JSON] | None:
    """The Table's columns and these (once)."""
    if columns is None or any(c.get("name") == COLUMNS[0]["name"] for c in columns):
        return columns
    return [*columns, *COLUMNS]


def cells(node: JSON) -> list[Any]:
    """The values of COLUMNS for one node object (None where its status says nothing)."""
    allocatable = as_dict(as_dict(node.get("status")).get("allocatable"))
    cpu = quantity(allocatable.get("cpu"))
    memory = quantity(allocatable.get("memory"))
    pods = quantity(allocatable.get("pods"))
    return [None if cpu is None else round(cpu, 2),
            None if memory is None else round(memory / 1024 ** 3, 1),
            None if pods is None else int(pods)]


def quantity(value: Any) -> float | None:
    """A Kubernetes quantity ("3800m", "16Gi", "110") as a number, None if not one."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    match = _QUANTITY.match(str(value or ""))
    if not match or match.group(2) not in _SUFFIX:
        return None
    try:
        return float(match.group(1)) * _SUFFIX[match.group(2)]
    except ValueError:
        return None

"""Label and field selectors with the API server's grammar and matching rules.

Label selectors: ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``, ``a notin (x)``, ``a``, ``!a``
(plus ``a>1``/``a<1``).  ``!=`` and ``notin`` also match objects without the label, as in
Kubernetes.  Field selectors: ``path=value``, ``path==value``, ``path!=value`` over the
fields each resource supports; a missing field compares as the empty string.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .resources import ResourceType
from .util import JSON

_KEY = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")


@dataclass(frozen=True)
class Requirement:
    key: str
    op: str  # "=", "!=", "in", "notin", "exists", "!", "gt", "lt"
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        has = self.key in labels
        val = labels.get(self.key)
        if self.op == "=":
            return has and val == self.values[0]
        if self.op == "!=":
            return not has or val != self.values[0]
        if self.op == "in":
            return has and val in self.values
        if self.op == "notin":
            return not has or val not in self.values
        if self.op == "exists":
            return has
        if self.op == "!":
            return not has
        try:
            num = int(val or "")
        except ValueError:
            return False
        return num > int(self.values[0]) if self.op == "gt" else num < int(self.values[0])


def _bad(selector: str, why: str) -> ApiError:
    return ApiError(400, f"unable to parse requirement: {why}", reason="BadRequest",
                    details={"causes": [{"message": f"invalid selector {selector!r}"}]})


def _split_top(text: str) -> list[str]:
    """Split on commas that are not inside a parenthesised value set."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


_SET_RE = re.compile(r"^(\S+)\s+(in|notin)\s*\((.*)\)$")
_CMP_RE = re.compile(r"^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(.*)$")


def _check_key(selector: str, key: str) -> None:
    if not _KEY.match(key) or len(key.split("/")[-1]) > 63:
        raise _bad(selector, f"invalid label key {key!r}")


def _check_value(selector: str, value: str) -> None:
    if len(value) > 63 or not _VALUE.match(value):
        raise _bad(selector, f"invalid label value: {value!r}")


def parse_labels(selector: str | None) -> list[Requirement]:
    if not selector or not selector.strip():
        return []
    reqs: list[Requirement] = []
    for part in _split_top(selector):
        m = _SET_RE.match(part)
        if m:
            key, op, raw = m.group(1), m.group(2), m.group(3)
            _check_key(selector, key)
            values = tuple(v.strip() for v in raw.split(",") if v.strip())
            for v in values:
                _check_value(selector, v)
            if not values and op == "in":
                raise _bad(selector, "for 'in', 'notin' operators, values set can't be empty")
            reqs.append(Requirement(key, op, values))
            continue
        if part.startswith("!"):
            key = part[1:].strip()
            _check_key(selector, key)
            reqs.append(Requirement(key, "!"))
            continue
        m = _CMP_RE.match(part)
        if m:
            key, op, value = m.group(1), m.group(2), m.group(3).strip()
            _check_key(selector, key)
            if op in (">", "<"):
                if not value.lstrip("-").isdigit():
                    raise _bad(selector, "for 'Gt', 'Lt' operators, the value must be an "
                                         f"integer: {value}")
                reqs.append(Requirement(key, "gt" if op == ">" else "lt", (value,)))
                continue
            _check_value(selector, value)
            reqs.append(Requirement(key, "!=" if op == "!=" else "=", (value,)))
            continue
        if " " in part:
            raise _bad(selector, f"found '{part.split()[1]}', expected: in, notin, =, ==, "
                                 "!=, gt, lt")
        _check_key(selector, part)
        reqs.append(Requirement(part, "exists"))
    return reqs


def labels_match(reqs: list[Requirement], obj: JSON) -> bool:
    if not reqs:
        return True
    labels = (obj.get("metadata") or {}).get("labels") or {}
    return all(r.matches(labels) for r in reqs)


# --- field selectors -------------------------------------------------------------------

_COMMON = ("metadata.name", "metadata.namespace")
FIELDS: dict[str, tuple[str, ...]] = {
    "pods": _COMMON + (
        "spec.nodeName", "spec.restartPolicy", "spec.schedulerName",
        "spec.serviceAccountName", "spec.hostNetwork", "status.phase", "status.podIP",
        "status.nominatedNodeName",
    ),
    "events": _COMMON + (
        "involvedObject.kind", "involvedObject.namespace", "involvedObject.name",
        "involvedObject.uid", "involvedObject.apiVersion", "involvedObject.resourceVersion",
        "involvedObject.fieldPath", "reason", "reportingComponent", "source", "type",
    ),
    "namespaces": _COMMON + ("status.phase",),
    "services": _COMMON + ("spec.clusterIP", "spec.type"),
}


@dataclass(frozen=True)
class FieldRequirement:
    path: str
    value: str
    negate: bool

    def matches(self, obj: JSON) -> bool:
        actual = field_value(obj, self.path)
        return (actual != self.value) if self.negate else (actual == self.value)


def field_value(obj: JSON, path: str) -> str:
    if path == "source":  # events: "source" means source.component
        return str((obj.get("source") or {}).get("component") or "")
    cur: Any = obj
    for part in path.split("."):
        if not isinstance(cur, dict):
            return ""
        cur = cur.get(part)
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    return str(cur)


def parse_fields(selector: str | None, rt: ResourceType) -> list[FieldRequirement]:
    if not selector or not selector.strip():
        return []
    allowed = FIELDS.get(rt.plural, _COMMON)
    reqs: list[FieldRequirement] = []
    for part in (p.strip() for p in selector.split(",")):
        if not part:
            continue
        if "!=" in part:
            path, value, negate = *part.split("!=", 1), True
        elif "==" in part:
            path, value, negate = *part.split("==", 1), False
        elif "=" in part:
            path, value, negate = *part.split("=", 1), False
        else:
            raise ApiError(400, f"invalid selector: '{selector}'; can't understand '{part}'")
        path = path.strip()
        if path not in allowed:
            if rt.group:
                known = ", ".join(f'"{f}"' for f in allowed)
                raise ApiError(400, f'"{path}" is not a known field selector: only {known}')
            raise ApiError(400, f'field label not supported: {path}')
        reqs.append(FieldRequirement(path, value.strip(), negate))
    return reqs


def fields_match(reqs: list[FieldRequirement], obj: JSON) -> bool:
    return all(r.matches(obj) for r in reqs)


def compile_selector(
    rt: ResourceType, label_selector: str | None, field_selector: str | None,
) -> Callable[[JSON], bool] | None:
    """One predicate for both selectors, or None when nothing is selected on."""
    lreqs = parse_labels(label_selector)
    freqs = parse_fields(field_selector, rt)
    if not lreqs and not freqs:
        return None

    def pred(obj: JSON) -> bool:
        return labels_match(lreqs, obj) and fields_match(freqs, obj)

    return pred

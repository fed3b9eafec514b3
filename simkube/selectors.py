"""Label and field selectors with the API server's grammar and matching rules.

Label selectors (parsed in ``label_selector``): ``a=b``, ``a==b``, ``a!=b``, ``a in (x,y)``,
``a notin (x)``, ``a``, ``!a`` (plus ``a>1``/``a<1``).  ``!=`` and ``notin`` also match objects
without the label, as in Kubernetes.  Field selectors: ``path=value``, ``path==value``,
``path!=value`` over the fields each resource supports (values escape a backslash, ``,`` and ``=``
with a backslash); a missing field compares as the empty string.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import ApiError
from .label_selector import Requirement, labels_match, parse_labels
from .resources import ResourceType
from .util import JSON

__all__ = ["Requirement", "compile_selector", "labels_match", "parse_fields", "parse_labels"]

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
    "secrets": _COMMON + ("type",),
    "nodes": _COMMON + ("spec.unschedulable",),
    "jobs": _COMMON + ("status.successful",),
}
# Kinds whose field labels the server converts itself: an unknown one gets this wording; a
# kind served generically lists the two it knows instead.
_CONVERTED = {"pods", "services", "events", "namespaces", "secrets", "nodes"}


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
    if path == "status.successful":  # jobs: the count of succeeded pods
        return str((obj.get("status") or {}).get("succeeded") or 0)
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


_TERM_OPERATORS = ("!=", "==", "=")


def _split_terms(selector: str) -> list[str]:
    """Terms between commas that no backslash escapes."""
    terms, start, escaped = [], 0, False
    for i, ch in enumerate(selector):
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == ",":
            terms.append(selector[start:i])
            start = i + 1
    terms.append(selector[start:])
    return terms


def _split_term(term: str) -> tuple[str, str, str] | None:
    """(field, operator, value) at the first operator from the left."""
    for i in range(len(term)):
        for op in _TERM_OPERATORS:
            if term.startswith(op, i):
                return term[:i], op, term[i + len(op):]
    return None


def _unescape(value: str) -> str:
    r"""A value with its escapes (\\ \, \=) resolved; a bare "," or "=" is refused."""
    out, escaped = [], False
    for ch in value:
        if escaped:
            if ch not in "\\,=":
                raise ApiError(400, f"invalid field selector: invalid escape sequence: \\{ch}")
            out.append(ch)
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch in ",=":
            raise ApiError(400, "invalid field selector: unescaped character in value: "
                                f"{ord(ch)}")
        else:
            out.append(ch)
    if escaped:
        raise ApiError(400, "invalid field selector: invalid escape sequence: \\")
    return "".join(out)


def parse_fields(selector: str | None, rt: ResourceType) -> list[FieldRequirement]:
    """As the API server parses a field selector (fields.ParseSelector): terms split on
    unescaped commas, taken in sorted order, nothing trimmed; then each field is checked
    against what the resource supports."""
    if not selector:
        return []
    allowed = FIELDS.get(rt.plural, _COMMON)
    reqs: list[FieldRequirement] = []
    for part in sorted(_split_terms(selector)):
        if not part:
            continue
        split = _split_term(part)
        if split is None:
            raise ApiError(400, f"invalid selector: '{selector}'; can't understand '{part}'")
        path, op, raw = split
        value = _unescape(raw)
        if path not in allowed:
            if rt.plural == "jobs":
                raise ApiError(400, f'field label "{path}" not supported for Job')
            if rt.crd or rt.plural in _CONVERTED:
                raise ApiError(400, f'field label not supported: {path}')
            known = ", ".join(f'"{f}"' for f in allowed)
            raise ApiError(400, f'"{path}" is not a known field selector: only {known}')
        reqs.append(FieldRequirement(path, value, op == "!="))
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

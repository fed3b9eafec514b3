"""A request's query string, read as the API server reads it, and only what the product
sends.

The API server reads a query with Go's `url.ParseQuery` and a boolean parameter as
apimachinery's `Convert_Slice_string_To_bool` does: the first value counts, and anything
but `0` or `false` (any case) is true — `watch=t`, `watch=True`, `watch=` all watch. A
reader that differs (a substring test for `watch=true`) can be made to take a watch for a
list, and redact or time it as one. So here nothing is left to interpretation: a `;`, an
escape Go would refuse, an empty or repeated parameter, a parameter the product never
sends, or a value it never sends is refused; what passes is sent again as encoded here,
so the API server reads exactly what was checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from urllib.parse import quote, unquote_plus

from .allowlist import Action

Check = Callable[[str], bool]
MAX_SELECTOR = 1024  # as the page's watch parameters (watch/resources.py)
MAX_TAIL = 10_000  # watch/logs.py's MAX_TAIL
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})")
_PRINTABLE = re.compile(r"[\x20-\x7e]*")
_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


class QueryRefused(ValueError):
    pass


def _exactly(*values: str) -> Check:
    return lambda value: value in values


def _count(low: int, high: int) -> Check:
    return lambda value: value.isascii() and value.isdigit() and low <= int(value) <= high


def _printable(limit: int) -> Check:
    return lambda value: len(value) <= limit and _PRINTABLE.fullmatch(value) is not None


_BOOLEAN = _exactly("true", "false")
_SELECTORS: dict[str, Check] = {"labelSelector": _printable(MAX_SELECTOR),
                                "fieldSelector": _printable(MAX_SELECTOR),
                                "includeObject": _exactly("Metadata", "Object")}
# What ClusterClient (watch/kube.py) sends, per kind of request; every other has no query.
LIST: dict[str, Check] = {**_SELECTORS, "limit": _count(1, 500),
                          "continue": _printable(8192)}
WATCH: dict[str, Check] = {**_SELECTORS, "watch": _exactly("true"),
                           "resourceVersion": _printable(128),
                           "allowWatchBookmarks": _exactly("true"),
                           "timeoutSeconds": _count(1, 86_400)}
# A server-side apply (Edit, Create from YAML): always as agentwatch's field manager.
APPLY: dict[str, Check] = {"fieldManager": _exactly("agentwatch"), "dryRun": _exactly("All"),
                           "force": _exactly("true")}
LOG: dict[str, Check] = {"follow": _BOOLEAN, "timestamps": _BOOLEAN, "previous": _BOOLEAN,
                         "container": lambda value: _LABEL.fullmatch(value) is not None,
                         "tailLines": _count(0, MAX_TAIL)}


def parse(raw: str) -> dict[str, str]:
    """The parameters of `raw`, each once, or QueryRefused for any form two readers
    could read differently."""
    params: dict[str, str] = {}
    if not raw:
        return params
    if ";" in raw:
        raise QueryRefused("a `;` in the query (the API server drops such a parameter)")
    for pair in raw.split("&"):
        key, _, value = pair.partition("=")
        if not key:
            raise QueryRefused("an empty parameter in the query")
        if _ESCAPE.search(pair):
            raise QueryRefused(f"a malformed escape in the query parameter {key[:64]!r}")
        key, value = unquote_plus(key), unquote_plus(value)
        if key in params:
            raise QueryRefused(f"the query parameter {key[:64]!r} is given twice")
        params[key] = value
    return params


def allowed(action: Action, params: dict[str, str]) -> dict[str, Check]:
    """The parameters `action` may carry (a list and a watch differ)."""
    if action is Action.LIST:
        return WATCH if "watch" in params else LIST
    if action is Action.LOG:
        return LOG
    if action is Action.APPLY:
        return APPLY
    return {}


def check(action: Action, params: dict[str, str]) -> None:
    rules = allowed(action, params)
    if action is Action.APPLY and "fieldManager" not in params:
        raise QueryRefused("an apply names its field manager (fieldManager=agentwatch)")
    for key, value in params.items():
        rule = rules.get(key)
        if rule is None:
            raise QueryRefused(f"the query parameter {key[:64]!r} is not one agentwatch sends "
                               f"with {action}")
        if not rule(value):
            raise QueryRefused(f"the value of the query parameter {key!r} is not one "
                               "agentwatch sends")


def encode(params: dict[str, str]) -> str:
    """The query the agent sends upstream: the checked parameters, encoded here."""
    return "&".join(f"{quote(key, safe='')}={quote(value, safe='')}"
                    for key, value in params.items())


def watches(params: dict[str, str]) -> bool:
    return params.get("watch") == "true"


def streams(params: dict[str, str]) -> bool:
    """A watch or a followed log: an answer that lasts as long as its stream."""
    return params.get("watch") == "true" or params.get("follow") == "true"

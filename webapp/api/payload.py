"""Reading and checking JSON request bodies, with errors that say what and where."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any
from urllib.parse import urlparse

from flask import request

from .. import events
from ..clock import to_utc_naive
from ..errors import AppError, Invalid
from ..recorder import NewEvent
from . import jsonbody


class UnsupportedMediaType(AppError):
    status = 415
    code = "unsupported_media_type"


class PayloadTooLarge(AppError):
    status = 413
    code = "payload_too_large"


def json_body(batch_key: str | None = None) -> Any:
    """The request's JSON body, parsed strictly (see jsonbody): every JSON endpoint reads
    its body here."""
    if not request.is_json:
        raise UnsupportedMediaType(
            f"Send JSON with 'Content-Type: application/json' (got "
            f"{request.mimetype or 'no content type'!r})")
    return jsonbody.loads(request.get_data(cache=False), batch_key=batch_key)


_EVENT_FIELDS = {"type", "commit", "project", "message", "link", "happened_at", "details"}
_MAX_TEXT = {"commit": 64, "project": 255, "message": 10_000, "link": 2048}


class EventRules:
    """Limits that depend on configuration and on the time of the request."""

    def __init__(self, now: datetime, retention_days: int, skew_seconds: int,
                 max_batch: int) -> None:
        self.now = now
        self.oldest = now - timedelta(days=retention_days)
        self.newest = now + timedelta(seconds=skew_seconds)
        self.retention_days = retention_days
        self.max_batch = max_batch


def parse_events(body: Any, rules: EventRules) -> tuple[list[NewEvent], bool]:
    """The events of a single-event or batch body; whether it was a batch.

    Any bad event rejects the whole request, naming its index.
    """
    if isinstance(body, dict) and "events" in body:
        extra = sorted(set(body) - {"events"})
        if extra:
            raise Invalid(f"Unknown field {extra[0]!r} beside 'events'", code="unknown_field")
        items = body["events"]
        if not isinstance(items, list):
            raise Invalid("'events' must be a list of event objects", code="invalid_type")
        if not items:
            raise Invalid("'events' is empty: send at least one event", code="empty_batch")
        if len(items) > rules.max_batch:
            raise PayloadTooLarge(
                f"A batch holds at most {rules.max_batch} events; this one has {len(items)}",
                code="batch_too_large")
        parsed = []
        for index, item in enumerate(items):
            try:
                parsed.append(parse_event(item, rules))
            except Invalid as exc:
                raise Invalid(f"events[{index}]: {exc.message}", code=exc.code,
                              index=index, **exc.extra) from None
        return parsed, True
    return [parse_event(body, rules)], False


def parse_event(item: Any, rules: EventRules) -> NewEvent:
    if not isinstance(item, dict):
        raise Invalid("An event must be a JSON object", code="invalid_type")
    unknown = sorted(set(item) - _EVENT_FIELDS)
    if unknown:
        raise Invalid(f"Unknown field {unknown[0]!r}; allowed: {', '.join(sorted(_EVENT_FIELDS))}",
                      code="unknown_field", field=unknown[0])
    type_name = item.get("type")
    if not isinstance(type_name, str) or not type_name:
        raise Invalid("'type' is required and must be a string", code="invalid_type",
                      field="type")
    if type_name not in events.CATALOG:
        raise Invalid(f"Unknown event type {type_name!r}; agents may send: "
                      f"{', '.join(events.REPORTABLE_TYPES)}", code="unknown_event_type",
                      field="type")
    if not events.CATALOG[type_name].reportable:
        raise Invalid(f"Event type {type_name!r} is recorded by agentwatch itself and cannot "
                      "be sent", code="unknown_event_type", field="type")
    text = {name: _text(item, name) for name in _MAX_TEXT}
    if text["link"] is not None and not _http_url(text["link"]):
        raise Invalid("'link' must be an http(s) URL", code="invalid_value", field="link")
    details = item.get("details")
    if details is not None and not isinstance(details, dict):
        raise Invalid("'details' must be a JSON object", code="invalid_type", field="details")
    return NewEvent(
        type=type_name,
        happened_at=_happened_at(item.get("happened_at"), rules),
        commit_sha=text["commit"], project=text["project"], message=text["message"],
        link=text["link"], details=details,
    )


def _text(item: dict[str, Any], name: str) -> str | None:
    value = item.get(name)
    if value is None:
        return None
    if not isinstance(value, str):
        raise Invalid(f"'{name}' must be a string, not {type(value).__name__}",
                      code="invalid_type", field=name)
    if len(value) > _MAX_TEXT[name]:
        raise Invalid(f"'{name}' is longer than {_MAX_TEXT[name]} characters",
                      code="invalid_value", field=name)
    if name in ("commit", "project") and (not value.strip() or value != value.strip()):
        raise Invalid(f"'{name}' must not be blank or padded with spaces",
                      code="invalid_value", field=name)
    return value


def _happened_at(value: Any, rules: EventRules) -> datetime:
    if value is None:
        return rules.now
    if not isinstance(value, str):
        raise Invalid("'happened_at' must be an ISO 8601 string", code="invalid_type",
                      field="happened_at")
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        raise Invalid(f"'happened_at' {value!r} is not an ISO 8601 time",
                      code="invalid_value", field="happened_at") from None
    if parsed.tzinfo is None:
        raise Invalid(f"'happened_at' {value!r} has no time zone; add 'Z' or an offset",
                      code="invalid_value", field="happened_at")
    try:
        when = to_utc_naive(parsed)
    except OverflowError:
        # e.g. 0001-01-01T00:00:00+14:00: a valid text whose UTC time has no year.
        raise Invalid(f"'happened_at' {value!r} is out of range once converted to UTC",
                      code="invalid_value", field="happened_at") from None
    if when > rules.newest:
        raise Invalid(f"'happened_at' {value!r} is in the future", code="invalid_value",
                      field="happened_at")
    if when < rules.oldest:
        raise Invalid(f"'happened_at' {value!r} is older than the {rules.retention_days}-day "
                      "retention", code="invalid_value", field="happened_at")
    return when


def _http_url(value: str) -> bool:
    """An http(s) URL with a host and, if any, a port in range (urlparse raises on an
    unclosed IPv6 bracket, .port on a port out of range)."""
    try:
        parsed = urlparse(value)
        parsed.port  # noqa: B018 - checked for its ValueError
    except ValueError:
        return False
    return parsed.scheme in ("http", "https") and bool(parsed.hostname)

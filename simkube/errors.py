"""Kubernetes ``Status`` failures, raised by the store and rendered by the HTTP layer.

The messages copy the real API server's wording, because client code (and people reading
logs) match on them: ``pods "web-1" not found``, ``pods is forbidden: User "alice" ...``.
"""

from __future__ import annotations

from typing import Any

from .resources import ResourceType
from .util import JSON

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    409: "Conflict",
    410: "Expired",
    415: "UnsupportedMediaType",
    422: "Invalid",
    500: "InternalError",
    504: "Timeout",
}


class ApiError(Exception):
    """A failure that the API answers with a ``kind: Status`` body and HTTP ``code``."""

    def __init__(
        self, code: int, message: str, reason: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason or REASONS.get(code, "Unknown")
        self.details = details

    def status(self) -> JSON:
        body: JSON = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details is not None:
            body["details"] = self.details
        return body


def _details(rt: ResourceType, name: str | None) -> dict[str, Any]:
    d: dict[str, Any] = {"kind": rt.plural}
    if name:
        d["name"] = name
    if rt.group:
        d["group"] = rt.group
    return d


def not_found(rt: ResourceType, name: str) -> ApiError:
    return ApiError(404, f'{rt.qualified} "{name}" not found', details=_details(rt, name))


def already_exists(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409, f'{rt.qualified} "{name}" already exists', reason="AlreadyExists",
        details=_details(rt, name),
    )


def conflict(rt: ResourceType, name: str) -> ApiError:
    return ApiError(
        409,
        f'Operation cannot be fulfilled on {rt.qualified} "{name}": the object has been '
        "modified; please apply your changes to the latest version and try again",
        reason="Conflict", details=_details(rt, name),
    )


def invalid(rt: ResourceType, name: str, causes: list[tuple[str, str]]) -> ApiError:
    """422 with one ``field: message`` cause per problem, as field validation reports."""
    text = ", ".join(f"{f}: {m}" for f, m in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    details = _details(rt, name)
    details["kind"] = rt.kind
    details["causes"] = [
        {"reason": "FieldValueInvalid", "message": m, "field": f} for f, m in causes
    ]
    return ApiError(422, f'{rt.kind} "{name}" is invalid: {text}', details=details)


def bad_request(message: str) -> ApiError:
    return ApiError(400, message)


def gone(requested: str, oldest: int) -> ApiError:
    return ApiError(410, f"too old resource version: {requested} ({oldest})", reason="Expired")


def gone_list() -> ApiError:
    """An exact LIST at a version the store no longer remembers (etcd compacted it)."""
    return ApiError(410, "The resourceVersion for the provided list is too old.",
                    reason="Expired")


# The watch cache's retry hint for a version it has not reached (storage/errors.go).
TOO_LARGE_RETRY_SECONDS = 1


def too_large(requested: int, current: int) -> ApiError:
    """What the watch cache answers, after its 3 s wait, for a version newer than its own:
    ``storage.NewTooLargeResourceVersionError`` wrapped in ``apierrors.NewTimeoutError``
    (the JSON key of a cause's type is ``reason``)."""
    return ApiError(
        504, f"Timeout: Too large resource version: {requested}, current: {current}",
        reason="Timeout", details={
            "causes": [{"reason": "ResourceVersionTooLarge",
                        "message": "Too large resource version"}],
            "retryAfterSeconds": TOO_LARGE_RETRY_SECONDS,
        })


def invalid_list_options(causes: list[tuple[str, str, str]]) -> ApiError:
    """ListOptions validation (apimachinery's ValidateListOptions): 422 on meta.k8s.io.
    ``causes``: (field, cause reason, message such as "Forbidden: ...")."""
    text = ", ".join(f"{f}: {m}" for f, _, m in causes)
    if len(causes) > 1:
        text = f"[{text}]"
    return ApiError(422, f'ListOptions.meta.k8s.io "" is invalid: {text}', details={
        "group": "meta.k8s.io", "kind": "ListOptions",
        "causes": [{"reason": r, "message": m, "field": f} for f, r, m in causes]})


def forbidden(
    rt: ResourceType | None, resource: str, verb: str, user: str, namespace: str | None,
    name: str | None = None, group: str = "",
) -> ApiError:
    what = rt.qualified if rt is not None else resource.split("/")[0]
    subject = f'{what} "{name}"' if name else what
    scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
    msg = (
        f'{subject} is forbidden: User "{user}" cannot {verb} resource "{resource}" '
        f'in API group "{group}" {scope}'
    )
    details: dict[str, Any] = {"kind": resource.split("/")[0]}
    if name:
        details["name"] = name
    if group:
        details["group"] = group
    return ApiError(403, msg, details=details)

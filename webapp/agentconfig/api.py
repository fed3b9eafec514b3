"""JSON pieces of agent configuration: the served JSON Schema and the agent's PUT body."""

from __future__ import annotations

from typing import Any

from flask import Blueprint, Response, jsonify

from ..errors import Invalid
from .schema import SCHEMA
from .service import check_commit

bp = Blueprint("agentconfig_api", __name__, url_prefix="/api/v1/agent-config")

_FIELDS = ("config", "commit")


@bp.get("/schema.json")
def schema() -> Response:
    # Public on purpose: editors (yaml-language-server) fetch it without credentials.
    response = jsonify(SCHEMA)
    response.headers["Cache-Control"] = "public, max-age=300"
    return response


def parse_put(body: Any) -> tuple[str, str | None]:
    """`{"config": "<YAML text>", "commit"?: "<sha>"}` → (text, commit)."""
    if not isinstance(body, dict):
        raise Invalid("The body must be a JSON object: {\"config\": \"<YAML text>\", "
                      "\"commit\": \"<sha>\"}", code="invalid_type")
    unknown = sorted(set(body) - set(_FIELDS))
    if unknown:
        raise Invalid(f"Unknown field {unknown[0]!r}; allowed: {', '.join(_FIELDS)}",
                      code="unknown_field", field=unknown[0])
    if "config" not in body:
        raise Invalid("'config' is required: the configuration as YAML text",
                      code="missing_field", field="config")
    text = body["config"]
    if not isinstance(text, str):
        raise Invalid(f"'config' must be a string of YAML text, not {_json_type(text)}",
                      code="invalid_type", field="config")
    commit = body.get("commit")
    if commit is not None and not isinstance(commit, str):
        raise Invalid(f"'commit' must be a string, not {_json_type(commit)}",
                      code="invalid_type", field="commit")
    return text, check_commit(commit) if commit is not None else None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "an array"
    return "null" if value is None else type(value).__name__

"""The OpenAPI document of both JSON APIs."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import Any

import yaml
from flask import Blueprint, Response, jsonify

bp = Blueprint("api_docs", __name__, url_prefix="/api/v1")

OPENAPI_PATH = Path(__file__).parent.parent / "openapi.yaml"


@functools.cache
def document() -> dict[str, Any]:
    with OPENAPI_PATH.open() as handle:
        return yaml.safe_load(handle)


@bp.get("/openapi.json")
def openapi_json() -> Response:
    return jsonify(document())


@bp.get("/openapi.yaml")
def openapi_yaml() -> Response:
    return Response(OPENAPI_PATH.read_text(), mimetype="application/yaml")

"""The agent and user APIs against their OpenAPI document, with inputs generated from it
(valid and invalid): never a server error, and every answer is one the document describes.

Bounded for CI: a fixed number of examples per operation, derandomized so a failure
reproduces, no deadline (shared CI machines are slow, not wrong).
"""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from conftest import bearer
from flask import Flask
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode

from webapp.api import docs

EXAMPLES = 60

# Answers must be in the document; bodies must match its schemas.
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.checks.status_code_conformance,
    schemathesis.checks.content_type_conformance,
    schemathesis.checks.response_schema_conformance,
]


def _runs() -> list[tuple[str, GenerationMode]]:
    """(operation, mode) for both APIs; invalid inputs only where there is input to spoil."""
    runs = []
    for path, methods in docs.document()["paths"].items():
        for method, operation in methods.items():
            if not set(operation.get("tags", ())) & {"agent", "user"}:
                continue
            label = f"{method.upper()} {path}"
            runs.append((label, GenerationMode.POSITIVE))
            if "parameters" in operation or "requestBody" in operation:
                runs.append((label, GenerationMode.NEGATIVE))
    return runs


@pytest.fixture
def app_config(app_config: dict[str, Any]) -> dict[str, Any]:
    """Quotas off: on the fake clock a token's quota never drains, so the generated batches
    would soon get only 429s, and the rest of the run would test the quota instead of what
    each generated input should get (tests/security/test_ingestion_quota.py tests it)."""
    return {**app_config, "TOKEN_EVENTS_PER_MINUTE": 0, "TOKEN_BYTES_PER_DAY": 0}


def _personal_token(app: Flask) -> str:
    from webapp import users
    with app.app_context():
        return users.issue_token(users.get("alice"))


def test_the_document_is_served_as_tested(client: Any) -> None:
    assert client.get("/api/v1/openapi.json").get_json() == docs.document()


@pytest.mark.parametrize(("label", "mode"), _runs(),
                         ids=[f"{label}-{mode.value}" for label, mode in _runs()])
def test_generated_requests_get_documented_answers(app: Flask, h: Any, label: str,
                                                   mode: GenerationMode) -> None:
    h.user("alice", "admin")
    agent_token, user_token = h.agent_with_token("prod"), _personal_token(app)
    operation = schemathesis.openapi.from_wsgi("/api/v1/openapi.json", app) \
        .find_operation_by_label(label)
    headers = bearer(agent_token if "agent" in operation.tags else user_token)

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(max_examples=EXAMPLES, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def answers_as_documented(case: Any) -> None:
        response = case.call(headers=headers)
        case.validate_response(response, checks=CHECKS)

    answers_as_documented()

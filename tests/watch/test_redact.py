"""A Secret's values are blanked from every shape of answer a secrets path gives, before
anything else reads it: one object, a list, a Table, metadata only, a watch stream; an
answer that is none of these is refused, never passed on."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from webapp.watch import redact

VALUE = "c2VjcmV0"
APPLIED = {redact.LAST_APPLIED: json.dumps({"data": {"password": VALUE}}), "team": "db"}


def secret(name: str = "db") -> dict:
    return {"kind": "Secret", "metadata": {"name": name, "annotations": dict(APPLIED)},
            "data": {"password": VALUE}, "stringData": {"user": "app"}, "type": "Opaque"}


def test_every_shape_keeps_keys_and_loses_values() -> None:
    shapes = [secret(), {"kind": "SecretList", "items": [secret(), secret("b")]},
              {"kind": "Table", "rows": [{"cells": ["db"], "object": secret()}]},
              {"type": "MODIFIED", "object": secret()},
              {"kind": "PartialObjectMetadata", "metadata": secret()["metadata"]}]
    for shape in shapes:
        text = redact.redact_bytes(json.dumps(shape).encode()).decode()
        assert VALUE not in text and '"app"' not in text, text
        assert "password" in text or "PartialObjectMetadata" in text
        assert '"team": "db"' in text.replace('":"', '": "')  # other annotations stay


def test_a_watch_is_blanked_line_by_line_whatever_the_chunks() -> None:
    lines = b"".join(json.dumps({"type": "ADDED", "object": secret(str(i))}).encode() + b"\n"
                     for i in range(3))

    def chunks() -> Iterator[bytes]:
        for at in range(0, len(lines), 7):  # cut anywhere, mid-line included
            yield lines[at:at + 7]
    out = b"".join(redact.redact_stream(chunks(), watch=True))
    events = [json.loads(line) for line in out.splitlines()]
    assert [e["object"]["metadata"]["name"] for e in events] == ["0", "1", "2"]
    assert VALUE.encode() not in out


def test_only_secrets_paths_are_touched() -> None:
    assert redact.is_secrets_path("/api/v1/secrets")
    assert redact.is_secrets_path("/api/v1/namespaces/shop/secrets/db")
    assert redact.is_secrets_path("/api/v1/watch/namespaces/shop/secrets")
    assert not redact.is_secrets_path("/api/v1/namespaces/secrets/pods")  # a namespace named so
    assert not redact.is_secrets_path("/apis/example.com/v1/secrets")


@pytest.mark.parametrize("answer", [
    b"upstream connect error", b"k8s\x00\n\x0c\n\x02v1\x12\x06Secret" + VALUE.encode(),
    b"[" + json.dumps(secret()).encode() + b"]",
    json.dumps({"kind": "ConfigMap", "data": {"password": VALUE}}).encode(),
    json.dumps({"type": "ADDED", "object": secret(), "data": {"password": VALUE}}).encode(),
    json.dumps({"kind": "SecretList", "items": [[secret()]]}).encode(),
    (json.dumps(secret()) + "\n" + json.dumps(secret())).encode(),  # a watch read as a get
])
def test_an_answer_it_cannot_read_is_refused_not_passed(answer: bytes) -> None:
    """Not JSON, protobuf, another kind, another shape: it could hold a value unseen."""
    with pytest.raises(redact.Unredactable):
        redact.redact_bytes(answer)


def test_a_watch_line_it_cannot_read_ends_the_stream() -> None:
    good = json.dumps({"type": "ADDED", "object": secret()}).encode() + b"\n"
    out = []
    with pytest.raises(redact.Unredactable):
        for part in redact.redact_stream(iter([good, b"not json " + VALUE.encode() + b"\n"]),
                                         watch=True):
            out.append(part)
    assert VALUE.encode() not in b"".join(out)


def test_a_whole_answer_past_what_the_server_takes_is_refused_not_held(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A LIST of Secrets is blanked once whole: held at most as far as the server would
    take it (the server's own answer bound), never without end."""
    monkeypatch.setattr(redact, "MAX_WHOLE", 1024)
    pulled = []

    def endless() -> Iterator[bytes]:
        while True:
            pulled.append(1)
            yield b" " * 100

    with pytest.raises(redact.Unredactable, match="an answer over"):
        list(redact.redact_stream(endless(), watch=False))
    assert len(pulled) <= 11

"""Every bad input gets the documented status and ``{"error": {"type", "message", "code"}}``."""

from __future__ import annotations

import pytest


def assert_error(r, status: int, type: str | None = None) -> dict:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error"}
    err = body["error"]
    assert set(err) == {"type", "message", "code"} and err["code"] == status and err["message"]
    if type is not None:
        assert err["type"] == type
    return err


@pytest.mark.parametrize(
    "payload",
    [
        {},
        {"text": "a", "texts": ["b"]},
        {"text": 1},
        {"text": "a", "encoding": "cl100k_base", "encodings": ["o200k_base"]},
        {"text": "a", "encodings": []},
        {"text": "a", "limit": -1},
        {"text": "a", "extra": True},
        {"texts": "not a list"},
    ],
)
def test_count_schema_422(client, payload):
    assert_error(client.post("/v1/count", json=payload), 422, "validation_error")


def test_invalid_json_and_utf8_are_400(client):
    for raw in (b"{not json", b'{"text": "\xff\xfe"}', b"\xff"):
        r = client.post("/v1/count", content=raw, headers={"content-type": "application/json"})
        assert_error(r, 400, "invalid_json")


def test_unknown_encoding_404(client):
    err = assert_error(
        client.post("/v1/count", json={"text": "a", "encoding": "gpt9"}), 404, "encoding_not_found"
    )
    assert "cl100k_base" in err["message"]
    assert_error(client.post("/v1/encode", json={"text": "a", "encoding": "gpt9"}), 404)
    assert_error(
        client.post("/v1/count", json={"text": "a", "encodings": ["cl100k_base", "x"]}), 404
    )


def test_body_too_large_413(client, settings):
    big = "a" * (settings.max_request_bytes + 10)
    assert_error(client.post("/v1/count", json={"text": big}), 413, "payload_too_large")


def test_body_too_large_chunked_413(client, settings):
    def gen():
        for _ in range(settings.max_request_bytes // 65536 + 2):
            yield b"a" * 65536

    r = client.post("/v1/count", content=gen(), headers={"content-type": "application/json"})
    assert_error(r, 413, "payload_too_large")


def test_too_many_texts_422(client, settings):
    r = client.post("/v1/count", json={"texts": ["a"] * (settings.max_texts + 1)})
    err = assert_error(r, 422, "limit_exceeded")
    assert str(settings.max_texts) in err["message"]


def test_limit_above_max_tokens_422(client, settings):
    assert_error(
        client.post("/v1/count", json={"text": "a", "limit": settings.max_tokens + 1}),
        422,
        "limit_exceeded",
    )


def test_unknown_route_and_method(client):
    assert_error(client.get("/v1/nope"), 404, "not_found")
    assert_error(client.get("/v1/count"), 405, "method_not_allowed")


def test_request_id_echoed(client):
    r = client.post("/v1/count", json={"text": "a"}, headers={"X-Request-ID": "abc-123"})
    assert r.headers["x-request-id"] == "abc-123"
    r = client.post("/v1/count", json={"text": "a"}, headers={"X-Request-ID": "bad id\twith tab"})
    assert r.headers["x-request-id"] != "bad id\twith tab" and len(r.headers["x-request-id"]) == 32


def test_openapi_documents_every_field(client):
    schema = client.get("/openapi.json").json()
    missing = []
    for name, model in schema["components"]["schemas"].items():
        if name in ("HTTPValidationError", "ValidationError") or "properties" not in model:
            continue
        for field, spec in model["properties"].items():
            if "description" not in spec:
                missing.append(f"{name}.{field}")
    assert not missing, missing
    for path, methods in schema["paths"].items():
        for method, op in methods.items():
            if path.startswith("/v1/") and method == "post":
                assert "422" in op["responses"] and "404" in op["responses"], (path, method)


def test_inflight_limit_429():
    from fastapi.testclient import TestClient

    from bpecore_service.config import Settings
    from bpecore_service.main import create_app

    with TestClient(
        create_app(Settings(max_inflight=0, encodings=["cl100k_base"], load_in_background=False))
    ) as c:
        assert_error(c.post("/v1/count", json={"text": "a"}), 429, "too_many_requests")
        assert c.get("/readyz").status_code == 200  # probes are never shed


def test_per_token_objects_and_chunks_are_bounded():
    from fastapi.testclient import TestClient

    from bpecore_service.config import Settings
    from bpecore_service.main import create_app

    settings = Settings(
        max_offsets=10, max_chunks=3, encodings=["cl100k_base"], load_in_background=False
    )
    text = "word " * 11
    with TestClient(create_app(settings)) as c:
        assert c.post("/v1/encode", json={"text": text}).status_code == 200
        assert_error(
            c.post("/v1/encode", json={"text": text, "return_offsets": True}), 422, "limit_exceeded"
        )
        ids = list(range(11))
        assert_error(
            c.post("/v1/decode", json={"tokens": ids, "return_offsets": True}),
            422,
            "limit_exceeded",
        )
        assert_error(
            c.post("/tokenize", json={"prompt": text, "return_token_strs": True}),
            422,
            "limit_exceeded",
        )
        assert_error(c.post("/tei/tokenize", json={"inputs": text}), 422, "limit_exceeded")
        assert (
            c.post("/v1/chunk", json={"text": text, "max_tokens": 4}).status_code == 200
        )  # 11 tokens: 3 chunks
        assert_error(
            c.post("/v1/chunk", json={"text": text, "max_tokens": 3}), 422, "limit_exceeded"
        )

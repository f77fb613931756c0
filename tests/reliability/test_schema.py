"""Schema testing with schemathesis against the service's own OpenAPI document (in-process ASGI):
on every route, compat routes included, no 5xx and every response (status code, content type,
headers, body) conforms to the schema. Run against a real uvicorn (the Dockerfile's CMD), so the
middleware, error handlers and HTTP layer are all in the loop. Fixed seed, sized for CI; ``-m slow``
runs many more cases."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis")
from hypothesis import HealthCheck, settings  # noqa: E402

from bpecore_service.config import Settings  # noqa: E402
from bpecore_service.main import create_app  # noqa: E402

# Limits small enough that generated inputs hit them (each must answer its documented 4xx).
ENV = {
    "BPESVC_ENCODINGS": '["cl100k_base", "o200k_base"]',
    "BPESVC_MAX_TEXTS": "8",
    "BPESVC_MAX_RANGES": "64",
    "BPESVC_MAX_TOKENS": "100000",
    "BPESVC_MAX_REQUEST_BYTES": "200000",
    "BPESVC_MAX_OFFSETS": "2000",
    "BPESVC_MAX_CHUNKS": "2000",
}
COMMON = dict(deadline=None, suppress_health_check=list(HealthCheck), database=None)
# Checked: no 5xx, status codes / content types / headers / bodies as documented, 405 for other
# methods, and the rest of schemathesis' defaults. Not checked:
# - positive_data_acceptance: a schema-valid body can break a rule the schema cannot state (exactly
#   one of text/texts, ranges inside the text, server limits, ids in the vocabulary): documented 4xx;
# (negative_data_rejection is checked: request models are strict, so "1" for an integer or 0/1 for a
# boolean is a 422, as the schema says.)
EXCLUDED = [schemathesis.checks.positive_data_acceptance]


@pytest.fixture(scope="module")
def schema_server(start_server):
    server = start_server(ENV)
    server.wait_ready()
    yield server
    assert server.stop(), server.output()


@pytest.fixture(scope="module")
def api_schema(schema_server):
    return schemathesis.openapi.from_url(schema_server.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(max_examples=40, derandomize=True, **COMMON)
def test_schema_ci(case):
    case.call_and_validate(timeout=30, excluded_checks=EXCLUDED)


@pytest.mark.slow
@schema.parametrize()
@settings(max_examples=500, **COMMON)
def test_schema_slow(case):
    case.call_and_validate(timeout=30, excluded_checks=EXCLUDED)


def test_every_route_is_in_the_schema():
    paths = set(create_app(Settings()).openapi()["paths"])
    for route in (
        "/v1/count",
        "/v1/encode",
        "/v1/decode",
        "/v1/split",
        "/v1/intervals",
        "/v1/chunk",
        "/v1/chat/count",
        "/v1/encodings",
        "/tokenize",
        "/detokenize",
        "/tei/tokenize",
        "/decode",
        "/tei/decode",
        "/healthz",
        "/readyz",
        "/metrics",
    ):
        assert route in paths, route

"""POST /v1/count's lean handler answers exactly as the FastAPI route does.

Two apps with the same settings, one with ``fast_path=False`` (every request goes through the
route): each request is sent to both and the status, body and headers must be equal, for valid
requests (answered by the lean handler), requests the route refuses (passed on to it) and
requests that pass the schema but not the server limits (answered by the lean handler with the
route's error) alike.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bpecore_service import lean
from bpecore_service.main import create_app
from bpecore_service.routes.tokens import count_tokens
from bpecore_service.schemas import CountRequest, CountResponse

NAMES = ["cl100k_base", "o200k_base", "o200k_harmony"]
HEADERS = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def pair(settings):
    route_settings = settings.model_copy(update={"fast_path": False})
    with TestClient(create_app(settings)) as fast, TestClient(create_app(route_settings)) as route:
        yield fast, route


def _same(pair, body: bytes, headers: dict | None = None, path: str = "/v1/count"):
    fast, route = pair
    headers = HEADERS if headers is None else headers
    a = fast.post(path, content=body, headers=headers)
    b = route.post(path, content=body, headers=headers)
    assert (a.status_code, a.content) == (b.status_code, b.content), body[:300]
    for h in ("content-type", "content-length", "retry-after"):
        assert a.headers.get(h) == b.headers.get(h), (h, body[:300])
    assert "x-request-id" in a.headers and "x-request-id" in b.headers
    return a


VALID = [
    {"text": "hello world"},
    {"text": ""},
    {"text": "Ünïcödé ☃ 日本語のテキスト 🎉🎉"},
    {"text": "<|endoftext|> is special <|fim_prefix|>"},
    {"text": "    indented\n\n\tcode();  // x\r\n" * 20},
    {"text": "a" * 5000},
    {"text": "x", "encoding": "o200k_base"},
    {"text": "x", "encoding": None},
    {"text": "x", "texts": None},
    {"texts": []},
    {"texts": ["", "a b c", "hello world"]},
    {"texts": ["hello"], "encodings": NAMES},
    {"texts": ["hello", "ünï"], "encodings": ["o200k_base", "o200k_base"]},
    {"text": "hello world", "limit": 0},
    {"text": "hello world", "limit": 2},
    {"texts": ["hello world", "a b c d e f", ""], "limit": 3},
    {"texts": ["hello world", "a"], "limit": 1, "encodings": ["cl100k_base", "o200k_base"]},
    {"text": "hello world", "limit": 100_000},
    {"limit": None, "encodings": None, "text": "order of keys"},
]

# refused by the request model: the route answers
SCHEMA_INVALID = [
    {},
    {"text": "a", "texts": ["b"]},
    {"text": None},
    {"text": 1},
    {"text": ["a"]},
    {"texts": "a"},
    {"texts": ["a", 1]},
    {"text": "a", "encoding": ""},
    {"text": "a", "encoding": "x" * 201},
    {"text": "a", "encoding": 5},
    {"text": "a", "encodings": []},
    {"text": "a", "encodings": "cl100k_base"},
    {"text": "a", "encoding": "cl100k_base", "encodings": ["cl100k_base"]},
    {"text": "a", "limit": 1.5},
    {"text": "a", "limit": -1},
    {"text": "a", "extra": 1},
    {"text": "a", "Text": "b"},
    [],
    ["text"],
    "text",
    None,
    1,
]
# accepted by the request model, refused by a server limit or an unknown encoding: the lean handler
# answers with the route's error
LIMITS = [
    {"texts": ["a"] * 9},  # above max_texts (8)
    {"text": "a", "encoding": "nope"},
    {"text": "a", "encodings": ["cl100k_base", "nope"]},
    {"text": "a", "encodings": ["cl100k_base"] * 9},  # above max_encodings (8)
    {"text": "a", "limit": 100_001},  # above max_tokens
    {"text": "a", "limit": 10**30},
]
INVALID = SCHEMA_INVALID + LIMITS


@pytest.mark.parametrize("req", VALID, ids=range(len(VALID)))
def test_valid_requests_answered_alike(pair, req):
    r = _same(pair, json.dumps(req).encode())
    assert r.status_code == 200
    _same(pair, json.dumps(req, ensure_ascii=False).encode())


# values of the wrong JSON type (lax pydantic would coerce them; the models are strict): the fast
# path leaves them to the route, which refuses them
COERCED = [
    {"text": "a", "limit": "1"},
    {"text": "a", "limit": 1.0},
    {"text": "a", "limit": True},
    {"texts": ["a"], "limit": "0"},
]


@pytest.mark.parametrize("req", COERCED, ids=range(len(COERCED)))
def test_wrong_types_answered_alike(pair, req):
    assert _same(pair, json.dumps(req).encode()).status_code == 422


@pytest.mark.parametrize("req", INVALID, ids=range(len(INVALID)))
def test_invalid_requests_answered_alike(pair, req):
    r = _same(pair, json.dumps(req).encode())
    assert r.status_code in (400, 404, 413, 422)


RAW = [
    b"",
    b"{",
    b'{"text": "a"} x',
    b'{"text": "a",}',
    b'{"text": "a", "text": "b"}',  # the last one wins, as in json.loads
    b'{"text": "a", "limit": NaN}',
    b'{"text": "a", "limit": Infinity}',
    b'{"text": "\\ud800 lone"}',
    b'{"text": "pair \\ud83d\\ude00 and \\udc00\\ud800"}',
    '{"text": "\ud800 raw"}'.encode("utf-8", "surrogatepass"),
    b'{"text": "bad \xff utf-8"}',
    b'\xef\xbb\xbf{"text": "bom"}',
    '{"text": "utf-16"}'.encode("utf-16"),
    b'{"text": "ctrl \x01 char"}',
    b'{"text": "a\\qb"}',
    b'{"text": "' + b"[" * 100 + b'"}',
    b'{"x": ' + b"[" * 5000 + b"]" * 5000 + b"}",
    b'  {"text": "spaces"}  \n',
]


@pytest.mark.parametrize("body", RAW, ids=range(len(RAW)))
def test_raw_bodies_answered_alike(pair, body):
    _same(pair, body)


@pytest.mark.parametrize(
    "ctype",
    [
        None,
        "text/plain",
        "application/json; charset=utf-8",
        "Application/JSON",
        "application/vnd.api+json",
        "application/x-www-form-urlencoded",
    ],
)
def test_content_types_answered_alike(pair, ctype):
    headers = {} if ctype is None else {"content-type": ctype}
    _same(pair, b'{"text": "hello world"}', headers)


def test_request_id_echoed(pair):
    fast, _ = pair
    r = fast.post("/v1/count", json={"text": "hi"}, headers={"x-request-id": "abc-123"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "abc-123"


def _counters(client) -> list[str]:
    keep = (
        "bpesvc_tokens_total",
        "bpesvc_bytes_total",
        "bpesvc_requests_total",
        "bpesvc_request_bytes_count",
        "bpesvc_request_bytes_sum",
        "bpesvc_op_seconds_count",
        "bpesvc_errors_total",
    )
    return sorted(
        line for line in client.get("/metrics").text.splitlines() if line.startswith(keep)
    )


def test_metrics_recorded_alike(settings):
    apps = [create_app(settings), create_app(settings.model_copy(update={"fast_path": False}))]
    seen = []
    for app in apps:
        with TestClient(app) as c:
            for req in VALID + SCHEMA_INVALID[:6] + LIMITS:
                c.post("/v1/count", json=req)
            seen.append(_counters(c))
    assert seen[0] == seen[1]
    assert any(
        line.startswith('bpesvc_tokens_total{encoding="o200k_base",op="count"}') for line in seen[0]
    )


def test_openapi_still_describes_count(client):
    op = client.get("/openapi.json").json()["paths"]["/v1/count"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith(
        "/CountRequest"
    )
    assert "200" in op["responses"] and "422" in op["responses"]


# ----------------------------------------------------------------------------------- hypothesis
_value = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-3, 10**6),
    st.floats(allow_nan=False),
    st.text(max_size=30),
    st.sampled_from(NAMES + ["", "nope"]),
    st.lists(st.sampled_from(NAMES + ["nope"]), max_size=3),
    st.lists(st.text(max_size=20), max_size=4),
)
_request = st.dictionaries(
    st.sampled_from(["text", "texts", "encoding", "encodings", "limit", "extra"]),
    _value,
    max_size=4,
)
_good = st.fixed_dictionaries(
    {"text": st.text(max_size=200)},
    optional={"encoding": st.sampled_from(NAMES), "limit": st.integers(0, 100)},
) | st.fixed_dictionaries(
    {"texts": st.lists(st.text(max_size=50), max_size=5)},
    optional={
        "encodings": st.lists(st.sampled_from(NAMES), min_size=1, max_size=3),
        "limit": st.integers(0, 100),
    },
)


@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(req=_request | _good, ascii_only=st.booleans())
def test_hyp_lean_handler_equals_route(pair, req, ascii_only):
    _same(pair, json.dumps(req, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


def test_lean_handler_answers_what_the_schema_accepts(pair, monkeypatch):
    answered = []
    original = lean.Lean.parse

    def spy(self, body):
        req = original(self, body)
        answered.append(req is not None)
        return req

    monkeypatch.setattr(lean.Lean, "parse", spy)
    for req in VALID + LIMITS:
        _same(pair, json.dumps(req).encode())
    for req in SCHEMA_INVALID + COERCED:
        _same(pair, json.dumps(req).encode())
    assert answered == [True] * (len(VALID) + len(LIMITS)) + [False] * (
        len(SCHEMA_INVALID) + len(COERCED)
    )


def test_only_declared_routes_are_lean(client):
    layers = [m.kwargs["routes"] for m in client.app.user_middleware if m.cls is lean.LeanRoutes]
    assert [sorted(routes) for routes in layers] == [["/v1/chunk", "/v1/count", "/v1/encode"]]
    route = layers[0]["/v1/count"]
    assert route.endpoint.lean.model is CountRequest and route.endpoint.lean.answer is count_tokens


@pytest.mark.parametrize("req", VALID, ids=range(len(VALID)))
def test_count_answer_is_a_count_response(client, req):
    """``count_tokens`` writes its JSON by hand: it is a CountResponse, serialized as pydantic would."""
    r = client.post("/v1/count", json=req)
    model = CountResponse.model_validate_json(r.content)
    assert model.__pydantic_serializer__.to_json(model) == r.content
    assert model.results[0].model_dump() == model.model_dump(exclude={"results"})


def test_lean_handler_answers_raw_bodies_the_route_accepts(pair, monkeypatch):
    """Bodies pydantic-core's JSON parser refuses but ``json.loads`` accepts (a lone surrogate, a BOM)
    are still answered by the lean handler, as the route answers them; refused bodies go to the route."""
    parsed = []
    original = lean.Lean.parse

    def spy(self, body):
        parsed.append(original(self, body))
        return parsed[-1]

    monkeypatch.setattr(lean.Lean, "parse", spy)
    answered = 0
    for body in RAW:
        parsed.clear()
        r = _same(pair, body)
        assert len(parsed) == 1, body  # only the first app of the pair has the lean layer
        assert (r.status_code == 200) == (parsed[0] is not None), body
        answered += r.status_code == 200
    assert answered >= 6


# ----------------------------------------------------------------------------------- /v1/encode, /v1/chunk
TEXT = "# Title\n\nSome text ünïcödé ☃ 🎉, more words <|endoftext|> here.\n\n## Part\n\n" * 30
ENCODE = [
    {"text": "hello world"},
    {"text": TEXT[:200], "return_offsets": True},
    {"text": "a <|endoftext|> b"},  # disallowed special: 400 from encode_text
    {"text": "a <|endoftext|> b", "allowed_special": "all"},
    {"text": "a <|endoftext|> b", "disallowed_special": []},
    {"text": "x", "encoding": "o200k_base"},
    {"text": "x", "encoding": "nope"},
    {"text": "\ud800 lone", "return_offsets": True},
    {
        "text": TEXT,
        "return_offsets": True,
    },  # above max_offsets? no: checks the offsets path on a longer text
    {"text": 1},
    {"text": "x", "extra": 1},
    {"text": "x", "allowed_special": "some"},
    {},
]
CHUNK = [
    {"text": TEXT, "max_tokens": 50},
    {"text": TEXT, "max_tokens": 50, "overlap": 10, "markdown": True},
    {"text": TEXT, "max_tokens": 40, "trim": False},
    {"texts": [TEXT[:300], "", TEXT[300:900]], "max_tokens": 20},
    {"text": "x", "max_tokens": 1, "encoding": "nope"},
    {"text": "x", "max_tokens": 200_000},  # above max_tokens
    {"texts": ["x"] * 9, "max_tokens": 5},  # above max_texts
    {
        "text": TEXT * 40,
        "max_tokens": 1,
    },  # above max_chunks? the estimate is refused before chunking
    {"text": "x", "max_tokens": 5, "overlap": 5},
    {"text": "x", "texts": ["y"], "max_tokens": 5},
    {"text": "x"},
    {"text": "x", "max_tokens": "5"},
]


@pytest.mark.parametrize(
    "path,req",
    [("/v1/encode", r) for r in ENCODE] + [("/v1/chunk", r) for r in CHUNK],
    ids=[f"encode-{i}" for i in range(len(ENCODE))] + [f"chunk-{i}" for i in range(len(CHUNK))],
)
def test_encode_and_chunk_answered_alike(pair, path, req):
    _same(pair, json.dumps(req).encode(), path=path)
    _same(pair, json.dumps(req, ensure_ascii=False).encode("utf-8", "surrogatepass"), path=path)


def test_encode_and_chunk_lean_handlers_take_what_the_schema_accepts(pair, monkeypatch):
    answered = []
    original = lean.Lean.parse

    def spy(self, body):
        req = original(self, body)
        answered.append(req is not None)
        return req

    monkeypatch.setattr(lean.Lean, "parse", spy)
    for path, reqs in (("/v1/encode", ENCODE), ("/v1/chunk", CHUNK)):
        for req in reqs:
            answered.clear()
            r = _same(pair, json.dumps(req).encode(), path=path)
            schema_error = r.status_code == 422 and r.json()["error"]["type"] == "validation_error"
            assert answered == [not schema_error], (path, req, r.status_code)

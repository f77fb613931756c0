"""The middleware's fast path for POST /v1/count answers exactly as the FastAPI route does.

Two apps with the same settings, one with ``fast_path=False`` (every request goes through the
route): each request is sent to both and the status, body and headers must be equal, for valid
requests (answered by the fast path) and invalid ones (passed on to the route) alike. The piecewise
JSON decoding used for large bodies is checked against ``json.loads`` with tiny pieces.
"""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from service import fastpath
from service.main import create_app
from service.schemas import _clean_text

NAMES = ["cl100k_base", "o200k_base", "o200k_harmony"]
HEADERS = {"content-type": "application/json"}


@pytest.fixture(scope="module")
def pair(settings):
    route_settings = settings.model_copy(update={"fast_path": False})
    with TestClient(create_app(settings)) as fast, TestClient(create_app(route_settings)) as route:
        yield fast, route


def _same(pair, body: bytes, headers: dict | None = None):
    fast, route = pair
    headers = HEADERS if headers is None else headers
    a = fast.post("/v1/count", content=body, headers=headers)
    b = route.post("/v1/count", content=body, headers=headers)
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

INVALID = [
    {},
    {"text": "a", "texts": ["b"]},
    {"text": None},
    {"text": 1},
    {"text": ["a"]},
    {"texts": "a"},
    {"texts": ["a", 1]},
    {"texts": ["a"] * 9},  # above max_texts (8)
    {"text": "a", "encoding": "nope"},
    {"text": "a", "encoding": ""},
    {"text": "a", "encoding": "x" * 201},
    {"text": "a", "encoding": 5},
    {"text": "a", "encodings": []},
    {"text": "a", "encodings": "cl100k_base"},
    {"text": "a", "encodings": ["cl100k_base", "nope"]},
    {"text": "a", "encodings": ["cl100k_base"] * 9},  # above max_encodings (8)
    {"text": "a", "encoding": "cl100k_base", "encodings": ["cl100k_base"]},
    {"text": "a", "limit": 1.5},
    {"text": "a", "limit": -1},
    {"text": "a", "limit": 100_001},  # above max_tokens
    {"text": "a", "limit": 10**30},
    {"text": "a", "extra": 1},
    {"text": "a", "Text": "b"},
    [],
    ["text"],
    "text",
    None,
    1,
]


@pytest.mark.parametrize("req", VALID, ids=range(len(VALID)))
def test_valid_requests_answered_alike(pair, req):
    r = _same(pair, json.dumps(req).encode())
    assert r.status_code == 200
    _same(pair, json.dumps(req, ensure_ascii=False).encode())


# values of the wrong JSON type (lax pydantic would coerce them; the models are strict): the fast
# path leaves them to the route, which refuses them
COERCED = [{"text": "a", "limit": "1"}, {"text": "a", "limit": 1.0}, {"text": "a", "limit": True},
           {"texts": ["a"], "limit": "0"}]


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


@pytest.mark.parametrize("ctype", [None, "text/plain", "application/json; charset=utf-8", "Application/JSON",
                                   "application/vnd.api+json", "application/x-www-form-urlencoded"])
def test_content_types_answered_alike(pair, ctype):
    headers = {} if ctype is None else {"content-type": ctype}
    _same(pair, b'{"text": "hello world"}', headers)


def test_request_id_echoed(pair):
    fast, _ = pair
    r = fast.post("/v1/count", json={"text": "hi"}, headers={"x-request-id": "abc-123"})
    assert r.status_code == 200 and r.headers["x-request-id"] == "abc-123"


def _counters(client) -> list[str]:
    keep = ("bpesvc_tokens_total", "bpesvc_bytes_total", "bpesvc_requests_total", "bpesvc_request_bytes_count",
            "bpesvc_request_bytes_sum", "bpesvc_op_seconds_count", "bpesvc_errors_total")
    return sorted(line for line in client.get("/metrics").text.splitlines() if line.startswith(keep))


def test_metrics_recorded_alike(settings):
    apps = [create_app(settings), create_app(settings.model_copy(update={"fast_path": False}))]
    seen = []
    for app in apps:
        with TestClient(app) as c:
            for req in VALID + INVALID[:6]:
                c.post("/v1/count", json=req)
            seen.append(_counters(c))
    assert seen[0] == seen[1]
    assert any(line.startswith('bpesvc_tokens_total{encoding="o200k_base",op="count"}') for line in seen[0])


def test_openapi_still_describes_count(client):
    op = client.get("/openapi.json").json()["paths"]["/v1/count"]["post"]
    assert op["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/CountRequest")
    assert "200" in op["responses"] and "422" in op["responses"]


# ----------------------------------------------------------------------------------- hypothesis
_value = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 10**6), st.floats(allow_nan=False), st.text(max_size=30),
    st.sampled_from(NAMES + ["", "nope"]), st.lists(st.sampled_from(NAMES + ["nope"]), max_size=3),
    st.lists(st.text(max_size=20), max_size=4),
)
_request = st.dictionaries(
    st.sampled_from(["text", "texts", "encoding", "encodings", "limit", "extra"]), _value, max_size=4
)
_good = st.fixed_dictionaries(
    {"text": st.text(max_size=200)},
    optional={"encoding": st.sampled_from(NAMES), "limit": st.integers(0, 100)},
) | st.fixed_dictionaries(
    {"texts": st.lists(st.text(max_size=50), max_size=5)},
    optional={"encodings": st.lists(st.sampled_from(NAMES), min_size=1, max_size=3), "limit": st.integers(0, 100)},
)


@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(req=_request | _good, ascii_only=st.booleans())
def test_hyp_fast_path_equals_route(pair, req, ascii_only):
    _same(pair, json.dumps(req, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass"))


# ----------------------------------------------------------------------------------- piecewise parsing
_json_text = st.text(
    st.one_of(st.characters(), st.sampled_from(['"', "\\", "\n", "\ud83d", "\ude00", "\udbff", "\udc00", "é"])),
    max_size=60,
)


@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(doc=st.lists(_json_text, max_size=4), ascii_only=st.booleans(), piece=st.integers(1, 16))
def test_hyp_piecewise_loads_equals_json_loads(monkeypatch_piece, doc, ascii_only, piece):
    body = json.dumps({"texts": doc, "n": 1}, ensure_ascii=ascii_only).encode("utf-8", "surrogatepass")
    monkeypatch_piece(piece)
    assert fastpath.loads(body) == json.loads(body)


@pytest.mark.parametrize("escape", ["\\ud83d\\ude00", "\\u00e9", "\\\\", "\\\"", "\\n", "\\udc00", "\\ud800"])
@pytest.mark.parametrize("piece", [1, 2, 5, 6, 7, 13])
def test_piecewise_loads_on_escape_runs(monkeypatch_piece, escape, piece):
    for body in ('{"text": "%s"}' % (escape * 40), '{"text": "a%sb%sc"}' % (escape * 3, "x" * 9 + escape)):
        monkeypatch_piece(piece)
        assert fastpath.loads(body.encode()) == json.loads(body)


def test_piecewise_loads_errors_where_json_loads_does(monkeypatch_piece):
    monkeypatch_piece(4)
    for body in (b'{"text": "unterminated', b'{"text": "bad \\u12 escape........"}', b'{"text": "ctl \x01......"}'):
        with pytest.raises(ValueError):
            json.loads(body)
        with pytest.raises(ValueError):
            fastpath.loads(body)


@pytest.fixture
def monkeypatch_piece():
    saved = fastpath.PIECE_CHARS

    def set_piece(n: int) -> None:
        fastpath.PIECE_CHARS = n

    yield set_piece
    fastpath.PIECE_CHARS = saved


def test_text_and_size():
    for text in ["", "ascii", "ünï ☃ 🎉", "a\ud800b", "\udfff" * 3]:
        want = _clean_text(text)
        assert fastpath.text_and_size(text) == (want, len(want.encode("utf-8")))


def test_valid_requests_take_the_fast_path(pair, monkeypatch):
    answered = []
    original = fastpath.CountFastPath.answer

    def spy(self, body, info):
        out = original(self, body, info)
        answered.append(out is not None)
        return out

    monkeypatch.setattr(fastpath.CountFastPath, "answer", spy)
    for req in VALID:
        _same(pair, json.dumps(req).encode())
    for req in INVALID + COERCED:
        _same(pair, json.dumps(req).encode())
    assert answered == [True] * len(VALID) + [False] * (len(INVALID) + len(COERCED))

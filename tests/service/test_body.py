"""``bpecore_service.body``: the piecewise JSON decoding used for large bodies equals ``json.loads`` (checked
with tiny pieces), and ``text_and_size`` equals the request models' text cleaning."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from bpecore_service import body as parsing

_json_text = st.text(
    st.one_of(
        st.characters(),
        st.sampled_from(['"', "\\", "\n", "\ud83d", "\ude00", "\udbff", "\udc00", "é"]),
    ),
    max_size=60,
)


@hsettings(suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None)
@given(doc=st.lists(_json_text, max_size=4), ascii_only=st.booleans(), piece=st.integers(1, 16))
def test_hyp_piecewise_loads_equals_json_loads(monkeypatch_piece, doc, ascii_only, piece):
    body = json.dumps({"texts": doc, "n": 1}, ensure_ascii=ascii_only).encode(
        "utf-8", "surrogatepass"
    )
    monkeypatch_piece(piece)
    assert parsing.loads(body) == json.loads(body)


@pytest.mark.parametrize(
    "escape", ["\\ud83d\\ude00", "\\u00e9", "\\\\", '\\"', "\\n", "\\udc00", "\\ud800"]
)
@pytest.mark.parametrize("piece", [1, 2, 5, 6, 7, 13])
def test_piecewise_loads_on_escape_runs(monkeypatch_piece, escape, piece):
    for body in (
        '{"text": "%s"}' % (escape * 40),
        '{"text": "a%sb%sc"}' % (escape * 3, "x" * 9 + escape),
    ):
        monkeypatch_piece(piece)
        assert parsing.loads(body.encode()) == json.loads(body)


def test_piecewise_loads_errors_where_json_loads_does(monkeypatch_piece):
    monkeypatch_piece(4)
    for body in (
        b'{"text": "unterminated',
        b'{"text": "bad \\u12 escape........"}',
        b'{"text": "ctl \x01......"}',
    ):
        with pytest.raises(ValueError):
            json.loads(body)
        with pytest.raises(ValueError):
            parsing.loads(body)


@pytest.fixture
def monkeypatch_piece():
    saved = parsing.PIECE_CHARS

    def set_piece(n: int) -> None:
        parsing.PIECE_CHARS = n

    yield set_piece
    parsing.PIECE_CHARS = saved


@pytest.mark.parametrize("piece", [1, 3, 64 * 1024])
def test_text_and_size(monkeypatch_piece, piece):
    monkeypatch_piece(piece)
    for text in ["", "ascii", "ünï ☃ 🎉", "a\ud800b", "\udfff" * 3, "é" * 10 + "\ud83d"]:
        want = "".join(
            "\ufffd" if 0xD800 <= ord(c) <= 0xDFFF else c for c in text
        )  # lone surrogates replaced
        assert parsing.text_and_size(text) == (want, len(want.encode("utf-8")))


def test_loads_large_bodies_with_default_pieces():
    text = ('ünï ☃ \\ " \n 🎉 ' * 20_000) + "\ud800"
    for ascii_only in (True, False):
        data = json.dumps({"text": text, "texts": [text[:70_000], ""]}, ensure_ascii=ascii_only)
        raw = data.encode("utf-8", "surrogatepass")
        assert len(raw) > 2 * parsing.PIECE_CHARS
        assert parsing.loads(raw) == json.loads(raw)


@pytest.mark.parametrize(
    "ctype,want",
    [
        (None, False),
        (b"application/json", True),
        (b"Application/JSON; charset=utf-8", True),
        (b"application/vnd.api+json", False),
        (b"text/plain", False),
    ],
)
def test_json_content_type(ctype, want):
    headers = [(b"accept", b"*/*")] + ([] if ctype is None else [(b"content-type", ctype)])
    assert parsing.json_content_type(headers) is want

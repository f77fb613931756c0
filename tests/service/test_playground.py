"""POST /v1/encode's window onto a long text (offsets_range) and the token bytes (return_bytes):
what the playground page reads the tokens on screen through."""

from __future__ import annotations

import pytest

from bpecore_service.offsets import token_offsets

TEXTS = [
    "hello world",
    "héllo wörld 🙂🙂 中文字 \n\n  x",
    "🙂" * 7 + "abc",
    "\U0001f9d1\u200d\U0001f91d\u200d\U0001f9d1 é̃ 𝔘𝔫𝔦 ąę  \t\t end",
]


# ----------------------------------------------------------------------------------- the encode window
@pytest.mark.parametrize("text", TEXTS)
def test_encode_window_is_a_slice_of_the_whole_texts_offsets(client, text):
    whole = client.post("/v1/encode", json={"text": text, "return_offsets": True}).json()
    assert whole["offsets_first"] == 0
    offsets = whole["offsets"]
    n = len(text)
    for a in range(n):
        for b in sorted({a + 1, min(a + 3, n), n}):
            body = {"text": text, "return_offsets": True, "offsets_range": [a, b]}
            got = client.post("/v1/encode", json=body).json()
            first, window = got["offsets_first"], got["offsets"]
            assert got["tokens"] == whole["tokens"]
            assert window == offsets[first : first + len(window)], (a, b)
            touching = [k for k, o in enumerate(offsets) if o["start"] < b and o["end"] > a]
            # every token on text[a:b], and those before it that hold the rest of its first character
            assert first <= touching[0] and first + len(window) > touching[-1], (a, b)
            # a character has at most 4 bytes: at most 3 tokens before the first that touches
            assert touching[0] - first <= 3 and first + len(window) - 1 == touching[-1], (a, b)


def test_encode_window_of_a_long_text(client, cl100k):
    text = "naïve café 🙂, " * 2000
    tokens = cl100k.encode(text)
    got = client.post(
        "/v1/encode",
        json={"text": text, "return_offsets": True, "offsets_range": [15000, 15100]},
    ).json()
    first = got["offsets_first"]
    expected = token_offsets(cl100k, tokens)[first : first + len(got["offsets"])]
    assert [(o["id"], o["text"], o["start"], o["end"]) for o in got["offsets"]] == expected
    assert 20 < len(got["offsets"]) < 60  # only the window: the text has 18,000 tokens


def test_encode_bytes_are_each_tokens_bytes(client, cl100k):
    text = TEXTS[1]
    got = client.post(
        "/v1/encode", json={"text": text, "return_offsets": True, "return_bytes": True}
    ).json()
    raw = [bytes.fromhex(o["bytes"]) for o in got["offsets"]]
    assert raw == [cl100k.decode_single_token_bytes(t) for t in got["tokens"]]
    assert b"".join(raw) == text.encode()
    plain = client.post("/v1/encode", json={"text": text, "return_offsets": True}).json()
    assert all(o["bytes"] is None for o in plain["offsets"])


@pytest.mark.parametrize("window", [[3, 2], [0, 99], [-1, 2]])
def test_encode_window_out_of_range_is_422(client, window):
    r = client.post(
        "/v1/encode", json={"text": "hello", "return_offsets": True, "offsets_range": window}
    )
    assert r.status_code == 422
    assert r.json()["error"]["type"] in ("invalid_range", "validation_error")

"""/v1/count, /v1/encode, /v1/decode, /v1/encodings: each equals the library call."""

from __future__ import annotations

import pytest

import bpecore

TEXTS = [
    "hello world",
    "",
    "Ünïcödé ☃ 日本語のテキスト 🎉🎉",
    "    indented\n\n\tcode();  // x\r\n",
    "<|endoftext|> is special",
    "a" * 5000,
]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "o200k_harmony"])
@pytest.mark.parametrize("text", TEXTS, ids=range(len(TEXTS)))
def test_count_equals_library(client, name, text):
    r = client.post("/v1/count", json={"text": text, "encoding": name})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["encoding"] == name
    assert body["count"] == bpecore.get_encoding(name).count(text)
    assert body["results"] == [
        {"encoding": name, "count": body["count"], "counts": None, "within_limit": None}
    ]


def test_count_default_encoding(client, cl100k):
    r = client.post("/v1/count", json={"text": "hello world"})
    assert r.json()["encoding"] == "cl100k_base" and r.json()["count"] == 2


def test_count_batch_several_encodings(client):
    names = ["cl100k_base", "o200k_base"]
    r = client.post("/v1/count", json={"texts": TEXTS, "encodings": names})
    assert r.status_code == 200, r.text
    body = r.json()
    for result, name in zip(body["results"], names, strict=True):
        enc = bpecore.get_encoding(name)
        assert result["encoding"] == name
        assert result["counts"] == [enc.count(t) for t in TEXTS]
        assert result["count"] == sum(result["counts"])
    assert body["count"] == body["results"][0]["count"]


@pytest.mark.parametrize("limit", [0, 1, 2, 3, 100])
def test_count_limit(client, cl100k, limit):
    texts = ["hello world", "a b c", ""]
    r = client.post("/v1/count", json={"texts": texts, "limit": limit})
    body = r.json()
    expected = [cl100k.count_till_limit(t, limit) for t in texts]
    assert body["counts"] == expected
    assert body["within_limit"] == all(c is not None for c in expected)
    single = client.post("/v1/count", json={"text": "hello world", "limit": limit}).json()
    assert single["within_limit"] == (limit >= 2)
    assert single["count"] == (2 if limit >= 2 else None)


@pytest.mark.parametrize("text", TEXTS[:5], ids=range(5))
def test_encode_equals_library(client, cl100k, text):
    r = client.post("/v1/encode", json={"text": text, "disallowed_special": []})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["tokens"] == cl100k.encode(text, disallowed_special=())
    assert body["count"] == len(body["tokens"])
    assert body["offsets"] is None


def test_encode_special_policy(client, cl100k):
    text = "hi<|endoftext|><|fim_prefix|>"
    allowed = client.post("/v1/encode", json={"text": text, "allowed_special": "all"}).json()
    assert allowed["tokens"] == cl100k.encode(text, allowed_special="all")
    some = client.post(
        "/v1/encode",
        json={"text": text, "allowed_special": ["<|endoftext|>"], "disallowed_special": []},
    ).json()
    assert some["tokens"] == cl100k.encode(
        text, allowed_special={"<|endoftext|>"}, disallowed_special=()
    )
    r = client.post("/v1/encode", json={"text": text})
    assert r.status_code == 400
    assert r.json()["error"]["type"] == "disallowed_special_token"
    assert "<|endoftext|>" in r.json()["error"]["message"]


@pytest.mark.parametrize("text", ["hello world", "Ünïcödé ☃ 日本語 🎉", "x<|endoftext|>y"])
def test_encode_offsets_are_char_offsets(client, cl100k, text):
    body = client.post(
        "/v1/encode", json={"text": text, "allowed_special": "all", "return_offsets": True}
    ).json()
    offsets = body["offsets"]
    assert [o["id"] for o in offsets] == body["tokens"]
    assert offsets[0]["start"] == 0 and offsets[-1]["end"] == len(text)
    for prev, cur in zip(offsets, offsets[1:]):
        # contiguous, or overlapping by the one character a token boundary splits
        assert cur["start"] in (prev["end"], prev["end"] - 1)
    for o in offsets:
        raw = cl100k.decode_bytes([o["id"]])
        if raw.decode("utf-8", "ignore") == o["text"]:  # whole characters: the slice is the token
            assert text[o["start"] : o["end"]] == o["text"]
        else:  # a partial character: the slice holds it
            assert o["text"].replace("\ufffd", "") in text[o["start"] : o["end"]]


def test_decode_equals_library(client, cl100k):
    ids = cl100k.encode("Ünïcödé ☃ 🎉 hello<|endoftext|>", allowed_special="all")
    body = client.post("/v1/decode", json={"tokens": ids, "return_offsets": True}).json()
    assert body["text"] == cl100k.decode(ids)
    assert body["count"] == len(ids)
    assert body["offsets"][-1]["end"] == len(body["text"])


def test_decode_partial_character(client, cl100k):
    ids = cl100k.encode("🎉")
    assert len(ids) > 1
    body = client.post("/v1/decode", json={"tokens": ids[:1]}).json()
    assert body["text"] == cl100k.decode(ids[:1])
    assert "\ufffd" in body["text"]


def test_decode_errors(client):
    r = client.post("/v1/decode", json={"tokens": [15339, 100256]})
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_token"
    r = client.post("/v1/decode", json={"tokens": [-1]})
    assert r.status_code == 422


def test_encodings(client):
    body = client.get("/v1/encodings").json()
    by_name = {e["name"]: e for e in body["data"]}
    assert set(by_name) == set(bpecore.list_encodings())
    for name, info in by_name.items():
        enc = bpecore.get_encoding(name)
        assert info["n_vocab"] == enc.n_vocab
        assert info["special_tokens"] == enc.special_tokens
        assert info["pattern"] == enc.pattern
        assert info["vocab_sha256"] == enc.vocab_sha256 and len(info["vocab_sha256"]) == 64
        assert info["default"] == (name == "cl100k_base")


def test_lone_surrogate_is_replaced(client, cl100k):
    r = client.post(
        "/v1/count", content=b'{"text": "a\\ud800b"}', headers={"content-type": "application/json"}
    )
    assert r.status_code == 200
    assert r.json()["count"] == cl100k.count("a\ufffdb")

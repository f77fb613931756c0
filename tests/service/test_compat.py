"""vLLM (/tokenize, /detokenize) and TEI (/tokenize by body shape, /tei/tokenize, /decode) routes."""

from __future__ import annotations


def test_vllm_tokenize(client, cl100k):
    body = client.post(
        "/tokenize", json={"prompt": "hello world", "return_token_strs": True}
    ).json()
    assert body["tokens"] == cl100k.encode("hello world") and body["count"] == 2
    assert body["token_strs"] == ["hello", " world"]
    assert body["max_model_len"] is None  # no model config: unknown, not the server's request limit
    other = client.post("/tokenize", json={"model": "o200k_base", "prompt": "hello world"}).json()
    assert other["tokens"] == [24912, 2375]


def test_vllm_tokenize_reports_the_model_context_length(client, cl100k, monkeypatch):
    # An encoding from a model directory carries its config's context length.
    monkeypatch.setattr(cl100k, "max_model_len", 131072, raising=False)
    body = client.post("/tokenize", json={"model": "cl100k_base", "prompt": "hi"}).json()
    assert body["max_model_len"] == 131072


def test_vllm_detokenize(client, cl100k):
    ids = cl100k.encode("hello world")
    assert client.post("/detokenize", json={"tokens": ids}).json() == {"prompt": "hello world"}
    assert client.post("/detokenize", json={"model": "nope", "tokens": ids}).status_code == 404


def test_tei_tokenize_by_shape_and_prefix(client, cl100k):
    text = "hello wörld<|endoftext|>"
    for path in ("/tokenize", "/tei/tokenize"):
        body = client.post(path, json={"inputs": [text, "x"]}).json()
        assert len(body) == 2
        toks = body[0]
        assert [t["id"] for t in toks] == cl100k.encode(text, allowed_special="all")
        raw = text.encode()
        for t in toks:
            assert raw[t["start"] : t["stop"]] == cl100k.decode_bytes([t["id"]])
        assert toks[-1]["special"] is True and not any(t["special"] for t in toks[:-1])
    single = client.post("/tokenize", json={"inputs": "hello"}).json()
    assert [[t["id"] for t in single[0]]] == [cl100k.encode("hello")]


def test_tokenize_ambiguous_body_is_422(client):
    r = client.post("/tokenize", json={"text": "hello"})
    assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error"


def test_tei_decode(client, cl100k):
    ids = cl100k.encode("hi<|endoftext|>", allowed_special="all")
    assert client.post("/decode", json={"ids": ids}).json() == ["hi"]
    assert client.post(
        "/tei/decode", json={"ids": [ids, ids[:1]], "skip_special_tokens": False}
    ).json() == [
        "hi<|endoftext|>",
        "hi",
    ]

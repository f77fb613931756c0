"""/v1/chunk (and /v1/split, /v1/intervals once the library has them): equal to the library call."""

from __future__ import annotations

import pytest

from bpecore.chunker import chunk

DOC = (
    "# Title\n\nFirst paragraph. It has two sentences.\n\n## Part\n\n"
    + "Words and more words, in a longer paragraph that goes on. " * 20
    + "\n\nLast line ☃ 日本語.\n"
)


@pytest.mark.parametrize(
    "opts",
    [
        {"max_tokens": 16},
        {"max_tokens": 40, "overlap": 8},
        {"max_tokens": 30, "trim": False},
        {"max_tokens": 50, "markdown": True},
        {"max_tokens": 25, "encoding": "o200k_base"},
    ],
)
def test_chunk_equals_library(client, opts):
    r = client.post("/v1/chunk", json={"text": DOC, **opts})
    assert r.status_code == 200, r.text
    body = r.json()
    lib = chunk(
        DOC,
        opts.get("encoding", "cl100k_base"),
        opts["max_tokens"],
        opts.get("overlap", 0),
        opts.get("trim", True),
        opts.get("markdown", False),
    )
    assert body["chunks"] == [{"text": c.text, "start": c.start, "end": c.end, "tokens": c.tokens} for c in lib]
    assert body["count"] == len(lib) and body["results"] is None
    for c in body["chunks"]:
        assert DOC[c["start"] : c["end"]] == c["text"] and c["tokens"] <= opts["max_tokens"]


def test_chunk_batch(client):
    texts = [DOC, "", "short text"]
    body = client.post("/v1/chunk", json={"texts": texts, "max_tokens": 20}).json()
    assert len(body["results"]) == 3 and body["chunks"] is None
    for text, got in zip(texts, body["results"], strict=True):
        assert [c["end"] for c in got] == [c.end for c in chunk(text, "cl100k_base", 20)]
    assert body["count"] == sum(len(r) for r in body["results"])


@pytest.mark.parametrize(
    "payload,status",
    [
        ({"text": "a", "max_tokens": 0}, 422),
        ({"text": "a", "max_tokens": 5, "overlap": 5}, 422),
        ({"text": "a", "texts": ["b"], "max_tokens": 5}, 422),
        ({"text": "a", "max_tokens": 10**9}, 422),
        ({"texts": ["a"] * 100, "max_tokens": 5}, 422),
        ({"text": "a", "max_tokens": 5, "encoding": "x"}, 404),
    ],
)
def test_chunk_errors(client, payload, status):
    r = client.post("/v1/chunk", json=payload)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == status

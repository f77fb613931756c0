"""/v1/chunk (and /v1/split, /v1/intervals once the library has them): equal to the library call."""

from __future__ import annotations

import pytest

from bpecore.chunker import chunk

CODE = "import os\n\n\ndef first(x):\n    return x + 1\n\n\nclass Second:\n    def method(self):\n        return first(2)\n"
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
        opts.get("language"),
    )
    assert body["chunks"] == [
        {"text": c.text, "start": c.start, "end": c.end, "tokens": c.tokens} for c in lib
    ]
    assert body["count"] == len(lib) and body["results"] is None
    for c in body["chunks"]:
        assert DOC[c["start"] : c["end"]] == c["text"] and c["tokens"] <= opts["max_tokens"]


def test_chunk_language(client):
    r = client.post("/v1/chunk", json={"text": CODE, "max_tokens": 12, "language": "python"})
    assert r.status_code == 200, r.text
    lib = chunk(CODE, "cl100k_base", 12, language="python")
    assert [(c["start"], c["end"]) for c in r.json()["chunks"]] == [(c.start, c.end) for c in lib]
    assert [c.text.split("\n")[0] for c in lib][1:] == [
        "def first(x):",
        "class Second:",
        "def method(self):",
    ]


def test_chunk_balance(client):
    line = " ".join(f"Sentence number {i} says something about item {i * 7}." for i in range(40))
    r = client.post("/v1/chunk", json={"text": line, "max_tokens": 100, "balance": True})
    assert r.status_code == 200, r.text
    lib = chunk(line, "cl100k_base", 100, balance=True)
    assert [(c["start"], c["end"]) for c in r.json()["chunks"]] == [(c.start, c.end) for c in lib]
    # the option reached the chunker: the greedy cut leaves a short last chunk, balance does not
    assert lib != chunk(line, "cl100k_base", 100)
    assert max(c.tokens for c in lib) - min(c.tokens for c in lib) < 20


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
        ({"text": "a", "max_tokens": 5, "language": "cobol"}, 422),
    ],
)
def test_chunk_errors(client, payload, status):
    r = client.post("/v1/chunk", json=payload)
    assert r.status_code == status, r.text
    assert r.json()["error"]["code"] == status


TEXT = "Hello world! " * 40 + "Ünïcödé ☃ 日本語のテキスト 🎉 " * 10


@pytest.mark.parametrize("n", [0, 1, 5, 17, 100, 10_000])
@pytest.mark.parametrize("keep", ["head", "tail"])
def test_split_equals_library(client, cl100k, n, keep):
    r = client.post("/v1/split", json={"text": TEXT, "max_tokens": n, "keep": keep})
    assert r.status_code == 200, r.text
    body = r.json()
    if keep == "head":
        k = cl100k.split_at(TEXT, n)
        assert (body["offset"], body["start"], body["end"]) == (k, 0, k)
    else:
        k = cl100k.split_at_end(TEXT, n)
        assert (body["offset"], body["start"], body["end"]) == (k, k, len(TEXT))
    assert body["text"] == TEXT[body["start"] : body["end"]]
    assert body["count"] == cl100k.count(body["text"]) <= n


def test_split_errors(client, settings):
    assert client.post("/v1/split", json={"text": "a", "max_tokens": -1}).status_code == 422
    assert (
        client.post("/v1/split", json={"text": "a", "max_tokens": 1, "keep": "middle"}).status_code
        == 422
    )
    r = client.post("/v1/split", json={"text": "a", "max_tokens": settings.max_tokens + 1})
    assert r.status_code == 422 and r.json()["error"]["type"] == "limit_exceeded"


def test_intervals_equal_library(client, cl100k):
    import random

    rng = random.Random(7)
    n = len(TEXT)
    ranges = [sorted((rng.randint(0, n), rng.randint(0, n))) for _ in range(40)] + [
        [0, n],
        [0, 0],
        [n, n],
    ]
    body = client.post("/v1/intervals", json={"text": TEXT, "ranges": ranges}).json()
    assert body["counts"] == [cl100k.count(TEXT[i:j]) for i, j in ranges]
    assert body["count"] == cl100k.count(TEXT)


@pytest.mark.parametrize("ranges", [[[2, 1]], [[-1, 2]], [[0, 10**6]], [[0, 1, 2]]])
def test_intervals_bad_ranges(client, ranges):
    r = client.post("/v1/intervals", json={"text": "hello", "ranges": ranges})
    assert r.status_code == 422, r.text


def test_intervals_too_many(client, settings):
    r = client.post(
        "/v1/intervals", json={"text": "hello", "ranges": [[0, 1]] * (settings.max_ranges + 1)}
    )
    assert r.status_code == 422 and r.json()["error"]["type"] == "limit_exceeded"

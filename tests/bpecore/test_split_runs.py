"""split_at and split_at_end on runs (one repeated byte or character), checked by brute force.

A run is one long piece, the worst case of both scans; every n from 0 past the whole count is
compared with the definitions over encode (DESIGN.md): split_at is the largest k with
count(text[:k]) <= n, split_at_end the smallest k with count(text[k:]) <= n.
"""

import pytest

import bpecore

FILLS = ["a", " ", "7", "\n", "日", "é", "ab cd ", "!"]
SHAPES = [
    ("", ""),
    ("b", ""),
    ("", " x"),
    ("Hello ", "."),
]


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def enc(request):
    return bpecore.get_encoding(request.param)


def _check_all_n(enc, text):
    prefix = [len(enc.encode(text[:k])) for k in range(len(text) + 1)]
    suffix = [len(enc.encode(text[k:])) for k in range(len(text) + 1)]
    for n in range(max(prefix + suffix) + 2):
        want_head = max(k for k, c in enumerate(prefix) if c <= n)
        want_tail = min(k for k, c in enumerate(suffix) if c <= n)
        assert enc.split_at(text, n) == want_head, (text, n)
        assert enc.split_at_end(text, n) == want_tail, (text, n)


@pytest.mark.parametrize("fill", FILLS)
@pytest.mark.parametrize("head,tail", SHAPES)
def test_runs_every_n(enc, fill, head, tail):
    for m in (1, 2, 3, 5, 8, 17, 33, 40):
        _check_all_n(enc, head + fill * m + tail)


@pytest.mark.parametrize("fill", ["a", " ", "7"])
def test_long_run_sampled_n(enc, fill):
    # past the 32-byte threshold of the run path and several periods of its last tokens
    text = "b" + fill * 400 + " x"
    suffix = [len(enc.encode(text[k:])) for k in range(len(text) + 1)]
    prefix = [len(enc.encode(text[:k])) for k in range(len(text) + 1)]
    for n in (0, 1, 2, 3, 7, 13, 50, 99, 200, max(suffix)):
        assert enc.split_at_end(text, n) == min(k for k, c in enumerate(suffix) if c <= n), n
        assert enc.split_at(text, n) == max(k for k, c in enumerate(prefix) if c <= n), n

"""bpecore == tiktoken == reference, on the shared corpora and on generated text."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore import reference
from tests.conftest import ADVERSARIAL_CHARS, CORPORA, PATTERNS, shared_ranks, token_concatenation

ENCODINGS = ["cl100k_base", "o200k_base"]


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_corpus_matches_tiktoken(name, corpus_name, corpus, tiktoken_encoding):
    text = corpus(corpus_name)
    if name == "o200k_base" and corpus_name == "adv_whitespace":
        text = text[
            :200_000
        ]  # tiktoken's o200k panics on the full run of whitespace (its bug, not ours)
    expected = tiktoken_encoding(name).encode_ordinary(text)
    enc = bpecore.get_encoding(name)
    assert enc.encode_ordinary(text) == expected
    assert enc.count(text) == len(expected)


@pytest.mark.parametrize("name", ENCODINGS)
def test_golden_ids(name):
    enc = bpecore.get_encoding(name)
    golden = {
        "cl100k_base": {
            "hello world": [15339, 1917],
            "Hello, World!": [9906, 11, 4435, 0],
            " ": [220],
        },
        "o200k_base": {
            "hello world": [24912, 2375],
            "Hello, World!": [13225, 11, 5922, 0],
            " ": [220],
        },
    }[name]
    for text, ids in golden.items():
        assert enc.encode(text) == ids


def test_pinned_hard_input():
    # A long letter run: backtracking must pop; the answer is pinned from tiktoken.
    enc = bpecore.get_encoding("cl100k_base")
    assert enc.encode("a" * 20) == [70540, 70540, 29558]
    assert enc.encode("zKuX3yB6wQ9aTlmN0pR+/Ee7") == [
        89,
        42,
        84,
        55,
        18,
        88,
        33,
        21,
        86,
        48,
        24,
        64,
        51,
        18244,
        45,
        15,
        79,
        49,
        41731,
        36,
        68,
        22,
    ]


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("cp", [0x18D09, 0x088F, 0x0C5C, 0x0CDC])
def test_unicode_17_additions_cut_like_tiktoken(name, cp, tiktoken_encoding):
    # Found by hypothesis in CI: tiktoken's regex knows Unicode 16, where these code points are
    # not letters; tables measured from a Unicode 17 `regex` made "X/A" cut as "X", "/A".
    text = chr(cp) + "/A"
    assert bpecore.get_encoding(name).encode_ordinary(text) == tiktoken_encoding(
        name
    ).encode_ordinary(text)


def test_pinned_unicode_17_case():
    assert bpecore.get_encoding("cl100k_base").encode_ordinary("\U00018d09/A") == [
        172,
        246,
        112,
        231,
        14,
        32,
    ]


@pytest.mark.parametrize("name", ENCODINGS)
@given(text=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=300))
def test_hyp_text_matches_tiktoken_and_reference(name, text, tiktoken_encoding):
    enc = bpecore.get_encoding(name)
    ours = enc.encode_ordinary(text)
    assert ours == tiktoken_encoding(name).encode_ordinary(text)
    assert enc.count(text) == len(ours)
    assert enc.decode(ours) == text


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.data())
def test_hyp_token_concatenation_matches_reference(name, data, token_bytes):
    text = data.draw(token_concatenation(token_bytes(name)))
    ranks = _ranks(name)
    assert bpecore.get_encoding(name).encode_ordinary(text) == reference.encode_ordinary(
        ranks, PATTERNS[name], text
    )


@pytest.mark.parametrize("name", ENCODINGS)
@given(text=st.lists(st.sampled_from(ADVERSARIAL_CHARS), max_size=200).map("".join))
def test_hyp_adversarial_alphabet_matches_reference(name, text):
    assert bpecore.get_encoding(name).encode_ordinary(text) == reference.encode_ordinary(
        _ranks(name), PATTERNS[name], text
    )


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.binary(max_size=64))
def test_hyp_single_piece_matches_reference(name, data):
    assert bpecore.get_encoding(name).encode_piece(data) == reference.bpe_encode(_ranks(name), data)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize(
    "char,n", [("a", 5000), (" ", 5000), ("0", 999), ("\n", 3000), ("ab", 2500)]
)
def test_repetitive_matches_tiktoken(name, char, n, tiktoken_encoding):
    text = char * n
    assert bpecore.get_encoding(name).encode_ordinary(text) == tiktoken_encoding(
        name
    ).encode_ordinary(text)


_RANKS: dict[str, dict[bytes, int]] = {}


def _ranks(name: str) -> dict[bytes, int]:
    if name not in _RANKS:
        _RANKS[name] = shared_ranks(name)
    return _RANKS[name]


# Long non-ASCII texts are turned into UTF-8 without the GIL (backtrack.text_utf8): one text per
# PEP 393 storage width (Latin-1, UCS-2, UCS-4), every UTF-8 length, and a lone surrogate.
LONG_TEXTS = {
    "latin1": "caf\u00e9 na\u00efve \u00bfqu\u00e9? \u00a0\u00ff " * 5000,
    "ucs2": "\u65e5\u672c\u8a9e \u0394\u03b5\u03bb\u03c4\u03b1 \u20ac5 \ud7ff\ue000 " * 5000,
    "ucs4": "\U0001f600 \U0001d400x \u4e2d\u6587 \u00e9 a1 \U0010ffff" * 5000,
    # mostly ASCII, in runs of every length mod 8 (text_utf8 skips ASCII 8 or 4 code units a step)
    "latin1_runs": "".join("abcdefghijklmnopq"[: k % 17] + "\u00e9" for k in range(9000)),
    "ucs2_runs": "".join("The quick brown f"[: k % 17] + "\u2019" for k in range(9000)),
    "ucs4_runs": "".join("jumps over a lazy"[: k % 17] + "\U0001f600" for k in range(9000)),
}


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("kind", sorted(LONG_TEXTS))
def test_long_non_ascii_texts_match_tiktoken(name, kind, tiktoken_encoding):
    text = LONG_TEXTS[kind]
    assert len(text) >= 65536 and not text.isascii()
    enc = bpecore.get_encoding(name)
    fresh = "".join([text[:7], text[7:]])  # a new str whose UTF-8 nobody has asked for yet
    fresh_ids = enc.encode_ordinary(fresh)
    fresh_count = enc.count("".join([text[:7], text[7:]]))
    expected = tiktoken_encoding(name).encode_ordinary(text)  # leaves text's UTF-8 cached in it
    assert fresh_ids == expected and fresh_count == len(expected)
    assert enc.encode_ordinary(text) == expected
    assert list(enc.encode_to_buffer(text)) == expected
    assert enc.count(text) == len(expected)
    bad = text + "\ud800" + text[:100]  # tiktoken replaces a lone surrogate by U+FFFD
    expected = tiktoken_encoding(name).encode_ordinary(bad)
    assert enc.encode_ordinary(bad) == expected
    assert list(enc.encode_to_buffer(bad)) == expected
    assert enc.count(bad) == len(expected)

"""Encoding facade: special tokens, decode, batches, surrogates, registry."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore


@pytest.fixture(scope="module")
def cl100k():
    return bpecore.get_encoding("cl100k_base")


def test_registry():
    assert {"cl100k_base", "o200k_base"} <= set(bpecore.list_encodings())
    assert bpecore.get_encoding("cl100k_base") is bpecore.get_encoding("cl100k_base")
    with pytest.raises(ValueError, match="unknown encoding 'nope'.*cl100k_base"):
        bpecore.get_encoding("nope")


def test_attributes(cl100k):
    assert cl100k.name == "cl100k_base"
    assert cl100k.n_vocab == 100277
    assert bpecore.get_encoding("o200k_base").n_vocab == 200019
    assert cl100k.eot_token == 100257
    assert cl100k.vocab_sha256 == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


@pytest.mark.parametrize(
    "text,kwargs",
    [
        ("hi <|endoftext|> there", {"allowed_special": "all"}),
        ("hi <|endoftext|> there", {"disallowed_special": ()}),
        (
            "<|fim_prefix|>a<|fim_suffix|>b<|endoftext|>",
            {"allowed_special": {"<|fim_prefix|>", "<|endoftext|>"}, "disallowed_special": ()},
        ),
        ("<|endoftext|><|endoftext|>", {"allowed_special": {"<|endoftext|>"}}),
        ("no specials here", {}),
    ],
)
def test_special_tokens_like_tiktoken(cl100k, tiktoken_encoding, text, kwargs):
    assert cl100k.encode(text, **kwargs) == tiktoken_encoding("cl100k_base").encode(text, **kwargs)


def test_disallowed_special_raises(cl100k):
    with pytest.raises(ValueError, match="disallowed special token '<\\|endoftext\\|>'"):
        cl100k.encode("x <|endoftext|>")
    with pytest.raises(ValueError):
        cl100k.encode("x <|fim_prefix|>", allowed_special={"<|endoftext|>"})


@given(text=st.text(max_size=200))
def test_hyp_surrogates_like_tiktoken(text, tiktoken_encoding):
    enc = bpecore.get_encoding("cl100k_base")
    tik = tiktoken_encoding("cl100k_base")
    text = text + "\ud83d" + text  # a lone surrogate
    try:
        expected = tik.encode(text)
    except ValueError:  # the text holds a special token's string: both refuse it
        with pytest.raises(ValueError):
            enc.encode(text)
        expected = tik.encode(text, disallowed_special=())
    assert enc.encode(text, disallowed_special=()) == expected
    assert enc.count(text) == len(tik.encode_ordinary(text))


@given(text=st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=200))
def test_hyp_roundtrip(text):
    for name in ("cl100k_base", "o200k_base"):
        enc = bpecore.get_encoding(name)
        assert enc.decode(enc.encode_ordinary(text)) == text
        assert enc.decode_bytes(enc.encode(text, disallowed_special=())) == text.encode("utf-8")


def test_roundtrip_of_special_token_text(cl100k):
    # found by hypothesis in CI: text that spells a special token
    assert cl100k.decode(cl100k.encode_ordinary("<|endoftext|>")) == "<|endoftext|>"


def test_decode_errors_and_specials(cl100k):
    assert cl100k.decode([100257]) == "<|endoftext|>"
    assert cl100k.decode_bytes([15339, 100257]) == b"hello<|endoftext|>"
    for bad in (100256, 100277, -1, 2**40):
        with pytest.raises(ValueError, match="not in this vocabulary"):
            cl100k.decode([bad])
    assert cl100k.decode([9468, 246]) == "\ufffd\ufffd" or isinstance(
        cl100k.decode([9468, 246]), str
    )


def test_single_token_helpers(cl100k):
    assert cl100k.encode_single_token("hello") == 15339
    assert cl100k.encode_single_token("<|endoftext|>") == 100257
    assert cl100k.decode_single_token_bytes(15339) == b"hello"
    assert cl100k.decode_tokens_bytes([15339, 1917]) == [b"hello", b" world"]
    with pytest.raises(KeyError):
        cl100k.encode_single_token("hello world")


def test_batches(cl100k, corpus):
    texts = [corpus("english")[i : i + 5000] for i in range(0, 100_000, 5000)]
    assert cl100k.encode_batch(texts, num_threads=2) == [cl100k.encode(t) for t in texts]
    assert cl100k.count_batch(texts, num_threads=2) == [cl100k.count(t) for t in texts]
    assert cl100k.encode_ordinary_batch(texts) == [cl100k.encode_ordinary(t) for t in texts]
    # shares of unequal size (texts k, k + 3, k + 6... per thread) come back in input order
    texts = [corpus("multilingual")[i : i + 17_000 + i // 50] for i in range(0, 7 * 17_000, 17_000)]
    assert cl100k.count_batch(texts, num_threads=3) == [cl100k.count(t) for t in texts]
    assert cl100k.encode_batch(texts, num_threads=3) == [cl100k.encode(t) for t in texts]


def test_patternless_encoding(toy_encoding):
    assert toy_encoding.encode("ab cbb") == [256, 32, 260]
    assert toy_encoding.count("ab cbb") == 3
    assert toy_encoding.pattern is None


def test_construction_and_custom_pattern():
    ranks = bpecore.get_encoding("cl100k_base").mergeable_ranks
    enc = bpecore.Encoding("words", ranks, r"\S+|\s+", {"<|end|>": 200000})
    assert enc.encode("hello world") == [15339, 220, 14957]
    assert enc.encode("a<|end|>", allowed_special="all") == [64, 200000]
    with pytest.raises(ValueError, match="reuses id"):
        bpecore.Encoding("clash", ranks, None, {"<|x|>": 5})


@pytest.mark.parametrize(
    "specials",
    [{}, {"<end>": 300}, {"<end>": 300, "[sep]": 301}],
    ids=["none", "shared-first-char", "no-shared-prefix"],
)
def test_default_encode_special_check(toy_encoding, specials):
    """encode's default call skips the special-token search only when no special token can be
    in the text; the refusal and the ordinary ids are those of the full check."""
    enc = bpecore.Encoding("toy-specials", None, None, specials, vocab=toy_encoding._vocab)
    plain = "ab cbb"
    assert enc.encode(plain) == enc.encode_ordinary(plain) == enc._encode(plain, (), "all", 1)
    for special in specials:
        text = "ab" + special + "c"
        with pytest.raises(ValueError, match="disallowed special token"):
            enc.encode(text)
        assert enc.encode(text, disallowed_special=()) == enc.encode_ordinary(text)
        assert enc.encode(text, allowed_special="all") == [
            *enc.encode_ordinary("ab"),
            specials[special],
            *enc.encode_ordinary("c"),
        ]
    assert enc.encode("<") == enc.encode_ordinary("<")


@pytest.mark.parametrize(
    "pattern", [r"\S+|\s+", r"\w*|\s+|[^\w\s]+", r" ?\p{L}+| ?\d|[^\s\p{L}\d]+|\s+?"]
)
def test_regex_pattern_pieces_like_tiktoken(corpus, tiktoken_encoding, pattern):
    # A pattern no scanner knows is cut by the `regex` module; encode_text reads its ends
    # SCAN_AHEAD at a time (fill_scan), skipping empty matches (the second and third patterns
    # match empty strings, which tiktoken's own splitter does not accept: its BPE of each
    # non-empty match is the reference). Thousands of pieces, ASCII and not.
    import regex

    from tests.conftest import shared_ranks

    enc = bpecore.Encoding("custom", shared_ranks("cl100k_base"), pattern, {})
    ref = tiktoken_encoding("cl100k_base")
    for name in ("english", "code", "multilingual"):
        text = corpus(name)[:30_000]
        for cut in (text, text[:1], text[:63], text[:65], text[:130]):
            want = [
                t
                for m in regex.finditer(pattern, cut)
                if m.group()
                for t in ref._encode_single_piece(m.group().encode())
            ]
            assert enc.encode_ordinary(cut) == want, (name, len(cut))
            assert enc.count(cut) == len(want)

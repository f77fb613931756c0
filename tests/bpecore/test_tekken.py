"""Tekken (Mistral) against `mistral-common`'s own Tekkenizer: ids equal on every corpus, 0 mismatches."""

from __future__ import annotations

import base64
import gzip
import json
import os

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.tekken import LEGACY_SPECIAL_TOKENS
from tests.conftest import CORPORA, read_corpus

DEFAULT_CHARS = 200_000  # per corpus in the default run; the slow run takes all of each


def _reference_path(name: str = "tekken_240718.json") -> str:
    try:
        import mistral_common
    except ImportError:
        pytest.skip(
            "mistral-common (test extra) is not installed: it is the reference Tekken tokenizer"
        )
    return os.path.join(os.path.dirname(mistral_common.__file__), "data", name)


@pytest.fixture(scope="module")
def reference():
    path = _reference_path()
    from mistral_common.tokens.tokenizers.tekken import Tekkenizer

    return Tekkenizer.from_file(path)


@pytest.fixture(scope="module")
def tekken():
    return bpecore.get_encoding("tekken")


def _check(enc, ref, text: str) -> None:
    want = ref.encode(text, bos=False, eos=False)
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)


EDGES = [
    "",
    " ",
    "<s>[INST] hi [/INST]</s>",
    "Hello, World!\r\n\r\n  x",
    "ǅemo ǈ ŉ ǰ ﬁ",
    "a/\n/b",
    "123 4567",
]


def test_ids_equal_mistral_common(tekken, reference):
    for text in EDGES:
        _check(tekken, reference, text)
    for name in CORPORA:
        _check(tekken, reference, read_corpus(name)[:DEFAULT_CHARS])


@pytest.mark.slow
def test_ids_equal_mistral_common_full_corpora(tekken, reference):
    for name in CORPORA:
        _check(tekken, reference, read_corpus(name))


@given(
    text=st.one_of(
        st.text(max_size=80),
        st.lists(
            st.sampled_from(
                [
                    " ",
                    "\n",
                    "\r",
                    "/",
                    "a",
                    "A",
                    "ǅ",
                    "é",
                    "\u0301",
                    "1",
                    "日本",
                    "<s>",
                    "  ",
                    "\t",
                    "!!",
                    "Ab",
                ]
            ),
            max_size=30,
        ).map("".join),
    )
)
def test_hyp_equal_mistral_common(tekken, reference, text):
    _check(tekken, reference, text)


def test_ids_and_specials(tekken, reference):
    assert tekken.n_vocab == reference.n_words == 131072
    assert tekken.special_tokens["<s>"] == reference.bos_id == 1
    assert tekken.special_tokens["</s>"] == reference.eos_id == 2
    assert tekken.special_tokens["<SPECIAL_999>"] == 999
    assert tekken.encode("<s>hi</s>", allowed_special="all") == [
        1,
        *reference.encode("hi", False, False),
        2,
    ]
    text = read_corpus("multilingual")[:3000]
    ids = tekken.encode_ordinary(text)
    assert min(ids) >= 1000 and tekken.decode(ids) == reference.decode(ids) == text
    assert tekken.vocab_sha256 == "eccd1665d2e477697c33cb7f0daa6f6dfefc57a0a6bceb66d4be52952f827516"


def test_exact_operations_on_tekken(tekken):
    text = read_corpus("english")[:3000]
    k = tekken.split_at(text, 50)
    assert tekken.count(text[:k]) <= 50 < tekken.count(text[: k + 1]) or k == len(text)
    ic = tekken.interval_counter(text)
    assert all(
        ic.count(a, b) == tekken.count(text[a:b])
        for a, b in [(0, 100), (17, 950), (5, 6), (300, 3000)]
    )
    assert tekken.count_till_limit(text, 10) is None
    k = tekken.split_at_end(text, 30)
    assert tekken.count(text[k:]) <= 30 < tekken.count(text[k - 1 :])
    counter = tekken.appendable_counter()
    for i in range(0, 400, 13):
        assert counter.push(text[i : i + 13]) == tekken.count(text[: i + 13])
    chunks = bpecore.chunk(text, tekken, max_tokens=100)
    assert all(c.tokens == tekken.count(text[c.start : c.end]) <= 100 for c in chunks)


def _tiny(tmp_path, special_tokens=None, version="v3", **config):
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
        for i in range(256)
    ]
    vocab.append({"rank": 256, "token_bytes": base64.b64encode(b"ab").decode(), "token_str": "ab"})
    vocab.append(
        {"rank": 257, "token_bytes": base64.b64encode(b"abc").decode(), "token_str": "abc"}
    )
    doc = {
        "config": {
            "pattern": r"\w+|\s+|[^\w\s]+",
            "num_vocab_tokens": 258,
            "default_vocab_size": 277,
            "default_num_special_tokens": 20,
            "version": version,
            **config,
        },
        "vocab": vocab,
    }
    if special_tokens is not None:
        doc["special_tokens"] = special_tokens
    path = tmp_path / "tekken.json.gz"
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def test_load_tekken_cuts_to_default_vocab_size(tmp_path):
    enc = bpecore.load_tekken(_tiny(tmp_path))  # 277 - 20 = 257 ranks: "abc" (rank 257) is not used
    assert enc.encode_ordinary("abc ab") == [256 + 20, ord("c") + 20, ord(" ") + 20, 256 + 20]
    assert enc.special_tokens == {name: i for i, name in enumerate(LEGACY_SPECIAL_TOKENS)}


def test_load_tekken_listed_specials(tmp_path):
    specials = [
        {"rank": 0, "token_str": "<unk>", "is_control": True},
        {"rank": 1, "token_str": "<s>", "is_control": True},
    ]
    enc = bpecore.load_tekken(_tiny(tmp_path, specials, version="v13"))
    assert (
        enc.special_tokens["<s>"] == 1
        and enc.special_tokens["<SPECIAL_19>"] == 19
        and len(enc.special_tokens) == 20
    )


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"version": "v13"}, "without special_tokens"),
        ({"default_vocab_size": 400}, "not within 256..258"),
        (
            {"special_tokens": [{"rank": 0, "token_str": "<s>"}, {"rank": 1, "token_str": "<s>"}]},
            "special tokens",
        ),
    ],
)
def test_load_tekken_refuses(tmp_path, kwargs, message):
    with pytest.raises(bpecore.VocabError, match=message):
        bpecore.load_tekken(_tiny(tmp_path, **kwargs))

"""One text counted on several threads (batch.count_text, ``Encoding.count(num_threads=)``): cut at
piece boundaries no context can move, the count equals the single-thread one."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpecore.batch import count_text
from tests.conftest import ADVERSARIAL_CHARS, CORPORA, exact_encoding, read_corpus

SCANNED = ["cl100k_base", "o200k_base", "r50k_pattern"]


@pytest.mark.parametrize("name", SCANNED)
@pytest.mark.parametrize("corpus", CORPORA)
def test_corpus_threads_equal_one(name, corpus):
    enc = exact_encoding(name)
    text = read_corpus(corpus)
    expected = enc.count(text)
    assert enc.count(text, num_threads=2) == expected
    assert count_text(enc._core, text, 3, 4096) == expected  # ~250 segments: many more cuts


PARTS = st.sampled_from(
    [
        " ",
        "\n",
        "a",
        "Z",
        "0",
        "7",
        "'s",
        "'",
        " the",
        "\n\n",
        "  ",
        "\t",
        "\r\n",
        ".",
        "?!",
        "é",
        "\u0301",
        "中文",
        "😀",
        "\u00a0",
        "Ab",
        "ABC",
        "x1",
        " 123456",
        "/",
        "\n ",
        " \n",
    ]
)


@given(
    st.lists(st.one_of(PARTS, st.text(max_size=6)), min_size=1, max_size=200).map("".join),
    st.integers(1, 40),
)
def test_hyp_cuts_keep_the_count(text, segment):
    for name in SCANNED:
        enc = exact_encoding(name)
        assert count_text(enc._core, text, 2, segment) == enc.count(text), (name, segment)


@pytest.mark.parametrize("char", ADVERSARIAL_CHARS)
def test_runs_of_one_character(char):
    enc = exact_encoding("o200k_base")
    text = ("x " + char * 300 + "\nWord ") * 40
    assert count_text(enc._core, text, 2, 64) == enc.count(text)


def test_other_patterns_and_surrogates():
    for name in ("cl100k_words", "cl100k_nopattern"):
        enc = exact_encoding(name)
        text = read_corpus("english")[:300_000]
        assert enc.count(text, num_threads=2) == enc.count(text)
    enc = exact_encoding("cl100k_base")
    text = read_corpus("english")[:300_000] + "\ud800 tail"
    assert enc.count(text, num_threads=2) == enc.count(text)
    with pytest.raises(ValueError):
        count_text(enc._core, "abc", 2, 0)

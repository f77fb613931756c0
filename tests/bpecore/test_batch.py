"""Batches on native threads (bpecore/batch.pyx): any thread count gives the single-text answers."""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.batch import encode_batch
from tests.conftest import ADVERSARIAL_CHARS, exact_encoding

THREADS = [1, 2, 3, 8, 64]


@pytest.fixture(scope="module")
def cl100k() -> bpecore.Encoding:
    return bpecore.get_encoding("cl100k_base")


#: Texts the threads must treat exactly as encode_ordinary does: empty, every PEP 393 width, lone
#: surrogates first / last / alone / next to wide characters, special-token strings as plain text.
ODD_TEXTS = [
    "",
    "a",
    " ",
    "\ud800",
    "x\ud800y",
    "\udfff tail",
    "head \ud83d",
    "é\udc00" * 50,
    "中文\ud800😀",
    "café",
    "中文字符",
    "😀 emoji 😀",
    "mixed é 中 😀 \u0301",
    "<|endoftext|>",
    "  \n\t ",
    "a" * 5000,
]


def _mixed_texts(corpus, n: int = 240, seed: int = 7) -> list[str]:
    """Slices of 0..6,000 chars from the shared corpora (ASCII, non-ASCII, adversarial), plus ODD_TEXTS."""
    rng = random.Random(seed)
    sources = [
        corpus(name)[:300_000]
        for name in ("english", "code", "multilingual", "adv_unicode", "adv_base64")
    ]
    texts = []
    for _ in range(n):
        source = rng.choice(sources)
        a = rng.randrange(len(source))
        texts.append(source[a : a + rng.choice([0, 1, 7, 300, 2_500, 6_000])])
    texts[::17] = ODD_TEXTS[: len(texts[::17])]
    return texts


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_threads_equal_single_text_calls(name, corpus):
    enc = bpecore.get_encoding(name)
    texts = _mixed_texts(corpus) + ODD_TEXTS
    expected = [enc.encode_ordinary(t) for t in texts]
    counts = [len(e) for e in expected]
    for threads in THREADS:
        # the engine itself, without Encoding's minimum work per thread, so every count starts threads
        assert encode_batch(enc._core, texts, threads) == expected, threads
        assert encode_batch(enc._core, texts, threads, True) == counts, threads
        assert enc.encode_ordinary_batch(texts, num_threads=threads) == expected
        assert enc.encode_batch(texts, num_threads=threads, disallowed_special=()) == expected
        assert enc.count_batch(texts, num_threads=threads) == counts


@pytest.mark.parametrize("name", ["cl100k_words", "cl100k_nopattern", "r50k_pattern", "toy"])
def test_custom_pattern_and_patternless(name, corpus):
    # cl100k_words: the `regex` module cuts pieces under the GIL while the threads encode;
    # cl100k_nopattern and toy: the whole text is one piece.
    enc = exact_encoding(name)
    texts = [t[:400] for t in _mixed_texts(corpus, n=60, seed=11)] + ODD_TEXTS[:-1]
    expected = [enc.encode_ordinary(t) for t in texts]
    for threads in (1, 2, 5):
        assert encode_batch(enc._core, texts, threads) == expected
        assert encode_batch(enc._core, texts, threads, True) == [len(e) for e in expected]
        assert enc.encode_batch(texts, num_threads=threads, disallowed_special=()) == expected
        assert enc.count_batch(texts, num_threads=threads) == [len(e) for e in expected]


def test_empty_and_degenerate_thread_counts(cl100k):
    texts = ["hello world", "", "héllo", "x\ud800"]
    expected = [cl100k.encode_ordinary(t) for t in texts]
    assert (
        cl100k.count_batch([]) == []
        and cl100k.encode_batch([]) == []
        and encode_batch(cl100k._core, [], 4) == []
    )
    assert cl100k.encode_ordinary_batch(["", ""], num_threads=2) == [[], []]
    for threads in (0, -3, 1, len(texts), 1000):
        assert encode_batch(cl100k._core, texts, threads) == expected
        assert cl100k.encode_ordinary_batch(texts, num_threads=threads) == expected
        assert cl100k.count_batch(tuple(texts), num_threads=threads) == [len(e) for e in expected]
    assert cl100k.count_batch(iter(texts), num_threads=2) == [len(e) for e in expected]


def test_long_texts_and_growing_buffers(corpus):
    # Non-ASCII texts become UTF-8 in a per-thread buffer that grows; long texts use the piece cache.
    enc = bpecore.get_encoding("o200k_base")
    multi = corpus("multilingual")
    texts = (
        [multi[: 10**k] for k in range(1, 6)] + [multi[:100_000] + "\ud800"] + [multi[5:50]] * 20
    )
    expected = [enc.encode_ordinary(t) for t in texts]
    for threads in (2, 4):
        assert encode_batch(enc._core, texts, threads) == expected
        assert enc.count_batch(texts, num_threads=threads) == [len(e) for e in expected]


def test_bad_item_raises_and_leaves_no_thread_behind(cl100k):
    texts = ["hello"] * 50 + [b"bytes"] + ["world"] * 50
    before = threading.active_count()
    for count_only in (False, True):
        with pytest.raises(TypeError, match=r"texts\[50\] is bytes"):
            encode_batch(cl100k._core, texts, 4, count_only)
        with pytest.raises(TypeError):
            encode_batch(cl100k._core, ["a", None], 2, count_only)
    with pytest.raises(TypeError):
        exact_encoding("cl100k_words").count_batch(["a", 3], num_threads=2)
    assert threading.active_count() == before
    assert encode_batch(cl100k._core, texts[:50], 4, True) == [1] * 50


def test_str_subclass_items_refused_as_by_encode(cl100k):
    class Text(str):
        pass

    with pytest.raises(TypeError):
        cl100k.encode_ordinary(Text("hello"))
    with pytest.raises(TypeError, match=r"texts\[1\] is Text, not str"):
        encode_batch(cl100k._core, ["plain", Text("héllo wörld")], 2)


def test_concurrent_batches_share_one_encoder(corpus):
    enc = bpecore.get_encoding("cl100k_base")
    texts = _mixed_texts(corpus, n=120, seed=3)
    expected = [len(enc.encode_ordinary(t)) for t in texts]
    results: list = [None] * 4

    def run(k: int) -> None:
        results[k] = encode_batch(enc._core, texts, 3, k % 2 == 0)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k, result in enumerate(results):
        assert (result if k % 2 == 0 else [len(r) for r in result]) == expected


@pytest.mark.parametrize("threads", [1, 3])
def test_special_tokens_in_batches(cl100k, threads):
    texts = [
        "a<|endoftext|>b",
        "plain",
        "<|fim_prefix|>x",
        "<|endoftext|>",
        "<|endoftext|><|endoftext|>",
        "x<|fim_middle|>y<|fim_suffix|>z",
        "no special\ud800 here",
        "",
        "tail<|endofprompt|>",
        "<|notspecial|>",
    ] * 3
    for allowed in ("all", {"<|endoftext|>"}, {"<|fim_prefix|>", "<|fim_middle|>"}):
        expected = [cl100k.encode(t, allowed_special=allowed, disallowed_special=()) for t in texts]
        assert (
            cl100k.encode_batch(
                texts, num_threads=threads, allowed_special=allowed, disallowed_special=()
            )
            == expected
        )
    expected = [cl100k.encode(t, allowed_special="all") for t in texts]
    assert cl100k.encode_batch(texts, num_threads=threads, allowed_special="all") == expected
    with pytest.raises(ValueError, match="fim_prefix"):
        cl100k.encode_batch(texts, num_threads=threads, allowed_special={"<|endoftext|>"})
    with pytest.raises(
        ValueError, match="notspecial"
    ):  # a disallowed string that is no special token
        cl100k.encode_batch(
            texts, num_threads=threads, allowed_special="all", disallowed_special={"<|notspecial|>"}
        )
    plain = ["plain", "text"]
    assert cl100k.encode_batch(plain, num_threads=threads) == [cl100k.encode(t) for t in plain]


@given(
    st.lists(
        st.text(max_size=60)
        | st.text(st.sampled_from(ADVERSARIAL_CHARS + ["\ud800"]), max_size=80),
        max_size=30,
    ),
    st.integers(1, 5),
)
def test_hyp_batch_equals_map(texts, threads):
    for name in ("cl100k_base", "o200k_base"):
        enc = bpecore.get_encoding(name)
        expected = [enc.encode_ordinary(t) for t in texts]
        assert encode_batch(enc._core, texts, threads) == expected
        assert encode_batch(enc._core, texts, threads, True) == [len(e) for e in expected]

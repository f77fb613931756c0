"""One long text on several threads (batch.count_long / encode_long, ``Encoding.count`` and
``encode_long`` with ``num_threads``): cut at piece boundaries no context can move, the count and the
ids equal the single-thread ones, whatever the number of threads, the cut spacing, the text's
storage (ASCII, Latin-1, UCS-2, UCS-4, cached UTF-8) and the piece cache (on, or off: the call's
own table)."""

from __future__ import annotations

import ctypes

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.batch import count_long, encode_long, long_cuts
from tests.conftest import ADVERSARIAL_CHARS, CORPORA, exact_encoding, read_corpus

#: Every pattern whose scanner is cut (first_cut's proof covers them).
SCANNED = [
    "cl100k_base",
    "o200k_base",
    "r50k_pattern",
    "llama3_pattern",
    "qwen2_pattern",
    "tekken_pattern",
]


def fresh(text: str) -> str:
    """A new str equal to ``text`` (no UTF-8 cached in it by an earlier call)."""
    return "".join([text[:-1], text[-1:]])


def cache_utf8(text: str) -> str:
    """``text`` with CPython's UTF-8 cached in it, as an earlier call may leave it."""
    as_utf8 = ctypes.pythonapi.PyUnicode_AsUTF8AndSize
    as_utf8.restype = ctypes.c_void_p
    as_utf8.argtypes = [ctypes.py_object, ctypes.c_void_p]
    assert as_utf8(text, None)
    return text


@pytest.fixture(params=["cache", "no-cache"])
def piece_cache(request):
    """Each test with the piece cache on (its default size) and off."""
    before = bpecore.piececache.get_cache_size()
    bpecore.set_cache_size(before if request.param == "cache" else 0)
    yield request.param
    bpecore.set_cache_size(before)


def check(name: str, text: str, segment: int, threads=(2, 3, 4)) -> None:
    """count_long and encode_long on ``threads`` equal the one-thread count and ids."""
    core = exact_encoding(name)._core
    ids = core.encode(text)
    for n in threads:
        assert count_long(core, fresh(text), n, segment) == len(ids), (name, n, segment)
        assert encode_long(core, fresh(text), n, segment) == ids, (name, n, segment)


@pytest.mark.parametrize("name", SCANNED)
@pytest.mark.parametrize("corpus", CORPORA)
def test_corpus_threads_equal_one(name, corpus, piece_cache):
    enc = exact_encoding(name)
    text = read_corpus(corpus)
    ids = enc.encode_ordinary(text)
    for n in (1, 2, 3, 4):
        assert enc.count(fresh(text), num_threads=n) == len(ids)
        assert enc.encode_long(fresh(text), num_threads=n) == ids
    core = enc._core
    assert count_long(core, fresh(text), 3, 1000) == len(ids)  # ~1,000 windows: many more cuts
    assert encode_long(core, fresh(text), 4, 777) == ids
    assert count_long(core, cache_utf8(fresh(text)), 2, 4096) == len(ids)


def test_corpora_are_cut():
    """The corpora with words are cut (so the tests above test cuts), at first_cut places, in
    segments that shrink towards the end (guided: the last ones are the smallest); a run of one
    letter has no cut, and is one segment."""
    core = exact_encoding("cl100k_base")._core
    for corpus in ("english", "code", "multilingual"):
        text = read_corpus(corpus)
        for threads in (2, 4):
            starts = long_cuts(core, text, threads)
            assert len(starts) > 10, corpus
            for c in starts[1:]:
                a, b = text[c - 1], text[c]
                assert (a.isascii() and a.isalnum() and b in " \n") or (
                    a == "\n" and b.isascii() and b.isalpha()
                ), (corpus, c)
            sizes = [b - a for a, b in zip(starts, starts[1:])]
            assert sizes[0] > 3 * sizes[-2], (corpus, sizes)
    assert long_cuts(core, "a" * 100_000, 2, 1000) == [0]
    assert long_cuts(core, "abc " * 1000, 2, 4000) == [0]  # under 2 windows: not cut
    # "abc abc ...": a cut before each space (4j + 3); every window holds one.
    starts = long_cuts(core, "abc " * 10_000, 2, 10)
    assert len(starts) > 40 and all(c % 4 == 3 for c in starts[1:])


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
        "\r",
        ".",
        "?!",
        "/",
        "é",
        "ÿ",
        "\u0301",
        "中文",
        "😀",
        "\u00a0",
        "\u3000",
        "Ab",
        "ABC",
        "x1",
        " 123456",
        "\n ",
        " \n",
        "\n\nA",
    ]
)


@given(
    st.lists(st.one_of(PARTS, st.text(max_size=6)), min_size=1, max_size=200).map("".join),
    st.integers(1, 40),
    st.integers(2, 4),
)
def test_hyp_cuts_keep_the_ids(text, segment, threads):
    for name in SCANNED:
        core = exact_encoding(name)._core
        ids = core.encode(text)
        assert count_long(core, fresh(text), threads, segment) == len(ids), (name, segment)
        assert encode_long(core, fresh(text), threads, segment) == ids, (name, segment)


#: Texts built to put cut candidates in awkward places: long runs of whitespace (with \r\n),
#: of one letter, of digits, of CJK and emoji, next to letters and newlines.
AWKWARD = ["  ", "\n", "\r\n", " \n ", "\t", "a", "Z", "9", "中", "😀", "é", "'", ".\n"]


@pytest.mark.parametrize("name", SCANNED)
@pytest.mark.parametrize("run", AWKWARD)
def test_awkward_runs(name, run):
    for length in (1, 2, 5, 63, 300):
        body = run * length
        text = ("x " + body + "\nWord 12 " + body + "end\n" + body) * 12
        for segment in (1, 2, 3, 7, 64):
            check(name, text, segment, threads=(2, 4))


@pytest.mark.parametrize("char", ADVERSARIAL_CHARS)
def test_runs_of_one_character(char):
    for name in ("o200k_base", "cl100k_base", "r50k_pattern"):
        text = ("x " + char * 300 + "\nWord ") * 40
        check(name, text, 64)
        check(name, char * 5000, 100, threads=(2,))


def test_storage_kinds():
    """Latin-1 (non-ASCII), UCS-2 and UCS-4 strs are cut in characters, an ASCII str or one with
    its UTF-8 cached in bytes; the ids are the same."""
    words = ["café ", "naïve\n", "ÿes ", "中文 ", "字\n", "😀 ", "ok\n", "x1 "]
    for kinds in (words[:3], words[:5], words):
        text = "".join(words[(i * 7) % len(kinds)] for i in range(5000))
        for name in ("cl100k_base", "o200k_base"):
            check(name, text, 50)
            check(name, cache_utf8(fresh(text)), 50, threads=(2,))


def test_surrogates_and_other_patterns():
    for name in ("cl100k_words", "cl100k_nopattern"):
        enc = exact_encoding(name)
        text = read_corpus("english")[:300_000]
        assert enc.count(text, num_threads=2) == enc.count(text)
        assert enc.encode_long(text, num_threads=2) == enc.encode_ordinary(text)
    enc = exact_encoding("cl100k_base")
    for text in (
        read_corpus("english")[:300_000] + "\ud800 tail",
        "\udfff" + read_corpus("multilingual")[:300_000],
    ):
        assert enc.count(text, num_threads=2) == enc.count(text)
        assert enc.encode_long(text, num_threads=3) == enc.encode(text)
        with pytest.raises(UnicodeEncodeError):
            count_long(enc._core, text, 2, 1000)
        with pytest.raises(UnicodeEncodeError):
            encode_long(enc._core, text, 2, 1000)
    with pytest.raises(ValueError):
        count_long(enc._core, "abc", 2, 0)


def test_special_tokens_with_threads():
    enc = bpecore.get_encoding("cl100k_base")
    body = read_corpus("code")[:200_000]
    text = body + "<|endoftext|>" + body[:70_000] + "<|endoftext|>"
    want = enc.encode(text, allowed_special="all")
    assert enc.encode_long(text, allowed_special="all", num_threads=2) == want
    with pytest.raises(ValueError):
        enc.encode_long(text, num_threads=2)


def test_hf_one_regex_pipeline_threads(tmp_path):
    """An open model whose pipeline is one compiled call (NFC + one Split, on text NFC leaves
    alone) takes the same threaded path."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers

    from bpecore.pretokenize import QWEN2_PATTERN

    tok = tokenizers.Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([read_corpus("english")[:50_000]], trainer)
    tok.save(str(tmp_path / "tokenizer.json"))
    enc = bpecore.load_hf(tmp_path / "tokenizer.json")
    for corpus in ("english", "code"):
        text = read_corpus(corpus)[:400_000]
        want = tok.encode(text, add_special_tokens=False).ids
        assert enc.encode_long(text, num_threads=2) == want
        assert enc.encode_long(text, num_threads=3) == want
        assert enc.count(text, num_threads=4) == len(want)

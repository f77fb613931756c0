"""Exact operations against brute force: split_at, split_at_end, count_till_limit, intervals, streams.

Brute force is ``enc.count`` on the slice: what sending that text on its own costs.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from tests.conftest import ADVERSARIAL_CHARS, CORPORA, exact_encoding

encoding = exact_encoding


#: Open-model patterns over cl100k's vocab: their scanners under every exact operation.
OPEN = ["llama3_pattern", "qwen2_pattern", "tekken_pattern", "deepseek3_pattern"]
ALL = ["cl100k_base", "o200k_base", "r50k_pattern", "cl100k_nopattern", "toy", *OPEN]
FAST = ["cl100k_base", "o200k_base", "cl100k_nopattern"]


def check_split(enc, text, n):
    k = enc.split_at(text, n)
    assert enc.count(text[:k]) <= n
    # maximal: no longer prefix fits (checked over the next 60 characters and the whole text)
    for j in range(k + 1, min(len(text), k + 60) + 1):
        assert enc.count(text[:j]) > n, (n, k, j)
    if k < len(text):
        assert enc.count(text) > n or len(text) > k + 60


def check_split_end(enc, text, n):
    k = enc.split_at_end(text, n)
    assert enc.count(text[k:]) <= n
    for j in range(max(0, k - 60), k):
        assert enc.count(text[j:]) > n, (n, k, j)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", *OPEN])
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_split_on_corpora(name, corpus_name, corpus):
    enc = encoding(name)
    text = corpus(corpus_name)[:6000]
    for n in (0, 1, 2, 3, 7, 50, 333):
        check_split(enc, text, n)
        check_split_end(enc, text, n)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", *OPEN])
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_intervals_on_corpora(name, corpus_name, corpus):
    enc = encoding(name)
    text = corpus(corpus_name)[:50_000]
    ic = enc.interval_counter(text)
    rng = random.Random(corpus_name)
    pairs = []
    for _ in range(300):
        i = rng.randrange(len(text) + 1)
        j = min(len(text), i + rng.choice([0, 1, 2, 3, 10, 50, 400, 5000]))
        assert ic.count(i, j) == enc.count(text[i:j]), (i, j)
        pairs.append((i, j))
    assert ic.count_many(pairs) == [ic.count(i, j) for i, j in pairs]
    assert ic.count(0, len(text)) == enc.count(text) == ic.total


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", *OPEN])
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_appending_on_corpora(name, corpus_name, corpus):
    enc = encoding(name)
    text = corpus(corpus_name)[:3000]
    data = text.encode("utf-8")
    rng = random.Random(corpus_name)
    ac = enc.appendable_counter()
    pos = 0
    while pos < len(data):
        step = rng.choice([1, 1, 1, 2, 3, 5, 17, 100])
        got = ac.push(data[pos : pos + step])
        pos += step
        done = ac.bytes.decode("utf-8")
        assert got == enc.count(done)
    assert ac.text == text and ac.count == enc.count(text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern", *OPEN])
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_appending_one_character_at_a_time(name, corpus_name, corpus):
    # the str path with its shortcuts (word ends, space + letter) and the memo of short pieces;
    # the reference counts every prefix, so compare at every 7th push and at each word end
    enc = encoding(name)
    text = corpus(corpus_name)[:2500]
    ac = enc.appendable_counter()
    for k, ch in enumerate(text):
        got = ac.push(ch)
        if k % 7 == 0 or not ch.isalnum():
            assert got == enc.count(text[: k + 1]), k
    assert ac.count == enc.count(text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern", *OPEN])
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_every_character_push_on_corpora(name, corpus_name, corpus):
    # push_ascii's fast paths (a letter lengthening a word, space + letter, a word's end) and the
    # memo's last tokens, checked after every push
    enc = encoding(name)
    text = corpus(corpus_name)[:1200]
    check_character_pushes(enc, text)


def check_character_pushes(enc, text):
    """Push ``text`` a character at a time as str (the fast paths) and as bytes (``c_push``'s
    general path): both counts equal ``enc.count`` of the text so far after every push, and the
    two engines are in the same state (the counts alone cannot see a wrong cut where BPE gives
    the same number of tokens either way)."""
    fast = enc.appendable_counter()
    general = enc.appendable_counter()
    for k, ch in enumerate(text):
        assert fast.push(ch) == general.push(ch.encode("utf-8")) == enc.count(text[: k + 1]), k
        assert fast._state() == general._state(), k


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "cl100k_nopattern"])
@pytest.mark.parametrize("corpus_name", ["english", "multilingual", "adv_whitespace", "adv_digits"])
def test_prepending_on_corpora(name, corpus_name, corpus):
    enc = encoding(name)
    text = corpus(corpus_name)[:1500]
    pc = enc.prependable_counter()
    rng = random.Random(corpus_name)
    end = len(text)
    while end > 0:
        start = max(0, end - rng.choice([1, 1, 2, 4, 30]))
        assert pc.push(text[start:end]) == enc.count(text[start:])
        end = start
    assert pc.text == text


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("corpus_name", CORPORA)
def test_count_till_limit_on_corpora(name, corpus_name, corpus):
    enc = encoding(name)
    text = corpus(corpus_name)[:20_000]
    total = enc.count(text)
    for limit in (0, 1, 100, total - 1, total, total + 1):
        assert enc.count_till_limit(text, limit) == (total if total <= limit else None)


alphabet_text = st.lists(
    st.sampled_from(ADVERSARIAL_CHARS + ["ab", "cbb", "Hello", "don't", "'S", "123456", "  \n"]),
    max_size=60,
).map("".join)
texts = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=80), alphabet_text
)


@pytest.mark.parametrize("name", ALL)
@given(text=texts, n=st.integers(0, 30))
def test_hyp_split_at_is_largest_fitting_prefix(name, text, n):
    enc = encoding(name)
    k = enc.split_at(text, n)
    assert enc.count(text[:k]) <= n
    assert all(enc.count(text[:j]) > n for j in range(k + 1, len(text) + 1))


@pytest.mark.parametrize("name", ALL)
@given(text=texts, n=st.integers(0, 30))
def test_hyp_split_at_end_is_smallest_fitting_suffix(name, text, n):
    enc = encoding(name)
    k = enc.split_at_end(text, n)
    assert enc.count(text[k:]) <= n
    assert all(enc.count(text[j:]) > n for j in range(0, k))


@pytest.mark.parametrize("name", ALL)
@given(text=texts, data=st.data())
def test_hyp_interval_counts(name, text, data):
    enc = encoding(name)
    ic = enc.interval_counter(text)
    for _ in range(10):
        i = data.draw(st.integers(0, len(text)))
        j = data.draw(st.integers(i, len(text)))
        assert ic.count(i, j) == enc.count(text[i:j])


@pytest.mark.parametrize("name", ALL)
@given(text=texts, data=st.data())
def test_hyp_appending_equals_count_after_every_push(name, text, data):
    enc = encoding(name)
    raw = text.encode("utf-8")
    ac = enc.appendable_counter()
    pos = 0
    while pos < len(raw):
        step = data.draw(st.integers(1, 6))
        got = ac.push(raw[pos : pos + step])
        pos += step
        assert got == enc.count(ac.text)
    assert ac.text == text


@pytest.mark.parametrize("name", ALL)
@given(text=texts)
def test_hyp_appending_characters_equals_count(name, text):
    # one str character per push: the path the shortcuts and the short-piece memo serve
    enc = encoding(name)
    ac = enc.appendable_counter()
    for k, ch in enumerate(text):
        assert ac.push(ch) == enc.count(text[: k + 1])


#: The characters that decide the patterns' cuts: letters of every case class (Lu Ll Lt Lm Lo),
#: marks, digits, apostrophes and contraction letters, whitespace with CR/LF, punctuation, and
#: runs that reach the memo's 16-byte limit.
PATTERN_CHARS = [
    "a",
    "e",
    "s",
    "t",
    "d",
    "m",
    "l",
    "r",
    "v",
    "A",
    "S",
    "Z",
    "é",
    "É",
    "ǅ",
    "ʰ",
    "中",
    "ק",
    "\u0301",
    "0",
    "7",
    "٣",
    "'",
    "’",
    " ",
    " ",
    " ",
    "\t",
    "\n",
    "\r",
    "\x0b",
    "\x1c",
    "\u00a0",
    "\u3000",
    ".",
    ",",
    "!",
    "(",
    "/",
    "-",
    "_",
    "😀",
    "hello",
    "World",
    "abcdefghijklmno",
    # DeepSeek V3's classes: kana, CJK punctuation, an unassigned kana code point, a mark inside
    # the CJK set, a control, Cf, symbols
    "あ",
    "・",
    "\u3040",
    "\u3099",
    "\x00",
    "\u200d",
    "©",
    "€",
]
pattern_text = st.lists(st.sampled_from(PATTERN_CHARS), max_size=40).map("".join)


@pytest.mark.parametrize(
    "name", ["cl100k_base", "o200k_base", "r50k_pattern", "cl100k_nopattern", *OPEN]
)
@given(text=pattern_text)
def test_hyp_character_pushes_on_pattern_characters(name, text):
    check_character_pushes(encoding(name), text)


SCANNED = ["CL100K_PATTERN", "O200K_PATTERN", "R50K_PATTERN"]
SCANNED += ["LLAMA3_PATTERN", "QWEN2_PATTERN", "TEKKEN_PATTERN", "DEEPSEEK3_PATTERN"]


@pytest.mark.parametrize("pattern", SCANNED)
@given(text=st.one_of(pattern_text, texts), extra=pattern_text)
@example(text="'r", extra="e")  # r50k: "'" is the piece until "e" makes it "'re"
@example(text="\nxy.", extra="")
def test_hyp_piece_horizon_bounds_what_decides_a_piece(pattern, text, extra):
    # every piece cut from the text is cut the same from any text that agrees with it up to the
    # piece's horizon: the text cut at a character boundary at or after it, or the text extended
    import regex

    from bpecore import pretokenize

    source = getattr(pretokenize, pattern)
    compiled = regex.compile(source)
    kind = pretokenize.pattern_kind(source)
    raw = text.encode("utf-8")
    offsets = [len(text[:i].encode("utf-8")) for i in range(len(text) + 1)]
    for m in compiled.finditer(text):
        s, e = m.span()
        h = pretokenize._piece_horizon(kind, raw, offsets[s], offsets[e])
        for k in range(e, len(text) + 1):
            if offsets[k] >= h:
                assert compiled.match(text[:k], s).end() == e, (s, e, k)
        if h <= len(raw):
            for more in [extra] + PATTERN_CHARS:
                assert compiled.match(text + more, s).end() == e, (s, e, more)


@pytest.mark.parametrize("name", ALL)
@given(text=texts, data=st.data())
def test_hyp_prepending_equals_count_after_every_push(name, text, data):
    enc = encoding(name)
    pc = enc.prependable_counter()
    end = len(text)
    while end > 0:
        start = max(0, end - data.draw(st.integers(1, 5)))
        assert pc.push(text[start:end]) == enc.count(text[start:])
        end = start


@pytest.mark.parametrize("name", ALL)
@given(text=texts, limit=st.integers(0, 40))
def test_hyp_count_till_limit(name, text, limit):
    enc = encoding(name)
    total = enc.count(text)
    assert enc.count_till_limit(text, limit) == (total if total <= limit else None)


def test_custom_pattern_falls_back_exactly():
    enc = encoding("cl100k_words")
    text = "hello  world, this is\n a test"
    for n in range(0, 9):
        check_split(enc, text, n)
        check_split_end(enc, text, n)
        assert enc.count_till_limit(text, n) == (enc.count(text) if enc.count(text) <= n else None)
    ic = enc.interval_counter(text)
    assert all(
        ic.count(i, j) == enc.count(text[i:j])
        for i in range(len(text))
        for j in range(i, len(text), 3)
    )
    ac = enc.appendable_counter()
    for i, ch in enumerate(text):
        assert ac.push(ch) == enc.count(text[: i + 1])


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_long_runs_stream_linearly_and_exactly(name):
    # each of these used to re-cut the whole run per character somewhere (quadratic)
    enc = encoding(name)
    for text in (
        "a" * 30_000,
        " " * 20_000,
        "Hello" + "x" * 20_000,
        "\n" * 5000 + "  " * 5000,
        "-" * 20_000,
        " =" + "=" * 20_000,
        "\n " * 10_000,
        "aB" * 10_000,
        "(" + "z" * 20_000,
    ):
        ac = enc.appendable_counter()
        for ch in text:
            ac.push(ch)
        assert ac.count == enc.count(text)
        assert enc.split_at(text[:3000], 100) == _brute_split(enc, text[:3000], 100)


def _brute_split(enc, text, n):
    best = 0
    for k in range(len(text) + 1):
        if enc.count(text[:k]) <= n:
            best = k
        elif k > best + 400:
            break
    return best


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize(
    "text", [" \xa0don't", "\xa0don't", "  \n x", "ABCd'LL", "a\u0301\u0301b", "12345 6"]
)
def test_pinned_stream_cases(name, text):
    # " \xa0don't": a whitespace character of two bytes before a word once made a piece look stable
    enc = encoding(name)
    raw = text.encode("utf-8")
    for step in (1, 2, 3):
        ac = enc.appendable_counter()
        for pos in range(0, len(raw), step):
            assert ac.push(raw[pos : pos + step]) == enc.count(ac.text)


@pytest.mark.slow
@pytest.mark.parametrize("name", ALL)
@settings(max_examples=5000)
@given(text=texts, data=st.data())
def test_hyp_appending_many_examples(name, text, data):
    test_hyp_appending_equals_count_after_every_push.hypothesis.inner_test(name, text, data)
    test_hyp_appending_characters_equals_count.hypothesis.inner_test(name, text)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern", *OPEN])
@settings(max_examples=5000)
@given(text=pattern_text)
def test_hyp_character_pushes_many_examples(name, text):
    test_hyp_character_pushes_on_pattern_characters.hypothesis.inner_test(name, text)


@pytest.mark.slow
@pytest.mark.parametrize("pattern", SCANNED)
@settings(max_examples=5000)
@given(text=st.one_of(pattern_text, texts), extra=pattern_text)
def test_hyp_piece_horizon_many_examples(pattern, text, extra):
    test_hyp_piece_horizon_bounds_what_decides_a_piece.hypothesis.inner_test(pattern, text, extra)


def test_errors():
    enc = encoding("cl100k_base")
    with pytest.raises(ValueError):
        enc.split_at("abc", -1)
    ic = enc.interval_counter("abc")
    with pytest.raises(IndexError):
        ic.count(2, 1)
    with pytest.raises(IndexError):
        ic.count(0, 4)
    ac = enc.appendable_counter()
    ac.push("ok")
    with pytest.raises(ValueError, match="invalid UTF-8"):
        ac.push(b"\xff")
    assert ac.push(b"\xe4\xb8") == 1 and ac.pending_bytes == b"\xe4\xb8"
    assert ac.push(b"\xad") == enc.count("ok中")
    assert enc.count_till_limit("abc", -1) is None


def test_surrogates_are_replaced_like_count():
    enc = encoding("cl100k_base")
    text = "ab\ud800cd"
    assert enc.split_at(text, 100) == len(text)
    assert enc.interval_counter(text).count(0, 5) == enc.count(text)


@pytest.mark.parametrize("name", ["cl100k_base", "cl100k_words"])
def test_counters_refuse_what_is_not_text(name):
    # a push is str or bytes: an int is not five NUL bytes (bytes(5)), at either end
    enc = encoding(name)
    for counter, after in ((enc.appendable_counter(), "abcd"), (enc.prependable_counter(), "cdab")):
        counter.push("ab")
        for bad in (5, None, [1, 2]):
            with pytest.raises(TypeError, match="push takes str or bytes"):
                counter.push(bad)
        assert counter.count == enc.count("ab") and counter.bytes == b"ab"
        assert counter.push(bytearray(b"cd")) == enc.count(after)

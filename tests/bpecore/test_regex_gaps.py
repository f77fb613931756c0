"""Custom patterns whose matches leave characters out: tiktoken encodes only the matches, so a
character no match covers is in no piece and costs no token, for every operation.

The reference is the BPE (tiktoken's) of each non-empty match of the `regex` module, the text cut
at allowed special tokens first; for patterns without empty matches it is also checked to be
tiktoken's own ``encode`` (tiktoken refuses empty matches: its splitter panics on them).
"""

from __future__ import annotations

import functools
import random

import pytest
import regex
from hypothesis import example, given
from hypothesis import strategies as st

import bpecore
from tests.conftest import shared_ranks

SPECIAL = "<|e|>"
SPECIALS = {SPECIAL: 100257}

#: Patterns that leave gaps (at the start, in the middle, at the end, around the special token)
#: and never match the empty string: tiktoken runs them too.
GAP_PATTERNS = [
    r"[a-z]+",
    r"\w+",
    r" ?\p{L}+|\d{1,3}",
    r"\S+",
    r"[a-z]+(?= )|\d",
    r"(?<=_)[a-z]+|\d+",
]
#: Patterns that also match the empty string (empty matches are skipped).
EMPTY_PATTERNS = [r"[a-z]*", r"\w*|\s"]
PATTERNS = GAP_PATTERNS + EMPTY_PATTERNS

FIXED = [
    "ab_cd",
    "__ab cd__",
    "_",
    "",
    "x" + SPECIAL + "__y",
    SPECIAL + "  " + SPECIAL,
    "12345 hello, World!",
    "  héllo wörld 中文 😀 _x_ 1234567\n\tend.",
    "The quick brown fox -- jumps over 13 lazy dogs; _ok_?  ",
    "_" * 300 + "ab" + "." * 200 + "cd" + " " * 100,
]

PARTS = [
    "a", "b", "z", "Q", "é", "中", "😀", "_", "__", " ", "  ", "\n", "\t", "0", "12345", ".", ",!",
    "-", SPECIAL, "hello", " world", "_ab",
]  # fmt: skip
texts = st.lists(st.sampled_from(PARTS), max_size=30).map("".join)
patterns = st.sampled_from(PATTERNS)


@functools.cache
def ranks() -> dict[bytes, int]:
    return shared_ranks("cl100k_base")


@functools.cache
def encoding(pattern: str) -> bpecore.Encoding:
    enc = bpecore.Encoding("gaps", ranks(), pattern, SPECIALS)
    from bpecore.prefix import KIND_REGEX

    assert enc._core.kind == KIND_REGEX
    return enc


@functools.cache
def tiktoken_twin(pattern: str):
    tiktoken = pytest.importorskip("tiktoken")
    return tiktoken.Encoding(
        "gaps", pat_str=pattern, mergeable_ranks=ranks(), special_tokens=SPECIALS
    )


@functools.cache
def ref_ordinary(pattern: str, text: str) -> tuple[int, ...]:
    tt = tiktoken_twin(pattern)
    out: list[int] = []
    for m in regex.finditer(pattern, text):
        if m.group():
            out += tt._encode_single_piece(m.group().encode("utf-8"))
    return tuple(out)


def ref_count(pattern: str, text: str) -> int:
    return len(ref_ordinary(pattern, text))


def ref_encode(pattern: str, text: str) -> list[int]:
    """``encode(text, allowed_special="all")``: the ordinary parts between special tokens."""
    out: list[int] = []
    for i, part in enumerate(text.split(SPECIAL)):
        if i:
            out.append(SPECIALS[SPECIAL])
        out += ref_ordinary(pattern, part)
    if pattern in GAP_PATTERNS:
        assert out == tiktoken_twin(pattern).encode(text, allowed_special="all")
    return out


def check_encodings(pattern: str, text: str) -> None:
    enc = encoding(pattern)
    want = list(ref_ordinary(pattern, text))
    if pattern in GAP_PATTERNS:
        assert want == tiktoken_twin(pattern).encode_ordinary(text)
    assert enc.encode_ordinary(text) == want, (pattern, text)
    assert list(enc.encode_to_buffer(text, disallowed_special=())) == want
    assert enc.count(text) == len(want)
    assert enc.encode(text, allowed_special="all") == ref_encode(pattern, text)
    for limit in (0, 1, len(want) - 1, len(want), len(want) + 3):
        got = enc.count_till_limit(text, limit)
        assert got == (len(want) if len(want) <= limit else None), (pattern, text, limit)


def check_batches(pattern: str, batch: list[str]) -> None:
    enc = encoding(pattern)
    want = [list(ref_ordinary(pattern, t)) for t in batch]
    for threads in (1, 2):
        assert enc.encode_ordinary_batch(batch, num_threads=threads) == want
        assert enc.count_batch(batch, num_threads=threads) == [len(w) for w in want]
        assert enc.encode_batch(batch, num_threads=threads, allowed_special="all") == [
            ref_encode(pattern, t) for t in batch
        ]


def check_splits(pattern: str, text: str, limits) -> None:
    enc = encoding(pattern)
    counts_head = [ref_count(pattern, text[:k]) for k in range(len(text) + 1)]
    counts_tail = [ref_count(pattern, text[k:]) for k in range(len(text) + 1)]
    for n in limits:
        want = max(k for k, c in enumerate(counts_head) if c <= n)
        assert enc.split_at(text, n) == want, (pattern, text, n)
        want = min(k for k, c in enumerate(counts_tail) if c <= n)
        assert enc.split_at_end(text, n) == want, (pattern, text, n)


def check_intervals(pattern: str, text: str, ranges) -> None:
    enc = encoding(pattern)
    ic = enc.interval_counter(text)
    want = [ref_count(pattern, text[i:j]) for i, j in ranges]
    assert [ic.count(i, j) for i, j in ranges] == want, (pattern, text)
    assert ic.count_many(ranges) == want


def check_streams(pattern: str, text: str, rng: random.Random) -> None:
    """Pushed in random-sized parts, some as bytes cut inside a character."""
    enc = encoding(pattern)
    data = text.encode("utf-8")
    app = enc.appendable_counter()
    pos = 0
    while pos < len(data):
        stop = min(len(data), pos + rng.randint(1, 7))
        part = data[pos:stop]
        if rng.random() < 0.5 or (data[pos] & 0xC0) == 0x80:  # a str starts on a character
            got = app.push(part)
        else:
            while stop < len(data) and (data[stop] & 0xC0) == 0x80:
                stop += 1
            got = app.push(data[pos:stop].decode("utf-8"))
        pos = stop
        done = data[:pos].decode("utf-8", "ignore")
        assert got == app.count == ref_count(pattern, done), (pattern, text, pos)
    pre = enc.prependable_counter()
    end = len(text)
    while end > 0:
        start = max(0, end - rng.randint(1, 7))
        assert pre.push(text[start:end]) == ref_count(pattern, text[start:]), (pattern, text)
        end = start


def check_chunks(pattern: str, text: str) -> None:
    enc = encoding(pattern)
    chunks = list(bpecore.chunk(text, enc, max_tokens=3, trim=False))
    for chunk in chunks:
        assert text[chunk.start : chunk.end] == chunk.text
        assert chunk.tokens == ref_count(pattern, chunk.text) <= 3, (pattern, text, chunk)
    assert "".join(c.text for c in chunks) == text


# ------------------------------------------------------------------------------ fixed strings


@pytest.mark.parametrize("pattern", PATTERNS)
def test_gaps_encode_like_tiktoken(pattern):
    for text in FIXED:
        check_encodings(pattern, text)


@pytest.mark.parametrize("pattern", GAP_PATTERNS[:3])
def test_gaps_in_long_texts(pattern, corpus):
    # Past 4 KB encode_text keeps a cache of the call and the shared one learns the pieces: long
    # texts with thousands of gaps, each stretch between two gaps encoded on its own, and the
    # same text again (its pieces now from the shared cache).
    enc = encoding(pattern)
    for name in ("english", "code", "multilingual"):
        text = corpus(name)[:40_000]
        want = list(ref_ordinary(pattern, text))
        assert want == tiktoken_twin(pattern).encode_ordinary(text)
        for _ in range(2):
            assert enc.encode_ordinary(text) == want, (pattern, name)
            assert enc.count(text) == len(want)
        assert enc.count_batch([text, text[:5000]], num_threads=2) == [
            len(want),
            ref_count(pattern, text[:5000]),
        ]


def test_gap_joined_to_next_piece_is_dropped():
    # the `regex` module matches "ab" and "cd": the "_" between them is in no piece
    enc = encoding(r"[a-z]+")
    assert enc.encode_ordinary("ab_cd") == tiktoken_twin(r"[a-z]+").encode_ordinary("ab_cd")
    assert enc.encode_ordinary("ab_cd") == enc.encode_ordinary("ab") + enc.encode_ordinary("cd")
    assert enc.count("__ab cd__") == 2


@pytest.mark.parametrize("pattern", PATTERNS)
def test_gaps_batches(pattern):
    check_batches(pattern, FIXED + [t * 40 for t in FIXED])


@pytest.mark.parametrize("pattern", PATTERNS)
def test_gaps_split_at_brute_force(pattern):
    for text in FIXED[:-1]:
        check_splits(pattern, text, range(0, 8))


@pytest.mark.parametrize("pattern", [r"[a-z]+", r" ?\p{L}+|\d{1,3}"])
def test_gaps_split_at_past_long_gaps(pattern):
    # uncovered text costs nothing, so a split reaches past any amount of it: the window of
    # text that may fit is measured in covered bytes, not in bytes
    enc = encoding(pattern)
    for gap in ("_" * 5000, "." * 700 + "\n" * 700):
        text = "ab" + gap + "cd" + gap
        assert enc.count(text) == 2
        assert enc.split_at(text, 1) == 2 + len(gap)
        assert enc.split_at(text, 2) == len(text)
        assert enc.split_at_end(text, 1) == 2
        assert enc.split_at_end(text, 0) == 2 + len(gap) + 2
        assert enc.split_at_end(text, 2) == 0


@pytest.mark.parametrize("pattern", PATTERNS)
def test_gaps_intervals(pattern):
    for text in FIXED[:-1]:
        ranges = [(i, j) for i in range(len(text) + 1) for j in range(i, len(text) + 1)]
        check_intervals(pattern, text, ranges)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_gaps_streams(pattern):
    rng = random.Random(7)
    for text in FIXED:
        check_streams(pattern, text, rng)


@pytest.mark.parametrize("pattern", PATTERNS)
def test_gaps_chunks(pattern):
    for text in FIXED:
        check_chunks(pattern, text)


# ------------------------------------------------------------------------------ generated text


@given(pattern=patterns, text=texts)
@example(pattern=r"[a-z]+", text="ab_cd")
def test_hyp_gaps_encode(pattern, text):
    check_encodings(pattern, text)


@given(pattern=patterns, batch=st.lists(texts, max_size=6))
def test_hyp_gaps_batches(pattern, batch):
    check_batches(pattern, batch)


@given(pattern=patterns, text=texts, limits=st.lists(st.integers(0, 12), min_size=1, max_size=3))
@example(pattern=r"[a-z]+", text="ab_cd", limits=[1])
def test_hyp_gaps_split_at(pattern, text, limits):
    check_splits(pattern, text, limits)


@given(pattern=patterns, text=texts, data=st.data())
@example(pattern=r"[a-z]+", text="ab_cd", data=None)
def test_hyp_gaps_intervals(pattern, text, data):
    if data is None:
        ranges = [(0, 5), (1, 5), (2, 5), (0, 4)]
    else:
        bound = st.integers(0, len(text))
        ranges = [
            tuple(sorted(r)) for r in data.draw(st.lists(st.tuples(bound, bound), max_size=20))
        ]
    check_intervals(pattern, text, ranges)


@given(pattern=patterns, text=texts, seed=st.integers(0, 2**16))
@example(pattern=r"[a-z]+", text="ab_cd", seed=0)
def test_hyp_gaps_streams(pattern, text, seed):
    check_streams(pattern, text, random.Random(seed))

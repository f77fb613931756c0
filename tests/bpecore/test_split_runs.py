"""split_at and split_at_end on runs (one repeated byte or character), checked by brute force.

A run is one long piece, the worst case of both scans; every n from 0 past the whole count is
compared with the definitions over encode (DESIGN.md): split_at is the largest k with
count(text[:k]) <= n, split_at_end the smallest k with count(text[k:]) <= n.
"""

import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore

FILLS = ["a", " ", "7", "\n", "日", "é", "ab cd ", "!"]
#: Runs of one non-ASCII character of every class the scanners tell apart: upper and lower case,
#: a mark, Unicode whitespace, punctuation, a symbol of four UTF-8 bytes, and numerals (a decimal
#: digit, a letter-like numeral, another numeral), which the split_at_end run shortcut leaves out.
WIDE_FILLS = ["Ä", "ß", "\u0301", "\u3000", "\u00a0", "…", "😀", "٣", "Ⅻ", "①"]
SHAPES = [
    ("", ""),
    ("b", ""),
    ("", " x"),
    ("Hello ", "."),
]


@pytest.fixture(scope="module", params=["cl100k_base", "o200k_base"])
def enc(request):
    return bpecore.get_encoding(request.param)


def _qwen2_kind():
    """Qwen2's pattern (single digits, o200k's whitespace) over cl100k's ranks: its scanner kind."""
    from bpecore.pretokenize import QWEN2_PATTERN

    base = bpecore.get_encoding("cl100k_base")
    return bpecore.Encoding("qwen2-pattern", base._mergeable_ranks, QWEN2_PATTERN, {})


#: Every scanner kind whose split_at_end takes the run shortcut.
_KINDS = {
    "cl100k_base": lambda: bpecore.get_encoding("cl100k_base"),
    "o200k_base": lambda: bpecore.get_encoding("o200k_base"),
    "r50k_base": lambda: bpecore.get_encoding("r50k_base"),
    "tekken": lambda: bpecore.get_encoding("tekken"),
    "qwen2": _qwen2_kind,
    "deepseek3": lambda: _deepseek3_kind(),
}


def _deepseek3_kind():
    from tests.conftest import exact_encoding

    return exact_encoding("deepseek3_pattern")


@pytest.fixture(scope="module", params=sorted(_KINDS))
def kind_enc(request):
    return _KINDS[request.param]()


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


@pytest.mark.parametrize("fill", WIDE_FILLS)
@pytest.mark.parametrize("head,tail", SHAPES)
def test_wide_runs_every_n(kind_enc, fill, head, tail):
    """Runs of a non-ASCII character share their piece end like ASCII ones (numerals excepted):
    every n against the definitions, on every kind with the shortcut."""
    for m in (1, 2, 3, 5, 8, 17):
        _check_all_n(kind_enc, head + fill * m + tail)


@pytest.mark.parametrize("fill", ["a", " ", "7", "日", "😀"])
def test_long_run_sampled_n(enc, fill):
    # past the 32-byte threshold of the run path and several periods of its last tokens
    text = "b" + fill * 400 + " x"
    suffix = [len(enc.encode(text[k:])) for k in range(len(text) + 1)]
    prefix = [len(enc.encode(text[:k])) for k in range(len(text) + 1)]
    for n in (0, 1, 2, 3, 7, 13, 50, 99, 200, max(suffix)):
        assert enc.split_at_end(text, n) == min(k for k, c in enumerate(suffix) if c <= n), n
        assert enc.split_at(text, n) == max(k for k, c in enumerate(prefix) if c <= n), n


#: Runs of these, in any order and length, joined: letters of both cases, digits (cut in triples
#: that fall out of phase with a run's start), whitespace and line breaks, punctuation and the
#: apostrophe of the contractions, a non-ASCII letter and a CJK character.
_RUN_CHARS = "aAs'7 \n\r\t!.é日Ä\u0301\u3000…😀٣ア。\x01"


@settings(max_examples=150, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(_RUN_CHARS), st.integers(1, 12)), min_size=1, max_size=6
    ),
    name=st.sampled_from(sorted(_KINDS)),
)
def test_hyp_joined_runs_every_n(runs, name):
    """split_at_end reuses a run's piece end and every position's count within one call:
    joined runs of every class against the definitions, every n."""
    _check_all_n(_encoding(name), "".join(c * m for c, m in runs))


_MADE: dict = {}


def _encoding(name):
    if name not in _MADE:
        _MADE[name] = _KINDS[name]()
    return _MADE[name]


@pytest.mark.parametrize("fill", ["a", " ", "7", "\n", "!", "日", "é", "\u3000", "😀", "٣"])
def test_split_at_end_linear_in_n(enc, fill):
    """1 MB of one character: split_at_end at n = 10,000 costs about 10x n = 1,000 (it
    was 100x: each candidate in the window re-read the run, or re-cut digit triples out of
    phase with the reference cut, to the window's end). Process time, generous bound."""
    text = fill * 1_000_000
    times = []
    for n in (1000, 10000):
        t0 = time.process_time()
        enc.split_at_end(text, n)
        times.append(time.process_time() - t0)
    assert times[1] < max(40 * times[0], 0.05), times


@settings(max_examples=100, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(_RUN_CHARS), st.integers(1, 12)), min_size=1, max_size=6
    ),
    name=st.sampled_from(sorted(_KINDS)),
)
def test_hyp_appending_runs(runs, name):
    """The appending counter, one character at a time over joined runs (r50k's numbers extend
    their piece without a re-cut), equals the count of every prefix."""
    enc = _encoding(name)
    text = "".join(c * m for c, m in runs)
    counter = enc.appendable_counter()
    for k, char in enumerate(text, 1):
        assert counter.push(char) == enc.count(text[:k]), (text, k)


@pytest.mark.parametrize("fill", ["7", "٣"])
def test_r50k_numbers_linear(fill):
    """r50k cuts `` ?\\p{N}+``: 1 MB of one numeral is one piece. split_at and split_at_end at
    n = 10,000 cost about 10x n = 1,000 (each candidate re-cut the run: 0.5-0.8 s at n = 1000 on
    100-200 KB), and pushing it a character at a time stays linear."""
    enc = bpecore.get_encoding("r50k_base")
    text = fill * 1_000_000
    for op in (enc.split_at, enc.split_at_end):
        times = []
        for n in (1000, 10000):
            t0 = time.process_time()
            op(text, n)
            times.append(time.process_time() - t0)
        assert times[1] < max(40 * times[0], 0.05), (op.__name__, times)
    times = []
    for size in (100_000, 400_000):
        counter = enc.appendable_counter()
        t0 = time.process_time()
        for char in text[:size]:
            counter.push(char)
        times.append(time.process_time() - t0)
        assert counter.count == enc.count(text[:size])
    assert times[1] < 10 * times[0], times


@settings(max_examples=100, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from("日一アー・ゝ。7 a\n.é"), st.integers(1, 9)),
        min_size=1,
        max_size=6,
    )
)
def test_hyp_appending_deepseek3_cjk_runs(runs):
    """DeepSeek V3's pattern: a run of its CJK set (kana, ideographs, their punctuation and
    marks) is one piece that a CJK character extends without a re-cut; against the count of
    every prefix."""
    from tests.conftest import exact_encoding

    enc = exact_encoding("deepseek3_pattern")
    text = "".join(c * m for c, m in runs)
    counter = enc.appendable_counter()
    for k, char in enumerate(text, 1):
        assert counter.push(char) == enc.count(text[:k]), (text, k)


def test_deepseek3_cjk_stream_linear():
    """1 MB-class runs of a CJK character pushed one at a time: linear (each push re-cut the
    run before)."""
    from tests.conftest import exact_encoding

    enc = exact_encoding("deepseek3_pattern")
    times = []
    for size in (50_000, 200_000):
        counter = enc.appendable_counter()
        t0 = time.process_time()
        for char in "日" * size:
            counter.push(char)
        times.append(time.process_time() - t0)
        assert counter.count == enc.count("日" * size)
    assert times[1] < 10 * max(times[0], 0.01), times


@settings(max_examples=100, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(_RUN_CHARS), st.integers(1, 12)), min_size=1, max_size=6
    ),
    name=st.sampled_from(sorted(_KINDS)),
)
def test_hyp_prepending_runs(runs, name):
    """The prepending counter, one character at a time in front over joined runs (a run at the
    front lengthened through its first-token table; digit triples that shift with each digit
    meeting a recorded suffix count), equals the count of every suffix."""
    enc = _encoding(name)
    text = "".join(c * m for c, m in runs)
    counter = enc.prependable_counter()
    for k in range(len(text) - 1, -1, -1):
        assert counter.push(text[k]) == enc.count(text[k:]), (text, k)


@pytest.mark.parametrize("fill", ["a", " ", "7", "日", "\n", "ab cd "])
def test_prepending_linear(enc, fill):
    """One character pushed in front at a time: 4x the characters cost about 4x (a run at the
    front was cut and encoded whole at each push; digits re-cut to the run's end)."""
    times = []
    for size in (20_000, 80_000):
        text = (fill * size)[:size]
        counter = enc.prependable_counter()
        t0 = time.process_time()
        for char in reversed(text):
            counter.push(char)
        times.append(time.process_time() - t0)
        assert counter.count == enc.count(text)
    assert times[1] < 10 * max(times[0], 0.01), times


def test_prepending_without_pattern():
    """No pattern: the whole text is one piece, lengthened in front through its table."""
    from tests.conftest import exact_encoding

    enc = exact_encoding("cl100k_nopattern")
    text = "hello world, " * 300
    counter = enc.prependable_counter()
    for k in range(len(text) - 1, -1, -7):
        start = max(0, k - 6)
        assert counter.push(text[start : k + 1]) == enc.count(text[start:]), k

"""IntervalCounter's query paths against brute force (``enc.count`` of the slice).

The single-query path keeps per-counter buffers and a cache of the head of a repeated slice
start (``_Head`` in interval.pyx); these tests send query sequences that hit and miss that cache:
starts and ends repeated, in chunker-like order, across the GIL_BYTES switch, and from threads.
"""

from __future__ import annotations

import random
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.conftest import ADVERSARIAL_CHARS, exact_encoding

GIL_BYTES = 16384  # interval.pyx: single count() calls hold the GIL up to this slice length

encoding = exact_encoding


ALL = ["cl100k_base", "o200k_base", "r50k_pattern", "cl100k_nopattern", "toy"]

alphabet_text = st.lists(
    st.sampled_from(
        ADVERSARIAL_CHARS
        + ["ab", "cbb", "Hello", " world", "don't", "'S", "123456", "  \n", "中文字"]
    ),
    max_size=60,
).map("".join)
texts = st.one_of(
    st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=80), alphabet_text
)


@pytest.mark.parametrize("name", ALL)
@given(text=texts, data=st.data())
def test_hyp_interval_counts_with_repeated_starts_and_ends(name, text, data):
    enc = encoding(name)
    ic = enc.interval_counter(text)
    n = len(text)
    starts = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=3))
    ends = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=4))
    picks = data.draw(
        st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=25)
    )
    pairs = []
    for si, ei in picks:
        i, j = sorted((starts[si % len(starts)], ends[ei % len(ends)]))
        assert ic.count(i, j) == enc.count(text[i:j]), (i, j)
        pairs.append((i, j))
    assert ic.count_many(pairs) == [enc.count(text[i:j]) for i, j in pairs]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize(
    "corpus_name", ["english", "multilingual", "code", "adv_whitespace", "adv_unicode"]
)
def test_chunker_like_queries_on_corpora(name, corpus_name, corpus):
    """Many ends per start, moving out and back as a chunk search does; then the same as one batch."""
    enc = encoding(name)
    text = corpus(corpus_name)[:40_000]
    ic = enc.interval_counter(text)
    rng = random.Random(corpus_name)
    pairs = []
    for _ in range(40):
        i = rng.randrange(len(text))
        ends = [min(len(text), i + d) for d in (1, 7, 60, 400, 900, 650, 520, 540, 530, 535, 2)]
        for j in ends:
            assert ic.count(i, j) == enc.count(text[i:j]), (i, j)
            pairs.append((i, j))
    assert ic.count_many(pairs) == [ic.count(i, j) for i, j in pairs]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "cl100k_nopattern"])
def test_long_slices_release_the_gil_and_stay_exact(name, corpus):
    """Slices either side of GIL_BYTES, sharing starts, and inside a long run of one letter."""
    enc = encoding(name)
    text = corpus("english")[:30_000] + "a" * 40_000 + corpus("multilingual")[:20_000]
    ic = enc.interval_counter(text)
    for i in (0, 5, 29_990, 31_000):
        for length in (GIL_BYTES - 3, GIL_BYTES + 5, 20_000, 3, GIL_BYTES + 5):
            j = min(len(text), i + length)
            assert ic.count(i, j) == enc.count(text[i:j]), (i, j)


def test_threads_share_one_counter(corpus):
    """Concurrent single queries (short ones use the counter's buffers and head cache)."""
    enc = encoding("cl100k_base")
    text = corpus("multilingual")[:30_000]
    ic = enc.interval_counter(text)
    rng = random.Random(7)
    jobs = []
    for _ in range(4):
        starts = [rng.randrange(len(text)) for _ in range(6)]
        jobs.append(
            [
                (i, min(len(text), i + rng.choice([5, 50, 500, GIL_BYTES + 100])))
                for i in starts
                for _ in range(5)
            ]
        )
    expected = [[enc.count(text[i:j]) for i, j in job] for job in jobs]
    got: list[list[int]] = [[] for _ in jobs]

    def run(k):
        for _ in range(20):
            got[k] = [ic.count(i, j) for i, j in jobs[k]]

    threads = [threading.Thread(target=run, args=(k,)) for k in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert got == expected


# Every piece of 2..TABLE_MAX bytes keeps the counts of its prefixes and suffixes (interval.pyx,
# _piece_table); a repeated piece copies them from its first occurrence; runs with more than
# CAND_PER_BYTE tokens per byte and longer pieces keep none and are backtracked. These texts put
# slice ends inside each kind: long words, CJK runs, whitespace and digit runs, contractions.
TABLE_MAX = 1024
PIECE_TEXTS = [
    " internationalization 中华人民共和国的首都是北京 don't   \n\n  12345 ... ----- aaaa",
    "Hello world, hello world! The informational internationalization of informatics.",
    "東京都は日本の首都です。東京都は日本の首都です。 सूचना प्रौद्योगिकी Привет, мир!",
    "x = [1, 2, 3]\n\tif (a != b) { return 'c'; }\n" + " " * 40 + "end\r\n",
    "      " * 12 + "a" * 50 + "\n" * 7 + "=" * 30 + " abc",
]


@pytest.mark.parametrize("tables", [True, False], ids=["tables", "no_tables"])
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern"])
@pytest.mark.parametrize("text", PIECE_TEXTS, ids=range(len(PIECE_TEXTS)))
def test_every_slice_of_short_texts(name, text, tables):
    """All (i, j): every inner prefix/suffix count is read by some head or tail, through
    count_many (fresh head cache) and single count() (head cache built on each start); without
    the tables every partial piece is backtracked."""
    enc = encoding(name)
    ic = enc.interval_counter(text, piece_tables=tables)
    n = len(text)
    pairs = [(i, j) for i in range(n + 1) for j in range(i, n + 1)]
    expected = [enc.count(text[i:j]) for i, j in pairs]
    assert ic.count_many(pairs) == expected
    assert [ic.count(i, j) for i, j in pairs] == expected
    assert ic.total == enc.count(text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_pieces_past_the_table_limits(name):
    """A letter run longer than TABLE_MAX and one-character runs that give up the table."""
    enc = encoding(name)
    text = "start " + "ab" * (TABLE_MAX // 2 + 40) + " mid " + " " * 300 + "z" + "9" * 50 + " end"
    ic = enc.interval_counter(text)
    rng = random.Random(name)
    cuts = [
        0,
        3,
        6,
        7,
        300,
        TABLE_MAX + 1,
        TABLE_MAX + 87,
        TABLE_MAX + 90,
        len(text) - 360,
        len(text) - 200,
        len(text) - 58,
        len(text) - 30,
        len(text) - 2,
        len(text),
    ]
    cuts += [rng.randrange(len(text) + 1) for _ in range(30)]
    for i in cuts:
        for j in cuts:
            if i <= j:
                assert ic.count(i, j) == enc.count(text[i:j]), (i, j)


words = st.sampled_from(
    [
        "information",
        " information",
        "tion",
        " the",
        "中华人民",
        "共和国",
        "北京",
        " don't",
        "  ",
        "\n",
        "123456",
        "...",
        "ab",
        " x",
        "Σίσυφος",
        "🙂🙂",
        "\t",
    ]
)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern"])
@given(parts=st.lists(words, min_size=1, max_size=30), data=st.data())
def test_hyp_slices_ending_inside_repeated_pieces(name, parts, data):
    """Repeated words (their inner counts copied from the first occurrence), ends anywhere."""
    enc = encoding(name)
    text = "".join(parts)
    ic = enc.interval_counter(text)
    n = len(text)
    pairs = []
    for _ in range(12):
        i = data.draw(st.integers(0, n))
        j = data.draw(st.integers(i, n))
        pairs.append((i, j))
        assert ic.count(i, j) == enc.count(text[i:j]), (i, j)
    assert ic.count_many(pairs) == [enc.count(text[i:j]) for i, j in pairs]


# The chunker's searches (IntervalCounter.crossing, crossing_before, last_end_within) against the
# Python loops they replace (bpecore.chunker._CountSearches, which serves counters that only
# count), driven by counting each slice afresh: last_end_within asks the same probes in the same
# order, so it gives the same answers. crossing and crossing_before start from the piece that the
# pass's running counts name, so where counts are not monotonic they may meet another crossing
# than the gallop does: both are checked against the definition (and the chunks they lead to
# against split_at and split_at_end, test_chunker.py).
class _SliceCounts:
    def __init__(self, enc, text):
        self.enc, self.text = enc, text

    def count(self, i, j):
        return self.enc.count(self.text[i:j])

    def __len__(self):
        return len(self.text)


def check_searches(enc, ic, text, s, tokens, step):
    from bpecore.chunker import _CountSearches

    slow = _CountSearches(_SliceCounts(enc, text))
    count = slow.count
    n = len(text)
    lo = ic.crossing(s, tokens, step)
    assert s <= lo <= n and count(s, lo) <= tokens, (s, tokens, step)
    if lo < n:
        assert tokens < count(s, lo + 1), (s, tokens, step)
        stop = min(n, lo + 20)
        assert ic.last_end_within(s, tokens, lo + 2, stop) == slow.last_end_within(
            s, tokens, lo + 2, stop
        )
    e = min(n, s + step)
    for near in (ic.crossing_before(e, s, tokens, step), slow.crossing_before(e, s, tokens, step)):
        assert s <= near <= e and count(near, e) <= tokens, (e, s, tokens, step)
        assert near == s or tokens < count(near - 1, e), (e, s, tokens, step)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern", "cl100k_words"])
@pytest.mark.parametrize(
    "corpus_name", ["english", "multilingual", "code", "adv_whitespace", "adv_unicode"]
)
def test_searches_equal_their_loops_on_corpora(name, corpus_name, corpus):
    enc = encoding(name)
    text = corpus(corpus_name)[:20_000]
    ic = enc.interval_counter(text, piece_tables=False)
    rng = random.Random(corpus_name + name)
    for _ in range(25):
        s = rng.randrange(len(text))
        tokens = rng.choice([1, 5, 16, 128, 512])
        step = max(16, int(tokens * rng.uniform(1.0, 6.0) * 1.25))
        check_searches(enc, ic, text, s, tokens, step)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_pattern"])
@pytest.mark.parametrize("corpus_name", ["english", "multilingual", "code", "adv_whitespace"])
def test_last_end_within_on_windows_around_crossings(name, corpus_name, corpus):
    """last_end_within skips the ends whose count the stable pieces already put over ``tokens``
    (IntervalCounter._exceeds): every answer equal to asking each end, from a start whose head
    is cached (the crossing asked it first) and from one whose head is not."""
    enc = encoding(name)
    text = corpus(corpus_name)[:30_000]
    ic = enc.interval_counter(text, piece_tables=False)
    slow = _SliceCounts(enc, text)
    rng = random.Random(corpus_name + name + "within")
    n = len(text)
    for k in range(160):
        # the last 40 draws end at the text's end, where the last piece is stable up to its end
        s = rng.randrange(n - 1) if k < 120 else rng.randrange(n - 200, n - 1)
        tokens = rng.choice([1, 3, 16, 64])
        lo = ic.crossing(s, tokens, 64) if rng.random() < 0.8 else min(n, s + 20)
        first = max(s, lo + rng.randrange(-3, 3))
        stop = min(n, first + rng.randrange(0, 40)) if k < 120 else n
        want = next((e for e in range(stop, first - 1, -1) if slow.count(s, e) <= tokens), -1)
        assert ic.last_end_within(s, tokens, first, stop) == want, (s, tokens, first, stop)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "cl100k_nopattern", "toy"])
@given(text=texts, data=st.data())
def test_hyp_searches_equal_their_loops(name, text, data):
    enc = encoding(name)
    ic = enc.interval_counter(text, piece_tables=data.draw(st.booleans()))
    s = data.draw(st.integers(0, len(text)))
    check_searches(enc, ic, text, s, data.draw(st.integers(0, 40)), data.draw(st.integers(1, 50)))


def test_searches_reject_bad_arguments():
    ic = encoding("cl100k_base").interval_counter("one two three")
    with pytest.raises(ValueError):
        ic.crossing(14, 3, 16)
    with pytest.raises(ValueError):
        ic.crossing(0, 3, 0)
    with pytest.raises(ValueError):
        ic.crossing_before(5, 6, 3, 16)
    with pytest.raises(IndexError):
        ic.last_end_within(-1, 3, 0, 5)


# Without piece tables the pass takes each piece's count from the encoder's piece cache (the one
# count() fills), and backtracks and adds the pieces it lacks; with the cache off, from its own
# table of repeated pieces. Both must give count(slice), on a cold and a warm cache.
@pytest.mark.parametrize("corpus_name", ["english", "multilingual", "code", "adv_digits"])
def test_pass_without_tables_with_and_without_the_piece_cache(corpus_name, corpus):
    from bpecore import piececache

    enc = encoding("cl100k_base")
    text = corpus(corpus_name)[:60_000] + " " + "x" * 40 + " " + "é" * 40
    rng = random.Random(corpus_name)
    pairs = [(i, min(len(text), i + rng.randrange(1, 3000))) for i in range(0, len(text), 997)]
    pairs += [(0, len(text)), (len(text) - 90, len(text))]
    expected = [enc.count(text[i:j]) for i, j in pairs]
    old = piececache.get_cache_size()
    try:
        for size in (0, "64K", old):
            piececache.set_cache_size(size)
            for _ in range(2):  # cold, then warm
                ic = enc.interval_counter(text, piece_tables=False)
                assert ic.count_many(pairs) == expected, size
                assert ic.total == enc.count(text)
    finally:
        piececache.set_cache_size(old)


def test_init_again_recounts():
    # __init__ called again on a counter (allowed by Python) replaces its tables
    from bpecore.interval import IntervalCounter

    enc = encoding("cl100k_base")
    ic = enc.interval_counter("hello world, hello", piece_tables=False)
    IntervalCounter.__init__(ic, enc._core, "one two three four five six", False)
    assert ic.count(0, 27) == enc.count("one two three four five six")
    assert ic.crossing(0, 2, 16) == 7

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
    st.sampled_from(ADVERSARIAL_CHARS + ["ab", "cbb", "Hello", " world", "don't", "'S", "123456", "  \n", "中文字"]),
    max_size=60,
).map("".join)
texts = st.one_of(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=80), alphabet_text)


@pytest.mark.parametrize("name", ALL)
@given(text=texts, data=st.data())
def test_hyp_interval_counts_with_repeated_starts_and_ends(name, text, data):
    enc = encoding(name)
    ic = enc.interval_counter(text)
    n = len(text)
    starts = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=3))
    ends = data.draw(st.lists(st.integers(0, n), min_size=1, max_size=4))
    picks = data.draw(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 3)), min_size=1, max_size=25))
    pairs = []
    for si, ei in picks:
        i, j = sorted((starts[si % len(starts)], ends[ei % len(ends)]))
        assert ic.count(i, j) == enc.count(text[i:j]), (i, j)
        pairs.append((i, j))
    assert ic.count_many(pairs) == [enc.count(text[i:j]) for i, j in pairs]


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("corpus_name", ["english", "multilingual", "code", "adv_whitespace", "adv_unicode"])
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
        jobs.append([(i, min(len(text), i + rng.choice([5, 50, 500, GIL_BYTES + 100]))) for i in starts for _ in range(5)])
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

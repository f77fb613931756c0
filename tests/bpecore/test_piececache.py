"""The piece cache shared across calls and threads: exact with it on or off, its cap held under
eviction, and many threads counting different texts while it evicts (bpecore/piececache.pyx)."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore import piececache
from tests.conftest import CORPORA, read_corpus

ENCODINGS = ["cl100k_base", "o200k_base"]


def twin(name: str, max_bytes) -> bpecore.Encoding:
    """A second Encoding over ``name``'s vocabulary with its own cache of ``max_bytes``."""
    enc = bpecore.get_encoding(name)
    other = bpecore.Encoding(f"{name}-cache-{max_bytes}", pattern=enc.pattern, vocab=enc._vocab)
    other._core.piece_cache.resize(max_bytes)
    return other


@pytest.fixture(scope="module", params=ENCODINGS)
def pair(request):
    """(cache off, cache of 8 KB: 128 slots, so nearly every new piece evicts one)."""
    return twin(request.param, 0), twin(request.param, 8 << 10)


def resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def test_parse_size():
    assert piececache.parse_size("64M") == 64 << 20
    assert piececache.parse_size("16 MiB") == 16 << 20
    assert piececache.parse_size("512k") == 512 << 10
    assert piececache.parse_size(" 1G ") == 1 << 30
    assert piececache.parse_size("0") == 0
    assert piececache.parse_size(4096) == 4096
    for bad in ("-1", "lots", "", "1T", -5, "1.5M"):
        with pytest.raises(ValueError):
            piececache.parse_size(bad)


def test_table_sizes_within_cap():
    for cap in (0, 255, 256, 1000, 8 << 10, (1 << 20) + 1, 3 << 20):
        info = piececache.CacheTable(cap).info()
        assert info["bytes"] <= cap
        if cap >= 256:  # at least 2 buckets of 2 slots
            assert info["bytes"] > cap // 2  # a power of two of slots, the largest that fits


def test_hits_and_misses_are_counted():
    enc = twin("cl100k_base", 1 << 20)
    text = "Antidisestablishmentarianism and floccinaucinihilipilification, again: " * 3
    first = enc.count(text)
    info = enc._core.piece_cache.info()
    assert info["misses"] > 0 and info["entries"] > 0
    assert enc.count(text) == first
    after = enc._core.piece_cache.info()
    assert after["hits"] > info["hits"]
    assert after["entries"] == info["entries"]
    assert after["name"] == enc.name and after["max_bytes"] == 1 << 20


def test_off_means_no_table():
    enc = twin("cl100k_base", 0)
    enc.count("floccinaucinihilipilification " * 10)
    assert enc._core.piece_cache.info() == {
        "entries": 0,
        "bytes": 0,
        "hits": 0,
        "misses": 0,
        "max_bytes": 0,
        "name": enc.name,
    }


@pytest.mark.parametrize("corpus", CORPORA)
def test_corpus_cache_on_equals_off(pair, corpus):
    off, on = pair
    text = read_corpus(corpus)[:300_000]
    expected = off.encode_ordinary(text)
    for _ in range(2):  # the second pass mostly hits, the first mostly misses and evicts
        assert on.encode_ordinary(text) == expected
        assert on.count(text) == len(expected)
    texts = [text[i : i + 700] for i in range(0, len(text), 700)]
    assert on.count_batch(texts, num_threads=2) == off.count_batch(texts, num_threads=1)
    assert on.encode_batch(texts[:100], num_threads=2) == [
        off.encode_ordinary(t) for t in texts[:100]
    ]
    info = on._core.piece_cache.info()
    assert info["bytes"] <= info["max_bytes"] == 8 << 10
    assert info["entries"] <= info["bytes"] // piececache.SLOT_BYTES


WORDS = st.sampled_from(
    [
        "Floccinaucinihilipilification",
        " pneumonoultramicroscopic",
        "ação",
        " Überprüfung",
        "日本語の",
        " 1234567",
        "\n\n   ",
        "?!?!",
        " the",
        "  ",
        "\t",
        "e\u0301",
        "🙂🙂",
        " Straße",
    ]
)


CACHED_PAIRS = {name: (twin(name, 0), twin(name, 4 << 10)) for name in ENCODINGS}


@given(st.lists(st.one_of(WORDS, st.text(max_size=40)), max_size=60).map("".join))
def test_hyp_cache_on_equals_off(text):
    for name in ENCODINGS:
        off, on = CACHED_PAIRS[name]
        expected = off.encode_ordinary(text)
        assert on.encode_ordinary(text) == expected
        assert on.count(text) == len(expected)


def test_many_threads_while_evicting():
    """8 threads count different texts (count, encode, count_batch) through one encoder whose
    cache of 256 KB keeps evicting: answers equal to the cache off, the table within its cap, and
    resident memory grows by less than the cap plus the answers' own objects."""
    name = "o200k_base"
    off = twin(name, 0)
    cap = 256 << 10
    shared = twin(name, cap)
    rng = random.Random(23)
    texts = []
    for corpus in CORPORA:
        body = read_corpus(corpus)
        for _ in range(40):
            start = rng.randrange(0, len(body) - 6000)
            texts.append(body[start : start + rng.randrange(50, 6000)])
    expected = [off.count(t) for t in texts]
    before = resident_bytes()
    errors: list[str] = []
    start_line = threading.Barrier(8)

    def work(k: int) -> None:
        order = list(range(len(texts)))
        random.Random(k).shuffle(order)
        start_line.wait()
        for rounds in range(3):
            for i in order:
                if (i + k + rounds) % 5 == 0:
                    got = len(shared.encode_ordinary(texts[i]))
                else:
                    got = shared.count(texts[i])
                if got != expected[i]:
                    errors.append(f"thread {k}: text {i} counted {got}, expected {expected[i]}")
            batch = [texts[i] for i in order[:50]]
            if shared.count_batch(batch, num_threads=2) != [expected[i] for i in order[:50]]:
                errors.append(f"thread {k}: count_batch differs")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    grown = resident_bytes() - before
    assert not errors, errors[:5]
    info = shared._core.piece_cache.info()
    assert info["bytes"] <= cap
    assert info["entries"] <= cap // piececache.SLOT_BYTES
    assert info["misses"] > cap // piececache.SLOT_BYTES  # it did evict: more pieces than slots
    assert info["hits"] > 0
    assert grown < cap + (32 << 20), f"resident memory grew by {grown} bytes"


def test_set_cache_size_replaces_live_tables():
    enc = twin("cl100k_base", 1 << 20)
    old = piececache.get_cache_size()
    try:
        bpecore.set_cache_size("2M")
        assert enc._core.piece_cache.info()["max_bytes"] == 2 << 20
        names = [c["name"] for c in bpecore.cache_info()["caches"]]
        assert enc.name in names
        word = "floccinaucinihilipilification"
        cached = enc.count(word)
        bpecore.set_cache_size(0)
        assert enc._core.piece_cache.info()["bytes"] == 0
        assert enc.count(word) == cached == len(twin("cl100k_base", 0).encode_ordinary(word))
    finally:
        bpecore.set_cache_size(old)


def test_environment_setting():
    code = (
        "import bpecore, json; e = bpecore.get_encoding('cl100k_base'); e.count('hello world');"
        "i = bpecore.cache_info(); print(json.dumps([i['max_bytes'], e._core.piece_cache.info()['bytes']]))"
    )
    for value, cap in (("0", 0), ("1M", 1 << 20), ("300k", 300 << 10)):
        env = {**os.environ, "BPECORE_PIECE_CACHE": value}
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        assert out.returncode == 0, out.stderr
        max_bytes, table = eval(out.stdout)
        assert max_bytes == cap and table <= cap
    env = {**os.environ, "BPECORE_PIECE_CACHE": "plenty"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert out.returncode != 0 and "not a size in bytes" in out.stderr


def test_table_grows_to_its_cap():
    """The first call makes a small table; calls that find it over half full make larger ones,
    never over the cap, answers unchanged."""
    cap = 1 << 20
    enc, off = twin("o200k_base", cap), twin("o200k_base", 0)
    enc.count("floccinaucinihilipilification")
    assert enc._core.piece_cache.info()["bytes"] == piececache.START_BYTES
    text = read_corpus("multilingual") + read_corpus("code")
    sizes = set()
    for i in range(0, len(text), 20_000):
        part = text[i : i + 20_000]
        assert enc.count(part) == off.count(part)
        info = enc._core.piece_cache.info()
        assert info["bytes"] <= cap
        sizes.add(info["bytes"])
    assert max(sizes) == cap and len(sizes) >= 3  # 64 KB, 512 KB, then the 1 MB cap


@pytest.mark.parametrize("name", ENCODINGS)
def test_growth_carries_entries_over(name):
    """A table replaced by a larger one hands its entries on: the next call finds the pieces the
    small table had learnt (far fewer misses than a new empty table) and answers as the cache off
    does."""
    enc, off = twin(name, 1 << 20), twin(name, 0)
    text = read_corpus("multilingual")[:100_000]
    enc.count(text)  # fills the START_BYTES table over half
    small = enc._core.piece_cache.info()
    assert small["bytes"] == piececache.START_BYTES
    assert small["entries"] * 2 > small["bytes"] // piececache.SLOT_BYTES
    assert enc.count("x") == 1  # this call makes the larger table
    grown = enc._core.piece_cache.info()
    assert grown["bytes"] == piececache.START_BYTES * piececache.GROWTH
    assert grown["entries"] >= 0.95 * small["entries"]
    assert grown["hits"] == grown["misses"] == 0  # counters are per table
    part = text[-20_000:]  # the latest pieces: still in the small table
    assert enc.count(part) == off.count(part)
    carried = enc._core.piece_cache.info()["misses"]
    enc._core.piece_cache.clear()
    assert enc.count(part) == off.count(part)
    fresh = enc._core.piece_cache.info()["misses"]
    assert carried * 2 < fresh, (carried, fresh)
    assert enc.encode_ordinary(part) == off.encode_ordinary(part)


@pytest.mark.parametrize("name", ENCODINGS)
def test_pieces_that_miss_wait_and_land_in_place(name):
    """encode_text holds back the pieces that miss the shared cache and merges them 16 at a time
    (backtrack.merge_pending), then puts their tokens where each piece was met. A long piece (over
    32 bytes: the call's own cache, whose slots hold positions in the output) must find the
    earlier ones done; the call ends with some waiting; a text of only new pieces fills groups.
    Every answer equal to the cache off, encode and count."""
    rng = random.Random(11)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def word() -> str:  # a new piece of 6-14 letters: almost never a token
        return " " + "".join(rng.choice(letters) for _ in range(rng.randrange(6, 15)))

    long_piece = " " + "".join(rng.choice(letters) for _ in range(40))  # one piece, 41 bytes
    parts = []
    for i in range(400):
        parts += [word() for _ in range(rng.randrange(0, 20))]
        parts.append(long_piece if i % 3 else " the end.")
    texts = [
        "".join(parts),  # over 4 KB: the call's own cache serves the long piece's repeats
        "".join(parts[:37]),  # short: no own cache, pieces still waiting at the end
        "".join(word() for _ in range(16 * 20 + 5)),
    ]
    off = twin(name, 0)
    for t in texts:
        on = twin(name, 1 << 20)  # empty: every new word misses
        expected = off.encode_ordinary(t)
        assert on.encode_ordinary(t) == expected
        on._core.piece_cache.clear()
        assert on.count(t) == len(expected)
        assert on._core.piece_cache.info()["misses"] > 16


@pytest.mark.parametrize("name", ENCODINGS)
def test_random_text_leaves_a_warm_cache_and_prose_fills_a_cold_one(name):
    """A long call whose first 1,024 misses of the shared cache came with under a third of hits
    leaves it once the cache holds 4,096 entries (o200k's base64 pieces hit ~24%: random strings),
    under a sixteenth while it fills; prose in a cold cache stays and fills it."""
    import base64

    enc, off = twin(name, 4 << 20), twin(name, 0)
    prose = read_corpus("multilingual")[:100_000]
    assert enc.count(prose) == off.count(prose)
    cold = enc._core.piece_cache.info()
    assert cold["misses"] > 2_000 and cold["hits"] < cold["misses"] * 2, cold  # stayed
    for corpus in ("english", "code", "multilingual"):
        text = read_corpus(corpus)
        for i in range(0, 600_000, 150_000):
            assert enc.count(text[i : i + 150_000]) == off.count(text[i : i + 150_000])
    warm = enc._core.piece_cache.info()
    assert warm["entries"] >= 4_096
    rng = random.Random(3)
    for _ in range(3):  # o200k: later blobs find some of their short pieces from earlier ones
        blob = base64.b64encode(rng.randbytes(120_000)).decode()
        before = enc._core.piece_cache.info()
        assert enc.count(blob) == off.count(blob)
        after = enc._core.piece_cache.info()
        assert after["misses"] - before["misses"] == 1_024, (before, after)  # left after the trial
    assert enc.encode_ordinary(blob) == off.encode_ordinary(blob)

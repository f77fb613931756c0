"""Encodings and counters pickle, copy, and cross process boundaries (spawn, fork, forkserver)."""

from __future__ import annotations

import copy
import multiprocessing
import pickle
from concurrent.futures import ProcessPoolExecutor

import pytest

import bpecore
from bpecore.backtrack import BacktrackEncoder
from bpecore.interval import IntervalCounter

TEXTS = ["hello world", "Ünïcödé ✓ text 12345", "def f(x):\n    return x  # ok\n", "", "a" * 3000]
START_METHODS = [
    m for m in ("spawn", "fork", "forkserver") if m in multiprocessing.get_all_start_methods()
]


@pytest.fixture(scope="module")
def trained():
    corpus = [
        "the quick brown fox jumps over the lazy dog. " * 20,
        "pack my box with five dozen liquor jugs! " * 20,
    ]
    return bpecore.train(
        corpus, vocab_size=300, pattern="cl100k", special_tokens=["<|end|>"], workers=1, name="tiny"
    )


@pytest.mark.parametrize("name", bpecore.list_encoding_names())
def test_shipped_encoding_pickles_by_name(name):
    enc = bpecore.get_encoding(name)
    blob = pickle.dumps(enc)
    assert len(blob) < 120 and name.encode() in blob
    assert pickle.loads(blob) is enc
    assert copy.deepcopy(enc).encode("hello world") == enc.encode("hello world")


def test_other_encodings_pickle_by_value(trained, toy_encoding):
    own_cl100k = bpecore.Encoding(
        "cl100k_base",
        bpecore.get_encoding("cl100k_base")._mergeable_ranks,
        bpecore.get_encoding("cl100k_base").pattern,
        {"<|endoftext|>": 100257},
    )
    for enc in (trained, toy_encoding, own_cl100k):
        blob = pickle.dumps(enc)
        assert len(blob) > 1000
        for back in (pickle.loads(blob), copy.deepcopy(enc), copy.copy(enc)):
            assert back is not enc
            assert (back.name, back.pattern, back.special_tokens, back.n_vocab) == (
                enc.name,
                enc.pattern,
                enc.special_tokens,
                enc.n_vocab,
            )
            assert back._mergeable_ranks == enc._mergeable_ranks
            for text in TEXTS:
                assert back.encode(text) == enc.encode(text)


def test_registered_encoding_pickles_by_value(trained, monkeypatch):
    from bpecore import registry

    # Registered in copies of the registry's tables, so that other tests do not see the name.
    monkeypatch.setattr(registry, "ENCODING_CONSTRUCTORS", dict(registry.ENCODING_CONSTRUCTORS))
    monkeypatch.setattr(registry, "_cache", dict(registry._cache))
    enc = bpecore.Encoding(
        "pickle_registered", trained._mergeable_ranks, trained.pattern, trained.special_tokens
    )
    bpecore.register_encoding(enc)
    assert bpecore.get_encoding("pickle_registered") is enc
    back = pickle.loads(pickle.dumps(enc))  # a new process would not know the name
    assert back is not enc and back.encode("the lazy fox") == enc.encode("the lazy fox")


def test_shipped_encoding_replaced_by_registration_pickles_by_value(trained, monkeypatch):
    from bpecore import registry

    monkeypatch.setattr(registry, "ENCODING_CONSTRUCTORS", dict(registry.ENCODING_CONSTRUCTORS))
    monkeypatch.setattr(registry, "_cache", dict(registry._cache))
    shipped = bpecore.get_encoding("gpt2")
    monkeypatch.setattr(shipped, "_reduce_as", shipped._reduce_as)  # restored after the test
    other = bpecore.Encoding(
        "gpt2", trained._mergeable_ranks, trained.pattern, trained.special_tokens
    )
    bpecore.register_encoding(other)  # "gpt2" now names another encoding in this process
    back = pickle.loads(pickle.dumps(shipped))
    assert back is not other and back is not shipped
    assert back.encode("hello world") == shipped.encode("hello world")


def _counters(enc: bpecore.Encoding):
    text = "Hello wörld, this is a counter test. 1234 "
    ic = enc.interval_counter(text)
    ac = enc.appendable_counter()
    ac.push(text)
    ac.push("é".encode()[:1])  # half a character, held back
    pc = enc.prependable_counter()
    pc.push(text)
    return ic, ac, pc


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "custom_pattern"])
def test_counters_pickle_by_value(name):
    if name == "custom_pattern":
        base = bpecore.get_encoding("cl100k_base")
        enc = bpecore.Encoding("custom", base._mergeable_ranks, r"\S+|\s+", {})
    else:
        enc = bpecore.get_encoding(name)
    ic, ac, pc = _counters(enc)
    ic2, ac2, pc2 = (pickle.loads(pickle.dumps(c)) for c in (ic, ac, pc))
    assert type(ic2) is type(ic) and ic2.text == ic.text
    assert [ic2.count(i, j) for i in range(0, 40, 7) for j in range(i, 40, 5)] == [
        ic.count(i, j) for i in range(0, 40, 7) for j in range(i, 40, 5)
    ]
    assert ac2.count == ac.count and ac2.bytes == ac.bytes
    assert ac2.push("é".encode()[1:]) == ac.push("é".encode()[1:]) == enc.count(ac.bytes.decode())
    assert pc2.count == pc.count and pc2.push("Why: ") == pc.push("Why: ")
    if name != "custom_pattern":
        assert pickle.loads(pickle.dumps(ic2)).count(0, 5) == ic.count(0, 5)
        assert len(pickle.dumps(ic)) < 300  # the shipped encoding goes by name


def test_counter_without_encoding_refuses_clearly():
    enc = bpecore.get_encoding("cl100k_base")
    orphan = IntervalCounter(BacktrackEncoder(enc._vocab, enc.pattern), "some text")
    with pytest.raises(TypeError, match="Encoding.interval_counter"):
        pickle.dumps(orphan)


@pytest.mark.parametrize("method", START_METHODS)
def test_pool_map(method, trained):
    ctx = multiprocessing.get_context(method)
    enc = bpecore.get_encoding("cl100k_base")
    with ctx.Pool(2) as pool:
        assert pool.map(enc.count, TEXTS) == [enc.count(t) for t in TEXTS]
        assert pool.map(trained.encode, TEXTS) == [trained.encode(t) for t in TEXTS]
        ic = enc.interval_counter(TEXTS[1])
        assert pool.starmap(ic.count, [(0, 5), (3, 12)]) == [ic.count(0, 5), ic.count(3, 12)]


def test_process_pool_executor():
    enc = bpecore.get_encoding("o200k_base")
    with ProcessPoolExecutor(2, mp_context=multiprocessing.get_context("spawn")) as pool:
        assert list(pool.map(enc.encode, TEXTS)) == [enc.encode(t) for t in TEXTS]

"""The dictionary's tables: splits, prefixes and reachability agree with the reference merge loop."""

from __future__ import annotations

import random
import re

import pytest

import bpecore
from bpecore import reference
from bpecore.vocab import Vocab
from tests.conftest import SHARED, TOY_MERGES, shared_ranks, toy_ranks


def test_readme_example(toy_encoding):
    # README "How it works": the toy dictionary a b c ab cb ac bb cbb acbb.
    v = toy_encoding._vocab
    idx = {t: v.lookup(t) for t in [b"a", b"b", b"c", *TOY_MERGES]}
    # a c b b: cb merges first (rank 257), then cb+b, then a+cbb: the last merge is (a, cbb).
    assert v.split(idx[b"acbb"]) == (idx[b"a"], idx[b"cbb"])
    assert v.split(idx[b"cbb"]) == (idx[b"cb"], idx[b"b"])
    assert not v.valid_pair(idx[b"a"], idx[b"b"])  # BPE merges a b -> ab
    assert v.valid_pair(idx[b"ab"], idx[b"c"])
    assert toy_encoding.encode_piece(b"acbb") == [261]
    assert toy_encoding.encode_piece(b"abcbb") == [256, 260]  # ab cbb, not a bcbb
    for text in [b"abacbb", b"cbbacbb", b"aaabbbccc", b"acbbacbbab"]:
        assert toy_encoding.encode_piece(text) == reference.bpe_encode(toy_ranks(), text)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_splits_match_reference_sample(name):
    ranks = shared_ranks(name)
    enc = bpecore.get_encoding(name)
    v = enc._vocab
    rng = random.Random(1)
    for index in rng.sample(range(len(v)), 1500):
        token = v.token_bytes(index)
        assert reference.bpe_encode(ranks, token) == [index]
        assert v.is_reachable(index)
        if len(token) > 1:
            left, right = v.split(index)
            assert v.token_bytes(left) + v.token_bytes(right) == token
            assert left < index and right < index


@pytest.mark.slow
@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_every_token_is_reachable(name):
    ranks = shared_ranks(name)
    v = bpecore.get_encoding(name)._vocab
    assert v.n_unreachable == 0
    for index in range(len(v)):
        assert reference.bpe_encode(ranks, v.token_bytes(index)) == [index]


def test_unreachable_token_is_never_emitted():
    # "abc" is ranked after "ab" and "bc" but BPE on a b c forms ab first, and ab+c is not a merge
    # that wins over... "abd" has no merge path at all: b+d is not a token and a+b leaves ab d.
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"ab"] = 256
    ranks[b"bd"] = 257
    ranks[b"abd"] = 258  # a b d -> ab d (256 first); ab+d forms abd, reachable
    ranks[b"xbd"] = 259
    ranks[b"xb"] = 260  # x b d -> bd first (257), then x+bd = xbd: reachable
    ranks[b"abdd"] = 261
    ranks[b"bdd"] = 262  # a b d d -> ab d d -> abd d -> abdd: reachable; bdd never forms here
    ranks[b"zzq"] = 263  # z z q: no two-token split exists at all -> unreachable
    v = Vocab(ranks)
    assert not v.is_reachable(v.lookup(b"zzq"))
    assert v.n_unreachable >= 1
    enc = bpecore.Encoding("t", ranks, None, {})
    for text in ["zzq", "abd", "xbd", "abdd", "bdd", "zzqabdd"]:
        assert enc.encode(text) == reference.bpe_encode(ranks, text.encode()), text


def test_whole_pieces_are_found_only_whole():
    """enable_whole_pieces: a piece spelling an unreachable token is that token (tiktoken's lookup
    before BPE), in every length class of the core's loops; longer pieces holding it, its
    prefixes and longest matches are unchanged."""
    long_token = b"q" * 40 + b"zz"  # over SHORT_PIECE bytes: backtrack_piece's path
    ranks = {bytes([b]): b for b in range(256)}
    ranks.update({b"zzq": 256, b"qq": 257, b"qqqq": 258, long_token: 259})
    v = Vocab(ranks)
    unreachable = [t for t in (b"zzq", long_token) if not v.is_reachable(v.lookup(t))]
    assert unreachable == [b"zzq", long_token]
    before = bpecore.Encoding("t", None, r"\S+|\s+", {}, vocab=v)
    texts = ["zzq", long_token.decode(), "zzqq zzq", "q" * 41 + "zz", "zz zzq qzzq", "zzq" * 20]
    plain = {t: before.encode_ordinary(t) for t in texts}
    v.enable_whole_pieces()
    v.enable_whole_pieces()  # a second call changes nothing
    assert v.n_whole_only == 2
    after = bpecore.Encoding("t", None, r"\S+|\s+", {}, vocab=v)
    for text in texts:
        want = []
        for piece in re.findall(r"\S+|\s+", text):
            if piece.encode() in unreachable:
                want.append(ranks[piece.encode()])
            else:
                want += reference.bpe_encode(ranks, piece.encode())
        assert after.encode_ordinary(text) == want, text
        assert after.count(text) == len(want)
        assert after.count_till_limit(text, len(want)) == len(want)
        if not any(p.encode() in unreachable for p in re.findall(r"\S+", text)):
            assert want == plain[text]
    assert v._next_match(b"zzqq") == v.lookup(b"z")
    assert after.encode_piece(long_token) == [259]


def test_token_formed_only_from_higher_ranks_is_a_clear_error():
    ranks = {bytes([b]): b for b in range(256)}
    ranks[b"abc"] = 256
    ranks[b"bc"] = 257  # a b c -> a bc -> abc (rank 256 < 257): not representable
    with pytest.raises(ValueError, match="only from tokens of higher rank"):
        Vocab(ranks)


def test_gapped_ranks_map_to_external_ids():
    ranks = {bytes([b]): b * 2 for b in range(256)}
    ranks[b"ab"] = 1000
    enc = bpecore.Encoding("gaps", ranks, None, {})
    assert enc.encode("xab") == [ord("x") * 2, 1000]
    assert enc.decode([ord("x") * 2, 1000]) == "xab"
    with pytest.raises(ValueError, match="not in this vocabulary"):
        enc.decode([1])


@pytest.mark.parametrize(
    "ranks,message",
    [
        ({}, "empty"),
        ({b"a": 0}, "single-byte"),
        ({**{bytes([b]): b for b in range(256)}, b"ab": 5}, "two tokens"),
        ({**{bytes([b]): b for b in range(256)}, b"": 300}, "non-empty"),
        ({**{bytes([b]): b for b in range(256)}, b"ab": -1}, "integer"),
    ],
)
def test_bad_ranks_are_clear_errors(ranks, message):
    with pytest.raises(ValueError, match=message):
        Vocab(ranks)


# ----------------------------------------------------------------- loading (issue 6: start-up time)
def _tables(v: Vocab) -> tuple:
    # What the encoders read, token by token: bytes, split, reachability, and (through the steps)
    # the next_prefix chain down to each split.
    n = len(v)
    return (
        [v.token_bytes(i) for i in range(n)],
        [v.id_of_index(i) for i in range(n)],
        [v.split(i) for i in range(n)],
        [v.is_reachable(i) for i in range(n)],
        v.split_steps(),
        v.max_token_len,
        v.max_id,
    )


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_from_tiktoken_equals_dict_build(name):
    from bpecore.load import parse_tiktoken, read_file

    data = read_file(SHARED / "vocab" / f"{name}.tiktoken.gz")
    fresh = _tables(Vocab.from_tiktoken(data))
    assert fresh == _tables(Vocab(parse_tiktoken(data)))
    # the registry's vocab, built with the shipped split steps, has the same tables
    assert fresh == _tables(bpecore.get_encoding(name)._vocab)


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
def test_shipped_split_steps_match_a_fresh_build(name):
    import hashlib

    from bpecore.load import read_file
    from bpecore.registry import _split_steps

    data = read_file(SHARED / "vocab" / f"{name}.tiktoken.gz")
    steps = _split_steps(f"{name}.tiktoken", hashlib.sha256(data).hexdigest())
    assert steps is not None, "stale data/*.steps: regenerate with scripts/write_split_steps.py"
    assert steps == Vocab.from_tiktoken(data).split_steps()
    assert _split_steps(f"{name}.tiktoken", "0" * 64) is None  # bound to the rank file's hash


def test_wrong_split_steps_are_ignored():
    from bpecore.load import read_file

    data = read_file(SHARED / "vocab" / "cl100k_base.tiktoken.gz")
    fresh = _tables(Vocab.from_tiktoken(data))
    steps = bytearray(fresh[4])
    rng = random.Random(3)
    for i in rng.sample(range(256, len(steps)), 50):
        steps[i] = (steps[i] + 1) % 254
    assert _tables(Vocab.from_tiktoken(data, bytes(steps))) == fresh
    assert _tables(Vocab.from_tiktoken(data, bytes(fresh[4][:-1]))) == fresh  # wrong length


def _tiktoken_bytes(ranks: dict[bytes, int]) -> bytes:
    import base64

    return b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items())


def test_from_tiktoken_unsorted_ranks_and_gaps():
    ranks = toy_ranks()
    items = list(ranks.items())
    random.Random(5).shuffle(items)
    gapped = {t: r * 3 + 7 for t, r in items}
    for r in (dict(items), gapped):
        assert _tables(Vocab.from_tiktoken(_tiktoken_bytes(r))) == _tables(Vocab(r))


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"\n\n",
        b"YR== 0\n",  # non-canonical padding bits
        b"YQ 0\n",  # no padding
        b"YQ== +0\n",
        b"YQ== 0 1\n",
        b"YQ==\n",
        b"YQ== 4294967295\n",
        b"YQ== 0\nYQ== 1\n",  # repeated token
        b"YQ== 0\nYg== 0\n",  # repeated rank
        b"Y=Q= 0\n",
    ],
)
def test_from_tiktoken_leaves_odd_content_to_the_checked_parser(content):
    assert Vocab.from_tiktoken(content) is None


def test_from_tiktoken_whitespace_like_python():
    ranks = toy_ranks()
    text = _tiktoken_bytes(ranks).replace(b" ", b" \t ").replace(b"\n", b"\r\n") + b"\n  \n"
    assert _tables(Vocab.from_tiktoken(text)) == _tables(Vocab(ranks))


def test_head_and_hash_equals_load_head_and_piece_hash():
    """The branch-free head and hash encode_text cuts pieces with are load_head's and piece_hash's,
    for every length at every offset, near the text's end (the guarded path) and away from it."""
    from bpecore.vocab import _head_and_hash

    rng = random.Random(18)
    text = bytes(rng.randrange(256) for _ in range(80)) + b"\x00" * 9 + b"hello world, tokens!"
    for start in range(len(text)):
        for n in range(1, min(40, len(text) - start) + 1):
            head, h, ref_head, ref_h = _head_and_hash(text, start, n)
            assert (head, h) == (ref_head, ref_h), (start, n)
    with pytest.raises(ValueError):
        _head_and_hash(b"abc", 2, 2)

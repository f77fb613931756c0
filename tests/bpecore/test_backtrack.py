"""The fast paths of the backtracking encoder: buffers, batches, the piece cache, special tokens, threads."""

from __future__ import annotations

import array
import random
import threading

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore

ENCODINGS = ["cl100k_base", "o200k_base"]


def _sample(corpus, name: str, size: int = 60_000) -> str:
    return corpus(name)[:size]


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("corpus_name", ["english", "code", "multilingual", "adv_unicode"])
def test_buffer_equals_encode(name, corpus_name, corpus):
    enc = bpecore.get_encoding(name)
    text = _sample(corpus, corpus_name)
    buf = enc.encode_to_buffer(text)
    assert isinstance(buf, array.array) and buf.typecode == "I" and buf.itemsize == 4
    assert buf.tolist() == enc.encode_ordinary(text)
    assert memoryview(buf).format == "I"


@pytest.mark.parametrize("name", ENCODINGS)
def test_lists_of_every_length_around_the_prefetch(name, corpus):
    # The list is built with its items' int objects prefetched 32 and 64 items ahead: every
    # length from 0 to past both, with rare tokens (ints no list held before) among common ones.
    enc = bpecore.get_encoding(name)
    rng = random.Random(5)
    rare = enc.decode(rng.sample(range(50_000, 90_000), 40))
    text = corpus("code")[:3000] + rare + corpus("multilingual")[:2000]
    ids = enc.encode_ordinary(text)
    cuts = sorted({len(enc.decode(ids[:k])) for k in range(0, 200)})
    for cut in cuts:
        got = enc.encode_ordinary(text[:cut])
        assert got == enc.encode_to_buffer(text[:cut]).tolist()
        assert all(type(t) is int for t in got)


def test_buffer_with_specials_and_surrogates():
    enc = bpecore.get_encoding("cl100k_base")
    text = "a<|endoftext|>b\ud800c"
    assert enc.encode_to_buffer(text, allowed_special="all").tolist() == enc.encode(
        text, allowed_special="all"
    )
    assert enc.encode_to_buffer("").tolist() == []
    with pytest.raises(ValueError):
        enc.encode_to_buffer("<|endoftext|>")


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("threads", [1, 2, 4])
def test_batch_equals_map(name, threads, corpus):
    enc = bpecore.get_encoding(name)
    rng = random.Random(3)
    texts = []
    for corpus_name in ["english", "code", "multilingual"]:
        text = corpus(corpus_name)[:200_000]
        for _ in range(40):
            a = rng.randrange(len(text))
            texts.append(text[a : a + rng.choice([0, 1, 50, 3000, 20_000])])
    texts.append("x\ud800y")  # lone surrogate: replaced as in encode
    expected = [enc.encode_ordinary(t) for t in texts]
    assert enc.encode_ordinary_batch(texts, num_threads=threads) == expected
    assert enc.encode_batch(texts, num_threads=threads) == expected
    assert enc.count_batch(texts, num_threads=threads) == [len(e) for e in expected]


def test_batch_special_handling():
    enc = bpecore.get_encoding("cl100k_base")
    texts = ["a<|endoftext|>b", "plain", "<|fim_prefix|>x"]
    assert enc.encode_batch(texts, allowed_special="all") == [
        enc.encode(t, allowed_special="all") for t in texts
    ]
    with pytest.raises(ValueError):
        enc.encode_batch(texts)


@pytest.mark.parametrize("corpus_name", ["english", "multilingual", "code"])
def test_piece_cache_long_text(corpus_name, corpus, tiktoken_encoding):
    # Texts >= 4 KB go through the per-call cache of repeated pieces; repeats must copy exact ids.
    text = _sample(corpus, corpus_name, 300_000)
    text = text + text[:50_000]
    for name in ENCODINGS:
        enc = bpecore.get_encoding(name)
        expected = tiktoken_encoding(name).encode_ordinary(text)
        assert enc.encode_ordinary(text) == expected
        assert enc.count(text) == len(expected)


@given(
    words=st.lists(
        st.sampled_from(["naïve", "Straße", "東京都", "zKuX3yB6", "  ", "\n", "über", "aaaa"]),
        min_size=800,
        max_size=2000,
    )
)
def test_hyp_cached_pieces_match_tiktoken(words, tiktoken_encoding):
    text = " ".join(words)
    assert len(text.encode()) >= 4096  # long enough for the piece cache
    for name in ENCODINGS:
        expected = tiktoken_encoding(name).encode_ordinary(text)
        enc = bpecore.get_encoding(name)
        assert enc.encode_ordinary(text) == expected
        assert enc.count(text) == len(expected)


HARMONY_TEXTS = [
    "<|start|>user<|message|>hi<|end|>",
    "x <|reserved_200100|> y <|endoftext|>",
    "<|<|channel|>|>",
    "no specials here, just <| and |> apart",
    "<|return|><|call|><|constrain|>",
]


@pytest.mark.parametrize("text", HARMONY_TEXTS)
def test_special_handling_matches_tiktoken_harmony(text, tiktoken_encoding):
    tiktoken = pytest.importorskip("tiktoken")
    enc = bpecore.get_encoding("o200k_harmony")
    from tests.conftest import PATTERNS, shared_ranks

    tk = tiktoken.Encoding(
        "o200k_harmony",
        pat_str=PATTERNS["o200k_base"],
        mergeable_ranks=shared_ranks("o200k_base"),
        special_tokens=enc.special_tokens,
    )
    assert enc.encode(text, allowed_special="all") == tk.encode(text, allowed_special="all")
    assert enc.encode(text, disallowed_special=()) == tk.encode(text, disallowed_special=())
    some = {"<|endoftext|>", "<|message|>"}
    for kwargs in [
        {},
        {"allowed_special": some},
        {"disallowed_special": {"<|end|>"}},
        {"allowed_special": some, "disallowed_special": ()},
    ]:
        try:
            expected = tk.encode(text, **kwargs)
        except ValueError:
            with pytest.raises(ValueError):
                enc.encode(text, **kwargs)
        else:
            assert enc.encode(text, **kwargs) == expected


def test_disallowed_non_special_string_is_searched():
    # tiktoken searches any string passed as disallowed_special, special token or not.
    enc = bpecore.get_encoding("cl100k_base")
    with pytest.raises(ValueError, match="hello"):
        enc.encode("say hello", disallowed_special={"hello"})
    assert enc.encode("say hi", disallowed_special={"hello"}) == enc.encode_ordinary("say hi")


def test_many_specials_found_in_one_scan():
    enc = bpecore.get_encoding("o200k_harmony")
    text = ("word " * 2000) + "<|reserved_200500|>"
    with pytest.raises(ValueError, match="reserved_200500"):
        enc.encode(text)
    assert enc.encode(text, allowed_special="all")[-1] == enc.special_tokens["<|reserved_200500|>"]


@pytest.mark.parametrize("name", ENCODINGS)
def test_threads_share_one_encoder(name, corpus):
    enc = bpecore.get_encoding(name)
    texts = [
        corpus(c)[i * 7000 : i * 7000 + 30_000]
        for c in ["english", "multilingual", "code"]
        for i in range(4)
    ]
    expected = [enc.encode_ordinary(t) for t in texts]
    errors: list[str] = []

    def work(k: int) -> None:
        for j in range(6):
            i = (k + j) % len(texts)
            if enc.encode_ordinary(texts[i]) != expected[i] or enc.count(texts[i]) != len(
                expected[i]
            ):
                errors.append(f"thread {k} text {i}")
            if enc.encode_to_buffer(texts[i]).tolist() != expected[i]:
                errors.append(f"thread {k} buffer {i}")

    threads = [threading.Thread(target=work, args=(k,)) for k in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


_PIECE_UNITS = ["a", "ab", " ", "\t", "\r\n", "0", "Zx", "é", "中", "/", "=", "aaaa"]


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.data())
def test_hyp_single_piece_paths(name, data, token_bytes, tiktoken_encoding):
    # Pieces of 2..32 bytes take all their longest matches in one interleaved pass; longer ones
    # remember is_valid_pair answers per piece. Both against the reference merge loop and tiktoken.
    from bpecore import reference
    from tests.conftest import shared_ranks

    units = data.draw(
        st.lists(
            st.sampled_from(_PIECE_UNITS + token_bytes(name)[:2000:7]), min_size=1, max_size=12
        )
    )
    reps = data.draw(st.integers(1, 40))
    piece = (b"".join(u if isinstance(u, bytes) else u.encode() for u in units) * reps)[
        : data.draw(st.integers(1, 300))
    ]
    enc = bpecore.get_encoding(name)
    got = enc.encode_piece(piece)
    assert got == tiktoken_encoding(name)._encode_single_piece(piece)
    if len(piece) <= 80:
        assert got == reference.bpe_encode(_ranks(name, shared_ranks), piece)


_WORD_PREFIXES = [b"", b" ", b"_", b"(", b"'", b"\t", b"A", b"z"]
_WORD_PARTS = [
    "ing",
    "tion",
    "un",
    "pro",
    "pag",
    "ates",
    "ed",
    "s",
    "q",
    "x",
    "zz",
    "conspic",
    "uously",
    "re",
]


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.data())
def test_hyp_word_shaped_pieces(name, data, tiktoken_encoding):
    # ASCII pieces of up to 16 bytes shaped like words take their longest matches from the
    # whole-piece table (short_tokens_probed); the others of the same lengths walk the trie.
    from bpecore import reference
    from tests.conftest import shared_ranks

    parts = data.draw(st.lists(st.sampled_from(_WORD_PARTS), min_size=1, max_size=6))
    word = "".join(parts)
    word = data.draw(
        st.sampled_from([word, word.upper(), word.capitalize(), word.swapcase()])
    ).encode()
    piece = (data.draw(st.sampled_from(_WORD_PREFIXES)) + word)[: data.draw(st.integers(2, 18))]
    got = bpecore.get_encoding(name).encode_piece(piece)
    assert got == tiktoken_encoding(name)._encode_single_piece(piece)
    assert got == reference.bpe_encode(_ranks(name, shared_ranks), piece)


_RANKS: dict[str, dict[bytes, int]] = {}


def _ranks(name, shared_ranks):
    if name not in _RANKS:
        _RANKS[name] = shared_ranks(name)
    return _RANKS[name]


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("n", [1, 2, 3, 31, 32, 33, 64, 1000])
def test_piece_length_boundaries(name, n, tiktoken_encoding):
    enc = bpecore.get_encoding(name)
    tk = tiktoken_encoding(name)
    for piece in (b"a" * n, (b" \t" * n)[:n], (b"Hello" * n)[:n], ("é中" * n).encode()[:n]):
        assert enc.encode_piece(piece) == tk._encode_single_piece(piece)


@pytest.mark.parametrize("name", ENCODINGS)
def test_spine_rejects_only_invalid_pairs(name):
    # spine_rejects is a shortcut for is_valid_pair's last check: it may say True only for pairs
    # valid_pair rejects. Random pairs, pairs of short tokens and of whitespace tokens (its target).
    v = bpecore.get_encoding(name)._core.vocab
    n = len(v)
    rng = random.Random(5)
    reachable = [t for t in range(n) if v.is_reachable(t)]
    short = [t for t in reachable if len(v.token_bytes(t)) <= 3]
    space = [t for t in reachable if not v.token_bytes(t).strip()]
    rejected = 0
    for pool in (reachable, short, space):
        for _ in range(40_000):
            a, b = rng.choice(pool), rng.choice(pool)
            if v._spine_rejects(a, b):
                rejected += 1
                assert not v.valid_pair(a, b), (v.token_bytes(a), v.token_bytes(b))
    assert rejected > 1000


def _longest_reachable_prefix(v, b: bytes) -> int:
    for n in range(min(len(b), v.max_token_len), 0, -1):
        t = v.lookup(b[:n])
        if t >= 0 and v.is_reachable(t):
            return t
    raise AssertionError(b)


@pytest.mark.parametrize("name", ENCODINGS)
def test_next_match_every_token_and_rare_bytes(name):
    # next_match asks step3_filter before the trie's third step; a missing bit would cut a walk
    # short. Every reachable token must be its own longest match, with or without a byte after
    # it; random byte strings over the bytes of rare characters must give the reference answer.
    v = bpecore.get_encoding(name)._core.vocab
    for t in range(len(v)):
        if v.is_reachable(t):
            b = v.token_bytes(t)
            assert v._next_match(b) == t, b
            assert v._next_match(b + b"\xff") == t, b
    rng = random.Random(11)
    alphabet = bytes(range(0x80, 0xC0)) + bytes([0xE4, 0xE8, 0xEA, 0xF0, 0x9F, 0xA0, 0x20, 0x61])
    for _ in range(50_000):
        b = bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 6)))
        assert v._next_match(b) == _longest_reachable_prefix(v, b), b
    text = "".join(chr(rng.randint(0x20000, 0x2A6DF)) for _ in range(3_000)).encode()
    for i in range(0, len(text) - 8):
        assert v._next_match(text[i : i + 8]) == _longest_reachable_prefix(v, text[i : i + 8])


@pytest.mark.parametrize("name", ENCODINGS)
def test_next_match_across_runs_of_one_byte(name):
    # next_match crosses a run of one byte in one read of run_nodes when the byte's runs go
    # RUN_JUMP or more deep in the trie, then walks on from the run's node. Runs of every byte
    # value, shorter and longer than the longest run token, cut by the end of the text or followed
    # by bytes that continue a token ("\n" then spaces, spaces then "\n") or do not.
    v = bpecore.get_encoding(name)._core.vocab
    rng = random.Random(13)
    after = [b"", b" ", b"\n", b"\t", b"\r\n", b"a", b"\xff", b"  \n", b"\n    x", b"=", b"0"]
    jumped = 0
    for c in range(256):
        byte = bytes([c])
        longest = 0
        while v.lookup(byte * (longest + 1)) >= 0 or longest < 3:
            longest += 1
            if longest > 300:
                break
        for k in sorted(
            {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, longest - 1, longest, longest + 1, longest + 9}
        ):
            if k < 1:
                continue
            for tail in after:
                b = byte * k + tail
                assert v._next_match(b) == _longest_reachable_prefix(v, b), (c, k, tail)
        if longest >= 8:
            jumped += 1
    assert jumped >= 5  # space, tab, newline and ASCII art bytes ('=', '-', '*', '/' ...)
    # Mixed whitespace as adv_whitespace has it, from every position.
    text = bytes(rng.choice(b"  \t\n\n\r") for _ in range(4_000))
    text = b"".join(bytes([rng.choice(b" \t\n-=")]) * rng.randint(1, 200) for _ in range(60)) + text
    for i in range(len(text) - 1):
        window = text[i : i + 300]
        assert v._next_match(window) == _longest_reachable_prefix(v, window), i


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.data())
def test_hyp_whitespace_pieces(name, data, tiktoken_encoding):
    # Pieces that start and end with ASCII whitespace take the loop with the pair memo and
    # spine_rejects (Performance notes, step 24), whatever their length.
    units = data.draw(
        st.lists(
            st.sampled_from([" ", "\t", "\n", "\r", "\r\n", "  ", "x", "\u00a0", "-"]),
            min_size=1,
            max_size=6,
        )
    )
    runs = data.draw(
        st.lists(st.tuples(st.sampled_from(units), st.integers(1, 150)), min_size=1, max_size=8)
    )
    piece = "".join(u * k for u, k in runs).encode()
    if data.draw(st.booleans()):
        piece = b" " + piece + b"\n"
    enc = bpecore.get_encoding(name)
    assert enc.encode_piece(piece) == tiktoken_encoding(name)._encode_single_piece(piece)


@pytest.mark.parametrize("name", ENCODINGS)
def test_byte_pair_bitmap_is_valid_pair(name):
    # bytes_stay_apart (the 8 KB bitmap used for pairs of single bytes) answers as is_valid_pair.
    v = bpecore.get_encoding(name)._core.vocab
    byte_token = [v.lookup(bytes([b])) for b in range(256)]
    for a in range(256):
        for b in range(256):
            assert v._bytes_stay_apart(a, b) == v.valid_pair(byte_token[a], byte_token[b]), (a, b)


# Non-token pieces of up to 32 bytes are merged (backtrack.short_tokens: the merge loop over the
# pair table) instead of backtracked; short_backtrack, the backtracking loop it replaced, stays the
# reference. The vocabularies without some byte's token (GGUF StarCoder, Refact, Falcon) take the
# backtracking loop and are checked against `tokenizers` in test_gguf_vocabs.py.
def _merged_and_backtracked(enc, pieces: list[bytes]) -> tuple[list, list]:
    from bpecore import backtrack

    data, offsets = b"".join(pieces), [0]
    for p in pieces:
        offsets.append(offsets[-1] + len(p))
    core = enc._core
    return backtrack._short_loop(core, data, offsets, 1, 0), backtrack._short_loop(
        core, data, offsets, 0, 0
    )


def _grouped(enc, pieces: list[bytes]) -> list:
    from bpecore import backtrack

    data, offsets = b"".join(pieces), [0]
    for p in pieces:
        offsets.append(offsets[-1] + len(p))
    return backtrack._short_loop(enc._core, data, offsets, 2, 0)


@pytest.mark.parametrize("name", [*ENCODINGS, "r50k_base", "p50k_base", "tekken"])
def test_short_pieces_merged_as_backtracked_on_corpora(name, corpus):
    import regex

    enc = bpecore.get_encoding(name)
    pieces = []
    for corpus_name in [
        "english",
        "code",
        "multilingual",
        "adv_base64",
        "adv_unicode",
        "adv_whitespace",
        "adv_digits",
    ]:
        found = regex.findall(enc._pat_str, corpus(corpus_name)[:150_000])
        pieces += [p.encode() for p in found]
    pieces = [p for p in dict.fromkeys(pieces) if 2 <= len(p) <= 32]
    assert len(pieces) > 20_000
    merged, backtracked = _merged_and_backtracked(enc, pieces)
    bad = [p for p, a, b in zip(pieces, merged, backtracked) if a != b]
    assert not bad, bad[:5]
    # merge_group: 16 pieces side by side, as encode_text merges the pieces that miss the cache
    grouped = _grouped(enc, pieces)
    bad = [p for p, a, b in zip(pieces, grouped, backtracked) if a != b]
    assert not bad, bad[:5]


@pytest.mark.parametrize("name", ENCODINGS)
def test_short_pieces_merged_as_tiktoken_merges_them(name, corpus, tiktoken_encoding):
    import regex

    enc, tk = bpecore.get_encoding(name), tiktoken_encoding(name)
    found = regex.findall(enc._pat_str, corpus("multilingual")[:100_000] + corpus("code")[:50_000])
    pieces = [p for p in dict.fromkeys(f.encode() for f in found) if 2 <= len(p) <= 32]
    merged, _ = _merged_and_backtracked(enc, pieces)
    assert merged == [tk._encode_single_piece(p) for p in pieces]


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.data())
def test_short_pieces_merged_as_backtracked_generated(name, token_bytes, data):
    tokens = token_bytes(name)
    pieces = data.draw(
        st.lists(
            st.one_of(
                st.binary(min_size=2, max_size=32),
                st.lists(st.sampled_from(tokens), min_size=1, max_size=8)
                .map(b"".join)
                .filter(lambda b: 2 <= len(b) <= 32),
                st.lists(st.sampled_from(list(b" \n\tae1.")), min_size=2, max_size=32).map(bytes),
            ),
            min_size=1,
            max_size=50,
        )
    )
    enc = bpecore.get_encoding(name)
    merged, backtracked = _merged_and_backtracked(enc, pieces)
    assert merged == backtracked
    assert _grouped(enc, pieces) == backtracked


def test_short_pieces_merged_on_the_toy_vocab(toy_encoding):
    # the README's example merges (ab, cb, ac, bb, cbb, acbb): every string of a, b, c up to 12
    import itertools

    pieces = ["".join(t).encode() for n in range(2, 13) for t in itertools.product("abc", repeat=n)]
    merged, backtracked = _merged_and_backtracked(toy_encoding, pieces)
    assert merged == backtracked


@pytest.mark.parametrize("name", ENCODINGS)
def test_call_that_leaves_the_shared_cache(name, corpus, tiktoken_encoding):
    # Random strings make a call leave the shared piece cache (backtrack.encode_text: under 1/16
    # hits after SHARED_TRIAL misses, 1/3 once it is warm) for its own; the prose after them is
    # then cached there.
    import base64

    rng = random.Random(7)
    blob = base64.b64encode(bytes(rng.randrange(256) for _ in range(30_000))).decode()
    text = blob + "\n" + corpus("english")[:40_000] + corpus("code")[:20_000]
    enc, tk = bpecore.get_encoding(name), tiktoken_encoding(name)
    expected = tk.encode_ordinary(text)
    assert enc.encode_ordinary(text) == expected
    assert enc.count(text) == len(expected)
    assert enc.count_batch([text, blob], num_threads=2) == [len(expected), len(tk.encode(blob))]


_DIGIT_UNITS = [
    "7",
    "42",
    "123",
    "0000",
    "9" * 7,
    "٣",
    "²",
    "1²",
    "٣4",
    "a1",
    "x",
    " ",
    "\n",
    ".",
    "'s",
]


@pytest.mark.parametrize("name", ENCODINGS)
@given(data=st.data())
def test_hyp_digit_pieces_cut_block_knows(name, data, tiktoken_encoding):
    # When counting, cl100k's and o200k's scanner gives encode_text its pieces of 1-3 ASCII
    # digits as ~end, and cut_block counts them from digit_tokens (encode takes them the usual
    # way). Runs of ASCII digits of every length, beside non-ASCII digits (which keep them off
    # that path: \p{N}{1,3} may go on past them) and letters, as whole texts and long ones.
    units = data.draw(st.lists(st.sampled_from(_DIGIT_UNITS), min_size=1, max_size=40))
    text = "".join(units)
    enc = bpecore.get_encoding(name)
    want = tiktoken_encoding(name).encode_ordinary(text)
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)
    long = text * (5_000 // len(text) + 1)
    want = tiktoken_encoding(name).encode_ordinary(long)
    assert enc.encode_ordinary(long) == want
    assert enc.count(long) == len(want)


def test_digit_pieces_that_are_no_token():
    # A vocabulary (here the bytes and six merges) with the cl100k pattern: its strings of 2-3
    # digits are no tokens, so cut_block leaves them to the whole-piece lookup and the merging.
    tiktoken = pytest.importorskip("tiktoken")
    from bpecore.registry import CL100K_PATTERN
    from tests.conftest import toy_ranks

    ranks = toy_ranks()
    ranks[b"12"] = len(ranks)  # one digit pair that is a token
    enc = bpecore.Encoding("toy-cl100k", ranks, CL100K_PATTERN, {})
    ref = tiktoken.Encoding(
        "toy-cl100k", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )
    text = "abc 1 12 123 1234 12345 x9 ab12cb 7" * 300
    assert enc.encode_ordinary(text) == ref.encode_ordinary(text)
    assert enc.count(text) == len(ref.encode_ordinary(text))

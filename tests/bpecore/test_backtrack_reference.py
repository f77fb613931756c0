"""The four tuned backtracking loops agree with the plain backtracking encoder and the merge loop.

``backtrack.pyx`` encodes a piece with one of four loops, by its shape (``backtrack_piece``):
``short_tokens_probed`` (word-shaped ASCII, 2..16 bytes), ``short_tokens`` (other pieces of
2..32 bytes), ``backtrack_memo`` (longer pieces that start and end with whitespace, or over 256
bytes of at most 8 distinct leading bytes) and ``backtrack_long`` (the rest). Each is reached from
``encode_piece``, from ``encode``/``count`` of a text (no pattern: the text is the piece) and from
``count_till_limit``; every path is compared with ``reference.backtrack_encode`` and
``reference.bpe_encode``.
"""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from bpecore import reference
from tests.conftest import CORPORA, exact_encoding, read_corpus, shared_ranks, toy_ranks

SHORT_PIECE, PROBE_PIECE, PAIR_MEMO, MEMO_SAMPLE, MEMO_DISTINCT = 32, 16, 256, 64, 8
LOOPS = ("short_tokens_probed", "short_tokens", "backtrack_memo", "backtrack_long")


def loop_of(piece: bytes) -> str:
    """The loop backtrack_piece picks for ``piece`` (a piece that is not itself a token)."""
    if not piece:
        return "none"

    def word_shaped(p: bytes) -> bool:
        return (
            p[0] < 0x80
            and chr(p[1]).isascii()
            and chr(p[1]).isalpha()
            and (
                p[2:].isascii()
                and p[2:].isalpha()
                and (p[2:].islower() or p[2:].isupper())
                or not p[2:]
            )
        )

    if 2 <= len(piece) <= SHORT_PIECE:
        return (
            "short_tokens_probed"
            if len(piece) <= PROBE_PIECE and word_shaped(piece)
            else "short_tokens"
        )
    spaces = b" \t\n\r"
    if (piece[0] in spaces and piece[-1] in spaces) or (
        len(piece) > PAIR_MEMO and len(set(piece[:MEMO_SAMPLE])) <= MEMO_DISTINCT
    ):
        return "backtrack_memo"
    return "backtrack_long"


_RANKS: dict[str, dict[bytes, int]] = {}


def ranks_of(name: str) -> dict[bytes, int]:
    if name not in _RANKS:
        _RANKS[name] = toy_ranks() if name == "toy" else shared_ranks("cl100k_base")
    return _RANKS[name]


def check(name: str, piece: bytes) -> str:
    """Assert every entry point agrees on ``piece``; return the loop it took."""
    ranks = ranks_of(name)
    enc = exact_encoding("toy" if name == "toy" else "cl100k_nopattern")
    want = reference.bpe_encode(ranks, piece)
    assert reference.backtrack_encode(ranks, piece) == want
    assert enc.encode_piece(piece) == want
    try:
        text = piece.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and text.encode("utf-8") == piece:
        assert enc.encode_ordinary(text) == want
        assert enc.count(text) == len(want)
        assert enc.count_till_limit(text, len(want)) == len(want)
        assert enc.count_till_limit(text, len(want) - 1) is None
    return loop_of(piece) if piece not in ranks else "whole-piece lookup"


@given(st.text(alphabet="abc \n", max_size=300).map(str.encode))
def test_hyp_toy_vocab(piece):
    check("toy", piece)


_WORD = st.tuples(
    st.sampled_from([b"", b" ", b"_", b"(", b"A"]),
    st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=15),
    st.sampled_from([bytes.lower, bytes.upper, bytes.capitalize]),
)


@given(
    _WORD.map(lambda w: (w[0] + w[2](w[1].encode()))[:PROBE_PIECE]).filter(lambda p: len(p) >= 2)
)
def test_hyp_word_shaped_pieces(piece):
    check("cl100k", piece)


@given(st.binary(min_size=2, max_size=SHORT_PIECE))
def test_hyp_short_pieces(piece):
    check("cl100k", piece)


@given(st.binary(min_size=SHORT_PIECE + 1, max_size=160))
def test_hyp_long_pieces(piece):
    check("cl100k", piece)


_RUN_UNITS = [" ", "a", "0", "\n", "ab", " \t", "é", "中", "=", "\r\n"]


@given(
    st.lists(st.sampled_from(_RUN_UNITS), min_size=1, max_size=3),
    st.integers(PAIR_MEMO // 2, 2 * PAIR_MEMO),
)
def test_hyp_repetitive_pieces(units, reps):
    check("cl100k", ("".join(units) * reps).encode()[: reps + 1])


@given(
    st.text(alphabet=" \t\nab.", min_size=SHORT_PIECE, max_size=120).map(
        lambda t: (" " + t + " ").encode()
    )
)
def test_hyp_whitespace_bounded_pieces(piece):
    check("cl100k", piece)


@pytest.mark.parametrize("corpus_name", CORPORA)
def test_corpus_slices(corpus_name):
    # Slices of the corpora as single pieces, of lengths that reach the short and the long loops.
    text = read_corpus(corpus_name)
    rnd = random.Random(corpus_name)
    seen = set()
    for length in (2, 5, 9, 14, 20, 31, 33, 80, 150, 300):
        for _ in range(3):
            start = rnd.randrange(len(text) - length)
            seen.add(check("cl100k", text[start : start + length].encode()[: 3 * length]))
    assert seen & {"short_tokens", "short_tokens_probed"} and seen & {
        "backtrack_long",
        "backtrack_memo",
    }, seen


def test_every_loop_is_reached():
    # The generated shapes above do reach all four loops (not only the whole-piece lookup).
    assert {
        loop_of(p)
        for p in (
            b" hello",
            b"a1b2c3",
            b"x" * 300,
            b" " + b"ab" * 40 + b" ",
            bytes(range(65, 65 + 60)),
        )
    } == set(LOOPS)

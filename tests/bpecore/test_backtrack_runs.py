"""Runs of one byte over SHORT_PIECE bytes: ``backtrack_run`` reads their BPE from the periodic
last tokens of their prefixes (``backtrack.pyx``); it must equal tiktoken and the merge loop for
every byte and length, and fall back to the backtracking loops where it declines (more run tokens
than RUN_KINDS), on the shipped vocabularies and on generated ones with odd run-token ranks."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore
from bpecore import reference

ENCODINGS = ["cl100k_base", "o200k_base"]
RUN_KINDS, RUN_WINDOW = 64, 4096
LENGTHS = [
    *range(33, 90),
    127,
    128,
    129,
    255,
    256,
    257,
    1000,
    RUN_WINDOW - 1,
    RUN_WINDOW,
    RUN_WINDOW + 1,
    10_007,
]


@pytest.mark.parametrize("name", ENCODINGS)
def test_every_byte_run_equals_tiktoken(name, tiktoken_encoding):
    enc = bpecore.get_encoding(name)
    tk = tiktoken_encoding(name)
    for b in range(256):
        for n in LENGTHS:
            piece = bytes([b]) * n
            assert enc.encode_piece(piece) == tk._encode_single_piece(piece), (b, n)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("ch", ["a", " ", "\n", "\t", "0", "#", ".", "é", "\u3042"])
def test_runs_in_text(name, ch, tiktoken_encoding):
    # Through the scanners and encode_text's count and encode, with a run cut inside a text.
    enc = bpecore.get_encoding(name)
    tk = tiktoken_encoding(name)
    for n in (40, 333, 5000, 150_001):
        text = f"x {ch * n} y{ch * (n // 3)}"
        ref = tk.encode_ordinary(text)
        assert enc.encode_ordinary(text) == ref, (repr(ch), n)
        assert enc.count(text) == len(ref), (repr(ch), n)


def run_ranks(seed: int, kinds: int, longest: int) -> dict[bytes, int]:
    """The 256 bytes, then up to ``kinds`` tokens b"a" * k of random lengths up to ``longest``,
    each ranked next when BPE over the ranks before it leaves exactly two tokens (so that BPE
    forms it), in a random order."""
    rng = random.Random(seed)
    ranks = {bytes([b]): b for b in range(256)}
    candidates = list(range(2, longest + 1))
    for _ in range(20 * kinds):
        if len(ranks) - 256 == kinds or not candidates:
            break
        k = rng.choice(candidates)
        if len(reference.bpe_encode(ranks, b"a" * k)) == 2:
            ranks[b"a" * k] = len(ranks)
            candidates.remove(k)
    return ranks


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    kinds=st.sampled_from([1, 3, 7, 20, 63, 64, 65, 90]),
    longest=st.sampled_from([8, 33, 100, 200]),
    n=st.integers(33, 300),
)
def test_hyp_generated_run_vocab(seed, kinds, longest, n):
    ranks = run_ranks(seed, kinds, longest)
    enc = bpecore.Encoding("runs", ranks, None, {})
    piece = b"a" * n
    got = enc.encode_piece(piece)
    assert got == reference.bpe_encode(ranks, piece)
    assert enc.count(piece.decode()) == len(got)


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), kinds=st.sampled_from([7, 30, 63, 70]))
def test_hyp_generated_run_vocab_long(seed, kinds, tiktoken_encoding):
    tiktoken = pytest.importorskip("tiktoken")
    ranks = run_ranks(seed, kinds, 128)
    enc = bpecore.Encoding("runs", ranks, None, {})
    tk = tiktoken.Encoding("runs", pat_str=r"[\s\S]+", mergeable_ranks=ranks, special_tokens={})
    for n in (RUN_WINDOW + 1, 9_999):
        piece = b"a" * n
        assert enc.encode_piece(piece) == tk._encode_single_piece(piece)

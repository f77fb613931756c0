"""Fuzzing of the core against its oracles (see fuzz_targets.py for each target's oracle).

Two sizes: the default run uses fixed seeds (``derandomize=True`` and seeded generators) and takes
about a minute; ``-m slow`` runs the same properties at high example counts. scripts/reliability/fuzz.py runs
the same targets for a time budget (millions of inputs) and atheris mode.
"""

from __future__ import annotations

import random

import fuzz_targets as ft
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

CI = dict(derandomize=True, deadline=None, database=None, suppress_health_check=list(HealthCheck))
SLOW = dict(deadline=None, suppress_health_check=list(HealthCheck))

chars = (
    st.sampled_from(ft.ALPHABET)
    | st.sampled_from(ft.CHUNKS)
    | st.characters(exclude_categories=["Cs"])
)
texts = st.lists(chars, max_size=40).map("".join)
short_texts = st.lists(chars, max_size=16).map("".join)
encodings = st.sampled_from(ft.ENCODINGS)
patterns = st.sampled_from(list(ft.PATTERNS))


def ids_strategy():
    edges = st.sampled_from(
        [
            -1,
            0,
            100255,
            100256,
            100257,
            100276,
            100277,
            199997,
            199998,
            200018,
            200019,
            2**31,
            2**32,
            2**63 - 1,
            2**63,
            2**64,
            -(2**63),
            -(2**64),
        ]
    )
    return st.lists(st.integers(0, 200_000) | edges | st.integers(), max_size=12)


def _props(n_pre, n_enc, n_exact, n_dec, n_tt, n_hf, base):
    """The six properties at the given example counts, under ``base`` settings."""

    @settings(max_examples=n_pre, **base)
    @given(patterns, texts)
    def pretokenize(kind, text):
        ft.check_pretokenize(kind, text)

    @settings(max_examples=n_enc, **base)
    @given(encodings, texts)
    def encode(name, text):
        ft.check_encode(name, text)

    @settings(max_examples=n_exact, **base)
    @given(encodings, short_texts, st.integers(0, 2**32 - 1))
    def exact(name, text, seed):
        ft.check_exact(name, text, seed)

    @settings(max_examples=n_dec, **base)
    @given(encodings, ids_strategy())
    def decode(name, ids):
        ft.check_decode(name, ids)

    @settings(max_examples=n_tt, **base)
    @given(st.randoms(use_true_random=False) | st.binary(max_size=2000).map(lambda b: b))
    def load_tiktoken(r):
        ft.check_tiktoken(ft.gen_tiktoken(r) if isinstance(r, random.Random) else r)

    @settings(max_examples=n_hf, **base)
    @given(st.randoms(use_true_random=False) | st.binary(max_size=2000))
    def load_hf(r):
        ft.check_hf(ft.gen_hf(r) if isinstance(r, random.Random) else r)

    return {
        "pretokenize": pretokenize,
        "encode": encode,
        "exact": exact,
        "decode": decode,
        "load_tiktoken": load_tiktoken,
        "load_hf": load_hf,
    }


CI_PROPS = _props(2500, 1200, 800, 2000, 800, 500, CI)
SLOW_PROPS = _props(100_000, 20_000, 10_000, 100_000, 20_000, 10_000, SLOW)


@pytest.mark.parametrize("target", list(CI_PROPS))
def test_hyp_fuzz_ci(target):
    CI_PROPS[target]()


@pytest.mark.slow
@pytest.mark.parametrize("target", list(SLOW_PROPS))
def test_hyp_fuzz_slow(target):
    SLOW_PROPS[target]()


# Seeded bulk runs of the generators (cheaper per input than hypothesis): a fixed seed, so a failure
# here replays exactly; scripts/reliability/fuzz.py runs the same generators for millions of inputs.
BULK = {
    "pretokenize": 40_000,
    "encode": 20_000,
    "exact": 6_000,
    "decode": 100_000,
    "load_tiktoken": 6_000,
    "load_hf": 2_000,
}


@pytest.mark.parametrize("target", list(BULK))
def test_fuzz_seeded_bulk(target):
    gen, check = ft.TARGETS[target]
    ft.warm_up(target)
    for i in range(BULK[target]):
        args = gen(random.Random(f"ci:{i}"))
        try:
            check(*args) if isinstance(args, tuple) else check(args)
        except BaseException as e:
            raise AssertionError(
                f"{target} input ci:{i} {args!r:.500}: {type(e).__name__}: {e}"
            ) from e


REPETITIVE = {
    "empty": "",
    "a": "a" * 5000,
    "space": " " * 5000,
    "newline": "\n" * 3000,
    "digit": "0" * 3000,
    "contraction": "'s" * 1500,
    "emoji": "😀" * 2000,
    "space-a": " a" * 2500,
    "crlf": "\r\n" * 2000,
}


@pytest.mark.parametrize("text", list(REPETITIVE.values()), ids=list(REPETITIVE))
def test_repetitive_inputs_vs_regex_and_count(text):
    # tiktoken's "catastrophically repetitive" inputs: the scanners and the exact ops on long runs
    for kind in ft.PATTERNS:
        ft.check_pretokenize(kind, text)
    for name in ft.ENCODINGS:
        enc = ft.encoding(name)
        n = enc.count(text)
        assert enc.count_till_limit(text, n) == n and enc.count_till_limit(text, max(n - 1, 0)) in (
            None,
            0,
        )
        k = enc.split_at(text, n // 2)
        assert enc.count(text[:k]) <= n // 2 and (
            k == len(text) or enc.count(text[: k + 1]) > n // 2
        )

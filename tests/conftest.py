"""Shared fixtures: the toy vocabulary of the README, the shipped encodings, tiktoken twins, corpora."""

from __future__ import annotations

import base64
import functools
import gzip
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import bpecore
from bpecore.registry import CL100K_PATTERN, O200K_PATTERN

settings.register_profile(
    "dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# CI: fixed examples (derandomize), so a landing never depends on the draw; new inputs come from
# the dev profile, the slow suites and scripts/reliability/fuzz.py.
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPORA = sorted(p.name.split(".")[0] for p in (SHARED / "corpora").glob("*.txt.gz"))
PATTERNS = {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}

#: The README's worked example: every byte, then these merges in rank order.
TOY_MERGES = [b"ab", b"cb", b"ac", b"bb", b"cbb", b"acbb"]


def toy_ranks() -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for i, token in enumerate(TOY_MERGES):
        ranks[token] = 256 + i
    return ranks


def read_corpus(name: str) -> str:
    return gzip.decompress((SHARED / "corpora" / f"{name}.1mb.txt.gz").read_bytes()).decode("utf-8")


def shared_ranks(name: str) -> dict[bytes, int]:
    data = gzip.decompress((SHARED / "vocab" / f"{name}.tiktoken.gz").read_bytes())
    return {
        base64.b64decode(tok): int(rank)
        for tok, rank in (line.split() for line in data.splitlines() if line)
    }


@pytest.fixture(scope="session")
def toy_encoding() -> bpecore.Encoding:
    return bpecore.Encoding("toy", toy_ranks(), None, {})


@pytest.fixture(scope="session", params=["cl100k_base", "o200k_base"])
def encoding_name(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def corpus():
    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            cache[name] = read_corpus(name)
        return cache[name]

    return get


_tiktoken_cache: dict[str, object] = {}


@pytest.fixture(scope="session")
def tiktoken_encoding():
    """tiktoken.Encoding built from ../shared/vocab (no network), or skip when tiktoken is absent."""
    tiktoken = pytest.importorskip("tiktoken")

    def get(name: str):
        if name not in _tiktoken_cache:
            enc = bpecore.get_encoding(name)
            _tiktoken_cache[name] = tiktoken.Encoding(
                name,
                pat_str=PATTERNS[name],
                mergeable_ranks=shared_ranks(name),
                special_tokens=enc.special_tokens,
            )
        return _tiktoken_cache[name]

    return get


@pytest.fixture(scope="session")
def token_bytes():
    """All token byte strings of an encoding, for the token-concatenation strategy."""
    cache: dict[str, list[bytes]] = {}

    def get(name: str) -> list[bytes]:
        if name not in cache:
            cache[name] = bpecore.get_encoding(name).token_byte_values()
        return cache[name]

    return get


def token_concatenation(tokens: list[bytes], max_size: int = 40) -> st.SearchStrategy[str]:
    """Text made by concatenating random vocabulary tokens (the rust-gems create_test_bytes idea)."""
    return st.lists(st.sampled_from(tokens), max_size=max_size).map(
        lambda ts: b"".join(ts).decode("utf-8", "replace")
    )


ADVERSARIAL_CHARS = [
    " ",
    "a",
    "0",
    "\n",
    "\t",
    "'",
    "s",
    "A",
    "\u00a0",
    "\u3000",
    "é",
    "\u0301",
    "😀",
    "中",
    "/",
    "!",
    "\r",
]


_EXACT_ENCODINGS: dict[str, bpecore.Encoding] = {}


#: Characters on both sides of the patterns' cuts, by class: lower and upper case letters, a
#: mark, a CJK letter, digits, whitespace, newlines, apostrophe, punctuation, '/'.
BOUNDARY_CLASSES = ["az\u00e9", "AZ", "\u0301", "\u4e2d", "01", " \t", "\n\r", "'", ".,!", "/"]


@functools.cache
def boundary_ranks() -> dict[bytes, int]:
    """A small vocab whose counts see where pieces end: the 256 bytes, the boundary characters,
    then a token for every pair of them, pairs of two classes ranked before pairs of one. BPE
    merges a pair exactly when no cut falls between its characters, so a scanner or an exact
    operation that cut differently would count differently (cl100k's vocab never merges, e.g.,
    a newline with the spaces after it, so a cut there is invisible to its counts)."""
    ranks = {bytes([b]): b for b in range(256)}
    chars = "".join(BOUNDARY_CLASSES)
    for ch in chars:
        data = ch.encode("utf-8")
        for k in range(2, len(data) + 1):
            ranks.setdefault(data[:k], len(ranks))
    cls = {ch: i for i, group in enumerate(BOUNDARY_CLASSES) for ch in group}
    pairs = sorted(((a, b) for a in chars for b in chars), key=lambda p: cls[p[0]] == cls[p[1]])
    for a, b in pairs:
        ranks.setdefault((a + b).encode("utf-8"), len(ranks))
    return ranks


def exact_encoding(name: str) -> bpecore.Encoding:
    """The shipped encodings by name, plus vocabularies the exact-operation tests need: r50k's
    pattern over cl100k ("r50k_pattern"; "llama3_pattern", "qwen2_pattern", "tekken_pattern" likewise),
    a pattern-less cl100k vocab ("cl100k_nopattern"), the toy
    vocab ("toy") and a custom regex pattern ("cl100k_words"). Built once per session."""
    if name not in _EXACT_ENCODINGS:
        if name == "cl100k_nopattern":
            _EXACT_ENCODINGS[name] = bpecore.Encoding(name, shared_ranks("cl100k_base"), None, {})
        elif name == "toy":
            _EXACT_ENCODINGS[name] = bpecore.Encoding(name, toy_ranks(), None, {})
        elif name == "r50k_pattern":
            from bpecore.registry import R50K_PATTERN

            _EXACT_ENCODINGS[name] = bpecore.Encoding(
                name, shared_ranks("cl100k_base"), R50K_PATTERN, {}
            )
        elif name in ("llama3_pattern", "qwen2_pattern", "tekken_pattern"):
            from bpecore import pretokenize

            pattern = getattr(pretokenize, name.split("_")[0].upper() + "_PATTERN")
            _EXACT_ENCODINGS[name] = bpecore.Encoding(name, boundary_ranks(), pattern, {})
        elif name == "cl100k_words":
            _EXACT_ENCODINGS[name] = bpecore.Encoding(
                name, shared_ranks("cl100k_base"), r"\S+|\s+", {}
            )
        else:
            _EXACT_ENCODINGS[name] = bpecore.get_encoding(name)
    return _EXACT_ENCODINGS[name]

"""The GPT-2 family: r50k_base, gpt2, p50k_base and p50k_edit, shipped and hash-checked."""

from __future__ import annotations

import base64
import gzip
import hashlib
from importlib import resources

import pytest

import bpecore
from bpecore.registry import ENDOFTEXT, FIM_MIDDLE, FIM_PREFIX, FIM_SUFFIX, R50K_PATTERN

R50K_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
P50K_SHA256 = "94b5ca7dff4d00767bc256fdd1b27e5b17361d7b8a5f968547f9f23eb70d2069"
FAMILY = ["gpt2", "r50k_base", "p50k_base", "p50k_edit"]


def _shipped(filename: str) -> bytes:
    return gzip.decompress(resources.files("bpecore").joinpath(f"data/{filename}.gz").read_bytes())


def test_rank_files_are_tiktokens():
    r50k, p50k = _shipped("r50k_base.tiktoken"), _shipped("p50k_base.tiktoken")
    assert hashlib.sha256(r50k).hexdigest() == R50K_SHA256
    assert hashlib.sha256(p50k).hexdigest() == P50K_SHA256
    spaces = b"".join(base64.b64encode(b" " * n) + b" %d\n" % (50255 + n) for n in range(2, 26))
    assert p50k == r50k + spaces


@pytest.mark.parametrize("name", FAMILY)
def test_shape(name):
    enc = bpecore.get_encoding(name)
    assert enc.name == name
    assert enc.pattern == R50K_PATTERN
    assert enc.eot_token == 50256
    n_vocab = {"gpt2": 50257, "r50k_base": 50257, "p50k_base": 50281, "p50k_edit": 50284}[name]
    assert enc.n_vocab == n_vocab
    assert enc.vocab_sha256 == (R50K_SHA256 if name in ("gpt2", "r50k_base") else P50K_SHA256)
    assert name in bpecore.list_encodings()


def test_p50k_edit_specials():
    enc = bpecore.get_encoding("p50k_edit")
    assert enc.special_tokens == {
        ENDOFTEXT: 50256,
        FIM_PREFIX: 50281,
        FIM_MIDDLE: 50282,
        FIM_SUFFIX: 50283,
    }
    assert enc.encode("<|fim_prefix|>x<|fim_suffix|>", allowed_special="all") == [50281, 87, 50283]


def test_golden():
    assert bpecore.get_encoding("gpt2").encode("hello world") == [31373, 995]
    assert bpecore.get_encoding("r50k_base").encode(
        "hello <|endoftext|>", allowed_special="all"
    ) == [31373, 220, 50256]
    # p50k's whitespace tokens: the 7 spaces before " x" are one token there, 7 in r50k.
    assert bpecore.get_encoding("p50k_base").encode("        x") == [50262, 2124]
    assert bpecore.get_encoding("r50k_base").encode("        x") == [
        220,
        220,
        220,
        220,
        220,
        220,
        220,
        2124,
    ]
    assert bpecore.get_encoding("gpt2").encode("00000000000000000") == [8269, 10535, 830]


@pytest.mark.parametrize("name", ["r50k_base", "p50k_base"])
@pytest.mark.parametrize(
    "corpus_name", ["english", "code", "multilingual", "adv_whitespace", "adv_digits"]
)
def test_equals_tiktoken(name, corpus_name, corpus):
    tiktoken = pytest.importorskip("tiktoken")
    enc = bpecore.get_encoding(name)
    ref = tiktoken.Encoding(
        name,
        pat_str=R50K_PATTERN,
        mergeable_ranks=enc.mergeable_ranks,
        special_tokens=enc.special_tokens,
    )
    text = corpus(corpus_name)[:300_000]
    assert enc.encode(text) == ref.encode(text)
    assert enc.count(text) == len(ref.encode(text))

"""Loaders: .tiktoken files and Hugging Face tokenizer.json; malformed files are clear errors."""

from __future__ import annotations

import base64
import gzip
import json

import pytest

import bpecore
from bpecore.load import bytes_to_unicode
from tests.conftest import SHARED, TOY_MERGES, toy_ranks


def _write_tiktoken(path, ranks):
    path.write_bytes(b"".join(base64.b64encode(t) + b" %d\n" % r for t, r in ranks.items()))


def test_load_tiktoken_shared_file_matches_shipped():
    enc = bpecore.load_tiktoken(SHARED / "vocab" / "cl100k_base.tiktoken.gz", name="cl")
    assert enc.encode("hello world") == [15339, 1917]
    assert enc.vocab_sha256 == "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"


def test_load_tiktoken_toy(tmp_path):
    path = tmp_path / "toy.tiktoken"
    _write_tiktoken(path, toy_ranks())
    enc = bpecore.load_tiktoken(path, pattern=None, special_tokens={"<|eot|>": 999})
    assert enc.name == "toy"
    assert enc.encode("acbb<|eot|>", allowed_special="all") == [261, 999]
    gz = tmp_path / "toy2.tiktoken.gz"
    gz.write_bytes(gzip.compress(path.read_bytes()))
    assert bpecore.load_tiktoken(gz, pattern=None).encode("acbb") == [261]


@pytest.mark.parametrize(
    "content,message",
    [
        (b"YQ== 0\nYg==\n", ":2: expected '<base64 token> <rank>'"),
        (b"YQ== 0\n!!!! 1\n", ":2: invalid base64"),
        (b"YQ== 0\nYg== x\n", ":2: rank b'x' is not an integer"),
        (b"YQ== 0\nYQ== 1\n", ":2: token b'a' already has rank 0"),
        (b"YQ== 0\nYg== 0\n", ":2: rank 0 already given on line 1"),
        (b"", "no tokens"),
        (b"YQ== 0\n", "single-byte tokens"),
        (b"\xff\xfe 0\n", ":1: invalid base64"),
    ],
)
def test_malformed_tiktoken(tmp_path, content, message):
    path = tmp_path / "bad.tiktoken"
    path.write_bytes(content)
    with pytest.raises(bpecore.VocabError) as info:
        bpecore.load_tiktoken(path)
    assert message in str(info.value)
    assert "bad.tiktoken" in str(info.value)


def test_truncated_gzip_and_missing_file(tmp_path):
    path = tmp_path / "cut.tiktoken.gz"
    path.write_bytes((SHARED / "vocab" / "cl100k_base.tiktoken.gz").read_bytes()[:5000])
    with pytest.raises(bpecore.VocabError, match="cut.tiktoken.gz"):
        bpecore.load_tiktoken(path)
    with pytest.raises(bpecore.VocabError, match="cannot read"):
        bpecore.load_tiktoken(tmp_path / "missing.tiktoken")


def test_sha256_mismatch(tmp_path):
    path = tmp_path / "toy.tiktoken"
    _write_tiktoken(path, toy_ranks())
    with pytest.raises(bpecore.VocabError, match="SHA-256"):
        bpecore.load_tiktoken(path, expected_sha256="0" * 64)


def _toy_hf(merge_form: str, pre_tokenizer=None) -> dict:
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = []
    splits = {
        b"ab": (b"a", b"b"),
        b"cb": (b"c", b"b"),
        b"ac": (b"a", b"c"),
        b"bb": (b"b", b"b"),
        b"cbb": (b"cb", b"b"),
        b"acbb": (b"a", b"cbb"),
    }
    for i, token in enumerate(TOY_MERGES):
        left, right = (("".join(b2u[x] for x in part)) for part in splits[token])
        vocab[left + right] = 256 + i
        merges.append(f"{left} {right}" if merge_form == "string" else [left, right])
    return {
        "version": "1.0",
        "added_tokens": [{"id": 300, "content": "<|end|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    }


@pytest.mark.parametrize("merge_form", ["string", "list"])
def test_load_hf_toy(tmp_path, merge_form):
    path = tmp_path / "tokenizer.json"
    pre = {
        "type": "Sequence",
        "pretokenizers": [
            {
                "type": "Split",
                "pattern": {"Regex": r"\S+|\s+"},
                "behavior": "Isolated",
                "invert": False,
            },
            {"type": "ByteLevel", "add_prefix_space": False, "use_regex": False},
        ],
    }
    path.write_text(json.dumps(_toy_hf(merge_form, pre)))
    enc = bpecore.load_hf(path)
    assert enc.pattern == r"\S+|\s+"
    assert enc.encode("acbb ab<|end|>", allowed_special="all") == [261, 32, 256, 300]


def test_load_hf_bytelevel_uses_gpt2_pattern(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(_toy_hf("string", {"type": "ByteLevel", "add_prefix_space": False})))
    enc = bpecore.load_hf(path)
    assert enc.pattern == bpecore.registry.R50K_PATTERN  # GPT-2 cuts like r50k: the scanner applies
    assert enc.encode("ab's") == [256, 39, 115]


@pytest.mark.parametrize(
    "mutate,message",
    [
        (lambda d: d["model"].update(type="WordPiece"), "not BPE"),
        (
            lambda d: d["model"]["merges"].append("zz qq"),
            "merges\\[6\\]: token 'zz' is not in the vocab",
        ),
        (lambda d: d["model"]["merges"].append("a"), "merges\\[6\\]: expected two tokens"),
        # a byte without a token is dropped, as `tokenizers` drops it; a merge of it is refused
        (lambda d: d["model"]["vocab"].pop("a"), "token 'a' is not in the vocab"),
        (
            lambda d: d.update(normalizer={"type": "Lowercase"}),
            "normalizer .Lowercase. is not supported",
        ),
        (lambda d: d.update(pre_tokenizer={"type": "Whitespace"}), "pre-tokenizer 'Whitespace'"),
    ],
)
def test_malformed_hf(tmp_path, mutate, message):
    doc = _toy_hf("string")
    mutate(doc)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(bpecore.VocabError, match=message):
        bpecore.load_hf(path)


def test_hf_merge_list_that_differs_from_bpe_by_rank(tmp_path):
    doc = _toy_hf("string")
    b2u = bytes_to_unicode()
    doc["model"]["merges"][-1] = f"{b2u[ord('a')]}{b2u[ord('c')]} {b2u[ord('b')]}{b2u[ord('b')]}"
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(bpecore.VocabError, match="merges\\[5\\].*differs from BPE by rank"):
        bpecore.load_hf(path)


def test_hf_not_json(tmp_path):
    path = tmp_path / "tokenizer.json"
    path.write_bytes(b'{"model": \n  {"vocab": }')
    with pytest.raises(bpecore.VocabError, match="tokenizer.json:2: not valid JSON"):
        bpecore.load_hf(path)


@pytest.mark.parametrize("filename", ["cl100k_base.tiktoken", "tekken_240718.json"])
def test_shipped_file_with_another_hash_is_refused(filename, monkeypatch):
    from bpecore import load

    good = load.shipped_sha256()
    data, digest, _ = load.read_shipped(filename)
    assert digest == good[filename] and len(data) > 0
    monkeypatch.setattr(load, "shipped_sha256", lambda: {**good, filename: "0" * 64})
    with pytest.raises(bpecore.VocabError, match="does not match the pinned"):
        load.read_shipped(filename)

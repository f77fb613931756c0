"""Llama 3's tokenizer.json through ``load_hf``, against Hugging Face `tokenizers`: 0 mismatches.

Two files of the same vocabulary: the one rebuilt from llama.cpp's Llama 3 GGUF (its tokens and
the hub file's 280,147 merges, ``scripts/gguf_vocabs.sh``) and the one transformers' tiktoken
converter writes from the ``tokenizer.model`` of `llama-models` (``scripts/chat_reference.sh``
installs transformers in build/chat-reference; the file is written there once, in a subprocess,
so its ``regex`` never meets the test extra's). Each lists every split of every token, token by
token in id order, with ``ignore_merges``; ``bpecore.hf._rank_file`` reads it as BPE by rank.
"""

from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
import time
from collections import defaultdict
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore
from bpecore.hf import _build, _rank_file
from bpecore.llama import WholePieceEncoding
from bpecore.load import bytes_to_unicode
from tests.conftest import CORPORA, assert_exact_operations, read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the reference")

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "build" / "chat-reference"
CONVERTED = ROOT / "build" / "llama3-converted" / "tokenizer.json"

_CONVERT = """
import sys
from transformers.convert_slow_tokenizer import TikTokenConverter
from bpecore.llama import installed_path, special_token_names
TikTokenConverter(
    vocab_file=installed_path(3), extra_special_tokens=special_token_names(3)
).converted().save(sys.argv[1])
"""


def _converted() -> Path:
    if CONVERTED.is_file():
        return CONVERTED
    if not (REFERENCE / "transformers").is_dir():
        pytest.skip(f"{REFERENCE} has no transformers: scripts/chat_reference.sh installs it")
    try:
        from bpecore.llama import installed_path

        installed_path(3)
    except bpecore.VocabError as e:
        pytest.skip(str(e))
    CONVERTED.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REFERENCE), str(ROOT)]))
    part = CONVERTED.with_suffix(".part")
    subprocess.run([sys.executable, "-c", _CONVERT, str(part)], env=env, check=True)
    part.replace(CONVERTED)
    return CONVERTED


def _rebuilt(tmp_path_factory) -> Path:
    from tests.bpecore import test_gguf_vocabs

    path = tmp_path_factory.mktemp("llama-bpe") / "tokenizer.json"
    path.write_text(json.dumps(test_gguf_vocabs._rebuilt("llama-bpe")), encoding="utf-8")
    return path


@pytest.fixture(scope="module", params=["gguf", pytest.param("converted", marks=pytest.mark.slow)])
def pair(request, tmp_path_factory):
    """(load_hf of the file, `tokenizers` on it, the file's path)."""
    if request.param == "gguf":
        if not (ROOT / "build" / "gguf-vocabs" / "ggml-vocab-llama-bpe.gguf").is_file():
            pytest.skip("build/gguf-vocabs is missing: scripts/gguf_vocabs.sh fetches it")
        path = _rebuilt(tmp_path_factory)
    else:
        path = _converted()
    start = time.process_time()
    enc = bpecore.load_hf(path)
    print(f"load_hf({request.param}): {time.process_time() - start:.2f} s CPU")
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.encode_special_tokens = True
    return enc, tok, path


def _same(enc, tok, text: str) -> None:
    want = tok.encode(text, add_special_tokens=False).ids
    got = enc.encode_ordinary(text)
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        pytest.fail(f"first difference at token {k}: {got[k : k + 5]} != {want[k : k + 5]}")
    assert enc.count(text) == len(want)


def test_read_as_a_rank_file(pair):
    """The file is the compiled whole-piece encoding, with the file's ids and special tokens."""
    enc, tok, _ = pair
    assert isinstance(enc, WholePieceEncoding)
    assert enc.n_vocab == tok.get_vocab_size() == 128_256
    assert enc.special_tokens["<|eot_id|>"] == tok.token_to_id("<|eot_id|>") == 128_009
    text = "<|begin_of_text|>hi<|eot_id|>"
    tok.encode_special_tokens = False
    try:
        want = tok.encode(text, add_special_tokens=False).ids
    finally:
        tok.encode_special_tokens = True
    assert enc.encode(text, allowed_special="all") == want == [128_000, 6151, 128_009]
    again = pickle.loads(pickle.dumps(enc))
    assert isinstance(again, WholePieceEncoding)
    assert again.encode(text, allowed_special="all") == want
    assert again.encode_ordinary(" mnoha .::.::") == enc.encode_ordinary(" mnoha .::.::")


def test_corpora(pair):
    enc, tok, _ = pair
    for name in CORPORA:
        _same(enc, tok, read_corpus(name)[:50_000])


@pytest.mark.slow
def test_corpora_whole(pair):
    enc, tok, _ = pair
    for name in CORPORA:
        _same(enc, tok, read_corpus(name))


_TEXT = st.text(
    st.sampled_from(list(" \t\n\r'sdtmlvre.:,;!?()[]{}<>=+-_*/\\|\"`~@#$%^&0123456789aAzé日本한ǘ"))
    | st.characters(codec="utf-8"),
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(data=st.data())
def test_hyp_same_as_tokenizers(pair, data):
    enc, tok, _ = pair
    _same(enc, tok, data.draw(_TEXT))


@pytest.mark.slow
def test_two_splits_of_one_token_side_by_side(pair):
    """Merge priority and BPE by rank differ only in which of two different splits of one token
    goes first when both are there at once: every token with two or more splits, as one piece
    twice over and after (before) each of its splits' left (right) parts, against `tokenizers`
    with no regex (the whole text one piece)."""
    enc, _, path = pair
    doc = json.loads(path.read_text(encoding="utf-8"))
    doc["pre_tokenizer"] = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc))
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    splits: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for merge in doc["model"]["merges"]:
        left, right = merge.split(" ") if isinstance(merge, str) else merge
        splits[left + right].append((left, right))
    pieces = set()
    for token, pairs in splits.items():
        if len(pairs) < 2:
            continue
        data = bytes(byte_of[c] for c in token)
        pieces.add(data + data)
        for left, right in pairs:
            pieces.add(bytes(byte_of[c] for c in left) + data)
            pieces.add(data + bytes(byte_of[c] for c in right))
    texts = []
    for data in sorted(pieces):
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    assert len(texts) > 400_000
    want = [e.ids for e in tok.encode_batch(texts, add_special_tokens=False)]
    bad = [t for t, w in zip(texts, want) if enc.encode_piece(t.encode("utf-8")) != w]
    assert not bad, bad[:5]


def test_exact_operations(pair):
    """split_at, split_at_end, count_till_limit, interval counts, both counters and the chunker
    against their definitions over `tokenizers`' counts, on text with whole-piece-only tokens
    (" mnoha" and ".::.::" are never formed by BPE from their bytes) and without."""
    enc, tok, _ = pair

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    plain = read_corpus("english")[1000:1090]
    spelled = plain[:40] + " mnoha .::.:: x" + plain[40:70]
    assert not enc._spells_whole(plain) and enc._spells_whole(spelled)
    for text in (plain, spelled):
        assert_exact_operations(enc, text, count)


def _doc(pair) -> dict:
    return json.loads(pair[2].read_text(encoding="utf-8"))


@pytest.mark.slow
def test_other_layouts_are_not_read_as_rank_files(pair):
    """A merge out of its token's place, a split left out or no ``ignore_merges``: not a rank
    file's conversion (the merge-priority path then decides, and refuses Llama 3's vocabulary)."""
    doc = _doc(pair)
    assert _rank_file(doc, "f") is not None
    merges = doc["model"]["merges"]
    swapped = dict(doc, model=dict(doc["model"], merges=[merges[1], merges[0], *merges[2:]]))
    assert _rank_file(swapped, "f") is None
    parts = [m.split(" ") if isinstance(m, str) else m for m in merges]
    k = next(i for i, (a, b) in enumerate(parts) if a + b == "ĠĠĠĠ" and a != "Ġ")
    dropped = dict(doc, model=dict(doc["model"], merges=merges[:k] + merges[k + 1 :]))
    assert _rank_file(dropped, "f") is None
    plain = dict(doc, model=dict(doc["model"], ignore_merges=False))
    assert _rank_file(plain, "f") is None
    with pytest.raises(bpecore.VocabError, match="formed by BPE only from tokens of higher"):
        _build(plain, "llama", "f")

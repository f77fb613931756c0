"""Inputs the fuzzers found that once crashed or answered wrong; each stays here for good."""

from __future__ import annotations

import json
import time

import pytest

import bpecore
from bpecore.load import bytes_to_unicode


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("bad", [2**63, 2**64, -(2**63) - 1, 10**30, -(10**30)])
def test_decode_id_beyond_c_range_is_valueerror(name, bad):
    # was OverflowError ("Python int too large to convert to C ssize_t"), which is not a ValueError
    enc = bpecore.get_encoding(name)
    for call in (enc.decode_bytes, enc.decode, enc.decode_tokens_bytes):
        with pytest.raises(ValueError):
            call([15339, bad])
    with pytest.raises(ValueError):
        enc.decode_single_token_bytes(bad)


def _hf_doc() -> dict:
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for left, right in [("h", "e"), ("l", "l"), ("he", "ll")]:
        vocab[left + right] = len(vocab)
    return {
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": ["h e", "l l", "he ll"]},
    }


def _write(tmp_path, data: bytes):
    path = tmp_path / "tok" / "tokenizer.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(data)
    return path


def _mutated(fn) -> bytes:
    doc = _hf_doc()
    fn(doc)
    return json.dumps(doc).encode()


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deep-nesting"),  # was RecursionError
        pytest.param(
            _mutated(lambda d: d.update(added_tokens=["\u0120"])), id="added-token-not-object"
        ),
        pytest.param(_mutated(lambda d: d.update(added_tokens=7)), id="added-tokens-int"),
        pytest.param(_mutated(lambda d: d.update(normalizer="NFC")), id="normalizer-string"),
        pytest.param(_mutated(lambda d: d.update(pre_tokenizer=[1])), id="pre-tokenizer-list"),
        pytest.param(
            _mutated(lambda d: d["model"]["vocab"].update(h=[1])), id="vocab-id-list"
        ),  # was TypeError
        pytest.param(_mutated(lambda d: d["model"]["vocab"].update(h="7")), id="vocab-id-string"),
        pytest.param(_mutated(lambda d: d["model"]["vocab"].update(h=1.5)), id="vocab-id-float"),
        pytest.param(_mutated(lambda d: d["model"]["vocab"].update(h=-3)), id="vocab-id-negative"),
        pytest.param(
            _mutated(lambda d: d["model"].update(merges=[["h", ["e"]]])), id="merge-part-list"
        ),
    ],
)
def test_malformed_tokenizer_json_is_vocab_error(tmp_path, data):
    with pytest.raises(bpecore.VocabError):
        bpecore.load_hf(_write(tmp_path, data))


def test_small_tokenizer_json_loads_fast(tmp_path):
    # bytes_to_unicode() was rebuilt once per byte: 0.4 s for a 260-token file
    path = _write(tmp_path, json.dumps(_hf_doc()).encode())
    t0 = time.perf_counter()
    for _ in range(5):
        enc = bpecore.load_hf(path)
    assert (time.perf_counter() - t0) / 5 < 0.1
    assert enc.decode(enc.encode("hello")) == "hello"


@pytest.mark.parametrize(
    "tools",
    [
        [{}],
        [{"type": "function"}],
        [{"function": {}}],
        [1],
        ["x"],
        [None],
        [{"function": {"name": "f", "parameters": {"properties": {"a": 1}}}}],
        [{"function": {"name": "f", "description": 7}}],
    ],
    ids=repr,
)
def test_malformed_tools_are_valueerror(tools):
    # schemathesis: POST /v1/chat/count {"messages": [], "tools": [{}]} was a 500 (KeyError 'name')
    with pytest.raises(ValueError, match="malformed tool definition"):
        bpecore.count_messages([], model="gpt-4o", tools=tools)


def test_chat_count_malformed_tools_is_422():
    from fastapi.testclient import TestClient

    from bpecore_service.config import Settings
    from bpecore_service.main import create_app

    with TestClient(
        create_app(Settings(load_in_background=False, encodings=["cl100k_base", "o200k_base"]))
    ) as c:
        r = c.post("/v1/chat/count", json={"messages": [], "model": "gpt-4o", "tools": [{}]})
        assert r.status_code == 422, r.text
        assert r.json()["error"]["type"] == "unsupported_message"

"""Hostile vocabulary files: every loader refuses a broken file with a ``VocabError`` that names
the file (and the place in it, where there is one), in bounded time and memory.

Loaders: ``load_hf`` (tokenizer.json), ``load_tekken``, ``load_llama`` (tokenizer.model),
``load_gguf`` and ``from_pretrained`` (a model directory). Each gets hand-made breakages
(truncated, wrong types, deep nesting, duplicate tokens and merges, merges naming missing tokens,
invalid UTF-8, gigantic strings, GGUF counts of 2**60) and seeded random mutations of a valid file
(byte flips, cuts, splices; a model directory's tokenizer_config.json beside a valid
tokenizer.json); a mutated file must load (and then encode) or be refused with a
``VocabError``, never another exception. Fixed seeds: 10,000 mutations per loader in the default run
(about a minute here), 100,000 under ``-m slow``.
"""

from __future__ import annotations

import base64
import json
import random
import struct
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import pytest

import bpecore
from bpecore.load import bytes_to_unicode

#: Per load, in process CPU time and Python-allocated bytes (a file here is at most a few MB).
TIME_LIMIT = 5.0
MEMORY_LIMIT = 64 * 2**20

B2U = bytes_to_unicode()
MERGES = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o"), ("Ġ", "w"), ("o", "r")]


# ----------------------------------------------------------------------------- valid files
def hf_doc() -> dict:
    vocab = {B2U[b]: b for b in range(256)}
    for left, right in MERGES:
        vocab[left + right] = len(vocab)
    return {
        "version": "1.0",
        "added_tokens": [{"id": len(vocab), "content": "<|end|>", "special": True}],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {"type": "Digits", "individual_digits": True},
                {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
            ],
        },
        "model": {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in MERGES]},
    }


def _token_bytes() -> list[bytes]:
    return [bytes([b]) for b in range(256)] + [b"he", b"ll", b"hell", b"hello", b" w", b"or"]


def tekken_doc() -> dict:
    tokens = _token_bytes()
    return {
        "config": {
            "pattern": r"[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+|\s+",
            "default_vocab_size": len(tokens) + 4,
            "default_num_special_tokens": 4,
            "version": "v7",
        },
        "vocab": [
            {"rank": i, "token_bytes": base64.b64encode(t).decode(), "token_str": None}
            for i, t in enumerate(tokens)
        ],
        "special_tokens": [
            {"rank": i, "token_str": s, "is_control": True}
            for i, s in enumerate(["<unk>", "<s>", "</s>", "[INST]"])
        ],
    }


def llama_text() -> bytes:
    return b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(_token_bytes()))


U32, I32, STRING, ARRAY = 4, 5, 8, 9


def _s(text: str | bytes) -> bytes:
    data = text.encode("utf-8") if isinstance(text, str) else text
    return struct.pack("<Q", len(data)) + data


def gguf_bytes(pairs: list[tuple[str, int, object]] | None = None) -> bytes:
    """A GGUF file: (key, type, value) pairs; arrays are (ARRAY, (item type, items))."""
    if pairs is None:
        tokens = [B2U[b] for b in range(256)] + [a + b for a, b in MERGES]
        pairs = [
            ("tokenizer.ggml.model", STRING, "gpt2"),
            ("tokenizer.ggml.pre", STRING, "gpt-2"),
            ("tokenizer.ggml.tokens", ARRAY, (STRING, tokens)),
            ("tokenizer.ggml.token_type", ARRAY, (I32, [1] * len(tokens))),
            ("tokenizer.ggml.merges", ARRAY, (STRING, [f"{a} {b}" for a, b in MERGES])),
        ]
    out = [b"GGUF", struct.pack("<IQQ", 3, 0, len(pairs))]
    for key, kind, value in pairs:
        out.append(_s(key) + struct.pack("<I", kind))
        if kind == ARRAY:
            item, items = value
            out.append(struct.pack("<IQ", item, len(items)))
            for v in items:
                out.append(struct.pack("<i", v) if item in (I32, U32) else _s(v))
        elif kind == STRING:
            out.append(_s(value))
        else:
            out.append(struct.pack("<I", value))
    return b"".join(out)


def _write_dir(directory: Path, files: dict[str, bytes]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (directory / name).write_bytes(data)
    return directory


def pretrained_config() -> bytes:
    """A model directory's tokenizer_config.json: special tokens, a length, named chat templates."""
    templates = [
        {"name": "default", "template": "{% for m in messages %}{{ m.content }}{% endfor %}"},
        {"name": "tool_use", "template": "{{ tools | tojson }}{{ messages[-1].content }}"},
    ]
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<s>",
        "eos_token": {"content": "</s>", "special": True},
        "model_max_length": 4096,
        "chat_template": templates,
    }
    return json.dumps(config).encode()


def load_pretrained(path: Path):
    """``from_pretrained`` of the directory holding ``path`` (its tokenizer_config.json), with a
    valid tokenizer.json beside it: the mutations reach the directory's own file."""
    (path.parent / "tokenizer.json").write_text(json.dumps(hf_doc()))
    return bpecore.from_pretrained(path.parent)


#: loader name -> (file name, valid content, load)
LOADERS: dict[str, tuple[str, Callable[[], bytes], Callable]] = {
    "pretrained": ("tokenizer_config.json", pretrained_config, load_pretrained),
    "hf": ("tokenizer.json", lambda: json.dumps(hf_doc()).encode(), bpecore.load_hf),
    "tekken": ("tekken.json", lambda: json.dumps(tekken_doc()).encode(), bpecore.load_tekken),
    "llama": (
        "tokenizer.model",
        llama_text,
        lambda path: bpecore.load_llama(path, version=3),
    ),
    "gguf": ("model.gguf", gguf_bytes, bpecore.load_gguf),
}


@pytest.fixture(autouse=True, scope="module")
def _no_background_builds():
    """Wait for the service's preload thread (started when the live-server fixtures of
    tests/reliability/conftest.py import ``bpecore_service.main``) before any load here.

    Starting and stopping ``tracemalloc`` (``_bounded``) while another thread allocates without
    the GIL (the preload thread decompressing and building the shipped vocabularies) crashes
    CPython 3.11: ``-m slow`` here died with SIGSEGV in that thread in 7 of 14 runs. The same
    mutations in a plain script with the thread and without tracemalloc (4 runs), or with
    tracemalloc and without the thread (2 runs), never crashed; with both, 2 runs of 4 did."""
    preload = sys.modules.get("bpecore_service.preload")
    thread = getattr(preload, "_started", None)
    if thread is not None:
        thread.join()


def _bounded(call: Callable[[], object]) -> object:
    """``call()``, checked to finish within TIME_LIMIT CPU seconds and MEMORY_LIMIT bytes."""
    tracemalloc.start()
    t0 = time.process_time()
    try:
        return call()
    finally:
        elapsed = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert elapsed < TIME_LIMIT, f"took {elapsed:.1f} s"
        assert peak < MEMORY_LIMIT, f"allocated {peak / 2**20:.0f} MB"


def _refused(load: Callable, path: Path, place: str | None = None) -> str:
    """The VocabError message of loading ``path``: it names the file, and ``place`` if given."""
    with pytest.raises(bpecore.VocabError) as info:
        _bounded(lambda: load(path))
    message = str(info.value)
    assert str(path) in message, message
    if place is not None:
        assert place in message, message
    return message


def _loads_or_refused(load: Callable, path: Path) -> None:
    """A mutated file loads and encodes, or is refused with a VocabError naming it."""
    try:
        enc = _bounded(lambda: load(path))
    except bpecore.VocabError as e:
        assert str(path) in str(e), str(e)
        return
    try:
        ids = enc.encode_ordinary("hello world 123 héllo")
    except ValueError:  # a vocabulary without some byte's token cannot encode that byte
        return
    assert enc.count("hello world 123 héllo") == len(ids)


def test_valid_files_load(tmp_path):
    for kind, (name, content, load) in LOADERS.items():
        path = tmp_path / kind / name
        path.parent.mkdir()
        path.write_bytes(content())
        enc = load(path)
        assert enc.decode(enc.encode_ordinary("hello world")) == "hello world", kind


# ----------------------------------------------------------------------------- hand-made breakages
def _hf_variant(change: Callable[[dict], object]) -> bytes:
    doc = hf_doc()
    result = change(doc)
    return result if isinstance(result, bytes) else json.dumps(doc).encode()


def _set(path: list, value) -> Callable[[dict], None]:
    def change(doc: dict) -> None:
        node = doc
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return change


HF_CASES = {
    "truncated": (lambda doc: json.dumps(doc).encode()[:300], "not valid JSON"),
    "invalid-utf8": (lambda doc: json.dumps(doc).encode().replace(b"BPE", b"\xff\xfe"), "JSON"),
    "deep-nesting": (lambda doc: b"[" * 200_000 + b"]" * 200_000, "nested too deep"),
    "model-not-object": (_set(["model"], [1, 2]), "model"),
    "vocab-id-string": (_set(["model", "vocab", "he"], "x"), "'he'"),
    "vocab-id-huge": (_set(["model", "vocab", "he"], 2**60), "'he'"),
    "merges-not-list": (_set(["model", "merges"], "h e"), "merges"),
    "merge-wrong-type": (_set(["model", "merges", 2], 7), "merges[2]"),
    "merge-three-parts": (_set(["model", "merges", 1], "l l l"), "merges[1]"),
    "merge-missing-token": (_set(["model", "merges", 3], "hell zz"), "merges[3]"),
    "merge-twice": (lambda doc: doc["model"]["merges"].append("h e"), "merges[6]"),
    "duplicate-ids": (_set(["model", "vocab", "ll"], 256), None),
    "added-token-reuses-id": (_set(["added_tokens", 0, "id"], 5), "reuses id 5"),
    "added-token-wrong-type": (_set(["added_tokens", 0], "x"), "added_tokens"),
    "pre-tokenizer-unknown": (_set(["pre_tokenizer", "type"], "Whitespace"), "'Whitespace'"),
    "split-regex-broken": (
        _set(["pre_tokenizer", "pretokenizers", 0], {"type": "Split", "pattern": {"Regex": "("}}),
        "does not compile",
    ),
    "flag-wrong-type": (
        _set(["pre_tokenizer", "pretokenizers", 1, "use_regex"], "yes"),
        "use_regex",
    ),
    "gigantic-token": (
        lambda doc: doc["model"]["vocab"].__setitem__("x" * 4_000_000, 9999),
        None,
    ),
}


@pytest.mark.parametrize("case", sorted(HF_CASES))
def test_hf_breakages(tmp_path, case):
    change, place = HF_CASES[case]
    path = tmp_path / "tokenizer.json"
    path.write_bytes(_hf_variant(change))
    if case == "gigantic-token":  # a token no merge forms: loads (as tokenizers does), fast
        _loads_or_refused(bpecore.load_hf, path)
        return
    _refused(bpecore.load_hf, path, place)


def _tekken_variant(change: Callable[[dict], object]) -> bytes:
    doc = tekken_doc()
    result = change(doc)
    return result if isinstance(result, bytes) else json.dumps(doc).encode()


TEKKEN_CASES = {
    "truncated": (lambda doc: json.dumps(doc).encode()[:200], "not valid JSON"),
    "invalid-utf8": (lambda doc: b"\xff" + json.dumps(doc).encode(), "not valid JSON"),
    "deep-nesting": (lambda doc: b"[" * 200_000 + b"]" * 200_000, None),
    "no-config": (lambda doc: doc.pop("config"), "not a Tekken file"),
    "vocab-size-huge": (_set(["config", "default_vocab_size"], 2**60), "not within"),
    "num-special-string": (
        _set(["config", "default_num_special_tokens"], "4"),
        "malformed Tekken config",
    ),
    "entry-not-object": (_set(["vocab", 3], "AAA="), "vocab[3]"),
    "rank-wrong": (_set(["vocab", 7, "rank"], 70), "vocab[7]"),
    "base64-broken": (_set(["vocab", 9, "token_bytes"], "!!"), "vocab[9]"),
    "duplicate-token": (_set(["vocab", 260, "token_bytes"], "aGU="), "vocab[260]"),
    "special-ranks": (_set(["special_tokens", 1, "rank"], 9), "special token ranks"),
    "specials-not-list": (_set(["special_tokens"], 5), "special_tokens"),
    "pattern-broken": (_set(["config", "pattern"], r"\V("), "does not compile"),
}


@pytest.mark.parametrize("case", sorted(TEKKEN_CASES))
def test_tekken_breakages(tmp_path, case):
    change, place = TEKKEN_CASES[case]
    path = tmp_path / "tekken.json"
    path.write_bytes(_tekken_variant(change))
    _refused(bpecore.load_tekken, path, place)


LLAMA_CASES = {
    "truncated-line": (lambda data: data[: data.index(b"\n", 500) - 2] + b"\n", None),
    "no-rank": (lambda data: data + b"aGVsbG8gd29ybGQ=\n", None),
    "base64-broken": (lambda data: data + b"!!!! 300\n", None),
    "rank-huge": (lambda data: data + b"aGVsbG8gd29ybGQ= 1152921504606846976\n", None),
    "rank-not-number": (lambda data: data + b"aGVsbG8gd29ybGQ= x\n", None),
    "duplicate-token": (lambda data: data + b"aGU= 262\n", None),
    "invalid-utf8": (lambda data: b"\xff\xfe" + data, None),
    "missing-byte": (  # a token over a byte that has none: found by the slow mutations
        lambda data: (
            data.replace(base64.b64encode(b"\xf5") + b" 245\n", b"")
            + base64.b64encode(b"\xf5\xf5")
            + b" 245\n"
        ),
        "0xf5",
    ),
}


def test_llama_gigantic_token(tmp_path):
    """A 300 KB token line loads (tiktoken would read it too), in bounded time and memory."""
    path = tmp_path / "tokenizer.model"
    path.write_bytes(llama_text() + base64.b64encode(b"ab" * 150_000) + b" 262\n")
    _loads_or_refused(lambda p: bpecore.load_llama(p, version=3), path)


@pytest.mark.parametrize("case", sorted(LLAMA_CASES))
def test_llama_breakages(tmp_path, case):
    change, place = LLAMA_CASES[case]
    path = tmp_path / "tokenizer.model"
    path.write_bytes(change(llama_text()))
    _refused(lambda p: bpecore.load_llama(p, version=3), path, place)


def _gguf_pairs(**change) -> list[tuple[str, int, object]]:
    tokens = [B2U[b] for b in range(256)] + [a + b for a, b in MERGES]
    pairs = {
        "tokenizer.ggml.model": (STRING, "gpt2"),
        "tokenizer.ggml.pre": (STRING, "gpt-2"),
        "tokenizer.ggml.tokens": (ARRAY, (STRING, tokens)),
        "tokenizer.ggml.merges": (ARRAY, (STRING, [f"{a} {b}" for a, b in MERGES])),
    }
    pairs.update(change)
    return [(k, kind, v) for k, (kind, v) in pairs.items()]


def _header(n_kv: int) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv)


GGUF_CASES = {
    "pairs-2**60": (_header(2**60), "cannot fit"),
    "key-2**60": (_header(1) + struct.pack("<Q", 2**60) + b"\0" * 64, "claims"),
    "tokens-2**60": (
        _header(1) + _s("tokenizer.ggml.tokens") + struct.pack("<IIQ", ARRAY, STRING, 2**60),
        "claims 1152921504606846976 items",
    ),
    "string-2**60": (
        _header(1) + _s("tokenizer.ggml.pre") + struct.pack("<IQ", STRING, 2**60),
        "claims 1152921504606846976 bytes",
    ),
    "nested-arrays": (
        _header(1) + _s("k") + struct.pack("<I", ARRAY) + struct.pack("<IQ", ARRAY, 1) * 50,
        "nest",
    ),
    "truncated": (gguf_bytes()[:-7], None),
    "tokens-wrong-type": (
        gguf_bytes(_gguf_pairs(**{"tokenizer.ggml.tokens": (ARRAY, (U32, [1, 2, 3]))})),
        "tokenizer.ggml.tokens",
    ),
    "merge-missing-token": (
        gguf_bytes(_gguf_pairs(**{"tokenizer.ggml.merges": (ARRAY, (STRING, ["h zz"]))})),
        "merges[0]",
    ),
    "duplicate-token": (
        gguf_bytes(
            _gguf_pairs(
                **{"tokenizer.ggml.tokens": (ARRAY, (STRING, [B2U[b] for b in range(256)] + ["a"]))}
            )
        ),
        "listed at",
    ),
    "invalid-utf8-token": (
        gguf_bytes(
            _gguf_pairs(
                **{
                    "tokenizer.ggml.tokens": (
                        ARRAY,
                        (STRING, [B2U[b].encode() for b in range(256)] + [b"\xff\xfe"]),
                    )
                }
            )
        ),
        None,
    ),
    "model-wrong-type": (
        gguf_bytes(_gguf_pairs(**{"tokenizer.ggml.model": (U32, 3)})),
        "tokenizer.ggml.model",
    ),
}


@pytest.mark.parametrize("case", sorted(GGUF_CASES))
def test_gguf_breakages(tmp_path, case):
    data, place = GGUF_CASES[case]
    path = tmp_path / "model.gguf"
    path.write_bytes(data)
    _refused(bpecore.load_gguf, path, place)


PRETRAINED_CASES = {
    "config-truncated": ({"tokenizer_config.json": b'{"chat_template": "x'}, "tokenizer_config"),
    "config-not-object": ({"tokenizer_config.json": b"[1, 2]"}, "tokenizer_config"),
    "config-deep": ({"tokenizer_config.json": b"[" * 100_000 + b"]" * 100_000}, None),
    "added-tokens-decoder-wrong": (
        {"tokenizer_config.json": json.dumps({"added_tokens_decoder": {"x": 5}}).encode()},
        "added_tokens_decoder key 'x'",
    ),
    "chat-templates-wrong": (
        {"tokenizer_config.json": json.dumps({"chat_template": [{"x": 1}]}).encode()},
        "chat_template",
    ),
    "model-config-wrong": (
        {"config.json": json.dumps({"max_position_embeddings": "long"}).encode()},
        "max_position_embeddings",
    ),
    "model-config-not-object": ({"config.json": b"[]"}, "config.json"),
    "tokenizer-broken": ({"tokenizer.json": b'{"model": {"type": "BPE", "vocab": 5'}, None),
}


@pytest.mark.parametrize("case", sorted(PRETRAINED_CASES))
def test_pretrained_breakages(tmp_path, case):
    files, place = PRETRAINED_CASES[case]
    directory = _write_dir(
        tmp_path / "model", {"tokenizer.json": json.dumps(hf_doc()).encode(), **files}
    )
    with pytest.raises(bpecore.VocabError) as info:
        _bounded(lambda: bpecore.from_pretrained(directory))
    assert str(directory) in str(info.value), str(info.value)
    if place is not None:
        assert place in str(info.value)


# ----------------------------------------------------------------------------- seeded mutations
def _mutate(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        kind = rng.randrange(5)
        i = rng.randrange(len(data) + 1)
        if kind == 0 and data:  # flip a byte
            data[min(i, len(data) - 1)] = rng.randrange(256)
        elif kind == 1:  # cut the end
            del data[i:]
        elif kind == 2 and data:  # duplicate a span
            j = rng.randrange(i, min(len(data), i + 64) + 1)
            data[i:i] = data[i:j]
        elif kind == 3:  # insert odd bytes
            data[i:i] = rng.choice([b"\xff", b"\x00", b'"', b"[", b"{", b"\\u0000", b"9" * 30])
        elif data:  # delete a span
            del data[i : i + rng.randrange(1, 16)]
    return bytes(data)


def _fuzz(tmp_path: Path, kind: str, n: int, seed: int) -> None:
    name, content, load = LOADERS[kind]
    valid = content()
    rng = random.Random(seed)
    for k in range(n):
        path = tmp_path / f"{kind}-{k}" / name
        path.parent.mkdir()
        path.write_bytes(_mutate(rng, valid))
        _loads_or_refused(load, path)


@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_mutations(tmp_path, kind):
    _fuzz(tmp_path, kind, n=10_000, seed=23)


@pytest.mark.slow
@pytest.mark.parametrize("kind", sorted(LOADERS))
def test_mutations_long(tmp_path, kind):
    _fuzz(tmp_path, kind, n=100_000, seed=2323)

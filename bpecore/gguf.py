"""llama.cpp GGUF files: the byte-level BPE tokenizer in their metadata (``load_gguf(path)``).

A GGUF file opens with ``GGUF``, a version (2 or 3), the tensor count and the metadata count,
then key/value pairs (key: u64 length + UTF-8; value: u32 type + data; arrays: u32 item type +
u64 count + items), all little-endian; the tensors follow and are never read. Only the
metadata is parsed, from the file as it is read: every length and count is checked against the
bytes left in the file before anything is allocated, so a header claiming 2**63 tokens is
refused after reading a few bytes, not answered with a 2**63-element allocation.

The tokenizer keys: ``tokenizer.ggml.model`` (``gpt2`` = byte-level BPE; others refused),
``tokens`` (byte-level token strings, index = id), ``token_type`` (1 normal, 3 control,
4 user-defined, 5 unused, 6 byte), ``merges`` (``"a b"`` in priority order) and ``pre``, the
name of the pre-tokenizer that ``convert_hf_to_gguf.py`` recognised. The file becomes the
``tokenizer.json`` it stands for and goes through ``bpecore.hf``: control tokens are special added
tokens, user-defined ones non-special added tokens (cut out of any text, as llama.cpp does),
and ``pre`` is the pre-tokenizer of ``PRE_TOKENIZERS``; a name not there is refused with a
VocabError naming it. GGUF carries no normalizer, and none is applied. ``vocab_sha256`` is
the SHA-256 of the tokens and merges (a model file's tensors are gigabytes and never read).
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Any, BinaryIO

from bpecore.encoding import Encoding
from bpecore.load import VocabError
from bpecore.pretokenize import O200K_PATTERN

_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def _split_then_bytes(pattern: str) -> dict:
    return {
        "type": "Sequence",
        "pretokenizers": [
            {
                "type": "Split",
                "pattern": {"Regex": pattern},
                "behavior": "Isolated",
                "invert": False,
            },
            {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": True,
                "use_regex": False,
            },
        ],
    }


_GPT2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def _splits_then_bytes(*patterns: str) -> dict:
    """Each regex re-splits the previous one's pieces (matches and the text between them kept
    as pieces), then the bytes: how llama.cpp runs the regex list of a ``tokenizer.ggml.pre``
    name, and how the models' ``tokenizer.json`` files chain their Split stages."""
    return {
        "type": "Sequence",
        "pretokenizers": [
            *(
                {"type": "Split", "pattern": {"Regex": p}, "behavior": "Isolated", "invert": False}
                for p in patterns
            ),
            {
                "type": "ByteLevel",
                "add_prefix_space": False,
                "trim_offsets": True,
                "use_regex": False,
            },
        ],
    }


#: CJK ideographs to U+9FA5, then U+0800 to U+4E00 and Hangul syllables to U+D7FF, as one run
#: (the characters themselves in the pattern, as in the models' files).
_DEEPSEEK_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_DEEPSEEK_CODER = ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _DEEPSEEK_CJK, r"\p{N}")
_DEEPSEEK_V3 = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)
_FALCON = (
    r"[\p{P}\$\+<=>\^~\|`]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    r"[0-9][0-9][0-9]",
)

#: ``tokenizer.ggml.pre`` -> the ``tokenizer.json`` pre-tokenizer of the models it names (their
#: Hugging Face files, the source ``convert_hf_to_gguf.py`` read): GPT-2's ByteLevel regex;
#: Llama 3's and Qwen2's one Split; o200k's Split (GPT-4o, Llama 4); StarCoder's digits one by
#: one, then GPT-2's regex. DeepSeek Coder, DeepSeek V3 and Falcon: the regex list
#: llama.cpp runs for the name (``llama-vocab.cpp``), each regex re-splitting the pieces of the
#: one before, then the bytes; DeepSeek V3's is its tokenizer.json's Split chain exactly
#: (test_gguf.py compares them).
PRE_TOKENIZERS: dict[str, dict] = {
    "gpt-2": _GPT2,
    "llama3": _split_then_bytes(_LLAMA3),
    "llama-v3": _split_then_bytes(_LLAMA3),
    "llama-bpe": _split_then_bytes(_LLAMA3),
    "qwen2": _split_then_bytes(_QWEN2),
    "gpt-4o": _split_then_bytes(O200K_PATTERN),
    "llama4": _split_then_bytes(O200K_PATTERN),
    "deepseek-coder": _splits_then_bytes(*_DEEPSEEK_CODER),
    "deepseek-v3": _splits_then_bytes(*_DEEPSEEK_V3),
    "falcon": _splits_then_bytes(*_FALCON),
    "starcoder": {
        "type": "Sequence",
        "pretokenizers": [{"type": "Digits", "individual_digits": True}, _GPT2],
    },
}

GGUF_MAGIC = b"GGUF"
_SCALARS = {
    0: "<B",
    1: "<b",
    2: "<H",
    3: "<h",
    4: "<I",
    5: "<i",
    6: "<f",
    7: "<?",
    10: "<Q",
    11: "<q",
    12: "<d",
}
_STRING, _ARRAY = 8, 9
#: Nested arrays deeper than this are refused (GGUF writers nest at most once).
_MAX_DEPTH = 4
_TOKEN_NORMAL, _TOKEN_CONTROL, _TOKEN_USER, _TOKEN_UNUSED, _TOKEN_BYTE = 1, 3, 4, 5, 6


class _Reader:
    """Bounded reads from a file: no length or count may exceed the bytes left."""

    def __init__(self, f: BinaryIO, size: int, source: str) -> None:
        self.f, self.left, self.source = f, size, source

    def bytes(self, n: int, what: str) -> bytes:
        if n > self.left:
            raise VocabError(
                f"{self.source}: {what} claims {n} bytes, but only {self.left} are left in the file"
            )
        data = self.f.read(n)
        if len(data) != n:
            raise VocabError(f"{self.source}: file ended inside {what}")
        self.left -= n
        return data

    def scalar(self, fmt: str, what: str):
        return struct.unpack(fmt, self.bytes(struct.calcsize(fmt), what))[0]

    def string(self, what: str) -> str:
        n = self.scalar("<Q", what)
        try:
            return self.bytes(n, what).decode("utf-8")
        except UnicodeDecodeError as e:
            raise VocabError(f"{self.source}: {what} is not UTF-8: {e}") from e

    def value(self, kind: int, what: str, depth: int = 0) -> Any:
        if kind in _SCALARS:
            return self.scalar(_SCALARS[kind], what)
        if kind == _STRING:
            return self.string(what)
        if kind == _ARRAY:
            if depth >= _MAX_DEPTH:
                raise VocabError(f"{self.source}: {what}: arrays nested deeper than {_MAX_DEPTH}")
            item = self.scalar("<I", what)
            count = self.scalar("<Q", what)
            least = 8 if item in (_STRING, _ARRAY) else struct.calcsize(_SCALARS.get(item, "<B"))
            if count * least > self.left:
                raise VocabError(
                    f"{self.source}: {what} claims {count} items, more than the {self.left} bytes "
                    "left in the file can hold"
                )
            if item in _SCALARS:
                fmt = _SCALARS[item]
                data = self.bytes(count * struct.calcsize(fmt), what)
                return [v[0] for v in struct.iter_unpack(fmt, data)]
            return [self.value(item, f"{what}[{i}]", depth + 1) for i in range(count)]
        raise VocabError(f"{self.source}: {what} has unknown value type {kind}")


def read_metadata(path: str | os.PathLike) -> dict[str, Any]:
    """The metadata key/value pairs of a GGUF file (tensors are not read)."""
    source = os.fspath(path)
    try:
        f = open(path, "rb")
    except OSError as e:
        raise VocabError(f"{source}: cannot read GGUF file: {e.strerror or e}") from e
    with f:
        size = os.fstat(f.fileno()).st_size
        r = _Reader(f, size, source)
        if r.bytes(4, "the magic") != GGUF_MAGIC:
            raise VocabError(f"{source}: not a GGUF file (no GGUF magic)")
        version = r.scalar("<I", "the version")
        if version not in (2, 3):
            raise VocabError(f"{source}: GGUF version {version} is not supported (2, 3)")
        r.scalar("<Q", "the tensor count")
        n_kv = r.scalar("<Q", "the metadata count")
        if n_kv * 12 > r.left:  # a key length (8) and a type (4) at least per pair
            raise VocabError(f"{source}: {n_kv} metadata pairs cannot fit in {r.left} bytes")
        meta: dict[str, Any] = {}
        for i in range(n_kv):
            key = r.string(f"metadata key {i}")
            meta[key] = r.value(r.scalar("<I", key), key)
    return meta


def _list(meta: dict, key: str, source: str, item: type, optional: bool = False) -> list:
    value = meta.get(key)
    if value is None and optional:
        return []
    if not isinstance(value, list) or not all(isinstance(v, item) for v in value):
        raise VocabError(f"{source}: {key} is missing or not a list of {item.__name__}")
    return value


def gguf_tokenizer_json(meta: dict[str, Any], source: str = "<gguf>") -> dict:
    """The ``tokenizer.json`` document a GGUF file's tokenizer metadata stands for."""
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise VocabError(
            f"{source}: tokenizer.ggml.model {model!r} is not byte-level BPE ('gpt2'); "
            "SentencePiece and WordPiece vocabularies are not supported"
        )
    pre_name = meta.get("tokenizer.ggml.pre")
    pre = PRE_TOKENIZERS.get(pre_name) if isinstance(pre_name, str) else None
    if pre is None:
        raise VocabError(
            f"{source}: pre-tokenizer {pre_name!r} (tokenizer.ggml.pre) is not reproduced exactly; "
            f"known: {', '.join(sorted(PRE_TOKENIZERS))}"
        )
    tokens = _list(meta, "tokenizer.ggml.tokens", source, str)
    merges = _list(meta, "tokenizer.ggml.merges", source, str)
    types = _list(meta, "tokenizer.ggml.token_type", source, int, optional=True)
    if types and len(types) != len(tokens):
        raise VocabError(f"{source}: {len(types)} token types for {len(tokens)} tokens")
    vocab: dict[str, int] = {}
    added: list[dict] = []
    for i, token in enumerate(tokens):
        kind = types[i] if types else _TOKEN_NORMAL
        if kind in (_TOKEN_CONTROL, _TOKEN_USER):
            special = kind == _TOKEN_CONTROL
            added.append({"id": i, "content": token, "special": special, "normalized": False})
        elif kind in (_TOKEN_NORMAL, _TOKEN_BYTE):
            if token in vocab:
                raise VocabError(f"{source}: token {token!r} is listed at {vocab[token]} and {i}")
            vocab[token] = i
        elif kind != _TOKEN_UNUSED:
            raise VocabError(f"{source}: token {i} ({token!r}) has type {kind}, not reproduced")
    return {
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre,
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    }


def load_gguf(path: str | os.PathLike, *, name: str | None = None) -> Encoding:
    """An encoding from the tokenizer in a GGUF file's metadata (ids = llama.cpp's token ids).

    ``name`` defaults to ``general.name`` from the metadata, else the file's name up to its first dot.
    """
    from bpecore.hf import _build

    source = os.fspath(path)
    meta = read_metadata(path)
    doc = gguf_tokenizer_json(meta, source)
    if name is None:
        general = meta.get("general.name")
        name = general if isinstance(general, str) and general else None
        name = name or os.path.basename(source).split(".")[0]
    try:
        enc = _build(doc, name, source)
    except (TypeError, AttributeError, KeyError, IndexError) as e:
        raise VocabError(f"{source}: malformed tokenizer metadata: {type(e).__name__}: {e}") from e
    digest = hashlib.sha256()
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        digest.update("\n".join(meta[key]).encode("utf-8") + b"\0")
    enc.vocab_sha256 = digest.hexdigest()
    from bpecore.pretrained import _pickle_as_reload

    _pickle_as_reload(enc, load_gguf, source, name=name)
    return enc

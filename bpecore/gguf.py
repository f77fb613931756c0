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
and ``pre`` gives the pre-tokenizer of ``PRE_TOKENIZERS``, the normalizer of ``NORMALIZERS``
and ``ignore_merges`` (``IGNORE_MERGES``) of the models' own ``tokenizer.json`` files, which
GGUF does not record; a name not there is refused with a VocabError naming it. The target is
Hugging Face `tokenizers` on the model's file (what llama.cpp's test vectors hold), where
llama.cpp's regex lists only approximate some of them (Falcon, DeepSeek LLM). Byte tokens a
vocabulary lacks (StarCoder's 0xF1, Falcon's control characters) are dropped from the text as
`tokenizers` drops them. ``vocab_sha256`` is the SHA-256 of the tokens and merges (a model
file's tensors are gigabytes and never read).
"""

from __future__ import annotations

import hashlib
import os
import struct
from typing import Any, BinaryIO

from bpecore.encoding import Encoding
from bpecore.hf import _DEEPSEEK_LLM_LETTERS  # DeepSeek LLM's letters, as its file spells them
from bpecore.load import VocabError, bytes_to_unicode
from bpecore.pretokenize import O200K_PATTERN

_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
#: Qwen3.5: Qwen2's with combining marks inside letter runs, never in the punctuation run.
_QWEN35 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

_BYTES = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
_GPT2 = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}
_DIGITS = {"type": "Digits", "individual_digits": True}


def _split(pattern: str) -> dict:
    return {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}


def _splits_then_bytes(*stages: str | dict) -> dict:
    """Each stage re-splits the previous one's pieces (a string is an Isolated Split: matches
    and the text between them kept as pieces), then the bytes without GPT-2's regex."""
    return {
        "type": "Sequence",
        "pretokenizers": [*(_split(p) if isinstance(p, str) else p for p in stages), _BYTES],
    }


#: CJK ideographs to U+9FA5, then U+0800 to U+4E00 and Hangul syllables to U+D7FF, as one run
#: (the characters themselves in the pattern, as in the models' files).
_DEEPSEEK_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
_DEEPSEEK_CODER = ("[\r\n]", r"\s?\p{L}+", r"\s?\p{P}+", _DEEPSEEK_CJK, _DIGITS)
_DEEPSEEK_LLM = (
    "[\r\n]",
    rf"\s?[{_DEEPSEEK_LLM_LETTERS}]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    r"\s+$",
    _DEEPSEEK_CJK,
    _DIGITS,
)
_DEEPSEEK_V3 = (
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+"
    "| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
)
_FALCON = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Punctuation", "behavior": "Contiguous"},
        _GPT2,
        {"type": "Digits", "individual_digits": False},
        _split("[0-9][0-9][0-9]"),
    ],
}
_DIGITS_THEN_GPT2 = {"type": "Sequence", "pretokenizers": [_DIGITS, _GPT2]}

#: ``tokenizer.ggml.pre`` -> the ``tokenizer.json`` pre-tokenizer of the models it names, as
#: their Hugging Face files spell it (the source ``convert_hf_to_gguf.py`` read; llama.cpp's own
#: regex lists for some names only approximate them): GPT-2's ByteLevel regex (MPT: GPT-NeoX's
#: file); Llama 3's, Qwen2's and Qwen3.5's one Split; o200k's Split (GPT-4o, Llama 4);
#: StarCoder's, Refact's and Command R's digits one by one, then GPT-2's regex; Falcon's
#: punctuation runs, GPT-2's regex, digit runs, then groups of three digits; the Split chains of
#: DeepSeek Coder, DeepSeek LLM (then digits one by one) and DeepSeek V3 (test_gguf.py and
#: test_gguf_vocabs.py check them against the models' files and llama.cpp's test vectors).
PRE_TOKENIZERS: dict[str, dict] = {
    "gpt-2": _GPT2,
    "mpt": _GPT2,
    "llama3": _splits_then_bytes(_LLAMA3),
    "llama-v3": _splits_then_bytes(_LLAMA3),
    "llama-bpe": _splits_then_bytes(_LLAMA3),
    "qwen2": _splits_then_bytes(_QWEN2),
    "qwen35": _splits_then_bytes(_QWEN35),
    "gpt-4o": _splits_then_bytes(O200K_PATTERN),
    "llama4": _splits_then_bytes(O200K_PATTERN),
    "deepseek-coder": _splits_then_bytes(*_DEEPSEEK_CODER),
    "deepseek-llm": _splits_then_bytes(*_DEEPSEEK_LLM),
    "deepseek-v3": _splits_then_bytes(*_DEEPSEEK_V3),
    "falcon": _FALCON,
    "starcoder": _DIGITS_THEN_GPT2,
    "refact": _DIGITS_THEN_GPT2,
    "command-r": _DIGITS_THEN_GPT2,
}
#: The normalizer of the models' files where they have one (GPT-NeoX's, hence MPT's, Qwen2's
#: and Command R's NFC; Qwen3.5 has none); GGUF does not record it, so it comes with the name.
NORMALIZERS: dict[str, dict] = {name: {"type": "NFC"} for name in ("mpt", "qwen2", "command-r")}
#: Names whose models' files set ``ignore_merges`` (Llama 3: a piece that is a token is it).
IGNORE_MERGES = frozenset({"llama3", "llama-v3", "llama-bpe"})

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


def gguf_tokenizer_json(
    meta: dict[str, Any], source: str = "<gguf>", pre_name: str | None = None
) -> dict:
    """The ``tokenizer.json`` document a GGUF file's tokenizer metadata stands for
    (``pre_name`` in place of its ``tokenizer.ggml.pre``)."""
    model = meta.get("tokenizer.ggml.model")
    if model != "gpt2":
        raise VocabError(
            f"{source}: tokenizer.ggml.model {model!r} is not byte-level BPE ('gpt2'); "
            "SentencePiece and WordPiece vocabularies are not supported"
        )
    pre_name = meta.get("tokenizer.ggml.pre") if pre_name is None else pre_name
    pre = PRE_TOKENIZERS.get(pre_name) if isinstance(pre_name, str) else None
    if pre is None:
        raise VocabError(
            f"{source}: pre-tokenizer {pre_name!r} (tokenizer.ggml.pre) is not reproduced exactly; "
            f"known: {', '.join(sorted(PRE_TOKENIZERS))}"
            + ("; a file without one can be given pre=NAME" if pre_name is None else "")
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
    model: dict[str, Any] = {"type": "BPE", "vocab": vocab, "merges": merges}
    if pre_name in IGNORE_MERGES:
        model["ignore_merges"] = True
    return {
        "added_tokens": added,
        "normalizer": NORMALIZERS.get(pre_name),
        "pre_tokenizer": pre,
        "model": model,
    }


def _ranked_by_id(meta: dict[str, Any], doc: dict, name: str, source: str) -> Encoding | None:
    """Llama 3's vocabulary (``ignore_merges``; tokens ranked before a part they merge from, and
    tokens BPE never forms): ids are the ranks when the merges form the tokens in id order, so
    it becomes ``bpecore.llama``'s reordered vocab with a whole-piece table, compiled and exact
    as ``load_llama``'s. None when that does not hold (non-special added tokens, a normalizer,
    merges out of id order): the file then goes through ``bpecore.hf``."""
    from bpecore.llama import _reranked, _whole_piece_encoding

    pre = doc["pre_tokenizer"]
    stages = pre.get("pretokenizers") or []
    if doc["normalizer"] is not None or len(stages) != 2 or stages[0].get("type") != "Split":
        return None
    if any(not a["special"] for a in doc["added_tokens"]):
        return None
    vocab: dict[str, int] = doc["model"]["vocab"]
    formed: dict[int, None] = {}
    for merge in doc["model"]["merges"]:
        tid = vocab.get(merge.replace(" ", "", 1))
        if tid is None:
            return None
        formed.setdefault(tid)
    order = list(formed)
    if any(a > b for a, b in zip(order, order[1:])):
        return None
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    try:
        ranks = {bytes(byte_of[c] for c in token): tid for token, tid in vocab.items()}
    except KeyError:
        return None
    core, whole = _reranked(ranks, source)
    specials = {a["content"]: a["id"] for a in doc["added_tokens"]}
    return _whole_piece_encoding(name, core, stages[0]["pattern"]["Regex"], specials, whole)


def load_gguf(
    path: str | os.PathLike, *, name: str | None = None, pre: str | None = None
) -> Encoding:
    """An encoding from the tokenizer in a GGUF file's metadata (ids = llama.cpp's token ids).

    ``name`` defaults to ``general.name`` from the metadata, else the file's name up to its first
    dot. ``pre`` names the pre-tokenizer (a ``PRE_TOKENIZERS`` key) of a file that records none
    (older conversions, such as llama.cpp's GPT-NeoX test vocabulary: ``pre="mpt"``) and
    overrides the one it records.
    """
    from bpecore.hf import _build

    source = os.fspath(path)
    meta = read_metadata(path)
    doc = gguf_tokenizer_json(meta, source, pre)
    if name is None:
        general = meta.get("general.name")
        name = general if isinstance(general, str) and general else None
        name = name or os.path.basename(source).split(".")[0]
    try:
        enc = None
        if (pre or meta.get("tokenizer.ggml.pre")) in IGNORE_MERGES:
            enc = _ranked_by_id(meta, doc, name, source)
        if enc is None:
            enc = _build(doc, name, source)
    except (TypeError, AttributeError, KeyError, IndexError) as e:
        raise VocabError(f"{source}: malformed tokenizer metadata: {type(e).__name__}: {e}") from e
    digest = hashlib.sha256()
    for key in ("tokenizer.ggml.tokens", "tokenizer.ggml.merges"):
        digest.update("\n".join(meta[key]).encode("utf-8") + b"\0")
    enc.vocab_sha256 = digest.hexdigest()
    from bpecore.pretrained import _pickle_as_reload

    if pre is None:
        _pickle_as_reload(enc, load_gguf, source, name=name)
    else:
        _pickle_as_reload(enc, load_gguf, source, name=name, pre=pre)
    return enc

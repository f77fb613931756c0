"""Writing vocabularies: `.tiktoken` rank files (+ a JSON sidecar) and Hugging Face `tokenizer.json`.

``save_tiktoken(enc, "x.tiktoken")`` writes one ``<base64 token> <rank>`` line per token in rank
order and ``x.tiktoken.json`` with the name, pattern and special tokens, so that ``load_tiktoken(path)``
(which reads the sidecar) rebuilds the same encoding.

``save_hf(enc, "tokenizer.json")`` writes a byte-level BPE model: the vocab through GPT-2's
``bytes_to_unicode`` map, one merge per non-byte token in rank order (the pair BPE-by-rank forms
it from, i.e. ``Vocab.split``), pre-tokenizer ``Sequence[Split(pattern, Isolated),
ByteLevel(use_regex=false)]``, a ByteLevel decoder and the specials as added tokens.
``ignore_merges`` is true: a piece that is a whole token is that token, as in tiktoken.
"""

from __future__ import annotations

import base64
import json
import os
import re
from typing import TYPE_CHECKING

from bpecore.load import bytes_to_unicode

if TYPE_CHECKING:  # Encoding's save methods call this module: it names the class for types only
    from bpecore.encoding import Encoding


# An atom followed by a possessive counted repeat: ``\p{N}{1,3}+``, ``[a-z]{2}+``, ``x{1,}+``.
_POSSESSIVE_COUNT = re.compile(
    r"(\\[pP]\{[^}]*\}|\\[pP]\w|\[(?:\\.|[^\]\\])*\]|\\.|[^\\()|])(\{\d+(?:,\d*)?\})\+"
)


def hf_regex(pattern: str) -> str:
    r"""``pattern`` spelled so Oniguruma (Hugging Face) splits like the ``regex`` module.

    Oniguruma reads ``X{n,m}+`` as "``X{n,m}``, one or more times" rather than possessive (so
    cl100k's ``\p{N}{1,3}+`` would take any run of digits); the atomic group ``(?>X{n,m})`` means
    the same in both engines.
    """
    return _POSSESSIVE_COUNT.sub(r"(?>\1\2)", pattern)


def _tokens(enc: Encoding) -> list[tuple[int, bytes]]:
    v = enc._vocab
    return [(v.id_of_index(i), v.token_bytes(i)) for i in range(len(v))]


def sidecar_path(path: str | os.PathLike) -> str:
    """Where ``save_tiktoken`` puts the JSON sidecar of ``path``."""
    return os.fspath(path) + ".json"


def save_tiktoken(enc: Encoding, path: str | os.PathLike) -> str:
    """Write ``enc``'s ranks to ``path`` and its name/pattern/specials to ``path + '.json'``.

    Returns the path written.
    """
    path = os.fspath(path)
    with open(path, "wb") as f:
        for rank, token in _tokens(enc):
            f.write(base64.b64encode(token) + b" " + str(rank).encode() + b"\n")
    meta = {"name": enc.name, "pattern": enc.pattern, "special_tokens": enc.special_tokens}
    with open(sidecar_path(path), "w", encoding="utf-8") as f:
        json.dump(meta, f, ensure_ascii=False, indent=1)
        f.write("\n")
    return path


def hf_json(enc: Encoding) -> dict:
    """The `tokenizer.json` document of ``enc`` (byte-level BPE)."""
    v = enc._vocab
    to_char = bytes_to_unicode()

    def spell(token: bytes) -> str:
        return "".join(to_char[b] for b in token)

    vocab: dict[str, int] = {}
    merges: list[list[str]] = []
    for i in range(len(v)):
        token = v.token_bytes(i)
        vocab[spell(token)] = v.id_of_index(i)
        if len(token) > 1:
            left, right = v.split(i)
            if left != i:  # unreachable tokens have no merge; only whole-piece lookup can give them
                merges.append([spell(v.token_bytes(left)), spell(v.token_bytes(right))])
    byte_level = {
        "type": "ByteLevel",
        "add_prefix_space": False,
        "trim_offsets": True,
        "use_regex": False,
    }
    if enc.pattern is None:
        pre_tokenizer = byte_level
    else:
        split = {
            "type": "Split",
            "pattern": {"Regex": hf_regex(enc.pattern)},
            "behavior": "Isolated",
            "invert": False,
        }
        pre_tokenizer = {"type": "Sequence", "pretokenizers": [split, byte_level]}
    added = [
        {
            "id": tid,
            "content": s,
            "single_word": False,
            "lstrip": False,
            "rstrip": False,
            "normalized": False,
            "special": True,
        }
        for s, tid in sorted(enc.special_tokens.items(), key=lambda kv: kv[1])
    ]
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": pre_tokenizer,
        "post_processor": None,
        "decoder": dict(byte_level),
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "ignore_merges": True,
            "vocab": vocab,
            "merges": merges,
        },
    }


def save_hf(enc: Encoding, path: str | os.PathLike) -> str:
    """Write ``enc`` as a Hugging Face `tokenizer.json` (byte-level BPE) to ``path``; returns it."""
    path = os.fspath(path)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(hf_json(enc), f, ensure_ascii=False)
    return path

"""Reading vocabularies: `.tiktoken` rank files and Hugging Face `tokenizer.json` (byte-level BPE).

Every malformed input raises ``VocabError`` (a ``ValueError``) naming the file and, where there is
one, the line; a file is never half-loaded into a wrong vocabulary.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import json
import os
from functools import partial
from typing import Any

from bpecore.pretokenize import R50K_PATTERN
from bpecore.vocab import Vocab


class VocabError(ValueError):
    """A vocabulary file that cannot be loaded, with the file (and line) at fault."""


def read_file(path: str | os.PathLike) -> bytes:
    """The bytes of ``path``, gunzipped when they are gzip data."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise VocabError(f"{path}: cannot read vocabulary file: {e.strerror or e}") from e
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as e:
            raise VocabError(f"{path}: corrupt gzip data: {e}") from e
    return data


def parse_tiktoken(data: bytes, source: str = "<bytes>") -> dict[bytes, int]:
    """Parse `.tiktoken` content: one ``<base64 token> <rank>`` per line.

    A fast pass handles well-formed files; anything odd goes through the line-by-line pass, which
    names the first bad line.
    """
    ranks = _parse_tiktoken_fast(data)
    return ranks if ranks is not None else _parse_tiktoken_checked(data, source)


_strict_b64 = partial(binascii.a2b_base64, strict_mode=True)


def _parse_tiktoken_fast(data: bytes) -> dict[bytes, int] | None:
    fields = data.split()
    n_lines = sum(1 for line in data.splitlines() if line.strip())
    if len(fields) != 2 * n_lines:
        return None
    try:
        ranks = dict(zip(map(_strict_b64, fields[0::2]), map(int, fields[1::2])))
    except (ValueError, binascii.Error):
        return None
    lines = fields[0::2]
    values = ranks.values()
    if (
        not ranks
        or len(ranks) != len(lines)
        or len(set(values)) != len(ranks)
        or min(values) < 0
        or max(values) >= 0xFFFFFFFF
        or b"" in ranks
    ):
        return None
    return ranks


def _parse_tiktoken_checked(data: bytes, source: str) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    seen_ranks: dict[int, int] = {}
    for lineno, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        fields = line.split()
        if len(fields) != 2:
            raise VocabError(f"{source}:{lineno}: expected '<base64 token> <rank>', got {line[:80]!r}")
        try:
            token = base64.b64decode(fields[0], validate=True)
        except (binascii.Error, ValueError) as e:
            raise VocabError(f"{source}:{lineno}: invalid base64 token {fields[0][:80]!r}: {e}") from e
        try:
            rank = int(fields[1])
        except ValueError as e:
            raise VocabError(f"{source}:{lineno}: rank {fields[1][:40]!r} is not an integer") from e
        if not token:
            raise VocabError(f"{source}:{lineno}: empty token")
        if rank < 0 or rank >= 0xFFFFFFFF:
            raise VocabError(f"{source}:{lineno}: rank {rank} out of range [0, 2**32 - 1)")
        if token in ranks:
            raise VocabError(f"{source}:{lineno}: token {token!r} already has rank {ranks[token]}")
        if rank in seen_ranks:
            raise VocabError(f"{source}:{lineno}: rank {rank} already given on line {seen_ranks[rank]}")
        ranks[token] = rank
        seen_ranks[rank] = lineno
    if not ranks:
        raise VocabError(f"{source}: no tokens")
    return ranks


def tiktoken_vocab(data: bytes, source: str = "<bytes>") -> Vocab:
    """The Vocab of `.tiktoken` content: parsed and built in C without the GIL when well formed.

    Anything odd (or a vocabulary the build rejects) goes through ``parse_tiktoken`` and
    ``Vocab(ranks)``, so errors name the file and line exactly as before.
    """
    try:
        vocab = Vocab.from_tiktoken(data)
        return vocab if vocab is not None else Vocab(parse_tiktoken(data, source))
    except VocabError:
        raise
    except ValueError as e:
        raise VocabError(f"{source}: {e}") from e


def load_tiktoken_ranks(path: str | os.PathLike, expected_sha256: str | None = None) -> dict[bytes, int]:
    """Read a `.tiktoken` file (optionally gzip), check its SHA-256 if given, return its ranks."""
    data = read_file(path)
    if expected_sha256 is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_sha256:
            raise VocabError(f"{path}: SHA-256 {actual} does not match the expected {expected_sha256}")
    return parse_tiktoken(data, str(path))


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (used by byte-level BPE JSON files)."""
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1)
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def _hf_pattern(pre: Any, source: str) -> str | None:
    """The split regex of a Hugging Face pre-tokenizer, or raise for one bpecore cannot reproduce."""
    if pre is None:
        return None
    kind = pre.get("type")
    if kind == "ByteLevel":
        if pre.get("add_prefix_space"):
            raise VocabError(f"{source}: ByteLevel add_prefix_space=true is not supported")
        # GPT-2's pattern cuts exactly like r50k's possessive form, which has a fast scanner.
        return R50K_PATTERN if pre.get("use_regex", True) else None
    if kind == "Split":
        pattern = pre.get("pattern", {})
        if "Regex" in pattern:
            regex_str = pattern["Regex"]
        elif "String" in pattern:
            import regex

            regex_str = regex.escape(pattern["String"])
        else:
            raise VocabError(f"{source}: Split pre-tokenizer without a pattern")
        if pre.get("behavior", "Isolated") != "Isolated" or pre.get("invert"):
            raise VocabError(f"{source}: Split behavior {pre.get('behavior')!r} is not supported (only Isolated)")
        return regex_str
    if kind == "Sequence":
        patterns = [_hf_pattern(p, source) for p in pre.get("pretokenizers", [])]
        patterns = [p for p in patterns if p is not None]
        if len(patterns) > 1:
            raise VocabError(f"{source}: more than one splitting pre-tokenizer is not supported")
        return patterns[0] if patterns else None
    raise VocabError(f"{source}: pre-tokenizer {kind!r} is not supported (ByteLevel, Split, Sequence)")


def parse_hf(data: bytes, source: str = "<bytes>") -> tuple[dict[bytes, int], str | None, dict[str, int], list[tuple[int, int, int]]]:
    """Parse a Hugging Face `tokenizer.json` with a byte-level BPE model.

    Returns (mergeable_ranks, pattern, special_tokens, merges) where merges are (left, right, merged)
    ids, so the caller can check BPE-by-rank gives the same merges as the file's list.
    Any malformed file raises VocabError (a wrong type anywhere, JSON nested too deep).
    """
    try:
        return _parse_hf(data, source)
    except (RecursionError, TypeError, AttributeError, KeyError, IndexError) as e:
        raise VocabError(f"{source}: malformed tokenizer.json: {type(e).__name__}: {e}") from e


def _parse_hf(data: bytes, source: str) -> tuple[dict[bytes, int], str | None, dict[str, int], list[tuple[int, int, int]]]:
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        line = getattr(e, "lineno", None)
        raise VocabError(f"{source}{':' + str(line) if line else ''}: not valid JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise VocabError(f"{source}: no 'model' object")
    model = doc["model"]
    if model.get("type", "BPE") != "BPE":
        raise VocabError(f"{source}: model type {model.get('type')!r} is not BPE")
    if doc.get("normalizer") is not None:
        raise VocabError(f"{source}: normalizers are not supported (found {doc['normalizer'].get('type')!r})")
    vocab = model.get("vocab")
    merges = model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise VocabError(f"{source}: model needs a 'vocab' object and a 'merges' list")
    for token, tid in vocab.items():
        if type(tid) is not int or tid < 0:
            raise VocabError(f"{source}: vocab id of {token!r} is {tid!r}, not an integer >= 0")
    byte_of = {c: b for b, c in bytes_to_unicode().items()}

    def to_bytes(token: str, where: str) -> bytes:
        try:
            return bytes(byte_of[c] for c in token)
        except KeyError as e:
            raise VocabError(f"{source}: {where}: {token!r} is not a byte-level token") from e

    ranks: dict[bytes, int] = {}
    b2u = bytes_to_unicode()  # once: building it per byte made a small file's load take 0.4 s
    for b in range(256):
        char = b2u[b]
        if char not in vocab:
            raise VocabError(f"{source}: vocab lacks the byte-level token {char!r} for byte 0x{b:02x}")
        ranks[bytes([b])] = vocab[char]
    triples: list[tuple[int, int, int]] = []
    for i, merge in enumerate(merges):
        where = f"merges[{i}]"
        if isinstance(merge, str):
            parts = merge.split(" ")
        elif isinstance(merge, list):
            parts = merge
        else:
            raise VocabError(f"{source}: {where}: expected 'a b' or ['a', 'b'], got {merge!r}")
        if len(parts) != 2 or not all(isinstance(p, str) and p for p in parts):
            raise VocabError(f"{source}: {where}: expected two tokens, got {merge!r}")
        left, right = parts
        merged = left + right
        for tok in (left, right, merged):
            if tok not in vocab:
                raise VocabError(f"{source}: {where}: token {tok!r} is not in the vocab")
        merged_bytes = to_bytes(merged, where)
        if merged_bytes in ranks and ranks[merged_bytes] != vocab[merged]:
            raise VocabError(f"{source}: {where}: token {merged!r} is formed twice")
        ranks[merged_bytes] = vocab[merged]
        triples.append((vocab[left], vocab[right], vocab[merged]))
    specials = {}
    for added in doc.get("added_tokens") or []:
        content, tid = added.get("content"), added.get("id")
        if not isinstance(content, str) or not isinstance(tid, int):
            raise VocabError(f"{source}: malformed added_tokens entry {added!r}")
        specials[content] = tid
    for content, tid in specials.items():
        if tid in set(ranks.values()):
            raise VocabError(f"{source}: added token {content!r} reuses id {tid} of a BPE token")
    pattern = _hf_pattern(doc.get("pre_tokenizer"), source)
    return ranks, pattern, specials, triples

"""Reading vocabularies: `.tiktoken` rank files and the helpers the `tokenizer.json` reader (`hf.py`) shares.

Every malformed input raises ``VocabError`` (a ``ValueError``) naming the file and, where there is
one, the line; a file is never half-loaded into a wrong vocabulary.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import hashlib
import os
from functools import partial
from importlib import resources

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
            raise VocabError(
                f"{source}:{lineno}: expected '<base64 token> <rank>', got {line[:80]!r}"
            )
        try:
            token = base64.b64decode(fields[0], validate=True)
        except (binascii.Error, ValueError) as e:
            raise VocabError(
                f"{source}:{lineno}: invalid base64 token {fields[0][:80]!r}: {e}"
            ) from e
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
            raise VocabError(
                f"{source}:{lineno}: rank {rank} already given on line {seen_ranks[rank]}"
            )
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


def load_tiktoken_ranks(
    path: str | os.PathLike, expected_sha256: str | None = None
) -> dict[bytes, int]:
    """Read a `.tiktoken` file (optionally gzip), check its SHA-256 if given, return its ranks."""
    data = read_file(path)
    if expected_sha256 is not None:
        actual = hashlib.sha256(data).hexdigest()
        if actual != expected_sha256:
            raise VocabError(
                f"{path}: SHA-256 {actual} does not match the expected {expected_sha256}"
            )
    return parse_tiktoken(data, str(path))


def bytes_to_unicode() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters (used by byte-level BPE JSON files)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    chars = printable[:]
    extra = 0
    for b in range(256):
        if b not in printable:
            printable.append(b)
            chars.append(256 + extra)
            extra += 1
    return dict(zip(printable, map(chr, chars)))


def shipped_sha256() -> dict[str, str]:
    """File name -> SHA-256 of each vocabulary file shipped in ``bpecore/data`` (its SHA256SUMS)."""
    text = resources.files("bpecore").joinpath("data/SHA256SUMS").read_text()
    return {
        name: digest
        for digest, name in (line.split() for line in text.splitlines() if line.strip())
    }


def read_shipped(filename: str) -> tuple[bytes, str, str]:
    """``(data, sha256, path)`` of ``data/<filename>.gz`` inside the package, its SHA-256 checked
    against the pinned one (SHA256SUMS): a corrupted install is a VocabError, never a vocabulary."""
    path = resources.files("bpecore").joinpath(f"data/{filename}.gz")
    data = read_file(str(path))
    expected = shipped_sha256()[filename]
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise VocabError(
            f"{path}: SHA-256 {actual} does not match the pinned {expected}; reinstall bpecore"
        )
    return data, actual, str(path)

"""Per-token offsets: which characters of a text each token covers.

A token may end inside a multi-byte character; then it and the next token both cover that
character (start = the character holding the token's first byte, end = one past the character
holding its last byte). The text is rebuilt from the token bytes with an incremental UTF-8 decoder,
so the same code serves /v1/encode (offsets into the input, which the decoded bytes reproduce) and
/v1/decode (offsets into the output, invalid bytes replaced with U+FFFD).
"""

from __future__ import annotations

import codecs
from collections.abc import Iterable

from bpecore import Encoding


def token_offsets(enc: Encoding, tokens: Iterable[int]) -> list[tuple[int, str, int, int]]:
    """``(id, text, start, end)`` per token, character offsets into the decoded text."""
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    out: list[tuple[int, str, int, int]] = []
    emitted = 0
    for tid in tokens:
        raw = enc.decode_bytes([tid])
        start = emitted  # a pending partial character is emitted at this index
        emitted += len(decoder.decode(raw))
        pending = 1 if decoder.getstate()[0] else 0
        out.append((tid, raw.decode("utf-8", "replace"), start, emitted + pending))
    return out


def token_byte_offsets(enc: Encoding, tokens: Iterable[int]) -> list[tuple[int, bytes, int, int]]:
    """``(id, bytes, start, stop)`` per token, UTF-8 byte offsets (the TEI convention)."""
    out = []
    pos = 0
    for tid in tokens:
        raw = enc.decode_bytes([tid])
        out.append((tid, raw, pos, pos + len(raw)))
        pos += len(raw)
    return out

"""Per-token offsets: which characters of a text each token covers.

A token may end inside a multi-byte character; then it and the next token both cover that
character (start = the character holding the token's first byte, end = one past the character
holding its last byte). The text is rebuilt from the token bytes with an incremental UTF-8 decoder,
so the same code serves /v1/encode (offsets into the input, which the decoded bytes reproduce) and
/v1/decode (offsets into the output, invalid bytes replaced with U+FFFD).
"""

from __future__ import annotations

import codecs
from bisect import bisect_left, bisect_right
from collections.abc import Iterable
from functools import lru_cache
from itertools import accumulate

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


@lru_cache(maxsize=64)
def _byte_lengths(enc: Encoding) -> list[int]:
    """The length in bytes of every token id of ``enc`` (0 for an id without bytes), built once."""

    def length(tid: int) -> int:
        try:
            return len(enc.decode_single_token_bytes(tid))
        except (KeyError, ValueError):
            return 0

    return [length(tid) for tid in range(enc.n_vocab)]


def token_offsets_window(
    enc: Encoding, tokens: list[int], text: str, start: int, end: int
) -> tuple[int, list[tuple[int, str, int, int]]]:
    """``(first, offsets)``: ``token_offsets`` of the tokens of ``text`` that overlap
    ``text[start:end]``, ``first`` being the index of the first of them in ``tokens``.

    Only the window's tokens are decoded into offsets: a view of a long text asks for the part on
    screen. The window may start up to three tokens early (at the first token that starts on a
    character boundary), and its offsets are those ``token_offsets`` gives for the whole text.
    """
    raw = text.encode("utf-8")
    byte_ends = list(accumulate(map(_byte_lengths(enc).__getitem__, tokens)))
    byte_start = len(text[:start].encode("utf-8"))
    byte_end = byte_start + len(text[start:end].encode("utf-8"))
    first = bisect_right(byte_ends, byte_start)  # the first token ending after byte_start
    stop = min(bisect_left(byte_ends, byte_end) + 1, len(tokens)) if end > start else first
    # a token that starts inside a character: begin with the token holding that character's start
    while 0 < first < len(tokens) and 0x80 <= raw[byte_ends[first - 1]] < 0xC0:
        first -= 1
    base = len(raw[: byte_ends[first - 1]].decode("utf-8")) if first else 0
    window = token_offsets(enc, tokens[first : max(stop, first)])
    return first, [(tid, t, a + base, b + base) for tid, t, a, b in window]

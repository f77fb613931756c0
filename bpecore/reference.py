"""Slow, obviously correct BPE: the oracle every fast path is tested against.

``bpe_encode`` is the textbook merge loop: start from single bytes, repeatedly merge the adjacent pair
whose concatenation has the lowest rank (leftmost on ties), until no pair merges. O(n^2) per piece;
use it on short inputs only.
"""

from __future__ import annotations

import regex


def bpe_encode(mergeable_ranks: dict[bytes, int], piece: bytes) -> list[int]:
    """Encode one piece by repeatedly merging the lowest-rank adjacent pair."""
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best_rank = None
        best_i = -1
        for i in range(len(parts) - 1):
            rank = mergeable_ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best_rank is None or rank < best_rank):
                best_rank = rank
                best_i = i
        if best_rank is None:
            break
        parts[best_i : best_i + 2] = [parts[best_i] + parts[best_i + 1]]
    return [mergeable_ranks[p] for p in parts]


def pieces(pattern: str | None, text: str) -> list[str]:
    """Pre-tokenize with the `regex` module (leftmost-first), or one piece when there is no pattern."""
    if pattern is None:
        return [text] if text else []
    return regex.findall(pattern, text)


def encode_ordinary(mergeable_ranks: dict[bytes, int], pattern: str | None, text: str) -> list[int]:
    """Pre-tokenize ``text`` and BPE-encode each piece's UTF-8 bytes."""
    out: list[int] = []
    for piece in pieces(pattern, text):
        out.extend(bpe_encode(mergeable_ranks, piece.encode("utf-8")))
    return out

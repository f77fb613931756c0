"""Slow, obviously correct BPE: the oracle every fast path is tested against.

``bpe_encode`` is the textbook merge loop: start from single bytes, repeatedly merge the adjacent pair
whose concatenation has the lowest rank (leftmost on ties), until no pair merges. O(n^2) per piece;
use it on short inputs only. ``backtrack_encode`` is the backtracking algorithm of the fast
encoders (README, "How it works"), plainly written over the same dict of ranks.
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


def backtrack_encode(mergeable_ranks: dict[bytes, int], piece: bytes) -> list[int]:
    """Encode one piece by backtracking (README "How it works", steps 1-3), without a merge loop.

    Equal to ``bpe_encode``: the fast encoders' algorithm, written for clarity. Tokens are the
    keys of ``mergeable_ranks`` that BPE can produce (``bpe_encode(t) == [rank of t]``); two are
    compatible when BPE keeps them side by side (``bpe_encode(x + y) == [rank x, rank y]``).
    """
    known: dict[bytes, bool] = {}

    def is_token(t: bytes) -> bool:
        if t not in known:
            known[t] = t in mergeable_ranks and bpe_encode(mergeable_ranks, t) == [
                mergeable_ranks[t]
            ]
        return known[t]

    def compatible(x: bytes, y: bytes) -> bool:
        return bpe_encode(mergeable_ranks, x + y) == [mergeable_ranks[x], mergeable_ranks[y]]

    tokens: list[bytes] = []  # the encoding of piece[:pos]
    dead: set[int] = set()  # positions no encoding of the prefix before them can stop at
    pos, longest = 0, len(piece)
    while pos < len(piece):
        # 1. the longest token (shorter than ``longest``) that prefixes the rest; 2. the next
        # shorter one while it is not compatible with the previous token or ends at a dead end
        for end in range(min(len(piece), pos + longest), pos, -1):
            t = piece[pos:end]
            if is_token(t) and end not in dead and (not tokens or compatible(tokens[-1], t)):
                tokens.append(t)
                pos, longest = end, len(piece)
                break
        else:
            # 3. no prefix fits: pop the previous token, mark its end dead, retry from its start
            # with its next shorter prefix
            dead.add(pos)
            last = tokens.pop()
            pos, longest = pos - len(last), len(last) - 1
    return [mergeable_ranks[t] for t in tokens]


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


# ---------------------------------------------------------------------------------------------
# Reference trainer (issue 7): the naive BPE training loop the Cython ``Trainer`` is tested against.
# Every step recounts all pairs from scratch. Tie-break: highest count, then the smallest
# (left bytes, right bytes); a pair whose concatenation is already a token is never merged.


def train_merges(
    words: dict[bytes, int] | list[tuple[list[bytes], int]],
    n_merges: int,
    min_frequency: int = 1,
    vocab: set[bytes] | None = None,
) -> list[tuple[bytes, bytes]]:
    """The merges BPE training makes on ``words`` (pieces -> counts, or (token list, count) pairs)."""
    if isinstance(words, dict):
        seqs = [
            ([piece[i : i + 1] for i in range(len(piece))], count) for piece, count in words.items()
        ]
    else:
        seqs = [(list(tokens), count) for tokens, count in words]
    known = set(vocab) if vocab is not None else {bytes([b]) for b in range(256)}
    merges: list[tuple[bytes, bytes]] = []
    while len(merges) < n_merges:
        counts: dict[tuple[bytes, bytes], int] = {}
        for tokens, count in seqs:
            for pair in zip(tokens, tokens[1:]):
                counts[pair] = counts.get(pair, 0) + count
        candidates = [
            (-count, left, right)
            for (left, right), count in counts.items()
            if count >= max(1, min_frequency) and left + right not in known
        ]
        if not candidates:
            break
        _, left, right = min(candidates)
        merges.append((left, right))
        known.add(left + right)
        for tokens, _ in seqs:
            i = 0
            while i < len(tokens) - 1:
                if tokens[i] == left and tokens[i + 1] == right:
                    tokens[i : i + 2] = [left + right]
                i += 1
    return merges


def train(
    texts: list[str],
    vocab_size: int,
    pattern: str | None,
    min_frequency: int = 2,
    superbpe_transition: int | None = None,
    superword_pattern: str | None = None,
) -> dict[bytes, int]:
    """mergeable_ranks trained on ``texts``: bytes get ranks 0..255, merge k gets rank 256 + k.

    With ``superbpe_transition=t``: t merges over ``pattern`` pieces, then the pieces of
    ``superword_pattern`` are encoded with that vocab and training goes on over them.
    """
    counts: dict[bytes, int] = {}
    for text in texts:
        for piece in pieces(pattern, text):
            key = piece.encode("utf-8")
            counts[key] = counts.get(key, 0) + 1
    n_merges = vocab_size - 256
    first = n_merges if superbpe_transition is None else min(n_merges, superbpe_transition)
    ranks = {bytes([b]): b for b in range(256)}
    for left, right in train_merges(counts, first, min_frequency, set(ranks)):
        ranks[left + right] = len(ranks)
    if superbpe_transition is None or len(ranks) - 256 < first:
        return ranks
    super_counts: dict[bytes, int] = {}
    for text in texts:
        for piece in pieces(superword_pattern, text):
            key = piece.encode("utf-8")
            super_counts[key] = super_counts.get(key, 0) + 1
    by_rank = {rank: token for token, rank in ranks.items()}
    words = [
        ([by_rank[t] for t in bpe_encode(ranks, piece)], count)
        for piece, count in sorted(super_counts.items())
    ]
    for left, right in train_merges(words, n_merges - first, min_frequency, set(ranks)):
        ranks[left + right] = len(ranks)
    return ranks

"""Pre-tokenization: cutting text into the pieces that BPE encodes one by one.

``next_piece_end(kind, s, n, pos)`` returns the end (byte offset) of the piece that starts at
``pos`` in the valid UTF-8 text ``s[:n]``. Patterns without a scanner (PAT_REGEX) are cut by the
`regex` module in ``BacktrackEncoder._pieces``; PAT_NONE makes the whole text one piece.
Cost: O(piece length) per call, no allocation, nogil.
"""

from libc.stdint cimport uint8_t

from bpecore.pretokenize cimport PAT_NONE, PAT_REGEX, PAT_CL100K, PAT_O200K, PAT_R50K


cdef Py_ssize_t next_piece_end(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    return n


def pattern_kind(pattern):
    """The PatternKind that cuts ``pattern``: a hand-written scanner, the regex fallback or none."""
    if pattern is None:
        return PAT_NONE
    return PAT_REGEX

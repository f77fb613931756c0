from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore._piececache cimport BpeCacheTable
from bpecore.piececache cimport PieceCache
from bpecore.vocab cimport Vocab, VocabView


cdef Py_ssize_t encode_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                             vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil
#: encode_piece without the whole-piece lookup (n >= 1).
cdef Py_ssize_t backtrack_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil
#: len(encode_piece(p[:n])) (n >= 1); ``scratch`` is clobbered.
cdef Py_ssize_t count_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                            vector[uint32_t]& scratch, vector[uint64_t]& bits) noexcept nogil


cdef inline Py_ssize_t count_bytes(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                   vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """``count_piece`` that also takes an empty piece (a custom pattern may match nothing)."""
    return count_piece(v, p, n, out, bits) if n > 0 else 0


#: Encode (append to ``out``) or count the UTF-8 text s[:n] with the scanner ``kind`` (PAT_REGEX:
#: pieces end at ``ends``, where a ~start skips text no match covers: BacktrackEncoder._pieces);
#: returns its token count, or out.size() when encoding. ``shared``: the encoder's piece cache
#: table (piececache.pyx), or NULL.
cdef Py_ssize_t encode_text(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                            const vector[Py_ssize_t]& ends, vector[uint32_t]& out,
                            bint count_only, BpeCacheTable* shared) noexcept nogil


cdef class BacktrackEncoder:
    cdef readonly Vocab vocab
    cdef readonly int kind          #: pretokenize.PatternKind of the pattern
    cdef readonly object pattern    #: pattern string, or None for "the whole text is one piece"
    cdef object _regex              #: compiled pattern, for patterns without a hand-written scanner
    cdef readonly PieceCache piece_cache   #: BPE of pieces kept across calls (piececache.pyx)

    cdef int _pieces(self, str text, const uint8_t** s, Py_ssize_t* n, vector[Py_ssize_t]& ends) except -1
    cdef Py_ssize_t _encode_pieces(self, const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& ends,
                                   vector[uint32_t]& out, bint count_only) noexcept nogil
    cdef list _to_list(self, vector[uint32_t]& out)

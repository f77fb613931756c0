# IntervalCounter's C declarations, so that other compiled modules (the chunker) call its searches
# without going through Python: its fields and C methods are documented in interval.pyx.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore._piececache cimport BpeCacheTable
from bpecore.backtrack cimport BacktrackEncoder


cdef struct _Piece:
    int64_t cum           #: tokens of the pieces up to and including this one
    Py_ssize_t end        #: where this piece ends
    Py_ssize_t reach      #: max horizon of the pieces up to and including this one


cdef struct _Head:
    # The cut of text[a:] from a slice start a up to the first boundary of the whole text. Any
    # slice [a, b) with b >= horizon cuts the same head pieces (the scanner never read past b).
    bint eager            #: build an entry on every miss (single count()); else only for a start asked twice in a row
    Py_ssize_t asked      #: start of the previous query (-1: none)
    Py_ssize_t start      #: slice start a of the entry (-1: no entry)
    Py_ssize_t m          #: piece index at the boundary reached: piece_at[boundary]
    Py_ssize_t count      #: tokens of the head pieces [a, boundary)
    Py_ssize_t horizon    #: max piece_horizon of the head pieces


cdef class IntervalCounter:
    cdef BacktrackEncoder encoder
    cdef readonly str text
    cdef const uint8_t* s
    cdef Py_ssize_t n
    cdef Py_ssize_t nchars
    cdef int kind
    cdef vector[int32_t] piece_at
    cdef vector[uint32_t] first_at   #: without piece tables: first piece ending at or after 16k
    cdef _Piece* pieces       #: pieces[0..npieces - 1], room for pcap (malloc'd: filled by pointer)
    cdef Py_ssize_t npieces
    cdef Py_ssize_t pcap
    cdef vector[uint32_t] char_byte
    cdef vector[uint32_t] block_char   #: with char_byte: the character at byte 64k (``_char``)
    cdef vector[uint32_t] scratch
    cdef vector[uint64_t] bits
    cdef _Head head
    cdef bint tables    #: inner prefix/suffix counts are computed in the pass

    cdef inline _Piece* _next_piece(self) noexcept nogil
    cdef inline Py_ssize_t _add_piece(self, Py_ssize_t pos, Py_ssize_t e, int64_t cum, Py_ssize_t top) noexcept nogil
    cdef bint _pass_tables(self) noexcept nogil
    cdef bint _pass_counts(self, BpeCacheTable* shared) noexcept nogil
    cdef Py_ssize_t _count_cached(self, Py_ssize_t pos, Py_ssize_t e, uint64_t h, BpeCacheTable* shared, uint64_t* hits, uint64_t* misses) noexcept nogil
    cdef Py_ssize_t _count_new(self, Py_ssize_t pos, Py_ssize_t e, vector[uint32_t]& work) noexcept nogil
    cdef inline Py_ssize_t _piece_count(self, Py_ssize_t x, Py_ssize_t e, vector[uint32_t]& scratch, vector[uint64_t]& bits) noexcept nogil
    cdef Py_ssize_t _byte(self, Py_ssize_t c) noexcept nogil
    cdef inline Py_ssize_t _at(self, Py_ssize_t x) noexcept nogil
    cdef inline Py_ssize_t _at_or_before(self, Py_ssize_t b) noexcept nogil
    cdef Py_ssize_t _last_stable(self, Py_ssize_t b) noexcept nogil
    cdef Py_ssize_t _from_boundary(self, Py_ssize_t m, Py_ssize_t j, Py_ssize_t b, vector[uint32_t]& scratch, vector[uint64_t]& bits) noexcept nogil
    cdef Py_ssize_t c_count(self, Py_ssize_t a, Py_ssize_t b, vector[uint32_t]& scratch, vector[uint64_t]& bits, _Head* head) noexcept nogil
    cdef Py_ssize_t _count_chars(self, Py_ssize_t start, Py_ssize_t end) except -1
    cdef Py_ssize_t _char(self, Py_ssize_t x) noexcept nogil
    cdef (Py_ssize_t, Py_ssize_t) _piece_bracket(self, Py_ssize_t start, Py_ssize_t tokens) noexcept nogil
    cdef (Py_ssize_t, Py_ssize_t) _piece_bracket_before(self, Py_ssize_t end, Py_ssize_t tokens) noexcept nogil
    cdef bint _exceeds(self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t tokens) noexcept
    # the chunker's calls (also Python methods)
    cpdef Py_ssize_t count(self, Py_ssize_t start, Py_ssize_t end) except -1
    cpdef Py_ssize_t crossing(self, Py_ssize_t start, Py_ssize_t tokens, Py_ssize_t step) except -1
    cpdef Py_ssize_t crossing_before(self, Py_ssize_t end, Py_ssize_t lo, Py_ssize_t tokens, Py_ssize_t step) except -1
    cpdef Py_ssize_t last_end_within(self, Py_ssize_t start, Py_ssize_t tokens, Py_ssize_t first, Py_ssize_t stop) except -2

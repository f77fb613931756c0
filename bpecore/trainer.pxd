from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libcpp.string cimport string
from libcpp.unordered_set cimport unordered_set
from libcpp.vector cimport vector


cdef struct HeapEntry:
    int64_t count                   #: the pair's count when pushed (may be stale: lazy invalidation)
    uint32_t pair                   #: pair id


cdef class Trainer:
    #: Token t (t = rank) is tok_bytes[tok_start[t]:tok_start[t+1]]; tokens are only appended.
    cdef vector[uint8_t] tok_bytes
    cdef vector[uint64_t] tok_start
    #: The bytes of every token, to refuse a merge that would form an existing token again.
    cdef unordered_set[string] tok_set
    #: Word w (a unique piece) is sym[word_start[w]:word_start[w] + word_len[w]]; merges shrink
    #: word_len in place. word_count[w] is its corpus frequency, word_stamp[w] the last merge
    #: that visited it (dedupes the pair -> words lists).
    cdef vector[uint32_t] sym
    cdef vector[uint64_t] word_start
    cdef vector[uint32_t] word_len
    cdef vector[int64_t] word_count
    cdef vector[uint32_t] word_stamp
    #: Pair p is (pair_left[p], pair_right[p]) with pair_count[p] adjacent occurrences (weighted by
    #: word counts). pair_words[p] lists the words that held p when it was last seen growing
    #: (may contain stale words and duplicates; freed once p is merged).
    cdef vector[uint32_t] pair_left
    cdef vector[uint32_t] pair_right
    cdef vector[int64_t] pair_count
    cdef vector[vector[uint32_t]] pair_words
    cdef vector[uint32_t] pair_stamp
    #: Open addressing (linear probing, load <= 0.5): key (left << 32 | right) + 1 -> pair id; 0 = empty.
    cdef vector[uint64_t] hkeys
    cdef vector[uint32_t] hvals
    cdef uint64_t hmask
    #: Max-heap on (count desc, left bytes asc, right bytes asc), lazily invalidated.
    cdef vector[HeapEntry] heap
    #: Merges done: token 256 + k (or n_initial + k) = merge_left[k] + merge_right[k].
    cdef vector[uint32_t] merge_left
    cdef vector[uint32_t] merge_right
    cdef vector[uint32_t] new_pairs
    cdef readonly uint32_t n_initial
    cdef readonly int64_t min_frequency
    cdef bint started

    cdef uint32_t _pair_id(self, uint32_t a, uint32_t b) noexcept nogil
    cdef void _add(self, uint32_t a, uint32_t b, int64_t delta, uint32_t word, uint32_t new_token) noexcept nogil
    cdef bint _better(self, const HeapEntry& x, const HeapEntry& y) noexcept nogil
    cdef void _sift_down(self, Py_ssize_t j, HeapEntry e) noexcept nogil
    cdef int _cmp_token(self, uint32_t a, uint32_t b) noexcept nogil
    cdef void _push(self, HeapEntry e) noexcept nogil
    cdef HeapEntry _pop(self) noexcept nogil
    cdef int _step(self) noexcept nogil
    cdef void _merge(self, uint32_t pair) noexcept nogil
    cdef void _start(self) noexcept nogil

cimport cython
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore.vocab cimport Vocab, VocabView


cdef struct TrieView:
    # Reverse trie over the reachable tokens: walking bytes backwards from a position meets every
    # token that ends there. Raw pointers into a SuffixTrie's vectors.
    const uint32_t* root_child      #: node for the last byte b of a token (256 entries)
    const uint64_t* keys            #: open addressing, (node + 1) << 8 | byte -> vals slot (0 = empty)
    const uint32_t* vals            #: child node
    uint64_t mask
    const uint32_t* node_token      #: token whose reversed bytes spell the node, or NO_TOKEN


cdef class SuffixTrie:
    cdef vector[uint32_t] root_child
    cdef vector[uint64_t] keys
    cdef vector[uint32_t] vals
    cdef vector[uint32_t] node_token
    cdef TrieView view
    cdef readonly Vocab vocab


#: Last token of BPE(p[:i]) (i >= 1), given last[x] = last token of BPE(p[:x]) for 1 <= x < i.
cdef uint32_t last_token(const VocabView* v, const TrieView* st, const uint8_t* p, Py_ssize_t i,
                         const uint32_t* last, vector[uint32_t]& scratch) noexcept nogil

#: First token of BPE(p[k:end]) (k < end), given first[x] = first token of BPE(p[x:end]) for k < x < end.
cdef uint32_t first_token(const VocabView* v, const uint8_t* p, Py_ssize_t k, Py_ssize_t end,
                          const uint32_t* first, vector[uint32_t]& scratch) noexcept nogil

#: Conservative bound on how far the scanner may look when it cuts the piece [start, end):
#: text up to the returned offset decides the piece (README, "Exact operations").
cdef Py_ssize_t piece_horizon(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) noexcept nogil


cdef struct MemoEntry:
    uint64_t w0                       #: the piece's first 8 bytes, zero-padded
    uint64_t w1                       #: bytes 8-15, zero-padded
    uint32_t length                   #: 0: empty slot
    uint32_t count


@cython.final
cdef class Appender:
    cdef Vocab vocab
    cdef const VocabView* v
    cdef SuffixTrie trie
    cdef int kind
    cdef vector[uint8_t] buf          #: complete UTF-8 text pushed so far
    cdef Py_ssize_t frontier          #: end of the stable pieces: they never change on append
    cdef Py_ssize_t committed         #: tokens of the stable pieces
    cdef Py_ssize_t mid_count         #: tokens of unstable pieces before the last piece
    cdef Py_ssize_t n_mid             #: number of those pieces
    cdef Py_ssize_t last_start        #: start of the last (unstable) piece
    cdef vector[uint32_t] last        #: last[x]: last token of BPE(buf[last_start:last_start+x])
    cdef vector[uint32_t] cnt         #: cnt[x]: token count of the same prefix
    cdef Py_ssize_t last_count        #: tokens of the last piece
    cdef int shape                    #: what appending one more character can do (SHAPE_*)
    cdef bint shape_flag              #: o200k word: has a lower-class char; space: has \r or \n
    cdef bint ws_mode                 #: o200k: the tail is one whitespace run with a newline
    cdef vector[uint32_t] run_last    #: prefix table of buf[frontier:] while ws_mode
    cdef vector[uint32_t] run_cnt
    cdef vector[uint32_t] scratch
    cdef vector[uint64_t] bits
    cdef vector[uint32_t] out
    cdef vector[MemoEntry] memo       #: counts of short pieces seen before (direct-mapped)
    cdef int memo_shift               #: 64 - log2(memo slots)
    cdef size_t memo_misses           #: misses since the memo last grew
    cdef uint64_t key0, key1          #: the key _memo_slot last computed

    cdef inline Py_ssize_t c_count(self) noexcept nogil
    cdef void c_push(self, const uint8_t* data, Py_ssize_t n) noexcept nogil
    cdef inline MemoEntry* _memo_slot(self, const uint8_t* p, Py_ssize_t n) noexcept nogil
    cdef void _memo_store(self, MemoEntry* e, Py_ssize_t n, Py_ssize_t count) noexcept nogil
    cdef inline Py_ssize_t _count(self, const uint8_t* p, Py_ssize_t n) noexcept nogil
    cdef inline void _append(self, const uint8_t* data, Py_ssize_t n) noexcept nogil
    cdef void _extend_last(self) noexcept nogil
    cdef void _extend_run(self) noexcept nogil
    cdef void _enter_ws_mode(self) noexcept nogil
    cdef void _rescan(self) noexcept nogil
    cdef void _set_shape(self) noexcept nogil
    cdef bint _shortcut(self, uint8_t c, uint8_t fl) noexcept nogil
    cdef inline bint _extends(self, const uint8_t* c, uint8_t flags) noexcept nogil

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

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore._classes cimport (
    BPE_UT_N, PAT_CL100K, PAT_DEEPSEEK3, PAT_LLAMA3, PAT_O200K, PAT_QWEN2, PAT_R50K, PAT_TEKKEN,
)
from bpecore.pretokenize cimport char_flags_fast
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


cdef inline bint run_ends_shared(int kind) noexcept nogil:
    """Patterns in which a piece that is one character c repeated, at least twice, ends where
    the piece one c earlier ends: every alternative that can match such a run is greedy and
    unbounded (letters and marks, punctuation and symbols, ``\\s*[\\r\\n]+``, ``\\s+(?!\\S)``,
    r50k's numbers, DeepSeek V3's CJK runs and its runs no other alternative takes, which end
    where one does), and the numeral alternatives that are bounded ({1,3}, single) are left out
    by ``run_width``. split_at_end then reads a run once, not once per candidate inside it
    (tests/bpecore/test_split_runs.py); the prepending counter extends
    such a run at the front likewise (appendable.pyx)."""
    return (kind == PAT_CL100K or kind == PAT_O200K or kind == PAT_R50K or kind == PAT_LLAMA3
            or kind == PAT_QWEN2 or kind == PAT_TEKKEN or kind == PAT_DEEPSEEK3)


cdef inline Py_ssize_t run_width(int kind, const uint8_t* s, Py_ssize_t k) noexcept nogil:
    """Bytes of the character at ``k`` when a run of it may share its piece end, else 0: not
    \\p{N}, which the patterns cut in bounded pieces, but r50k's `` ?\\p{N}+``."""
    cdef Py_ssize_t w
    if char_flags_fast(s, k, &w) & BPE_UT_N and kind != PAT_R50K:
        return 0
    return w

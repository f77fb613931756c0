"""Exact prefix operations: the prefix-last-token table, the first-token table and split_at_end.

The last token of BPE(p[:i]) is the longest token t ending at i whose predecessor
last[i - len(t)] is compatible with it (README, "How it works"); so one backwards trie walk per
byte gives the last token and the count of every prefix of a piece (``last_token``, over the
reversed tokens in ``SuffixTrie``), and the mirror rule gives the first token of every suffix
(``first_token``). Cost per byte: one walk of at most L trie nodes (L = longest token) plus one
compatibility check per candidate; memory: 8 bytes per byte of the piece (last token + count).
``last_token`` is what the appending engine (``appender.pyx``) extends per push.

``split_at_end(text, n)``: the smallest k with count(text[k:]) <= n, from the end backwards with
the first-token table (a long run costs O(1) trie walks per step); work grows with n, not with
the text. Worst input: a long piece ending the text (a run of one letter), still linear in the
bytes that can fit in n tokens.
"""

# Decision that holds: the suffix trie hashes with vocab's hash_u64 rather than a copy of its
# own, and lives beside the tables that read it. The measurements: docs/perf/prefix.md.

from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from libc.string cimport memcmp

from bpecore._classes cimport PAT_NONE, PAT_REGEX
from bpecore._types cimport NO_TOKEN
from bpecore.backtrack cimport BacktrackEncoder, count_bytes
from bpecore.pretokenize cimport next_piece_end
from bpecore.utf8 cimport is_lead
from bpecore.vocab cimport Vocab, VocabView, hash_u64, is_valid_pair, token_len, trie_child


cdef class SuffixTrie:
    """Reverse trie over the reachable tokens of a Vocab (for the prefix-last-token table).

    ``root_child[b]``: node of the one-byte suffix b. ``keys``/``vals``: child of ``node`` by the
    next byte *to the left*, open addressing keyed ``(node + 1) << 8 | byte`` (0 = empty, load
    factor <= 0.5). ``node_token[node]``: the reachable token whose bytes, read right to left,
    spell the path to ``node``, or NO_TOKEN. Built once per Vocab (about 0.1 s for o200k).
    """

    def __init__(self, Vocab vocab):
        self.vocab = vocab
        cdef const VocabView* v = &vocab.view
        cdef uint32_t i, node, child, length
        cdef Py_ssize_t j
        cdef uint64_t total = 0, size = 16, key, slot
        cdef const uint8_t* p
        for i in range(v.n_tokens):
            total += token_len(v, i)
        while size < 2 * total + 16:
            size <<= 1
        self.keys.assign(size, 0)
        self.vals.assign(size, 0)
        self.root_child.assign(256, NO_TOKEN)
        self.view.mask = size - 1
        self.view.keys = self.keys.data()
        self.view.vals = self.vals.data()
        for i in range(v.n_tokens):
            if not v.reachable[i]:
                continue
            p = v.all_bytes + v.token_starts[i]
            length = token_len(v, i)
            node = self.root_child[p[length - 1]]
            if node == NO_TOKEN:
                node = self.node_token.size()
                self.node_token.push_back(NO_TOKEN)
                self.root_child[p[length - 1]] = node
            j = <Py_ssize_t>length - 2
            while j >= 0:
                child = _child(&self.view, node, p[j])
                if child == NO_TOKEN:
                    child = self.node_token.size()
                    self.node_token.push_back(NO_TOKEN)
                    key = ((<uint64_t>node + 1) << 8) | p[j]
                    slot = hash_u64(key) & (size - 1)
                    while self.keys[slot] != 0:
                        slot = (slot + 1) & (size - 1)
                    self.keys[slot] = key
                    self.vals[slot] = child
                node = child
                j -= 1
            self.node_token[node] = i
        self.view.root_child = self.root_child.data()
        self.view.node_token = self.node_token.data()


cdef inline uint32_t _child(const TrieView* st, uint32_t node, uint8_t b) noexcept nogil:
    cdef uint64_t key = ((<uint64_t>node + 1) << 8) | b
    cdef uint64_t i = hash_u64(key) & st.mask
    cdef uint64_t k
    while True:
        k = st.keys[i]
        if k == key:
            return st.vals[i]
        if k == 0:
            return NO_TOKEN
        i = (i + 1) & st.mask


cdef uint32_t last_token(const VocabView* v, const TrieView* st, const uint8_t* p, Py_ssize_t i,
                         const uint32_t* last, vector[uint32_t]& scratch) noexcept nogil:
    cdef uint32_t node = st.root_child[p[i - 1]]
    cdef uint32_t t
    cdef Py_ssize_t j = i - 1, start
    scratch.clear()
    while node != NO_TOKEN:
        t = st.node_token[node]
        if t != NO_TOKEN:
            scratch.push_back(t)
        if j == 0:
            break
        j -= 1
        node = _child(st, node, p[j])
    while scratch.size():
        t = scratch.back()
        scratch.pop_back()
        start = i - token_len(v, t)
        if start == 0 or is_valid_pair(v, last[start], t):
            return t
    return NO_TOKEN


cdef uint32_t first_token(const VocabView* v, const uint8_t* p, Py_ssize_t k, Py_ssize_t end,
                          const uint32_t* first, vector[uint32_t]& scratch) noexcept nogil:
    cdef uint32_t node = v.root_child[p[k]]
    cdef uint32_t t
    cdef Py_ssize_t j = k + 1, stop
    scratch.clear()
    while node != NO_TOKEN:
        t = v.node_token[node]
        if t != NO_TOKEN:
            scratch.push_back(t)
        if j == end:
            break
        node = trie_child(v, node, p[j])
        j += 1
    while scratch.size():
        t = scratch.back()
        scratch.pop_back()
        stop = k + token_len(v, t)
        if stop == end or is_valid_pair(v, t, first[stop]):
            return t
    return NO_TOKEN


def split_at_end(BacktrackEncoder encoder, str text, Py_ssize_t limit):
    """Smallest char offset k with count(text[k:]) <= limit (see Encoding.split_at_end), for a
    scanner pattern or none (custom patterns: Encoding._split_at_end_regex; ValueError here).

    Candidates k go from the end backwards. count(text[k:]) = the pieces cut from k until one of
    them ends on a boundary of the reference cut (the pieces of the window text[k0:]), plus the
    reference's count from there on (cutting is deterministic from a boundary, and the patterns
    have no look-behind). The first piece's count comes from a first-token table anchored at its
    end, so a long run costs O(1) trie walks per step. The scan stops once the bytes left of k
    cannot fit in ``limit`` tokens even at L bytes per token: work grows with ``limit``.
    """
    if limit < 0:
        raise ValueError("n must be >= 0")
    if encoder.kind == PAT_REGEX:
        raise ValueError("a custom pattern's split_at_end is Encoding.split_at_end's")
    cdef const uint8_t* s
    cdef Py_ssize_t n, k0, k, e, pos, x, total, best, chars_right = 0
    cdef Py_ssize_t maxlen = encoder.vocab.max_token_len
    cdef const VocabView* v = &encoder.vocab.view
    cdef int kind = encoder.kind
    s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
    cdef Py_ssize_t nchars = len(text)
    cdef vector[Py_ssize_t] ref_count      # ref_count[x - k0]: count(text[x:]) (pieces cut from x on), -1 if not known yet
    cdef vector[Py_ssize_t] chain, chain_count
    cdef vector[uint32_t] first, cnt_first  # first-token table of the anchored piece, index x - k0
    cdef vector[uint32_t] scratch, out
    cdef vector[uint64_t] bits
    cdef Py_ssize_t anchor = -1, anchor_lo = 0, ends_count
    cdef Py_ssize_t run_e = -1, run_w = 0, j  # end of the last candidate's piece when it is one
    # character (of run_w bytes) repeated
    cdef bint runs = run_ends_shared(kind)
    cdef vector[Py_ssize_t] ref_ends
    # window: no k below n - (limit + 1) * maxlen bytes can fit
    k0 = n - (limit + 1) * maxlen
    if k0 <= 0:
        k0 = 0
    else:
        while k0 < n and not is_lead(s[k0]):
            k0 += 1
    best = nchars
    with nogil:
        ref_count.assign(n - k0 + 1, -1)
        pos = k0
        while pos < n:
            e = n if kind == PAT_NONE else next_piece_end(kind, s, n, pos)
            ref_ends.push_back(e)
            pos = e
        total = 0
        ref_count[n - k0] = 0
        for x in range(<Py_ssize_t>ref_ends.size() - 1, -1, -1):
            e = ref_ends[x]
            pos = k0 if x == 0 else ref_ends[x - 1]
            total += count_bytes(v, s + pos, e - pos, out, bits)
            ref_count[pos - k0] = total
        first.resize(n - k0 + 1)
        cnt_first.resize(n - k0 + 1)
        k = n
        while k > k0:
            k -= 1
            while k > k0 and not is_lead(s[k]):
                k -= 1
            chars_right += 1
            # cut from k until a reference boundary
            if run_e >= 0 and memcmp(s + k, s + k + run_w, run_w) == 0:
                e = run_e  # the piece one character on is this one repeated: it ends there too
            else:
                e = n if kind == PAT_NONE else next_piece_end(kind, s, n, k)
                run_e = -1
                if runs:
                    run_w = run_width(kind, s, k)
                    if run_w and e - k >= 2 * run_w and (e - k) % run_w == 0:
                        j = k + run_w
                        while j < e and memcmp(s + j, s + k, run_w) == 0:
                            j += run_w
                        if j == e:
                            run_e = e
            if e != anchor:
                anchor = e
                anchor_lo = e
            while anchor_lo > k:
                anchor_lo -= 1
                first[anchor_lo - k0] = first_token(v, s + k0, anchor_lo - k0, anchor - k0,
                                                    first.data(), scratch)
                cnt_first[anchor_lo - k0] = 1 + (0 if anchor_lo + token_len(v, first[anchor_lo - k0]) == anchor
                                                 else cnt_first[anchor_lo + token_len(v, first[anchor_lo - k0]) - k0])
            # count(text[e:]): cut from e until a position already counted, then remember the
            # count from every position passed (cutting from a position is deterministic), so
            # each position is cut from once per call (digit triples out of phase with the
            # reference cut would otherwise re-cut the rest of the window per candidate)
            pos = e
            chain.clear()
            while ref_count[pos - k0] < 0:
                chain.push_back(pos)
                x = next_piece_end(kind, s, n, pos)
                chain_count.push_back(count_bytes(v, s + pos, x - pos, out, bits))
                pos = x
            total = ref_count[pos - k0]
            for j in range(<Py_ssize_t>chain.size() - 1, -1, -1):
                total += chain_count[j]
                ref_count[chain[j] - k0] = total
            chain_count.clear()
            total = cnt_first[k - k0] + ref_count[e - k0]
            if total <= limit:
                best = nchars - chars_right
    return best


#: PatternKind of patterns cut by the `regex` module (no scanner): the exact operations fall back
#: to slower exact paths for them.
KIND_REGEX = PAT_REGEX

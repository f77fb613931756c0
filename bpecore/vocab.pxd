from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from libcpp.vector cimport vector

from bpecore._types cimport token_t, NO_TOKEN
from bpecore._simd cimport BPE_LOW_BYTES, BPE_SWAR, bpe_ctz64


cdef struct PieceEntry:
    # One slot of the whole-piece table (reachable tokens only), 16 bytes: a hit on a token of up
    # to 8 bytes reads this cache line and nothing else.
    uint64_t head                   #: first min(len, 8) bytes, little-endian, zero padded
    uint32_t token                  #: the token (NO_TOKEN = empty slot)
    uint32_t len                    #: its length in bytes, | WHOLE_ONLY for a whole-piece-only token


cdef enum:
    # PieceEntry.len flag of an unreachable token that a piece is when it spells it (tiktoken looks
    # a piece up before BPE; Vocab.enable_whole_pieces): lookup_piece never matches such an entry,
    # lookup_whole does.
    WHOLE_ONLY = 0x80000000


cdef struct TrieEntry:
    # One slot of the longest-match trie, 16 bytes: a step reads one cache line.
    uint64_t key                    #: (node + 1) << 8 | byte (0 = empty slot)
    uint32_t child                  #: child node
    uint32_t token                  #: reachable token spelled by the child node, or NO_TOKEN


cdef struct PairEntry:
    uint64_t key                    #: (left << 32 | right) + 1 (0 = empty slot)
    uint32_t merged                 #: merged token of that pair
    uint32_t pad


cdef struct SpineEnds:
    # Where is_valid_pair's walk down a token's spines ends (its last check, see spine_rejects).
    uint32_t right_base             #: base token reached by repeated split_right (the token itself if base)
    uint32_t right_low              #: lowest-ranked non-base token on that spine, NO_TOKEN if the token is base
    uint32_t left_base              #: the same down split_left
    uint32_t left_low


cdef struct VocabView:
    # Read-only raw view of a built Vocab, for nogil code. Pointers stay valid while the Vocab lives.
    const uint8_t* all_bytes        #: token bytes, concatenated in rank order
    const uint32_t* token_starts    #: token i is all_bytes[token_starts[i]:token_starts[i+1]]
    const uint32_t* split_left      #: left half of token i's last BPE merge (i itself for base tokens)
    const uint32_t* split_right     #: right half of token i's last BPE merge
    const uint32_t* next_prefix     #: longest reachable token that is a strict prefix of i, or NO_TOKEN
    const uint8_t* reachable        #: 1 if BPE can produce token i from its own bytes
    const uint32_t* bytes_table     #: open addressing, bytes hash -> token (NO_TOKEN = empty)
    uint64_t bytes_mask
    uint64_t pair_mask              #: pairs has pair_mask + 1 slots
    const uint32_t* root_child      #: trie node reached from the root by byte b (256 entries)
    uint64_t trie_mask              #: trie has trie_mask + 1 slots
    const uint32_t* node_token      #: reachable token spelled by trie node, or NO_TOKEN
    uint32_t n_tokens
    const PieceEntry* pieces        #: open addressing, piece_hash -> reachable token with inline head
    uint32_t piece_shift            #: slot = piece_hash >> piece_shift (table size 2**(64 - shift))
    const TrieEntry* trie           #: open addressing, (node + 1) << 8 | byte -> child node and its token
    const PairEntry* pairs          #: open addressing, (left << 32 | right) + 1 -> merged token
    const uint32_t* byte_token      #: token of the single byte b (256 entries)
    const uint64_t* pair_filter     #: bit mul_hash(key) >> pair_filter_shift set for every pair key
    uint32_t pair_filter_shift
    const uint64_t* first2x         #: trie node spelled by bytes b0 b1 (index b0 << 8 | b1) | its token << 32 (NO_TOKEN halves when absent)
    const SpineEnds* spine_ends     #: per token: the bottoms of its right and left spines (spine_rejects)
    const uint64_t* byte_pair_merge #: bit a << 8 | b set when the tokens of bytes a and b merge (8 KB)
    const uint64_t* piece_tails     #: pieces[i]'s token's last 8 bytes when it is over 8 bytes long (same slots)
    const uint64_t* step3_filter    #: bit mul_hash(key) >> step3_shift set for every trie key below a first2 node
    uint32_t step3_shift
    uint32_t n_whole_only           #: WHOLE_ONLY entries in pieces (Vocab.enable_whole_pieces), usually 0
    const uint32_t* run_max         #: per byte c: the longest k with c^k a trie node, 0 below RUN_JUMP (256 entries)
    const uint32_t* run_at          #: per byte c: where c's entries start in run_nodes (256 entries)
    const uint64_t* run_nodes       #: run_at[c] + k - 1: trie node of c^k | the longest token c^j (j <= k) << 32
    const uint32_t* digit_tokens    #: the reachable token of 1-3 ASCII digits (digit_index), or NO_TOKEN


cdef inline uint64_t load_head(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # p[:min(n, 8)] as a little-endian word, zero padded, without reading outside p[:n] (n >= 1).
    cdef uint64_t w = 0
    cdef uint32_t a = 0, b = 0
    if n >= 8:
        memcpy(&w, p, 8)
        return w
    if n >= 4:
        memcpy(&a, p, 4)
        memcpy(&b, p + n - 4, 4)
        return <uint64_t>a | (<uint64_t>b << ((n - 4) * 8))
    return <uint64_t>p[0] | (<uint64_t>p[n >> 1] << ((n >> 1) * 8)) | (<uint64_t>p[n - 1] << ((n - 1) * 8))


cdef inline uint64_t piece_hash(const uint8_t* p, Py_ssize_t n, uint64_t head) noexcept nogil:
    # Multiplicative hash of (head, last 8 bytes, n); the slot is the top bits.
    cdef uint64_t tail = 0
    cdef uint64_t h = (head ^ (<uint64_t>n << 58)) * 0x9E3779B97F4A7C15ULL
    if n > 8:
        memcpy(&tail, p + n - 8, 8)
        h = (h ^ (h >> 29) ^ tail) * 0xC2B2AE3D27D4EB4FULL
    return h


cdef inline uint64_t head_and_hash(const uint8_t* p, Py_ssize_t n, const uint8_t* limit,
                                   uint64_t* head) noexcept nogil:
    # piece_hash(p, n, load_head(p, n)), head[0] = load_head(p, n) (n >= 1), without a branch on n
    # when p[:8] may be read (p + 8 <= limit: all but the last 7 bytes of a text). load_head's and
    # piece_hash's tests of n depend on the text and mispredict often (English: ~0.5 and ~0.07 per
    # piece); here the head is one load and a mask, the tail hash is computed for every piece from
    # p[n - 8:n] (or p[:8], discarded, when n <= 8) and kept by a mask.
    cdef uint64_t w, tail, h, h2, big
    if not BPE_SWAR or p + 8 > limit:                 # BPE_SWAR: little-endian loads
        head[0] = load_head(p, n)
        return piece_hash(p, n, head[0])
    memcpy(&w, p, 8)
    big = <uint64_t>0 - <uint64_t>(n > 8)             # all ones when n > 8
    w &= BPE_LOW_BYTES[n if n < 8 else 8]
    head[0] = w
    h = (w ^ (<uint64_t>n << 58)) * 0x9E3779B97F4A7C15ULL
    memcpy(&tail, p + ((<uint64_t>n - 8) & big), 8)
    h2 = (h ^ (h >> 29) ^ tail) * 0xC2B2AE3D27D4EB4FULL
    return h ^ ((h ^ h2) & big)


cdef inline bint tail_equal(const VocabView* v, uint64_t slot, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # p[8:n] == bytes 8..n of the token in pieces[slot], which has p's head and length n > 8. Its
    # last 8 bytes are read from piece_tails[slot], a load that does not wait for the token id
    # (and that encode_text prefetches with the slot); the middle of a token over 16 bytes from
    # all_bytes.
    cdef uint64_t x
    memcpy(&x, p + n - 8, 8)
    if x != v.piece_tails[slot]:
        return False
    return n <= 16 or memcmp(v.all_bytes + v.token_starts[v.pieces[slot].token] + 8, p + 8, n - 16) == 0


cdef inline uint32_t lookup_piece_hashed(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                         uint64_t head, uint64_t h) noexcept nogil:
    # lookup_piece with head = load_head(p, n) and h = piece_hash(p, n, head) already computed.
    cdef uint64_t mask = (<uint64_t>1 << (64 - v.piece_shift)) - 1
    cdef uint64_t i = h >> v.piece_shift
    cdef const PieceEntry* e
    while True:
        e = &v.pieces[i]
        if e.token == NO_TOKEN:
            return NO_TOKEN
        if e.head == head and e.len == <uint32_t>n:
            if n <= 8 or tail_equal(v, i, p, n):
                return e.token
        i = (i + 1) & mask


cdef inline uint32_t lookup_whole_hashed(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                         uint64_t head, uint64_t h) noexcept nogil:
    # lookup_piece_hashed also finding WHOLE_ONLY tokens (the length test masks the flag). Asked
    # only after lookup_piece_hashed missed and when v.n_whole_only: other vocabs pay one test of
    # that field per piece that is not a token.
    cdef uint64_t mask = (<uint64_t>1 << (64 - v.piece_shift)) - 1
    cdef uint64_t i = h >> v.piece_shift
    cdef const PieceEntry* e
    while True:
        e = &v.pieces[i]
        if e.token == NO_TOKEN:
            return NO_TOKEN
        if e.head == head and (e.len & ~(<uint32_t>WHOLE_ONLY)) == <uint32_t>n:
            if n <= 8 or tail_equal(v, i, p, n):
                return e.token
        i = (i + 1) & mask


cdef inline uint32_t lookup_whole(const VocabView* v, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # The token the whole piece p[:n] is (n >= 1): lookup_piece's, else a WHOLE_ONLY one.
    cdef uint64_t head = load_head(p, n)
    cdef uint64_t h = piece_hash(p, n, head)
    cdef uint32_t t = lookup_piece_hashed(v, p, n, head, h)
    if t == NO_TOKEN and v.n_whole_only:
        t = lookup_whole_hashed(v, p, n, head, h)
    return t


cdef inline uint32_t lookup_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # The reachable token spelled p[:n] (n >= 1), or NO_TOKEN: lookup_any's answer when that token
    # is reachable, from the whole-piece table.
    cdef uint64_t head = load_head(p, n)
    return lookup_piece_hashed(v, p, n, head, piece_hash(p, n, head))


cdef inline uint64_t hash_bytes(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # 8 bytes per step, multiply-xorshift mixing; lengths are mixed in so prefixes differ.
    cdef uint64_t h = 0x9E3779B97F4A7C15ULL ^ (<uint64_t>n * 0xC2B2AE3D27D4EB4FULL)
    cdef uint64_t w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, p + i, 8)
        h = (h ^ w) * 0xFF51AFD7ED558CCDULL
        h ^= h >> 32
        i += 8
    if i < n:
        w = 0
        memcpy(&w, p + i, n - i)
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ULL
        h ^= h >> 29
    h *= 0x9E3779B97F4A7C15ULL
    return h ^ (h >> 31)


cdef inline uint64_t mul_hash(uint64_t k) noexcept nogil:
    # Hash of the trie and pair tables' keys: slot (h >> 32) & mask (tables up to 2**32 slots),
    # pair filter bit h >> pair_filter_shift. One multiply; its bits 32 and up depend on all the
    # key's low bits, which hold the whole key (node < 2**24, token ids < 2**32 with the pair's
    # left half at bit 32). These probes are backtracking's inner loop (docs/perf/backtrack.md,
    # step 23).
    return k * 0x9E3779B97F4A7C15ULL


cdef inline uint64_t hash_u64(uint64_t k) noexcept nogil:
    k ^= k >> 33
    k *= 0xFF51AFD7ED558CCDULL
    k ^= k >> 33
    return k


cdef inline uint32_t token_len(const VocabView* v, uint32_t t) noexcept nogil:
    return v.token_starts[t + 1] - v.token_starts[t]


cdef inline uint32_t lookup_any(const VocabView* v, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # The token whose bytes are exactly p[:n] (reachable or not), or NO_TOKEN.
    cdef uint64_t i = hash_bytes(p, n) & v.bytes_mask
    cdef uint32_t t
    while True:
        t = v.bytes_table[i]
        if t == NO_TOKEN:
            return NO_TOKEN
        if (v.token_starts[t + 1] - v.token_starts[t]) == <uint32_t>n and \
                memcmp(v.all_bytes + v.token_starts[t], p, n) == 0:
            return t
        i = (i + 1) & v.bytes_mask


cdef inline uint32_t pair_lookup(const VocabView* v, uint32_t a, uint32_t b) noexcept nogil:
    # The token BPE forms by merging a and b, or NO_TOKEN. Most pairs asked about are not merges;
    # the one-bit-per-slot filter (L2-sized) answers those without touching the table.
    cdef uint64_t key = ((<uint64_t>a << 32) | b) + 1
    cdef uint64_t hk = mul_hash(key)
    cdef uint64_t f = hk >> v.pair_filter_shift
    if not ((v.pair_filter[f >> 6] >> (f & 63)) & 1):
        return NO_TOKEN
    cdef uint64_t i = (hk >> 32) & v.pair_mask
    cdef uint64_t k
    while True:
        k = v.pairs[i].key
        if k == key:
            return v.pairs[i].merged
        if k == 0:
            return NO_TOKEN
        i = (i + 1) & v.pair_mask


cdef inline uint32_t trie_child(const VocabView* v, uint32_t node, uint8_t b) noexcept nogil:
    cdef uint64_t key = ((<uint64_t>node + 1) << 8) | b
    cdef uint64_t i = (mul_hash(key) >> 32) & v.trie_mask
    cdef uint64_t k
    while True:
        k = v.trie[i].key
        if k == key:
            return v.trie[i].child
        if k == 0:
            return NO_TOKEN
        i = (i + 1) & v.trie_mask


cdef inline bint step3_passes(const VocabView* v, uint64_t h) noexcept nogil:
    # step3_filter's bit for a trie key of hash h = mul_hash(key): False = no such key.
    cdef uint64_t f = h >> v.step3_shift
    return (v.step3_filter[f >> 6] >> (f & 63)) & 1


cdef inline int digit_index(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # Where p[:n], 1-3 ASCII digits (not checked), is in digit_tokens: 10 strings of one digit, then
    # 100 of two, 1000 of three.
    if n == 1:
        return p[0] - 48
    if n == 2:
        return 10 + (p[0] - 48) * 10 + (p[1] - 48)
    return 110 + (p[0] - 48) * 100 + (p[1] - 48) * 10 + (p[2] - 48)


cdef inline Py_ssize_t run_length(const uint8_t* p, Py_ssize_t lim, uint8_t c) noexcept nogil:
    # The number of leading bytes of p[:lim] equal to c, knowing that p[0] and p[1] are (lim >= 2).
    cdef Py_ssize_t i = 2
    cdef uint64_t w, cc
    if BPE_SWAR:
        cc = <uint64_t>c * <uint64_t>0x0101010101010101ULL
        while i + 8 <= lim:
            memcpy(&w, p + i, 8)
            w ^= cc
            if w:
                return i + (bpe_ctz64(w) >> 3)
            i += 8
    while i < lim and p[i] == c:
        i += 1
    return i


cdef inline uint32_t next_match(const VocabView* v, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # Longest reachable token that is a prefix of p[:n] (n >= 1). Single bytes are always tokens.
    # The first two bytes take one read of first2x (first2's node and that node's token in one
    # word), then one trie slot per byte. The third byte is first asked of step3_filter (an
    # L2-sized bit per trie key of that depth): most walks through rare characters end there, and
    # the filter answers them without the trie slot's cache miss. A run of one byte whose runs go
    # RUN_JUMP or more deep in the trie (spaces, newlines, tabs, '=' ...) is crossed in one read of
    # run_nodes instead of one trie slot per byte: whitespace tokens are up to 128 bytes long.
    cdef uint32_t best = v.byte_token[p[0]]
    if n == 1:
        return best
    cdef uint64_t x, key, h, i, k
    cdef uint32_t node
    cdef Py_ssize_t j
    cdef uint8_t c = p[0]
    if p[1] == c and v.run_max[c]:
        j = run_length(p, n if n < v.run_max[c] else v.run_max[c], c)
        x = v.run_nodes[v.run_at[c] + j - 1]
        if j == n or p[j] == c:   # the text ends, or c^(j + 1) is no trie node
            return <uint32_t>(x >> 32)
        node = <uint32_t>x
        best = <uint32_t>(x >> 32)
        key = ((<uint64_t>node + 1) << 8) | p[j]
        h = mul_hash(key)
    else:
        x = v.first2x[(<uint32_t>c << 8) | p[1]]
        node = <uint32_t>x
        if node == NO_TOKEN:
            return best
        if (x >> 32) != NO_TOKEN:
            best = <uint32_t>(x >> 32)
        if n == 2:
            return best
        key = ((<uint64_t>node + 1) << 8) | p[2]
        h = mul_hash(key)
        if not step3_passes(v, h):
            return best
        j = 2
    while True:
        i = (h >> 32) & v.trie_mask
        while True:
            k = v.trie[i].key
            if k == key:
                break
            if k == 0:
                return best
            i = (i + 1) & v.trie_mask
        node = v.trie[i].child
        if v.trie[i].token != NO_TOKEN:
            best = v.trie[i].token
        j += 1
        if j == n:
            return best
        key = ((<uint64_t>node + 1) << 8) | p[j]
        h = mul_hash(key)


cdef inline bint is_valid_pair(const VocabView* v, uint32_t token1, uint32_t token2) noexcept nogil:
    # True when BPE keeps token1 and token2 side by side: no merge across their boundary would win.
    # Undo the merges of both tokens from the last one backwards, checking at each step that no pair
    # straddling the boundary merges into a token of lower rank than the merges still pending.
    cdef uint32_t limit = NO_TOKEN
    cdef uint32_t combined
    while True:
        combined = pair_lookup(v, token1, token2)
        if combined != NO_TOKEN and combined < limit:
            return False
        if token1 > token2:
            limit = token1
            token1 = v.split_right[token1]
            if token1 == limit:
                limit = token2 + 1
                token2 = v.split_left[token2]
                if token2 + 1 == limit:
                    return True
        else:
            limit = token2 + 1
            token2 = v.split_left[token2]
            if token2 + 1 == limit:
                limit = token1
                token1 = v.split_right[token1]
                if token1 == limit:
                    return True


cdef inline bint spine_rejects(const VocabView* v, uint32_t token1, uint32_t token2) noexcept nogil:
    # True only when is_valid_pair(token1, token2) is False: the walk there takes both spines in
    # decreasing rank order, so unless it stops earlier it ends checking the two base tokens at
    # their bottoms against the lowest-ranked non-base token of either spine (+1 on the right
    # side). That last check alone rejects most pairs of long tokens (whitespace runs) whose walk
    # would go ~7 steps down to it (docs/perf/backtrack.md, step 24).
    cdef const SpineEnds* a = &v.spine_ends[token1]
    cdef const SpineEnds* b = &v.spine_ends[token2]
    cdef uint32_t limit = a.right_low
    cdef uint32_t combined
    if b.left_low != NO_TOKEN and b.left_low + 1 < limit:
        limit = b.left_low + 1
    combined = pair_lookup(v, a.right_base, b.left_base)
    return combined != NO_TOKEN and combined < limit


cdef inline bint bytes_stay_apart(const VocabView* v, uint8_t a, uint8_t b) noexcept nogil:
    # is_valid_pair(byte_token[a], byte_token[b]): single bytes are base tokens, so its walk is one
    # pair probe with no limit; an 8 KB bitmap instead of the filter and the pair table.
    cdef uint32_t k = (<uint32_t>a << 8) | b
    return not ((v.byte_pair_merge[k >> 6] >> (k & 63)) & 1)


cdef enum:
    RUN_JUMP = 4    #: bytes whose runs spell trie nodes this deep get run_nodes (next_match)


cdef class Vocab:
    #: Token i (i = position in rank order) occupies all_bytes[token_starts[i]:token_starts[i+1]].
    cdef vector[uint8_t] all_bytes
    cdef vector[uint32_t] token_starts
    #: The pair (split_left[i], split_right[i]) is the last merge BPE performs to form token i.
    cdef vector[uint32_t] split_left
    cdef vector[uint32_t] split_right
    #: Longest reachable token that is a strict prefix of token i, or NO_TOKEN.
    cdef vector[uint32_t] next_prefix
    #: 1 if encoding token i's bytes alone gives token i (only those can ever appear in output).
    cdef vector[uint8_t] reachable
    cdef vector[uint32_t] bytes_table
    cdef vector[uint32_t] root_child
    cdef vector[uint32_t] node_token
    #: External id (the rank the user sees) of token i; empty when ids are 0..n-1.
    cdef vector[uint32_t] ids
    #: Internal index of external id e (NO_TOKEN for gaps); empty when ids are 0..n-1.
    cdef vector[uint32_t] index_of_id
    #: Reachable tokens by their bytes, head inline (VocabView.pieces); load factor <= 0.5.
    cdef vector[PieceEntry] pieces
    #: Last 8 bytes of the tokens over 8 bytes in ``pieces``, by slot (VocabView.piece_tails).
    cdef vector[uint64_t] piece_tails
    #: The longest-match trie (key, child, node_token of the child) and the merge table.
    cdef vector[TrieEntry] trie
    cdef vector[PairEntry] pairs
    cdef vector[uint32_t] byte_token
    cdef vector[uint64_t] pair_filter
    cdef vector[uint64_t] first2x
    #: Bottoms of each token's spines (VocabView.spine_ends), from split_left/split_right.
    cdef vector[SpineEnds] spine_ends
    #: Bit a << 8 | b: pair_lookup(byte_token[a], byte_token[b]) != NO_TOKEN (VocabView.byte_pair_merge).
    cdef vector[uint64_t] byte_pair_merge
    #: Bit per trie key whose parent is a first2 node (VocabView.step3_filter).
    cdef vector[uint64_t] step3_filter
    #: Runs of one byte in the trie (VocabView.run_max, run_at, run_nodes).
    cdef vector[uint32_t] run_max
    cdef vector[uint32_t] run_at
    cdef vector[uint64_t] run_nodes
    #: Tokens of the 1,110 strings of 1-3 ASCII digits (VocabView.digit_tokens).
    cdef vector[uint32_t] digit_tokens
    cdef VocabView view
    cdef readonly uint32_t n_tokens
    cdef readonly uint32_t max_token_len
    cdef readonly uint32_t max_id
    cdef readonly uint32_t n_unreachable
    #: Unreachable tokens entered in ``pieces`` as WHOLE_ONLY (enable_whole_pieces); 0 for most vocabs.
    cdef readonly uint32_t n_whole_only

    cdef object _rank(self, uint32_t i)

"""The dictionary every encoder reads: token bytes, merge structure and lookup tables.

A ``Vocab`` is built once from ``mergeable_ranks`` (bytes -> rank, lower rank merges first) or
straight from `.tiktoken` content (``Vocab.from_tiktoken``), and is read-only afterwards, so any
number of threads may encode with it without the GIL.

Build cost: O(total token bytes) hash and trie insertions plus, per token, a walk down its chain
of prefix tokens with a pair-validity check (README, "How it works"); everything after parsing
runs without the GIL. Memory: about 300 bytes per token in all (tables, trie, whole-piece and pair
tables, 16 bytes per token of ``spine_ends``): loading cl100k + o200k adds 89 MB to the process.

Lookups (all in ``vocab.pxd``, inline, nogil):
- ``lookup_any``: bytes -> token, open addressing with linear probing, load factor <= 0.5;
  ``lookup_piece``: the same for reachable tokens, from the whole-piece table (first 8 bytes inline).
- ``pair_lookup``: (left, right) -> merged token, same scheme over 64-bit keys.
- ``next_match``: longest token that prefixes the input, one trie step per byte; the third byte
  is first asked of ``step3_filter`` (64 KB of bits, one per trie key of that depth), which ends
  most walks through rare characters without touching the trie.
- ``is_valid_pair``: would BPE keep these two tokens adjacent (rust-gems ``bpe`` construction);
  ``spine_rejects`` (its last check alone, from ``spine_ends``) and ``bytes_stay_apart`` (two
  single bytes, an 8 KB bitmap) are shortcuts the backtracking loops take first.
- The trie and pair tables hash keys with one multiply (``mul_hash``: slot = bits 32 and up).
"""

# Performance decisions that hold (docs/perf/vocab.md):
# - ``from_tiktoken`` parses base64 and ranks in C straight into all_bytes/token_starts (7 ms
#   for o200k instead of ~180 ms of Python); anything unusual returns None and load.py takes the
#   checked Python path, so error messages stay the same.
# - The build runs without the GIL (``_finish``), so a thread loading vocabs overlaps imports.
# - The trie is built in its combined (key, child) table growing by doubling, and next_prefix
#   from parent links: one miss per probe, no oversized table to memset and shrink.
# - One probe per token in the bytes table (duplicate check and insert together).
# - ``split_steps`` shipped beside a rank file (bound to its SHA-256) skips the split search, half
#   of the build; each split is still checked, with a full search on any mismatch.
# - No madvise before first touch here (no huge pages came of it); backtrack.pyx asks for them
#   once the tables are built.
# The measurements behind these decisions: docs/perf/vocab.md.

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from libcpp.algorithm cimport sort as cpp_sort
from libcpp.vector cimport vector

from bpecore._types cimport NO_TOKEN
from bpecore.vocab cimport (
    WHOLE_ONLY, PairEntry, PieceEntry, TrieEntry, VocabView, hash_bytes, head_and_hash, is_valid_pair, load_head, mul_hash, next_match, pair_lookup, spine_rejects,
    bytes_stay_apart, lookup_any, piece_hash, trie_child,
)


cdef uint64_t _table_size(uint64_t n) noexcept nogil:
    cdef uint64_t size = 16
    while size < 2 * n + 16:
        size <<= 1
    return size


class _DuplicateToken(ValueError):
    """Two ranks spell the same bytes (from_tiktoken answers None; the line-by-line parse names them)."""


# base64 digit values (-1: not a base64 digit; '=' is handled apart)
cdef signed char _B64[256]
for _i in range(256):
    _B64[_i] = -1
for _i in range(64):
    _B64[b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"[_i]] = _i


cdef inline bint _is_blank(uint8_t c) noexcept nogil:
    # whitespace inside a line (bytes.split() also splits on these)
    return c == 32 or c == 9 or c == 11 or c == 12


cdef int _parse_tiktoken(const uint8_t* d, Py_ssize_t n, vector[uint8_t]& out, vector[uint32_t]& starts,
                         vector[uint64_t]& keys) except -2 nogil:
    # Lines "<base64> <decimal rank>" (\n or \r ends a line; blank lines skipped) into token bytes
    # (out, starts) and keys[line] = rank << 32 | line. 0 on success; -1 for anything less than
    # plainly well formed: strict padding with zero spare bits, ranks of <= 10 ASCII digits below
    # 2**32 - 1. Stricter than Python's parse, never looser, so -1 only costs the slow path.
    cdef Py_ssize_t i = 0, s, e, g
    cdef uint64_t rank
    cdef int a, b, c, x, digits
    cdef uint32_t line = 0
    out.reserve(<size_t>(n // 2))
    starts.push_back(0)
    while i < n:
        while i < n and _is_blank(d[i]):
            i += 1
        if i == n:
            break
        if d[i] == 10 or d[i] == 13:
            i += 1
            continue
        s = i
        while i < n and _B64[d[i]] >= 0 or (i < n and d[i] == 61):
            i += 1
        e = i
        if i == n or not _is_blank(d[i]) or (e - s) & 3:
            return -1
        while i < n and _is_blank(d[i]):
            i += 1
        rank = 0
        digits = 0
        while i < n and 48 <= d[i] <= 57:
            rank = rank * 10 + (d[i] - 48)
            digits += 1
            i += 1
        if digits == 0 or digits > 10 or rank >= 0xFFFFFFFFULL:
            return -1
        while i < n and _is_blank(d[i]):
            i += 1
        if i < n and d[i] != 10 and d[i] != 13:
            return -1
        g = s
        while g < e:
            a = _B64[d[g]]
            b = _B64[d[g + 1]]
            if a < 0 or b < 0:
                return -1
            out.push_back(<uint8_t>((a << 2) | (b >> 4)))
            if d[g + 2] == 61:
                if g + 4 != e or d[g + 3] != 61 or b & 15:
                    return -1
                break
            c = _B64[d[g + 2]]
            if c < 0:
                return -1
            out.push_back(<uint8_t>(((b & 15) << 4) | (c >> 2)))
            if d[g + 3] == 61:
                if g + 4 != e or c & 3:
                    return -1
                break
            x = _B64[d[g + 3]]
            if x < 0:
                return -1
            out.push_back(<uint8_t>(((c & 3) << 6) | x))
            g += 4
        if line == 0xFFFFFFFEUL:
            return -1
        keys.push_back((rank << 32) | line)
        starts.push_back(out.size())
        line += 1
    return 0 if line else -1


cdef int _order_by_rank(Vocab self, vector[uint64_t]& keys, vector[uint32_t]& ranks) except -2 nogil:
    # Put the tokens in rank order (files list them so already; otherwise sort). -1 on a repeated rank.
    cdef size_t n = keys.size(), i, j, at = 0, length
    cdef bint in_order = True
    cdef vector[uint8_t] all_bytes
    cdef vector[uint32_t] starts
    for i in range(1, n):
        if (keys[i] >> 32) <= (keys[i - 1] >> 32):
            in_order = False
            break
    if not in_order:
        cpp_sort(keys.begin(), keys.end())
        for i in range(1, n):
            if (keys[i] >> 32) == (keys[i - 1] >> 32):
                return -1
        all_bytes.resize(self.all_bytes.size())
        starts.reserve(n + 1)
        starts.push_back(0)
        for i in range(n):
            j = keys[i] & 0xFFFFFFFFULL
            length = self.token_starts[j + 1] - self.token_starts[j]
            memcpy(all_bytes.data() + at, self.all_bytes.data() + self.token_starts[j], length)
            at += length
            starts.push_back(at)
        self.all_bytes.swap(all_bytes)
        self.token_starts.swap(starts)
    ranks.resize(n)
    for i in range(n):
        ranks[i] = keys[i] >> 32
    return 0


cdef int _set_ids(Vocab self, vector[uint32_t]& ranks) except -1 nogil:
    # n_tokens, max_id, max_token_len and the id maps (empty when ranks are 0..n-1).
    cdef uint32_t n = ranks.size(), i, length
    cdef bint identity = True
    self.n_tokens = n
    self.max_id = ranks[n - 1]
    self.max_token_len = 0
    for i in range(n):
        if ranks[i] != i:
            identity = False
        length = self.token_starts[i + 1] - self.token_starts[i]
        if length > self.max_token_len:
            self.max_token_len = length
    if not identity:
        self.ids = ranks
        self.index_of_id.assign(<size_t>self.max_id + 1, NO_TOKEN)
        for i in range(n):
            self.index_of_id[ranks[i]] = i
    return 0


cdef void _sync(Vocab self) noexcept nogil:
    self.view.all_bytes = self.all_bytes.data()
    self.view.token_starts = self.token_starts.data()
    self.view.split_left = self.split_left.data()
    self.view.split_right = self.split_right.data()
    self.view.next_prefix = self.next_prefix.data()
    self.view.reachable = self.reachable.data()
    self.view.bytes_table = self.bytes_table.data()
    self.view.bytes_mask = self.bytes_table.size() - 1
    self.view.pair_mask = self.pairs.size() - 1 if self.pairs.size() else 0
    self.view.root_child = self.root_child.data()
    self.view.trie_mask = self.trie.size() - 1 if self.trie.size() else 0
    self.view.node_token = self.node_token.data()
    self.view.n_tokens = self.n_tokens
    self.view.pieces = self.pieces.data()
    self.view.trie = self.trie.data()
    self.view.pairs = self.pairs.data()
    self.view.byte_token = self.byte_token.data()
    self.view.pair_filter = self.pair_filter.data()
    self.view.first2x = self.first2x.data()
    self.view.spine_ends = self.spine_ends.data()
    self.view.byte_pair_merge = self.byte_pair_merge.data()
    self.view.piece_tails = self.piece_tails.data()
    self.view.step3_filter = self.step3_filter.data()
    self.view.n_whole_only = self.n_whole_only
    self.view.run_max = self.run_max.data()
    self.view.run_at = self.run_at.data()
    self.view.run_nodes = self.run_nodes.data()
    self.view.digit_tokens = self.digit_tokens.data()


cdef int _build_lookup(Vocab self, uint32_t* err) except -1 nogil:
    # bytes -> token; 1 with err = (first index, second index) when two tokens spell the same
    # bytes, 2 with err[0] = the byte when a single byte has no token, else 0.
    cdef uint32_t n = self.n_tokens, i, t, length
    cdef uint64_t size = _table_size(n), mask = size - 1, slot
    cdef const uint8_t* base = self.all_bytes.data()
    cdef const uint32_t* starts = self.token_starts.data()
    cdef uint8_t byte_value
    cdef int j
    self.bytes_table.assign(size, NO_TOKEN)
    for i in range(n):
        length = starts[i + 1] - starts[i]
        slot = hash_bytes(base + starts[i], length) & mask
        while True:
            t = self.bytes_table[slot]
            if t == NO_TOKEN:
                self.bytes_table[slot] = i
                break
            if starts[t + 1] - starts[t] == length and memcmp(base + starts[t], base + starts[i], length) == 0:
                err[0] = t
                err[1] = i
                return 1
            slot = (slot + 1) & mask
    _sync(self)
    for j in range(256):
        byte_value = j
        if lookup_any(&self.view, &byte_value, 1) == NO_TOKEN:
            err[0] = j
            err[1] = 0
            for j in range(j + 1, 256):
                byte_value = j
                if lookup_any(&self.view, &byte_value, 1) == NO_TOKEN:
                    err[1] += 1
            return 2
    return 0


cdef int _rehash_trie(Vocab self, uint64_t size) except -1 nogil:
    # Re-insert the trie's slots (self.trie: key, child) into a table of ``size`` slots.
    cdef uint64_t mask = size - 1, slot, k
    cdef vector[TrieEntry] table
    cdef TrieEntry empty
    empty.key = 0
    empty.child = 0
    empty.token = NO_TOKEN
    table.assign(size, empty)
    for k in range(self.trie.size()):
        if self.trie[k].key != 0:
            slot = (mul_hash(self.trie[k].key) >> 32) & mask
            while table[slot].key != 0:
                slot = (slot + 1) & mask
            table[slot] = self.trie[k]
    self.trie.swap(table)
    return 0


cdef int _build_trie(Vocab self, vector[uint32_t]& parent, vector[uint32_t]& tok_node) except -1 nogil:
    # The trie over every token's bytes, tokens inserted in rank order (node ids in creation order).
    # Built in the combined (key, child) table, one cache line per probe instead of two. The table
    # starts at a quarter of the total bytes and doubles to keep the load factor <= 0.5, so it ends
    # at _table_size(nodes) without first filling a table sized for every byte (4x too big).
    # parent[node] (NO_TOKEN under the root) and tok_node[i] (node spelling token i) feed next_prefix.
    cdef uint32_t n = self.n_tokens, i, j, length, node, child
    cdef uint64_t size = _table_size(self.all_bytes.size() // 4), mask = size - 1, slot, key, k
    cdef const uint8_t* p
    cdef TrieEntry empty
    cdef TrieEntry* table
    empty.key = 0
    empty.child = 0
    empty.token = NO_TOKEN
    self.root_child.assign(256, NO_TOKEN)
    self.node_token.clear()
    self.node_token.reserve(self.all_bytes.size() // 3 + 256)
    parent.clear()
    parent.reserve(self.all_bytes.size() // 3 + 256)
    tok_node.resize(n)
    self.trie.assign(size, empty)
    table = self.trie.data()
    for i in range(n):
        p = self.all_bytes.data() + self.token_starts[i]
        length = self.token_starts[i + 1] - self.token_starts[i]
        node = self.root_child[p[0]]
        if node == NO_TOKEN:
            node = self.node_token.size()
            self.node_token.push_back(NO_TOKEN)
            parent.push_back(NO_TOKEN)
            self.root_child[p[0]] = node
        for j in range(1, length):
            key = ((<uint64_t>node + 1) << 8) | p[j]
            slot = (mul_hash(key) >> 32) & mask
            while True:
                k = table[slot].key
                if k == key:
                    child = table[slot].child
                    break
                if k == 0:
                    child = self.node_token.size()
                    self.node_token.push_back(NO_TOKEN)
                    parent.push_back(node)
                    table[slot].key = key
                    table[slot].child = child
                    if size < 2 * <uint64_t>self.node_token.size() + 16:
                        size <<= 1
                        mask = size - 1
                        _rehash_trie(self, size)
                        table = self.trie.data()
                    break
                slot = (slot + 1) & mask
            node = child
        self.node_token[node] = i
        tok_node[i] = node
    if size > _table_size(self.node_token.size()):
        _rehash_trie(self, _table_size(self.node_token.size()))
    _sync(self)
    return 0


cdef void _next_prefix(Vocab self, vector[uint32_t]& parent, vector[uint32_t]& tok_node) noexcept nogil:
    # next_prefix[i]: the nearest ancestor of token i's node that spells a (reachable) token.
    cdef uint32_t i, node, t, best
    for i in range(self.n_tokens):
        best = NO_TOKEN
        node = parent[tok_node[i]]
        while node != NO_TOKEN:
            t = self.node_token[node]
            if t != NO_TOKEN:
                best = t
                break
            node = parent[node]
        self.next_prefix[i] = best


cdef enum:
    _STEPS_SEARCH = 254         #: split_steps: search this token's split as without steps
    _STEPS_UNREACHABLE = 255    #: split_steps: no split (unreachable token)


cdef inline void _add_pair(Vocab self, uint32_t t1, uint32_t t2, uint32_t i, uint64_t mask,
                           uint32_t filter_bits) noexcept nogil:
    # Record (t1, t2) as token i's split: merge table (pairs), its filter, split_left/right.
    cdef uint64_t key = ((<uint64_t>t1 << 32) | t2) + 1, h = mul_hash(key), slot = (h >> 32) & mask
    while self.pairs[slot].key != 0:
        slot = (slot + 1) & mask
    self.pairs[slot].key = key
    self.pairs[slot].merged = i
    slot = h >> (64 - filter_bits)
    self.pair_filter[slot >> 6] |= <uint64_t>1 << (slot & 63)
    self.split_left[i] = t1
    self.split_right[i] = t2


cdef int _build_splits(Vocab self, const uint8_t* steps) except -1 nogil:
    # splits, in rank order: the longest prefix token whose remainder is a token and which BPE would
    # keep side by side with it (README, "How it works"); the merge table and its filter with them.
    # With ``steps`` (Vocab.split_steps of this very vocabulary, see there) the search is skipped:
    # token i's left half is steps[i] links down its next_prefix chain. Returns 1, tables
    # unfinished, when a step does not give a split (left or right not an earlier reachable token).
    cdef uint32_t n = self.n_tokens, i, j, t1, t2, length, filter_bits = 21
    cdef uint64_t size = _table_size(n), mask = size - 1, k
    cdef const uint8_t* p
    cdef PairEntry empty
    empty.key = 0
    empty.merged = NO_TOKEN
    empty.pad = 0
    self.pairs.assign(size, empty)
    # pair filter: 2**21 bits (256 KB) up to 256k pairs, doubled beyond
    while (<uint64_t>1 << filter_bits) < 8 * <uint64_t>n:
        filter_bits += 1
    self.pair_filter.assign((<uint64_t>1 << filter_bits) >> 6, 0)
    self.view.pair_filter_shift = 64 - filter_bits
    _sync(self)
    self.n_unreachable = 0
    self.reachable.assign(n, 1)
    for i in range(n):
        length = self.token_starts[i + 1] - self.token_starts[i]
        self.split_left[i] = i
        self.split_right[i] = i
        if length == 1:
            continue
        p = self.all_bytes.data() + self.token_starts[i]
        t1 = self.next_prefix[i]
        if steps != NULL and steps[i] != _STEPS_SEARCH:
            if steps[i] == _STEPS_UNREACHABLE:
                t1 = NO_TOKEN
            else:
                for k in range(steps[i]):
                    if t1 == NO_TOKEN:
                        return 1
                    t1 = self.next_prefix[t1]
                if t1 == NO_TOKEN or t1 >= i or not self.reachable[t1]:
                    return 1
                j = self.token_starts[t1 + 1] - self.token_starts[t1]
                t2 = lookup_any(&self.view, p + j, length - j)
                if t2 == NO_TOKEN or t2 >= i or not self.reachable[t2]:
                    return 1
                _add_pair(self, t1, t2, i, mask, filter_bits)
                continue
        while t1 != NO_TOKEN:
            if t1 < i and self.reachable[t1]:
                j = self.token_starts[t1 + 1] - self.token_starts[t1]
                t2 = lookup_any(&self.view, p + j, length - j)
                if t2 != NO_TOKEN and t2 < i and self.reachable[t2] and is_valid_pair(&self.view, t1, t2):
                    _add_pair(self, t1, t2, i, mask, filter_bits)
                    break
            t1 = self.next_prefix[t1]
        if t1 == NO_TOKEN:
            self.reachable[i] = 0
            self.n_unreachable += 1
    _sync(self)
    return 0


cdef int _build_step3_filter(Vocab self, vector[uint32_t]& first2) except -1 nogil:
    # step3_filter: one bit (of 16 or more per key, so ~6% false positives at most) for every trie
    # key whose parent node is spelled by two bytes, i.e. every third byte a walk can take.
    cdef vector[uint8_t] depth2
    cdef uint64_t k, key, f, count = 0
    cdef uint32_t bits = 12
    depth2.assign(self.node_token.size(), 0)
    for k in range(65536):
        if first2[k] != NO_TOKEN:
            depth2[first2[k]] = 1
    for k in range(self.trie.size()):
        key = self.trie[k].key
        if key != 0 and depth2[(key >> 8) - 1]:
            count += 1
    while (<uint64_t>1 << bits) < 16 * count:
        bits += 1
    self.step3_filter.assign((<uint64_t>1 << bits) >> 6, 0)
    self.view.step3_shift = 64 - bits
    for k in range(self.trie.size()):
        key = self.trie[k].key
        if key != 0 and depth2[(key >> 8) - 1]:
            f = mul_hash(key) >> (64 - bits)
            self.step3_filter[f >> 6] |= <uint64_t>1 << (f & 63)
    return 0


cdef int _build_runs(Vocab self) except -1 nogil:
    # run_nodes: for each byte c whose runs c^k are trie nodes for k up to RUN_JUMP or more, the
    # node of every c^k and the longest reachable token among c^1 .. c^k (next_match's run jump).
    cdef uint32_t c, node, best
    cdef size_t at
    self.run_max.assign(256, 0)
    self.run_at.assign(256, 0)
    self.run_nodes.clear()
    for c in range(256):
        at = self.run_nodes.size()
        node = self.root_child[c]
        best = NO_TOKEN
        while node != NO_TOKEN:
            if self.node_token[node] != NO_TOKEN:
                best = self.node_token[node]
            self.run_nodes.push_back(node | (<uint64_t>best << 32))
            node = trie_child(&self.view, node, <uint8_t>c)
        if self.run_nodes.size() - at < RUN_JUMP:
            self.run_nodes.resize(at)   # too short a chain to jump: walked slot by slot
        else:
            self.run_max[c] = <uint32_t>(self.run_nodes.size() - at)
            self.run_at[c] = <uint32_t>at
    return 0


cdef int _build_fast(Vocab self) except -1 nogil:
    # The cache-friendly twins of the tables above (VocabView.pieces, trie, byte_token, first2x).
    cdef uint64_t size, slot, k, head
    cdef vector[uint32_t] first2
    cdef uint32_t i, length, bits = 4, node
    cdef const uint8_t* p
    cdef uint8_t byte_value
    cdef uint8_t digits[3]
    cdef uint32_t value, d
    cdef int j
    cdef PieceEntry empty_piece
    empty_piece.head = 0
    empty_piece.token = NO_TOKEN
    empty_piece.len = 0
    # whole pieces: reachable tokens only, load factor <= 0.5
    while (<uint64_t>1 << bits) < 2 * <uint64_t>self.n_tokens:
        bits += 1
    size = <uint64_t>1 << bits
    self.pieces.assign(size, empty_piece)
    self.piece_tails.assign(size, 0)
    for i in range(self.n_tokens):
        if not self.reachable[i]:
            continue
        p = self.all_bytes.data() + self.token_starts[i]
        length = self.token_starts[i + 1] - self.token_starts[i]
        head = load_head(p, length)
        slot = piece_hash(p, length, head) >> (64 - bits)
        while self.pieces[slot].token != NO_TOKEN:
            slot = (slot + 1) & (size - 1)
        self.pieces[slot].head = head
        self.pieces[slot].token = i
        self.pieces[slot].len = length
        if length > 8:
            memcpy(&self.piece_tails[slot], p + length - 8, 8)
    self.view.piece_shift = 64 - bits
    # trie: the child's token inline
    for k in range(self.trie.size()):
        self.trie[k].token = self.node_token[self.trie[k].child] if self.trie[k].key != 0 else NO_TOKEN
    _sync(self)
    self.byte_token.resize(256)
    for k in range(256):
        byte_value = k
        self.byte_token[k] = lookup_any(&self.view, &byte_value, 1)
    # first2: the trie node spelled by two bytes, a build-time table (first2x keeps it in its low half)
    first2.assign(65536, NO_TOKEN)
    self.first2x.assign(65536, <uint64_t>0xFFFFFFFFFFFFFFFFULL)
    for k in range(65536):
        node = self.root_child[k >> 8]
        if node != NO_TOKEN:
            first2[k] = trie_child(&self.view, node, k & 0xFF)
            if first2[k] != NO_TOKEN:
                self.first2x[k] = first2[k] | (<uint64_t>self.node_token[first2[k]] << 32)
    _build_step3_filter(self, first2)
    _build_runs(self)
    # digit_tokens: the whole-piece answer for each string of 1-3 ASCII digits
    self.digit_tokens.assign(1110, NO_TOKEN)
    for length in range(1, 4):
        for value in range(10 ** length):
            d = value
            for j in range(<int>length):
                digits[length - 1 - j] = <uint8_t>(48 + d % 10)
                d //= 10
            self.digit_tokens[digit_index(digits, length)] = lookup_piece(&self.view, digits, length)
    # which pairs of single-byte tokens merge (the pair table's answer, asked once per byte pair)
    self.byte_pair_merge.assign(1024, 0)
    for k in range(65536):
        if pair_lookup(&self.view, self.byte_token[k >> 8], self.byte_token[k & 0xFF]) != NO_TOKEN:
            self.byte_pair_merge[k >> 6] |= <uint64_t>1 << (k & 63)
    # spine bottoms, in rank order (a token's halves rank before it)
    self.spine_ends.resize(self.n_tokens)
    for i in range(self.n_tokens):
        node = self.split_right[i]
        if node == i:
            self.spine_ends[i].right_base = i
            self.spine_ends[i].right_low = NO_TOKEN
        else:
            self.spine_ends[i].right_base = self.spine_ends[node].right_base
            self.spine_ends[i].right_low = self.spine_ends[node].right_low
            if self.spine_ends[i].right_low == NO_TOKEN:
                self.spine_ends[i].right_low = i
        node = self.split_left[i]
        if node == i:
            self.spine_ends[i].left_base = i
            self.spine_ends[i].left_low = NO_TOKEN
        else:
            self.spine_ends[i].left_base = self.spine_ends[node].left_base
            self.spine_ends[i].left_low = self.spine_ends[node].left_low
            if self.spine_ends[i].left_low == NO_TOKEN:
                self.spine_ends[i].left_low = i
    _sync(self)
    return 0


cdef _finish(Vocab self, mergeable_ranks, const uint8_t* steps=NULL):
    # Every table from all_bytes/token_starts/ids, without the GIL except for error messages and
    # the (never seen in shipped files) unreachable-token check against the reference BPE.
    cdef vector[uint32_t] parent, tok_node
    cdef uint32_t err[2]
    cdef uint32_t i, j, node, length
    cdef int status
    cdef const uint8_t* p
    with nogil:
        self.reachable.assign(self.n_tokens, 1)
        self.split_left.resize(self.n_tokens)
        self.split_right.resize(self.n_tokens)
        self.next_prefix.assign(self.n_tokens, NO_TOKEN)
        status = _build_lookup(self, err)
        if status == 0:
            _build_trie(self, parent, tok_node)
            _next_prefix(self, parent, tok_node)
            if _build_splits(self, steps) == 1:
                # steps of another vocabulary: search every split instead
                _build_splits(self, NULL)
    if status == 1:
        raise _DuplicateToken(f"token {self.token_bytes(err[1])!r} appears twice (ranks "
                              f"{self._rank(err[0])} and {self._rank(err[1])})")
    if status == 2:
        raise ValueError(f"vocabulary lacks single-byte tokens for {err[1] + 1} byte values "
                         f"(first: 0x{err[0]:02x}); byte-level BPE needs all 256")
    if self.n_unreachable:
        from bpecore.reference import bpe_encode
        if mergeable_ranks is None:
            mergeable_ranks = {self.token_bytes(i): self._rank(i) for i in range(self.n_tokens)}
        for i in range(self.n_tokens):
            if not self.reachable[i] and bpe_encode(mergeable_ranks, self.token_bytes(i)) == [self._rank(i)]:
                raise ValueError(
                    f"token {self.token_bytes(i)!r} (rank {self._rank(i)}) is formed by BPE only from "
                    "tokens of higher rank; bpecore needs every token ranked after the tokens it merges"
                )
        with nogil:
            for i in range(self.n_tokens):
                if not self.reachable[i]:
                    self.node_token[tok_node[i]] = NO_TOKEN
            _next_prefix(self, parent, tok_node)
    with nogil:
        _build_fast(self)


cdef class Vocab:
    """Byte-pair dictionary with the tables of the backtracking encoder.

    Tokens are numbered by rank order: internal index ``i`` is the ``i``-th lowest rank, so comparing
    indexes compares merge priority. ``ids[i]`` is the rank the user sees (empty when ranks are
    exactly ``0..n-1``, as for every shipped encoding).

    Fields (index ``i`` is a token, ``NO_TOKEN`` = 0xFFFFFFFF is the sentinel everywhere):
    - ``all_bytes``/``token_starts``: the bytes of token ``i`` are
      ``all_bytes[token_starts[i]:token_starts[i+1]]``.
    - ``split_left``/``split_right``: the two tokens whose merge is BPE's last step in forming ``i``;
      both equal ``i`` for a single byte (or an unreachable token).
    - ``next_prefix``: the longest reachable token that is a strict prefix of ``i``.
    - ``reachable``: 1 when BPE on ``i``'s bytes alone yields ``i``; other tokens never appear in
      any encoding and are left out of the trie and of whole-piece lookups.
    - ``bytes_table``: hash of the bytes -> ``i``; ``pairs``: merge table, (left, right) ->
      merged token; ``root_child``, ``trie`` (key, child, child's token), ``node_token``: the
      longest-match trie.
    - ``spine_ends``: for ``i``, the base token at the bottom of its split_right chain and the
      lowest-ranked merged token on that chain (``NO_TOKEN`` when ``i`` is a base token), and the
      same down split_left; ``byte_pair_merge``: bit ``a << 8 | b`` set when the single-byte
      tokens of ``a`` and ``b`` merge; ``step3_filter``: bit ``mul_hash(key) >> step3_shift``
      set for every trie key whose parent node is spelled by two bytes (no false negatives);
      ``run_max``/``run_at``/``run_nodes``: for a byte ``c`` whose runs ``c^k`` are trie nodes
      for ``k`` up to ``RUN_JUMP`` or more, the node of each ``c^k`` and the longest reachable
      token among ``c^1 .. c^k`` (next_match crosses a run in one read); ``digit_tokens``: the
      reachable token of each string of 1-3 ASCII digits (encode_text's digit pieces).
    The Vocab owns every table (C++ vectors); ``view`` holds raw pointers into them for nogil code.
    """

    def __init__(self, mergeable_ranks):
        items = sorted(mergeable_ranks.items(), key=lambda kv: kv[1])
        cdef Py_ssize_t n = len(items)
        if n == 0:
            raise ValueError("empty vocabulary")
        if n >= 0xFFFFFFFF:
            raise ValueError("vocabulary too large")
        cdef bytes b
        cdef Py_ssize_t i, length, at
        cdef vector[uint32_t] ranks
        prev_rank = -1
        ranks.reserve(n)
        self.token_starts.reserve(n + 1)
        self.token_starts.push_back(0)
        for i in range(n):
            b, rank = items[i]
            if not isinstance(b, bytes) or len(b) == 0:
                raise ValueError(f"token with rank {rank} is not a non-empty bytes object")
            if not isinstance(rank, int) or rank < 0 or rank >= 0xFFFFFFFF:
                raise ValueError(f"rank {rank!r} of token {b!r} is not an integer in [0, 2**32 - 1)")
            if rank == prev_rank:
                raise ValueError(f"rank {rank} is given to two tokens")
            prev_rank = rank
            length = len(b)
            at = self.all_bytes.size()
            self.all_bytes.resize(at + length)
            memcpy(self.all_bytes.data() + at, <const char*>b, length)
            self.token_starts.push_back(at + length)
            ranks.push_back(rank)
        _set_ids(self, ranks)
        _finish(self, mergeable_ranks)

    @staticmethod
    def from_tiktoken(const uint8_t[::1] data not None, const uint8_t[::1] split_steps=None):
        """The Vocab of `.tiktoken` content (``<base64 token> <rank>`` lines), or None.

        ``split_steps``: what ``split_steps()`` gave for this same content, to skip the search for
        each token's split (the costliest part of the build). It must be bound to ``data`` by the
        caller (bpecore.registry keeps it beside the rank file under the file's SHA-256); steps
        that do not spell a split of every token are ignored and the splits searched as without.

        Parses and builds without the GIL (the caller's other threads keep running). Returns None
        when the content is not plainly well formed (odd whitespace, non-canonical base64, a
        repeated token or rank, no lines): ``bpecore.load`` then parses it line by line in Python
        and names the bad line. Raises ValueError for a well-formed file that is no byte-level BPE
        vocabulary (missing single bytes), as ``Vocab(ranks)`` does.

        >>> Vocab.from_tiktoken(b"YQ== 0\\n").n_tokens
        Traceback (most recent call last):
        ...
        ValueError: vocabulary lacks single-byte tokens for 255 byte values (first: 0x00); byte-level BPE needs all 256
        """
        cdef Vocab self = Vocab.__new__(Vocab)
        cdef vector[uint64_t] keys
        cdef vector[uint32_t] ranks
        cdef Py_ssize_t n = data.shape[0]
        cdef int status = -1
        cdef const uint8_t* steps = NULL
        if n == 0:
            return None
        with nogil:
            status = _parse_tiktoken(&data[0], n, self.all_bytes, self.token_starts, keys)
            if status == 0:
                status = _order_by_rank(self, keys, ranks)
            if status == 0:
                _set_ids(self, ranks)
        if status != 0:
            return None
        if split_steps is not None and split_steps.shape[0] == self.n_tokens:
            steps = &split_steps[0]
        try:
            _finish(self, None, steps)
        except _DuplicateToken:
            return None
        return self

    def split_steps(self):
        """Each token's split as a number of links down its next_prefix chain, one byte per token.

        254: search it (chain longer than 253); 255: no split (single byte or unreachable). Saved
        beside a rank file, it lets ``from_tiktoken`` skip the split search (o200k: ~100 ms).
        """
        cdef bytearray out = bytearray(self.n_tokens)
        cdef uint32_t i, t, k
        for i in range(self.n_tokens):
            out[i] = _STEPS_UNREACHABLE
            if self.split_left[i] == i:
                continue
            t = self.next_prefix[i]
            k = 0
            while t != self.split_left[i]:
                t = self.next_prefix[t]
                k += 1
            out[i] = k if k < _STEPS_SEARCH else _STEPS_SEARCH
        return bytes(out)

    cdef object _rank(self, uint32_t i):
        return self.ids[i] if self.ids.size() else i

    def __len__(self):
        return self.n_tokens

    @property
    def identity_ids(self):
        """True when the external ids are exactly 0..n-1 (internal index == id)."""
        return self.ids.size() == 0

    def token_bytes(self, uint32_t index):
        """Bytes of the token at internal index ``index``."""
        if index >= self.n_tokens:
            raise IndexError(index)
        cdef const char* p = <const char*>self.all_bytes.data()
        return p[self.token_starts[index]:self.token_starts[index + 1]]

    def id_of_index(self, uint32_t index):
        return self._rank(index)

    def index_of(self, token_id):
        """Internal index of external id ``token_id``, or -1 when it is not a mergeable token."""
        if token_id < 0:
            return -1
        if self.ids.size() == 0:
            return token_id if token_id < self.n_tokens else -1
        if token_id >= self.index_of_id.size() or self.index_of_id[token_id] == NO_TOKEN:
            return -1
        return self.index_of_id[token_id]

    def split(self, uint32_t index):
        """(left, right) internal indexes of the last merge forming token ``index``."""
        return self.split_left[index], self.split_right[index]

    def is_reachable(self, uint32_t index):
        return bool(self.reachable[index])

    def enable_whole_pieces(self):
        """Make a piece that spells an unreachable token that token, as tiktoken's lookup of a
        piece before BPE does (Llama 3's file has 588 tokens BPE never forms). Enters them in the
        whole-piece table flagged WHOLE_ONLY: the encoders' whole-piece lookup (``lookup_whole``)
        finds them, the longest-match and prefix lookups (``lookup_piece``, the trie) do not.
        Call once, before encoding; a vocab without unreachable tokens is unchanged."""
        cdef uint32_t i, length
        cdef uint64_t slot, head, size = self.pieces.size()
        cdef const uint8_t* p
        if self.n_whole_only:
            return
        with nogil:
            for i in range(self.n_tokens):
                if self.reachable[i]:
                    continue
                p = self.all_bytes.data() + self.token_starts[i]
                length = self.token_starts[i + 1] - self.token_starts[i]
                head = load_head(p, length)
                slot = piece_hash(p, length, head) >> self.view.piece_shift
                while self.pieces[slot].token != NO_TOKEN:
                    slot = (slot + 1) & (size - 1)
                self.pieces[slot].head = head
                self.pieces[slot].token = i
                self.pieces[slot].len = length | WHOLE_ONLY
                if length > 8:
                    memcpy(&self.piece_tails[slot], p + length - 8, 8)
                self.n_whole_only += 1
            self.view.n_whole_only = self.n_whole_only

    def valid_pair(self, uint32_t a, uint32_t b):
        """Would BPE keep tokens ``a`` and ``b`` (internal indexes) next to each other?"""
        return bool(is_valid_pair(&self.view, a, b))

    def _spine_rejects(self, uint32_t a, uint32_t b):
        """spine_rejects(a, b): True only when valid_pair(a, b) is False (for tests)."""
        if a >= self.n_tokens or b >= self.n_tokens:
            raise IndexError((a, b))
        return bool(spine_rejects(&self.view, a, b))

    def _bytes_stay_apart(self, uint8_t a, uint8_t b):
        """bytes_stay_apart(a, b): valid_pair of the single-byte tokens of a and b (for tests)."""
        return bool(bytes_stay_apart(&self.view, a, b))

    def _next_match(self, bytes b):
        """next_match: internal index of the longest reachable token that prefixes ``b`` (for tests)."""
        if len(b) == 0:
            raise ValueError("empty bytes")
        return next_match(&self.view, <const uint8_t*>b, len(b))

    def lookup(self, bytes b):
        """Internal index of the token spelled ``b`` (reachable or not), or -1."""
        if len(b) == 0:
            return -1
        cdef uint32_t t = lookup_any(&self.view, <const uint8_t*>b, len(b))
        return -1 if t == NO_TOKEN else t

    def decode_bytes(self, tokens, dict special_bytes):
        """Concatenated bytes of external ids ``tokens``; ``special_bytes`` maps special ids to bytes.

        Raises ValueError naming the first id that is neither a token nor a special token.
        """
        cdef bytearray out = bytearray()
        cdef uint32_t index
        cdef bint identity = self.ids.size() == 0
        cdef Py_ssize_t t
        cdef const uint8_t* base = self.all_bytes.data()
        for tok in tokens:
            t = tok
            index = NO_TOKEN
            if t >= 0:
                if identity:
                    if t < self.n_tokens:
                        index = t
                elif t < <Py_ssize_t>self.index_of_id.size():
                    index = self.index_of_id[t]
            if index != NO_TOKEN:
                out += base[self.token_starts[index]:self.token_starts[index + 1]]
            else:
                special = special_bytes.get(tok)
                if special is None:
                    raise ValueError(f"token id {tok} is not in this vocabulary (valid: 0..{self.max_id} "
                                     f"and {len(special_bytes)} special tokens)")
                out += special
        return bytes(out)

    def _assign_ids(self, ids):
        """Give token ``i`` (internal index, rank order) the external id ``ids[i]``.

        For files whose ids do not follow merge priority (Hugging Face ``tokenizer.json`` of
        Qwen2, DeepSeek, GPT-NeoX, ...): the core stays in rank space and the existing id map
        (``ids``/``index_of_id``) translates at the boundary, so encode pays nothing more.
        ``ids`` must be distinct integers in [0, 2**32 - 1), one per token.
        """
        cdef vector[uint32_t] v
        cdef uint32_t i, top = 0
        if len(ids) != self.n_tokens:
            raise ValueError(f"{len(ids)} ids for {self.n_tokens} tokens")
        if len(set(ids)) != self.n_tokens:
            raise ValueError("two tokens share an id")
        for x in ids:
            if not 0 <= x < 0xFFFFFFFF:
                raise ValueError(f"id {x!r} out of range [0, 2**32 - 1)")
            v.push_back(x)
            if x > top:
                top = x
        self.max_id = top
        self.index_of_id.assign(<size_t>top + 1, NO_TOKEN)
        for i in range(self.n_tokens):
            self.index_of_id[v[i]] = i
        self.ids.swap(v)


def _head_and_hash(bytes text, Py_ssize_t start, Py_ssize_t n):
    """(head_and_hash's head, its hash, load_head, piece_hash) of text[start:start + n], read with
    the text's end as the limit (for tests: the two pairs are equal)."""
    if n < 1 or start < 0 or start + n > len(text):
        raise ValueError((start, n))
    cdef const uint8_t* s = <const uint8_t*>text
    cdef uint64_t head = 0
    cdef uint64_t h = head_and_hash(s + start, n, s + len(text), &head)
    cdef uint64_t ref = load_head(s + start, n)
    return head, h, ref, piece_hash(s + start, n, ref)

"""The dictionary every encoder reads: token bytes, merge structure and lookup tables.

A ``Vocab`` is built once from ``mergeable_ranks`` (bytes -> rank, lower rank merges first) and is
read-only afterwards, so any number of threads may encode with it without the GIL.

Build cost: O(total token bytes) hash and trie insertions plus, per token, a walk down its chain
of prefix tokens with a pair-validity check (README, "How it works"). About 0.2 s for o200k_base.
Memory: ~ 60 bytes per token plus ~ 24 bytes per trie node (~ 40 MB for cl100k + o200k together).

Lookups (all in ``vocab.pxd``, inline, nogil):
- ``lookup``: bytes -> token, open addressing with linear probing, load factor <= 0.5.
- ``pair_lookup``: (left, right) -> merged token, same scheme over 64-bit keys.
- ``next_match``: longest token that prefixes the input, one trie step per byte.
- ``is_valid_pair``: would BPE keep these two tokens adjacent (rust-gems ``bpe`` construction).
"""

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore._types cimport NO_TOKEN
from bpecore.vocab cimport (
    PairEntry, PieceEntry, TrieEntry, VocabView, hash_bytes, hash_u64, is_valid_pair, load_head,
    lookup_any, piece_hash, trie_child,
)


cdef uint64_t _table_size(uint64_t n):
    cdef uint64_t size = 16
    while size < 2 * n + 16:
        size <<= 1
    return size


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
    - ``bytes_table``: hash of the bytes -> ``i``; ``pair_keys``/``pair_vals``: merge table;
      ``root_child``, ``trie_keys``/``trie_vals``, ``node_token``: the longest-match trie.
    The Vocab owns every table (C++ vectors); ``view`` holds raw pointers into them for nogil code.
    """

    def __init__(self, mergeable_ranks):
        items = sorted(mergeable_ranks.items(), key=lambda kv: kv[1])
        cdef Py_ssize_t n = len(items)
        if n == 0:
            raise ValueError("empty vocabulary")
        if n >= 0xFFFFFFFF:
            raise ValueError("vocabulary too large")
        cdef uint32_t i, j, t, node, child, last, t1, t2, length
        cdef uint64_t slot, key, total = 0
        cdef uint32_t filter_bits
        cdef bytes b
        cdef const uint8_t* p
        prev_rank = -1
        identity = True
        self.token_starts.reserve(n + 1)
        self.token_starts.push_back(0)
        self.max_token_len = 0
        for i in range(n):
            b, rank = items[i]
            if not isinstance(b, bytes) or len(b) == 0:
                raise ValueError(f"token with rank {rank} is not a non-empty bytes object")
            if not isinstance(rank, int) or rank < 0 or rank >= 0xFFFFFFFF:
                raise ValueError(f"rank {rank!r} of token {b!r} is not an integer in [0, 2**32 - 1)")
            if rank == prev_rank:
                raise ValueError(f"rank {rank} is given to two tokens")
            prev_rank = rank
            if rank != i:
                identity = False
            p = b
            for j in range(len(b)):
                self.all_bytes.push_back(p[j])
            self.token_starts.push_back(self.all_bytes.size())
            if <uint32_t>len(b) > self.max_token_len:
                self.max_token_len = len(b)
        self.n_tokens = n
        self.max_id = items[n - 1][1]
        if not identity:
            self.ids.resize(n)
            self.index_of_id.assign(self.max_id + 1, NO_TOKEN)
            for i in range(n):
                self.ids[i] = items[i][1]
                self.index_of_id[items[i][1]] = i
        self.reachable.assign(n, 1)
        self.split_left.resize(n)
        self.split_right.resize(n)
        self.next_prefix.assign(n, NO_TOKEN)

        # bytes -> token
        cdef uint64_t size = _table_size(n)
        self.bytes_table.assign(size, NO_TOKEN)
        self._sync_view()
        for i in range(n):
            p = &self.all_bytes[0] + self.token_starts[i]
            length = self.token_starts[i + 1] - self.token_starts[i]
            if lookup_any(&self.view, p, length) != NO_TOKEN:
                raise ValueError(f"token {bytes(p[:length])!r} appears twice (ranks "
                                 f"{self._rank(lookup_any(&self.view, p, length))} and {self._rank(i)})")
            slot = hash_bytes(p, length) & (size - 1)
            while self.bytes_table[slot] != NO_TOKEN:
                slot = (slot + 1) & (size - 1)
            self.bytes_table[slot] = i
        self._sync_view()
        cdef uint8_t byte_value
        missing = []
        for j in range(256):
            byte_value = j
            if lookup_any(&self.view, &byte_value, 1) == NO_TOKEN:
                missing.append(j)
        if missing:
            raise ValueError(f"vocabulary lacks single-byte tokens for {len(missing)} byte values "
                             f"(first: 0x{missing[0]:02x}); byte-level BPE needs all 256")

        # trie over all token bytes
        for i in range(n):
            total += self.token_starts[i + 1] - self.token_starts[i]
        self.root_child.assign(256, NO_TOKEN)
        self.node_token.clear()
        size = _table_size(total)
        self.trie_keys.assign(size, 0)
        self.trie_vals.assign(size, 0)
        self._sync_view()
        for i in range(n):
            p = &self.all_bytes[0] + self.token_starts[i]
            length = self.token_starts[i + 1] - self.token_starts[i]
            node = self.root_child[p[0]]
            if node == NO_TOKEN:
                node = self.node_token.size()
                self.node_token.push_back(NO_TOKEN)
                self.root_child[p[0]] = node
            for j in range(1, length):
                child = trie_child(&self.view, node, p[j])
                if child == NO_TOKEN:
                    child = self.node_token.size()
                    self.node_token.push_back(NO_TOKEN)
                    key = ((<uint64_t>node + 1) << 8) | p[j]
                    slot = hash_u64(key) & (size - 1)
                    while self.trie_keys[slot] != 0:
                        slot = (slot + 1) & (size - 1)
                    self.trie_keys[slot] = key
                    self.trie_vals[slot] = child
                node = child
            self.node_token[node] = i
        self._shrink_trie()
        self._compute_next_prefix()

        # splits, in rank order: the longest prefix token whose remainder is a token and which
        # BPE would keep side by side with it (README, "How it works").
        size = _table_size(n)
        self.pair_keys.assign(size, 0)
        self.pair_vals.assign(size, NO_TOKEN)
        self.pairs.resize(size)
        for slot in range(size):
            self.pairs[slot].key = 0
            self.pairs[slot].merged = NO_TOKEN
            self.pairs[slot].pad = 0
        # pair filter: 2**21 bits (256 KB) up to 256k pairs, doubled beyond
        filter_bits = 21
        while (<uint64_t>1 << filter_bits) < 8 * <uint64_t>n:
            filter_bits += 1
        self.pair_filter.assign((<uint64_t>1 << filter_bits) >> 6, 0)
        self.view.pair_filter_shift = 64 - filter_bits
        self._sync_view()
        for i in range(n):
            length = self.token_starts[i + 1] - self.token_starts[i]
            self.split_left[i] = i
            self.split_right[i] = i
            if length == 1:
                continue
            p = &self.all_bytes[0] + self.token_starts[i]
            t1 = self.next_prefix[i]
            while t1 != NO_TOKEN:
                if t1 < i and self.reachable[t1]:
                    j = self.token_starts[t1 + 1] - self.token_starts[t1]
                    t2 = lookup_any(&self.view, p + j, length - j)
                    if t2 != NO_TOKEN and t2 < i and self.reachable[t2] and \
                            is_valid_pair(&self.view, t1, t2):
                        key = ((<uint64_t>t1 << 32) | t2) + 1
                        slot = hash_u64(key) & (size - 1)
                        while self.pair_keys[slot] != 0:
                            slot = (slot + 1) & (size - 1)
                        self.pair_keys[slot] = key
                        self.pair_vals[slot] = i
                        self.pairs[slot].key = key
                        self.pairs[slot].merged = i
                        slot = hash_u64(key) >> (64 - filter_bits)
                        self.pair_filter[slot >> 6] |= <uint64_t>1 << (slot & 63)
                        self.split_left[i] = t1
                        self.split_right[i] = t2
                        break
                t1 = self.next_prefix[t1]
            if t1 == NO_TOKEN:
                self.reachable[i] = 0
                self.n_unreachable += 1
        if self.n_unreachable:
            from bpecore.reference import bpe_encode
            for i in range(n):
                if not self.reachable[i] and bpe_encode(mergeable_ranks, self.token_bytes(i)) == [self._rank(i)]:
                    raise ValueError(
                        f"token {self.token_bytes(i)!r} (rank {self._rank(i)}) is formed by BPE only from "
                        "tokens of higher rank; bpecore needs every token ranked after the tokens it merges"
                    )
            for i in range(n):
                if not self.reachable[i]:
                    p = &self.all_bytes[0] + self.token_starts[i]
                    length = self.token_starts[i + 1] - self.token_starts[i]
                    node = self.root_child[p[0]]
                    for j in range(1, length):
                        node = trie_child(&self.view, node, p[j])
                    self.node_token[node] = NO_TOKEN
            self._compute_next_prefix()
        self._build_fast_tables()
        self._sync_view()

    cdef _shrink_trie(self):
        """Re-insert the trie into a table sized by its node count (load factor <= 0.5)."""
        cdef uint64_t size = _table_size(self.node_token.size()), mask = size - 1, slot, k
        cdef vector[uint64_t] keys
        cdef vector[uint32_t] vals
        keys.assign(size, 0)
        vals.assign(size, 0)
        for k in range(self.trie_keys.size()):
            if self.trie_keys[k] != 0:
                slot = hash_u64(self.trie_keys[k]) & mask
                while keys[slot] != 0:
                    slot = (slot + 1) & mask
                keys[slot] = self.trie_keys[k]
                vals[slot] = self.trie_vals[k]
        self.trie_keys.swap(keys)
        self.trie_vals.swap(vals)
        self._sync_view()

    cdef _build_fast_tables(self):
        """The cache-friendly twins of the tables above (VocabView.pieces, trie, pairs, byte_token)."""
        cdef uint64_t size, slot, k, head
        cdef uint32_t i, length, bits = 4, t, node
        cdef const uint8_t* p
        cdef uint8_t byte_value
        # whole pieces: reachable tokens only, load factor <= 0.5
        while (<uint64_t>1 << bits) < 2 * <uint64_t>self.n_tokens:
            bits += 1
        size = <uint64_t>1 << bits
        self.pieces.resize(size)
        for slot in range(size):
            self.pieces[slot].head = 0
            self.pieces[slot].token = NO_TOKEN
            self.pieces[slot].len = 0
        for i in range(self.n_tokens):
            if not self.reachable[i]:
                continue
            p = &self.all_bytes[0] + self.token_starts[i]
            length = self.token_starts[i + 1] - self.token_starts[i]
            head = load_head(p, length)
            slot = piece_hash(p, length, head) >> (64 - bits)
            while self.pieces[slot].token != NO_TOKEN:
                slot = (slot + 1) & (size - 1)
            self.pieces[slot].head = head
            self.pieces[slot].token = i
            self.pieces[slot].len = length
        self.view.piece_shift = 64 - bits
        # trie: same slots as trie_keys, with the child's token inline
        self.trie.resize(self.trie_keys.size())
        for k in range(self.trie_keys.size()):
            self.trie[k].key = self.trie_keys[k]
            self.trie[k].child = self.trie_vals[k]
            self.trie[k].token = self.node_token[self.trie_vals[k]] if self.trie_keys[k] != 0 else NO_TOKEN
        self.byte_token.resize(256)
        for k in range(256):
            byte_value = k
            self.byte_token[k] = lookup_any(&self.view, &byte_value, 1)
        self.first2.assign(65536, NO_TOKEN)
        self.first2x.assign(65536, <uint64_t>0xFFFFFFFFFFFFFFFFULL)
        for k in range(65536):
            node = self.root_child[k >> 8]
            if node != NO_TOKEN:
                self.first2[k] = trie_child(&self.view, node, k & 0xFF)
                if self.first2[k] != NO_TOKEN:
                    self.first2x[k] = self.first2[k] | (<uint64_t>self.node_token[self.first2[k]] << 32)

    cdef _compute_next_prefix(self):
        cdef uint32_t i, j, node, t, best, length
        cdef const uint8_t* p
        for i in range(self.n_tokens):
            p = &self.all_bytes[0] + self.token_starts[i]
            length = self.token_starts[i + 1] - self.token_starts[i]
            best = NO_TOKEN
            node = self.root_child[p[0]]
            for j in range(1, length):
                t = self.node_token[node]
                if t != NO_TOKEN:
                    best = t
                node = trie_child(&self.view, node, p[j])
            self.next_prefix[i] = best

    cdef _sync_view(self):
        self.view.all_bytes = self.all_bytes.data()
        self.view.token_starts = self.token_starts.data()
        self.view.split_left = self.split_left.data()
        self.view.split_right = self.split_right.data()
        self.view.next_prefix = self.next_prefix.data()
        self.view.reachable = self.reachable.data()
        self.view.bytes_table = self.bytes_table.data()
        self.view.bytes_mask = self.bytes_table.size() - 1
        self.view.pair_keys = self.pair_keys.data()
        self.view.pair_vals = self.pair_vals.data()
        self.view.pair_mask = self.pair_keys.size() - 1 if self.pair_keys.size() else 0
        self.view.root_child = self.root_child.data()
        self.view.trie_keys = self.trie_keys.data()
        self.view.trie_vals = self.trie_vals.data()
        self.view.trie_mask = self.trie_keys.size() - 1 if self.trie_keys.size() else 0
        self.view.node_token = self.node_token.data()
        self.view.n_tokens = self.n_tokens
        self.view.pieces = self.pieces.data()
        self.view.trie = self.trie.data()
        self.view.pairs = self.pairs.data()
        self.view.byte_token = self.byte_token.data()
        self.view.first2 = self.first2.data()
        self.view.pair_filter = self.pair_filter.data()
        self.view.first2x = self.first2x.data()

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

    def valid_pair(self, uint32_t a, uint32_t b):
        """Would BPE keep tokens ``a`` and ``b`` (internal indexes) next to each other?"""
        return bool(is_valid_pair(&self.view, a, b))

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

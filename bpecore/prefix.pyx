"""Exact prefix operations: the prefix-last-token table, the appending engine, split_at and friends.

The last token of BPE(p[:i]) is the longest token t ending at i whose predecessor
last[i - len(t)] is compatible with it (README, "How it works"); so one backwards trie walk per
byte gives the last token and the count of every prefix of a piece (``last_token``), and the
mirror rule gives the first token of every suffix (``first_token``). Cost per byte: one walk of
at most L trie nodes (L = longest token) plus one compatibility check per candidate; memory:
8 bytes per byte of the piece (last token + count).

Pre-tokenization (README, "Exact operations"): a piece cut from text[s:] depends only on the text
up to ``piece_horizon(s, e)``, a bound derived from the three shipped patterns (the letter run
from s, or from s+1 after a character the pattern takes as the letters' prefix, plus a
3-character contraction; 3 characters after an apostrophe; the whitespace run from s; the piece
and one more character). Pieces whose horizon lies inside the text never change when text is appended
or when the text is cut after the horizon; only the pieces after them are re-cut.

``Appender``: count after every push, exactly. Stable pieces are summed once; the unstable tail
(usually the last one or two pieces) is re-cut on each push, and the last piece's prefix table is
extended, not rebuilt, while its start stays put. Appending one character that provably extends
the last piece (a letter to a word, a space to a run of spaces: ``_extends``) skips the re-cut,
so a 1 MB run pushed a character at a time stays linear. Worst case: a long unstable tail that no
rule extends (e.g. o200k, "(" followed by a long run of non-ASCII letters) is re-cut per push.
Memory: the text plus 8 bytes per byte of the last piece, plus the memo of short pieces (24 KB
on the first push, doubling while it misses, at most 384 KB).
"""

# Performance decisions that hold (docs/perf/prefix.md: the first round and round 2's steps):
# - Pieces up to MEMO_LEN bytes keep their count and last token in a per-counter memo that
#   starts at 24 KB and doubles while it misses: a text's words and their prefixes come back.
# - A memo miss probes the whole-piece table from each start (the tables ``count`` keeps warm),
#   not the reverse trie: that was fewer instructions but 24 MB of random reads (round 2, step 2).
# - ``push_ascii`` (inline in prefix.pxd) lengthens a word or a whitespace run, starts a word after
#   one space, or ends a word at whitespace or punctuation without a re-cut; a larger inline body
#   (punctuation at a space) cost every push more than it saved (round 2, steps 2, 4, 6).
# - ``piece_horizon`` is as tight as the patterns allow, so a piece is stable as soon as the next
#   character is in (round 2, step 5).
# - ``Appender`` is final so its small methods inline (first round).
# The measurements behind these decisions: docs/perf/prefix.md.

from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

from bpecore._types cimport NO_TOKEN
from bpecore.backtrack cimport BacktrackEncoder, count_piece, encode_piece
from bpecore.pretokenize cimport PAT_CL100K, PAT_NONE, PAT_O200K, PAT_R50K, PAT_REGEX, char_flags, next_piece_end
from bpecore.vocab cimport Vocab, VocabView, hash_u64, is_valid_pair, lookup_piece, token_len, trie_child


cdef enum:
    FL_LU = 1
    FL_LL = 2
    FL_LT = 4
    FL_LM = 8
    FL_LO = 16
    FL_M = 32
    FL_N = 64
    FL_WS = 128
    FL_L = 31
    FL_LOWER = FL_LL | FL_LM | FL_LO | FL_M    #: o200k [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    FL_UPPER = FL_LU | FL_LT | FL_LM | FL_LO | FL_M    #: o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]

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


cdef inline uint8_t _flags(const uint8_t* s, Py_ssize_t p, Py_ssize_t* w) noexcept nogil:
    if s[p] < 0x80:
        w[0] = 1
        return BPE_UT_ASCII[s[p]]
    return char_flags(s, p, w)


cdef inline Py_ssize_t _run_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t p, uint8_t mask) noexcept nogil:
    cdef Py_ssize_t w
    while p < n and (_flags(s, p, &w) & mask):
        p += w
    return p


cdef Py_ssize_t piece_horizon(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    # Alternatives tried at ``start`` read: after an apostrophe, a contraction (up to 3
    # characters, all ASCII but the third); the whitespace run from start (the \s+ alternatives,
    # one character past it); the letters after an optional one-character prefix: for cl100k/r50k
    # the \p{L}++ run and one character past it; for o200k the [Lu Lt Lm Lo M]* run, then the
    # [Ll Lm Lo M]+ run after it (backtracking never reads further), then a 3-character
    # contraction; and the piece plus one character. Digits read no further than the piece plus
    # one character: \p{N}{1,3} and \p{N}+ either fail at ``start`` or are the piece.
    cdef Py_ssize_t w0, p, u, l, h = end + 1
    cdef uint8_t fl = _flags(s, start, &w0)
    if s[start] == 0x27 and start + 4 > h:
        h = start + 4
    if fl & FL_WS:
        p = _run_end(s, n, start, FL_WS) + 1
        if p > h:
            h = p
    # the letters' one-character prefix: [^\r\n\p{L}\p{N}] (cl100k, o200k), a space (r50k); a
    # letter alternative that finds no letter has read one character past the prefix
    cdef bint prefix = (s[start] == 0x20 if kind == PAT_R50K else
                        not (fl & (FL_L | FL_N)) and s[start] != 0x0A and s[start] != 0x0D)
    cdef int k
    if kind == PAT_O200K:
        for k in range(2):
            if k == 1 and not prefix:
                break
            p = start if k == 0 else start + w0
            if p >= n:
                break
            u = _run_end(s, n, p, FL_UPPER)
            l = _run_end(s, n, u, FL_LOWER)
            if l < u:
                l = u
            if l > p and l + 4 > h:
                h = l + 4
    elif fl & FL_L or prefix:
        p = start if fl & FL_L else start + w0
        p = _run_end(s, n, p, FL_L) + 1
        if p > h:
            h = p
    return h


cdef inline Py_ssize_t count_bytes(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                   vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """``count_piece`` that also takes an empty piece (a custom pattern may match nothing)."""
    return count_piece(v, p, n, out, bits) if n > 0 else 0


cdef class Appender:
    """Exact token count of a growing UTF-8 text (scanner patterns and no pattern).

    Fields: ``buf`` the text; pieces ending before ``frontier`` are stable (their horizon is inside
    the text) and counted in ``committed``; ``n_mid`` unstable pieces between ``frontier`` and
    ``last_start`` hold ``mid_count`` tokens; the last piece ``buf[last_start:]`` has its prefix
    table in ``last``/``cnt`` (index x = prefix of x bytes; entry 0 unused). ``shape`` and
    ``shape_flag`` say whether the next character may simply extend the last piece.
    """

    def __init__(self, BacktrackEncoder encoder, SuffixTrie trie):
        if encoder.kind == PAT_REGEX:
            raise ValueError("Appender needs a scanner pattern or no pattern")
        self.vocab = encoder.vocab
        self.v = &self.vocab.view
        self.trie = trie
        self.kind = encoder.kind
        self.last.push_back(NO_TOKEN)
        self.cnt.push_back(0)

    cdef inline Py_ssize_t c_count(self) noexcept nogil:
        return self.committed + self.mid_count + self.last_count

    cdef inline MemoEntry* _memo_slot(self, const uint8_t* p, Py_ssize_t n) noexcept nogil:
        """The memo slot of the piece p[:n] (1 <= n <= MEMO_LEN, p inside ``buf``): a hit when its
        ``length``/``w0``/``w1`` match, else the slot to fill (``_memo_store``).

        The key (``memo_key``) is two 8-byte loads, the slot one multiply."""
        memo_key(self, p, n)
        if self.memo.size() == 0:
            self.memo.resize(<size_t>1 << MEMO_MIN_BITS)
            self.memo_shift = 64 - MEMO_MIN_BITS
        return &self.memo[memo_hash(self.key0, self.key1, n, self.memo_shift)]

    cdef void _memo_store(self, MemoEntry* e, Py_ssize_t n, Py_ssize_t count, uint32_t last) noexcept nogil:
        """Fill the slot ``_memo_slot`` returned (its key is in key0/key1); grow the memo when
        misses since it last grew pass a quarter of its slots (entries are kept)."""
        cdef vector[MemoEntry] old
        e.w0 = self.key0
        e.w1 = self.key1
        e.length = <uint16_t>n
        e.count = <uint16_t>count
        e.last = last
        self.memo_misses += 1
        if self.memo_misses * 4 <= self.memo.size() or self.memo_shift <= 64 - MEMO_MAX_BITS:
            return
        self.memo_misses = 0
        self.memo_shift -= 1
        old.swap(self.memo)
        self.memo.resize(old.size() * 2)
        for e2 in old:
            if e2.length:
                self.memo[memo_hash(e2.w0, e2.w1, e2.length, self.memo_shift)] = e2

    cdef inline Py_ssize_t _count(self, const uint8_t* p, Py_ssize_t n) noexcept nogil:
        """len(BPE(p[:n])) for p inside ``buf``; pieces up to MEMO_LEN bytes go through the memo."""
        cdef MemoEntry* e
        cdef Py_ssize_t c
        if n > MEMO_LEN or n <= 0:
            return count_bytes(self.v, p, n, self.out, self.bits)
        e = self._memo_slot(p, n)
        if e.length == <uint16_t>n and e.w0 == self.key0 and e.w1 == self.key1:
            return e.count
        self.out.clear()
        c = encode_piece(self.v, p, n, self.out, self.bits)
        self._memo_store(e, n, c, self.out.back())
        return c

    cdef void _short_miss(self, MemoEntry* e, Py_ssize_t x) noexcept nogil:
        """Fill last[x] and cnt[x] (x <= MEMO_LEN, the table holds 1..x-1) on a memo miss, and
        the memo slot ``e``: the last token is the longest reachable token t = p[j:x] with
        j = 0 or last[j] compatible with t (README, "How it works"), found by probing the
        whole-piece table for p[0:x], p[1:x], ... (the tables ``count`` keeps warm)."""
        cdef const uint8_t* p = self.buf.data() + self.last_start
        cdef Py_ssize_t j, c
        cdef uint32_t t = NO_TOKEN
        for j in range(x):
            t = lookup_piece(self.v, p + j, x - j)
            if t != NO_TOKEN and (j == 0 or is_valid_pair(self.v, self.last[j], t)):
                break
        c = self.cnt[x - token_len(self.v, t)] + 1
        self.last.push_back(t)
        self.cnt.push_back(<uint32_t>c)
        self.last_count = c
        self._memo_store(e, x, c, t)

    cdef inline void _fill_short(self, const uint8_t* p, Py_ssize_t x) noexcept nogil:
        """last[x] and cnt[x] for x <= MEMO_LEN (the table holds 1..x-1): from the memo, or
        ``_short_miss``."""
        cdef MemoEntry* e = self._memo_slot(p, x)
        if e.length == <uint16_t>x and e.w0 == self.key0 and e.w1 == self.key1:
            self.last.push_back(e.last)
            self.cnt.push_back(e.count)
        else:
            self._short_miss(e, x)

    cdef inline void _append(self, const uint8_t* data, Py_ssize_t n) noexcept nogil:
        """buf += data[:n], keeping SLACK bytes of spare capacity."""
        cdef size_t size = self.buf.size()
        cdef Py_ssize_t k
        if self.buf.capacity() < size + n + SLACK:
            self.buf.reserve(2 * (size + n) + 64)
        for k in range(n):
            self.buf.push_back(data[k])

    cdef void _extend_last(self) noexcept nogil:
        """Extend the last piece's prefix table to its length and update ``last_count``. Prefixes
        up to MEMO_LEN bytes come from the memo (the same words come back all through a text) or,
        on a miss, from the table (``_short_miss``); longer ones take one backwards trie walk per
        byte not yet in the table."""
        cdef Py_ssize_t x, length = self.buf.size() - self.last_start
        cdef uint32_t t
        cdef const uint8_t* p = self.buf.data() + self.last_start
        for x in range(self.last.size(), length + 1):
            if x <= MEMO_LEN:
                self._fill_short(p, x)
                continue
            t = last_token(self.v, &self.trie.view, p, x, self.last.data(), self.scratch)
            self.last.push_back(t)
            self.cnt.push_back(self.cnt[x - token_len(self.v, t)] + 1)
        self.last_count = self.cnt[length]

    cdef void _extend_run(self) noexcept nogil:
        cdef Py_ssize_t x
        cdef uint32_t t
        cdef const uint8_t* p = self.buf.data() + self.frontier
        for x in range(self.run_last.size(), self.buf.size() - self.frontier + 1):
            t = last_token(self.v, &self.trie.view, p, x, self.run_last.data(), self.scratch)
            self.run_last.push_back(t)
            self.run_cnt.push_back(self.run_cnt[x - token_len(self.v, t)] + 1)

    cdef void _enter_ws_mode(self) noexcept nogil:
        """o200k, after a re-cut: if buf[frontier:] is whitespace with a newline, count it from a
        prefix table of the whole run from now on (each later whitespace byte costs one walk)."""
        cdef const uint8_t* s = self.buf.data()
        cdef Py_ssize_t n = self.buf.size(), p = self.frontier, w, nl = -1
        self.ws_mode = False
        if self.kind != PAT_O200K or p >= n:
            return
        while p < n:
            if not (char_flags(s, p, &w) & FL_WS):
                return
            if s[p] == 0x0A or s[p] == 0x0D:
                nl = p + 1
            p += w
        if nl < 0:
            return
        self.run_last.assign(1, NO_TOKEN)
        self.run_cnt.assign(1, 0)
        self._extend_run()
        self.mid_count = self.run_cnt[nl - self.frontier]
        self.n_mid = 1
        if nl != self.last_start:
            self.last_start = nl
            self.last.resize(1)
            self.cnt.resize(1)
        self._extend_last()
        self.ws_mode = True

    cdef void c_push(self, const uint8_t* data, Py_ssize_t n) noexcept nogil:
        """Append the complete UTF-8 ``data[:n]``."""
        cdef Py_ssize_t i = 0, w, k
        cdef uint8_t fl
        if self.kind == PAT_NONE:
            self._append(data, n)
            self._extend_last()
            return
        while i < n:
            fl = _flags(data, i, &w)
            if self.ws_mode and (fl & FL_WS):
                # o200k whitespace run: \s*[\r\n]+ takes it up to its last newline (counted from
                # the run's prefix table), \s+(?!\S) takes the spaces after (the last piece).
                self._append(data + i, w)
                i += w
                self._extend_run()
                if data[i - 1] == 0x0A or data[i - 1] == 0x0D:
                    self.mid_count = self.run_cnt[self.buf.size() - self.frontier]
                    self.last_start = self.buf.size()
                    self.last.resize(1)
                    self.cnt.resize(1)
                    self.last_count = 0
                else:
                    self._extend_last()
                continue
            self.ws_mode = False
            if self.buf.size() == 0 or not self._extends(data + i, fl):
                if i == n - 1 and data[i] < 0x80 and self._shortcut(data[i], fl):
                    return
                self._append(data + i, n - i)
                self._rescan()
                return
            self._append(data + i, w)
            self._extend_last()
            i += w

    cdef bint _shortcut(self, uint8_t c, uint8_t fl) noexcept nogil:
        """Append the ASCII character ``c`` that ends or starts a word, without a full re-cut.

        Word + a character that is not a letter, digit or apostrophe: every pattern's word
        alternative stops at that character having read it, and no alternative that could match
        at the word's start reads further (the contraction alternatives need an apostrophe first,
        o200k's trailing contraction one right after the letters), so the word's horizon is the
        new end: it is stable and its count is the one already known. The re-cut then starts at
        the new character. One space + a letter: that is the start of a word piece in every
        pattern (``[^\r\n\p{L}\p{N}]?`` or `` ?`` before the letters). Returns False when
        neither applies (the caller re-cuts)."""
        if self.n_mid != 0 or self.frontier != self.last_start:
            return False
        if self.shape == SHAPE_WORD:
            if fl & (FL_L | FL_N) or c == 0x27:
                return False
            self.committed += self.last_count
            self.frontier = self.buf.size()
            self._append(&c, 1)
            self._rescan()
            return True
        if (self.shape == SHAPE_SPACE and fl & FL_L and self.buf.size() - self.last_start == 1
                and self.buf[self.last_start] == 0x20):
            self._append(&c, 1)
            self._extend_last()
            self.shape = SHAPE_WORD
            self.shape_flag = self.kind == PAT_O200K and (fl & FL_LOWER) != 0
            return True
        return False

    cdef inline bint _extends(self, const uint8_t* c, uint8_t fl) noexcept nogil:
        """Does appending the character at ``c`` (flags ``fl``) just lengthen the last piece?"""
        if self.n_mid != 0 or self.frontier != self.last_start:
            return False
        if self.shape == SHAPE_WORD:
            if self.kind != PAT_O200K:
                return (fl & FL_L) != 0
            if fl & FL_LOWER:
                self.shape_flag = True
                return True
            return (fl & (FL_LU | FL_LT)) != 0 and not self.shape_flag
        if self.shape == SHAPE_PUNCT:
            return not (fl & (FL_L | FL_N | FL_WS)) and not (self.kind == PAT_O200K and (fl & FL_M))
        if self.shape == SHAPE_SPACE and (fl & FL_WS):
            if self.kind != PAT_O200K:
                return True
            if c[0] == 0x0A or c[0] == 0x0D:
                self.shape_flag = True
                return True
            return not self.shape_flag
        return False

    cdef void _set_shape(self) noexcept nogil:
        """Classify the last piece buf[last_start:] for ``_extends`` (README, "Exact operations")."""
        cdef const uint8_t* s = self.buf.data()
        cdef Py_ssize_t n = self.buf.size(), p0 = self.last_start, p, q, w0, w
        cdef uint8_t fl0 = char_flags(s, p0, &w0), fl
        cdef uint8_t c0 = s[p0]
        self.shape = SHAPE_NONE
        self.shape_flag = False
        if fl0 & FL_WS:
            p = p0
            while p < n and (char_flags(s, p, &w) & FL_WS):
                p += w
            if p == n:
                self.shape = SHAPE_SPACE
                for p in range(p0, n):
                    if s[p] == 0x0A or s[p] == 0x0D:
                        self.shape_flag = True
                return
        if fl0 & FL_L:
            q = p0
        elif c0 == 0x0A or c0 == 0x0D or (fl0 & FL_N):
            return
        elif self.kind == PAT_O200K and (fl0 & FL_M):
            return
        else:
            # a one-character prefix: " " (r50k), [^\r\n\p{L}\p{N}] (cl100k, o200k)
            q = p0 + w0
        if q >= n:
            return
        fl = char_flags(s, q, &w)
        if not (fl & (FL_L | FL_M | FL_N | FL_WS)) and (c0 == 0x20 or q == p0 + w0 and not (fl0 & FL_WS)):
            # punctuation run: " ?[^\s\p{L}\p{N}]+" in every pattern
            q = p0 + 1 if c0 == 0x20 else p0
            while q < n:
                fl = char_flags(s, q, &w)
                if fl & (FL_L | FL_N | FL_WS) or (self.kind == PAT_O200K and (fl & FL_M)):
                    return
                q += w
            self.shape = SHAPE_PUNCT
            return
        if self.kind == PAT_CL100K and c0 == 0x27 and q == p0 + w0:
            return  # an apostrophe before letters may be a contraction
        if self.kind == PAT_R50K and not (fl0 & FL_L) and c0 != 0x20:
            return  # r50k words take no prefix but a space
        while q < n:
            fl = char_flags(s, q, &w)
            if self.kind == PAT_O200K:
                if not (fl & (FL_L | FL_M)):
                    return
                if fl & FL_LOWER:
                    self.shape_flag = True
            elif not (fl & FL_L):
                return
            q += w
        self.shape = SHAPE_WORD

    cdef void _rescan(self) noexcept nogil:
        """Re-cut buf[frontier:], commit the pieces that became stable, rebuild the tail."""
        cdef const uint8_t* s = self.buf.data()
        cdef Py_ssize_t n = self.buf.size()
        cdef Py_ssize_t pos = self.frontier, e, old_last = self.last_start
        cdef bint stable = True
        self.mid_count = 0
        self.n_mid = 0
        while True:
            e = next_piece_end(self.kind, s, n, pos)
            if e == n:
                break
            if stable and piece_horizon(self.kind, s, n, pos, e) <= n:
                self.committed += self._count(s + pos, e - pos)
                self.frontier = e
            else:
                stable = False
                self.mid_count += self._count(s + pos, e - pos)
                self.n_mid += 1
            pos = e
        self.last_start = pos
        if pos != old_last:
            self.last.resize(1)
            self.cnt.resize(1)
        elif self.last.size() > <size_t>(n - pos + 1):
            self.last.resize(n - pos + 1)
            self.cnt.resize(n - pos + 1)
        self._extend_last()
        self._set_shape()
        self._enter_ws_mode()

    # -------------------------------------------------------------------- Python API
    def push_utf8(self, const uint8_t[::1] data):
        """Append complete UTF-8 ``data``; return the count of all text so far."""
        cdef Py_ssize_t total
        with nogil:
            if data.shape[0]:
                self.c_push(&data[0], data.shape[0])
            total = self.c_count()
        return total

    @property
    def count(self):
        return self.c_count()

    @property
    def nbytes(self):
        return self.buf.size()

    def _state(self):
        """(frontier, committed, mid_count, n_mid, last_start, table size, last_count, shape,
        shape_flag, ws_mode), for tests."""
        return (self.frontier, self.committed, self.mid_count, self.n_mid, self.last_start,
                self.last.size(), self.last_count, self.shape, self.shape_flag, self.ws_mode)

    def utf8(self):
        cdef const char* p = <const char*>self.buf.data()
        return p[:self.buf.size()]

    def memory_bytes(self):
        """Bytes held: the text, the last piece's table and the memo of short pieces."""
        return (self.buf.capacity() + 4 * (self.last.capacity() + self.cnt.capacity())
                + sizeof(MemoEntry) * self.memo.capacity())


cdef inline bint _is_lead(uint8_t b) noexcept nogil:
    return (b & 0xC0) != 0x80


def _piece_horizon(int kind, const uint8_t[::1] utf8, Py_ssize_t start, Py_ssize_t end):
    """``piece_horizon`` of the piece utf8[start:end] cut by a scanner kind, for tests."""
    if not 0 <= start < end <= utf8.shape[0]:
        raise ValueError("need 0 <= start < end <= len(utf8)")
    return piece_horizon(kind, &utf8[0], utf8.shape[0], start, end)


def count_till_limit(BacktrackEncoder encoder, str text, Py_ssize_t limit):
    """The count of ``text`` if it is <= limit, else None; work grows with ``limit``.

    Pieces are encoded in order and the scan stops as soon as the total passes ``limit``; a piece
    too long to fit (more than limit * L bytes, L the longest token) is rejected unencoded.
    """
    if limit < 0:
        return None
    cdef const uint8_t* s
    cdef Py_ssize_t n, pos = 0, e, total = 0, k
    cdef const VocabView* v = &encoder.vocab.view
    cdef Py_ssize_t maxlen = encoder.vocab.max_token_len
    cdef vector[uint32_t] out
    cdef vector[uint64_t] bits
    cdef int kind = encoder.kind
    s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
    if kind == PAT_REGEX:
        for m in encoder._regex.finditer(text):
            start, stop = m.span()
            piece = text[start:stop].encode("utf-8")
            if total + (len(piece) + maxlen - 1) // maxlen > limit:
                return None
            total += count_bytes(v, <const uint8_t*>piece, len(piece), out, bits)
            if total > limit:
                return None
        return total
    with nogil:
        while pos < n:
            e = n if kind == PAT_NONE else next_piece_end(kind, s, n, pos)
            if total + (e - pos + maxlen - 1) // maxlen > limit:
                total = limit + 1
                break
            total += count_bytes(v, s + pos, e - pos, out, bits)
            if total > limit:
                break
            pos = e
    return None if total > limit else total


def split_at(BacktrackEncoder encoder, SuffixTrie trie, str text, Py_ssize_t limit):
    """Largest char offset k with count(text[:k]) <= limit (see Encoding.split_at)."""
    if limit < 0:
        raise ValueError("n must be >= 0")
    cdef const uint8_t* s
    cdef Py_ssize_t n, pos = 0, w, chars = 0, best = 0
    cdef Py_ssize_t maxlen = encoder.vocab.max_token_len
    s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
    cdef Appender app = Appender(encoder, trie)
    with nogil:
        while pos < n:
            w = 1
            while pos + w < n and not _is_lead(s[pos + w]):
                w += 1
            app.c_push(s + pos, w)
            pos += w
            chars += 1
            if app.c_count() <= limit:
                best = chars
            if app.committed + (<Py_ssize_t>app.buf.size() - app.frontier + maxlen - 1) // maxlen > limit:
                break
    return best


def split_at_end(BacktrackEncoder encoder, str text, Py_ssize_t limit):
    """Smallest char offset k with count(text[k:]) <= limit (see Encoding.split_at_end).

    Candidates k go from the end backwards. count(text[k:]) = the pieces cut from k until one of
    them ends on a boundary of the reference cut (the pieces of the window text[k0:]), plus the
    reference's count from there on (cutting is deterministic from a boundary, and the patterns
    have no look-behind). The first piece's count comes from a first-token table anchored at its
    end, so a long run costs O(1) trie walks per step. The scan stops once the bytes left of k
    cannot fit in ``limit`` tokens even at L bytes per token: work grows with ``limit``.
    """
    if limit < 0:
        raise ValueError("n must be >= 0")
    cdef const uint8_t* s
    cdef Py_ssize_t n, k0, k, e, pos, x, total, best, chars_right = 0
    cdef Py_ssize_t maxlen = encoder.vocab.max_token_len
    cdef const VocabView* v = &encoder.vocab.view
    cdef int kind = encoder.kind
    s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
    cdef Py_ssize_t nchars = len(text)
    cdef vector[Py_ssize_t] ref_count      # ref_count[x - k0]: tokens of the reference pieces from x on, -1 if x is not a boundary
    cdef vector[uint32_t] first, cnt_first  # first-token table of the anchored piece, index x - k0
    cdef vector[uint32_t] scratch, out
    cdef vector[uint64_t] bits
    cdef Py_ssize_t anchor = -1, anchor_lo = 0, ends_count
    cdef vector[Py_ssize_t] ref_ends
    # window: no k below n - (limit + 1) * maxlen bytes can fit
    k0 = n - (limit + 1) * maxlen
    if k0 <= 0:
        k0 = 0
    else:
        while k0 < n and not _is_lead(s[k0]):
            k0 += 1
    if kind == PAT_REGEX:
        return _split_at_end_regex(encoder, text, limit, k0)
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
            while k > k0 and not _is_lead(s[k]):
                k -= 1
            chars_right += 1
            # cut from k until a reference boundary
            e = n if kind == PAT_NONE else next_piece_end(kind, s, n, k)
            if e != anchor:
                anchor = e
                anchor_lo = e
            while anchor_lo > k:
                anchor_lo -= 1
                first[anchor_lo - k0] = first_token(v, s + k0, anchor_lo - k0, anchor - k0,
                                                    first.data(), scratch)
                cnt_first[anchor_lo - k0] = 1 + (0 if anchor_lo + token_len(v, first[anchor_lo - k0]) == anchor
                                                 else cnt_first[anchor_lo + token_len(v, first[anchor_lo - k0]) - k0])
            total = cnt_first[k - k0]
            pos = e
            while ref_count[pos - k0] < 0:
                e = next_piece_end(kind, s, n, pos)
                total += count_bytes(v, s + pos, e - pos, out, bits)
                pos = e
            total += ref_count[pos - k0]
            if total <= limit:
                best = nchars - chars_right
    return best


def _split_at_end_regex(BacktrackEncoder encoder, str text, Py_ssize_t limit, Py_ssize_t k0_bytes):
    """Custom patterns: evaluate count(text[k:]) for each k from the end (exact, O(window^2))."""
    k0 = len(text.encode("utf-8")[:k0_bytes].decode("utf-8", "ignore"))
    best = len(text)
    for k in range(len(text) - 1, k0 - 1, -1):
        if encoder.count(text[k:]) <= limit:
            best = k
    return best


#: PatternKind of patterns cut by the `regex` module (no scanner): the exact operations fall back
#: to slower exact paths for them.
KIND_REGEX = PAT_REGEX

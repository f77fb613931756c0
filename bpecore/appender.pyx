"""The appending engine: the exact token count of a UTF-8 text that grows at the end.

``Appender.c_push(data)`` appends complete UTF-8; ``c_count()`` is then the count of all text so
far, exactly. Pieces whose cut can no longer change (their ``pretokenize.piece_horizon`` is inside
the text) are summed once; the unstable tail (usually the last one or two pieces) is re-cut on
each push, and the last piece's prefix-last-token table (``prefix.last_token``) is extended, not
rebuilt, while its start stays put. Appending one character that provably extends the last piece
(a letter to a word, a space to a run of spaces: ``_extends``) skips the re-cut, so a 1 MB run
pushed a character at a time stays linear (about 3 trie walks per byte of English; r50k's
unbounded numbers too). Worst input:
a long unstable tail that no rule extends (o200k, "(" followed by a long run of non-ASCII
letters) is re-cut per push. Memory: the text plus 8 bytes per byte of the last piece, plus the
memo of short pieces (24 KB on the first push, doubling while it misses, at most 384 KB).
``split_at`` pushes a text a character at a time and keeps the longest prefix that fits. Used by
``appendable.AppendableCounter`` (streams) and ``Encoding.split_at``.
"""

# Performance decisions that hold (docs/perf/prefix.md: the first round and round 2's steps):
# - Pieces up to MEMO_LEN bytes keep their count and last token in a per-counter memo that
#   starts at 24 KB and doubles while it misses: a text's words and their prefixes come back.
# - A memo miss probes the whole-piece table from each start (the tables ``count`` keeps warm),
#   not the reverse trie: that was fewer instructions but 24 MB of random reads (round 2, step 2).
# - ``push_ascii`` (inline in appender.pxd) lengthens a word or a whitespace run, starts a word
#   after one space, or ends a word at whitespace or punctuation without a re-cut; a larger inline
#   body (punctuation at a space) cost every push more than it saved (round 2, steps 2, 4, 6).
# - ``Appender`` is final so its small methods inline (first round), and the engine has a module
#   of its own: inside appendable.pyx gcc stopped inlining vector::push_back into
#   AppendableCounter.push (+3.7% instructions per push).
# The measurements behind these decisions: docs/perf/prefix.md.


from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore._classes cimport (
    BPE_UT_LT, BPE_UT_LU, BPE_UT_M, BPE_UT_N, BPE_UT_WS, F_L, F_LOWER, PAT_DEEPSEEK3, PAT_NONE,
    PAT_R50K, PAT_REGEX, leading_contraction, o200k_spaces, o200k_words,
)
from bpecore._types cimport NO_TOKEN
from bpecore.backtrack cimport BacktrackEncoder, count_bytes, encode_piece
from bpecore.prefix cimport SuffixTrie, last_token
from bpecore.pretokenize cimport (
    DS_CJK_OTHER, DS_CJK_PUNCT, DS_CJK_WORD, DS_OTHER, DS_SPACE, DS_WORD, char_flags,
    char_flags_fast, deepseek_char_class, next_piece_end, piece_horizon,
)
from bpecore.utf8 cimport is_lead
from bpecore.vocab cimport VocabView, is_valid_pair, lookup_piece, token_len


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
        if not o200k_spaces(self.kind) or p >= n:
            return
        while p < n:
            if not (char_flags(s, p, &w) & BPE_UT_WS):
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
            fl = char_flags_fast(data, i, &w)
            if self.ws_mode and (fl & BPE_UT_WS):
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
            if fl & (F_L | BPE_UT_N) or c == 0x27:
                return False
            self.committed += self.last_count
            self.frontier = self.buf.size()
            self._append(&c, 1)
            self._rescan()
            return True
        if (self.shape == SHAPE_SPACE and fl & F_L and self.buf.size() - self.last_start == 1
                and self.buf[self.last_start] == 0x20):
            self._append(&c, 1)
            self._extend_last()
            self.shape = SHAPE_WORD
            self.shape_flag = o200k_words(self.kind) and (fl & F_LOWER) != 0
            return True
        return False

    cdef inline bint _extends(self, const uint8_t* c, uint8_t fl) noexcept nogil:
        """Does appending the character at ``c`` (flags ``fl``) just lengthen the last piece?"""
        cdef Py_ssize_t w
        if self.n_mid != 0 or self.frontier != self.last_start:
            return False
        if self.shape == SHAPE_WORD:
            if self.kind == PAT_DEEPSEEK3:
                return deepseek_char_class(c, 4, 0, &w) == DS_WORD
            if not o200k_words(self.kind):
                return (fl & F_L) != 0
            if fl & F_LOWER:
                self.shape_flag = True
                return True
            return (fl & (BPE_UT_LU | BPE_UT_LT)) != 0 and not self.shape_flag
        if self.shape == SHAPE_NUMBER:
            return (fl & BPE_UT_N) != 0
        if self.shape == SHAPE_CJK:
            return _deepseek_cjk(deepseek_char_class(c, 4, 0, &w))
        if self.shape == SHAPE_PUNCT:
            return not (fl & (F_L | BPE_UT_N | BPE_UT_WS)) and not (o200k_words(self.kind) and (fl & BPE_UT_M))
        if self.shape == SHAPE_SPACE and (fl & BPE_UT_WS):
            if not o200k_spaces(self.kind):
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
        if fl0 & BPE_UT_WS:
            p = p0
            while p < n and (char_flags(s, p, &w) & BPE_UT_WS):
                p += w
            if p == n:
                self.shape = SHAPE_SPACE
                for p in range(p0, n):
                    if s[p] == 0x0A or s[p] == 0x0D:
                        self.shape_flag = True
                return
        if self.kind == PAT_DEEPSEEK3:
            _set_deepseek_shape(self)
            return
        if self.kind == PAT_R50K and (c0 == 0x20 or (fl0 & BPE_UT_N)):
            # `` ?\p{N}+``: the piece is its numerals (after one space) to the end
            q = p0 + 1 if c0 == 0x20 else p0
            if q < n and (char_flags(s, q, &w) & BPE_UT_N):
                while q < n and (char_flags(s, q, &w) & BPE_UT_N):
                    q += w
                if q == n:
                    self.shape = SHAPE_NUMBER
                return
        if fl0 & F_L:
            q = p0
        elif c0 == 0x0A or c0 == 0x0D or (fl0 & BPE_UT_N):
            return
        elif o200k_words(self.kind) and (fl0 & BPE_UT_M):
            return
        else:
            # a one-character prefix: " " (r50k), [^\r\n\p{L}\p{N}] (cl100k, o200k)
            q = p0 + w0
        if q >= n:
            return
        fl = char_flags(s, q, &w)
        if not (fl & (F_L | BPE_UT_M | BPE_UT_N | BPE_UT_WS)) and (c0 == 0x20 or q == p0 + w0 and not (fl0 & BPE_UT_WS)):
            # punctuation run: " ?[^\s\p{L}\p{N}]+" in every pattern
            q = p0 + 1 if c0 == 0x20 else p0
            while q < n:
                fl = char_flags(s, q, &w)
                if fl & (F_L | BPE_UT_N | BPE_UT_WS) or (o200k_words(self.kind) and (fl & BPE_UT_M)):
                    return
                q += w
            self.shape = SHAPE_PUNCT
            return
        if leading_contraction(self.kind) and c0 == 0x27 and q == p0 + w0:
            return  # an apostrophe before letters may be a contraction
        if self.kind == PAT_R50K and not (fl0 & F_L) and c0 != 0x20:
            return  # r50k words take no prefix but a space
        while q < n:
            fl = char_flags(s, q, &w)
            if o200k_words(self.kind):
                if not (fl & (F_L | BPE_UT_M)):
                    return
                if fl & F_LOWER:
                    self.shape_flag = True
            elif not (fl & F_L):
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


cdef inline bint _deepseek_cjk(uint8_t k) noexcept nogil:
    """A class of DEEPSEEK3_PATTERN's CJK set but its numerals (which ``\\p{N}{1,3}`` takes)."""
    return k == DS_CJK_WORD or k == DS_CJK_PUNCT or k == DS_CJK_OTHER


cdef void _set_deepseek_shape(Appender a) noexcept nogil:
    """_set_shape's words for DEEPSEEK3_PATTERN: ``[[\\p{L}\\p{M}]--CJK]+`` after at most one
    space or character of no class (not a punctuation mark: ``[!"#...][A-Za-z]+`` takes only
    ASCII letters; not CJK: its words are another run), and runs of the CJK set."""
    cdef const uint8_t* s = a.buf.data()
    cdef Py_ssize_t n = a.buf.size(), q = a.last_start, w
    cdef uint8_t k = deepseek_char_class(s, n, q, &w)
    if _deepseek_cjk(k):
        # a run of the CJK set is a piece of its own (the first Split), however long
        while q < n and _deepseek_cjk(deepseek_char_class(s, n, q, &w)):
            q += w
        if q == n:
            a.shape = SHAPE_CJK
        return
    if k == DS_SPACE or k == DS_OTHER:
        q += w
    elif k != DS_WORD:
        return
    if q >= n:
        return
    while q < n:
        if deepseek_char_class(s, n, q, &w) != DS_WORD:
            return
        q += w
    a.shape = SHAPE_WORD


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
            while pos + w < n and not is_lead(s[pos + w]):
                w += 1
            app.c_push(s + pos, w)
            pos += w
            chars += 1
            if app.c_count() <= limit:
                best = chars
            if app.committed + (<Py_ssize_t>app.buf.size() - app.frontier + maxlen - 1) // maxlen > limit:
                break
    return best

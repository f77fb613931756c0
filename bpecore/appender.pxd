cimport cython
from libc.stdint cimport uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

from bpecore._classes cimport BPE_UT_ASCII, BPE_UT_LL, BPE_UT_N, BPE_UT_WS, F_L, o200k_spaces, o200k_words
from bpecore.prefix cimport SuffixTrie
from bpecore.vocab cimport Vocab, VocabView


cdef enum:
    MEMO_LEN = 16     #: pieces up to this many bytes have their counts remembered
    MEMO_MIN_BITS = 10    #: the memo starts with 2**10 slots (24 KB) on the first short piece
    MEMO_MAX_BITS = 14    #: and doubles (up to 384 KB) each time it misses 1/4 of its slots
    SLACK = 16        #: buf keeps this many bytes of capacity past its end (8-byte loads)

cdef enum:
    SHAPE_NONE = 0    #: no rule: the next push re-cuts the tail
    SHAPE_WORD = 1    #: [prefix] letters; one more letter (of the right case for o200k) extends it
    SHAPE_SPACE = 2   #: whitespace only; one more whitespace character extends it (o200k: see _extends)
    SHAPE_PUNCT = 3   #: [space] then punctuation (not \s, \p{L}, \p{N}; o200k: nor \p{M}); one more extends it
    SHAPE_NUMBER = 4  #: r50k: [space] then \p{N}+ (`` ?\p{N}+``, unbounded); one more \p{N} extends it
    SHAPE_CJK = 5     #: DeepSeek V3: a run of its CJK set (its first Split, unbounded); one more CJK character (not \p{N}) extends it


cdef struct MemoEntry:
    uint64_t w0                       #: the piece's first 8 bytes, zero-padded
    uint64_t w1                       #: bytes 8-15, zero-padded
    uint32_t last                     #: last token of the piece's BPE
    uint16_t length                   #: 0: empty slot
    uint16_t count


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
    cdef void _memo_store(self, MemoEntry* e, Py_ssize_t n, Py_ssize_t count, uint32_t last) noexcept nogil
    cdef void _short_miss(self, MemoEntry* e, Py_ssize_t x) noexcept nogil
    cdef inline void _fill_short(self, const uint8_t* p, Py_ssize_t x) noexcept nogil
    cdef inline Py_ssize_t _count(self, const uint8_t* p, Py_ssize_t n) noexcept nogil
    cdef inline void _append(self, const uint8_t* data, Py_ssize_t n) noexcept nogil
    cdef void _extend_last(self) noexcept nogil
    cdef void _extend_run(self) noexcept nogil
    cdef void _enter_ws_mode(self) noexcept nogil
    cdef void _rescan(self) noexcept nogil
    cdef void _set_shape(self) noexcept nogil
    cdef bint _shortcut(self, uint8_t c, uint8_t fl) noexcept nogil
    cdef inline bint _extends(self, const uint8_t* c, uint8_t flags) noexcept nogil


cdef inline uint64_t memo_hash(uint64_t w0, uint64_t w1, uint64_t n, int shift) noexcept nogil:
    return ((w0 ^ (w1 * 0xC2B2AE3D27D4EB4FULL) ^ n) * 0x9E3779B97F4A7C15ULL) >> shift


cdef inline void memo_key(Appender a, const uint8_t* p, Py_ssize_t n) noexcept nogil:
    # a.key0/a.key1 = p[:n] (1 <= n <= MEMO_LEN, p inside a.buf), zero-padded: two 8-byte loads
    # (buf keeps SLACK bytes of capacity past its end) with the bytes past the piece masked off.
    cdef uint64_t w0, w1
    memcpy(&w0, p, 8)
    memcpy(&w1, p + 8, 8)
    if n < 8:
        w0 &= (<uint64_t>1 << (8 * n)) - 1
        w1 = 0
    elif n < 16:
        w1 &= (<uint64_t>1 << (8 * (n - 8))) - 1
    a.key0 = w0
    a.key1 = w1


cdef inline bint _end_word(Appender a, uint8_t c, uint8_t fl, size_t size) noexcept nogil:
    """``push_ascii`` for a character that is no letter: after a word, whitespace or punctuation
    (not a digit or an apostrophe) ends it; the word is stable with its count known, the new
    character is the last piece (o200k: a newline is left to ``c_push``, its whitespace mode)."""
    if a.shape != SHAPE_WORD or fl & BPE_UT_N or c == 0x27:
        return False
    if fl & BPE_UT_WS:
        if c == 0x0A or c == 0x0D:
            if o200k_spaces(a.kind):
                return False
            a.shape_flag = True
        else:
            a.shape_flag = False
        a.shape = SHAPE_SPACE
    else:
        a.shape = SHAPE_NONE
        a.shape_flag = False
    a.committed += a.last_count
    a.frontier = size
    a.last_start = size
    a.buf.push_back(c)
    a.last.resize(1)
    a.last.push_back(a.v.byte_token[c])
    a.cnt.resize(1)
    a.cnt.push_back(1)
    a.last_count = 1
    return True


cdef inline bint push_ascii(Appender a, uint8_t c) noexcept nogil:
    """Append the ASCII character ``c`` (< 0x80) when it lengthens a short word or whitespace
    piece, starts a word after one space, or ends a word with whitespace or punctuation; False:
    nothing was done, the caller takes ``c_push``. The same state ``c_push`` reaches, without its
    re-cut or calls (the rules: ``Appender._extends`` and ``Appender._shortcut``).

    A character that lengthens the last piece p to x <= MEMO_LEN bytes reads its count and last token
    from the memo slot of p[:x] (key: p's first 16 bytes, zero-padded, and x), one multiply and
    one probe; a miss derives them from the prefix table (``_short_miss``)."""
    cdef size_t size = a.buf.size()
    cdef Py_ssize_t x = <Py_ssize_t>size - a.last_start + 1
    cdef uint8_t fl = BPE_UT_ASCII[c]
    cdef MemoEntry* e
    if a.n_mid != 0 or a.frontier != a.last_start or a.buf.capacity() < size + 1 + SLACK:
        return False
    if fl & F_L:
        # a letter (Lu or Ll): lengthens a word, or makes one of a single space
        if x > MEMO_LEN or a.last.size() != <size_t>x or a.memo.size() == 0:
            return False
        if a.shape == SHAPE_WORD:
            if o200k_words(a.kind):
                if fl & BPE_UT_LL:
                    a.shape_flag = True
                elif a.shape_flag:
                    return False
        elif a.shape == SHAPE_SPACE and x == 2 and a.buf[size - 1] == 0x20:
            a.shape = SHAPE_WORD
            a.shape_flag = o200k_words(a.kind) and (fl & BPE_UT_LL) != 0
        else:
            return False
    elif a.shape == SHAPE_SPACE and fl & BPE_UT_WS:
        # whitespace lengthens whitespace (o200k: after a newline, only a newline does)
        if x > MEMO_LEN or a.last.size() != <size_t>x or a.memo.size() == 0:
            return False
        if o200k_spaces(a.kind):
            if c == 0x0A or c == 0x0D:
                a.shape_flag = True
            elif a.shape_flag:
                return False
    else:
        return _end_word(a, c, fl, size)
    a.buf.push_back(c)
    memo_key(a, a.buf.data() + a.last_start, x)
    e = &a.memo[memo_hash(a.key0, a.key1, x, a.memo_shift)]
    if e.length == x and e.w0 == a.key0 and e.w1 == a.key1:
        a.last.push_back(e.last)
        a.cnt.push_back(e.count)
        a.last_count = e.count
    else:
        a._short_miss(e, x)
    return True

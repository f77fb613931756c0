"""Pre-tokenization: cutting text into the pieces that BPE encodes one by one.

``next_piece_end(kind, s, n, pos)`` returns the end (byte offset) of the piece that starts at
``pos`` in the valid UTF-8 text ``s[:n]``, exactly where ``regex.finditer(pattern, text)`` would
end it. The shipped patterns (CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN) have hand-written
scanners over the UTF-8 bytes; character classes come from ``_unicode_tables.h``, measured from
the `regex` module itself (scripts/gen_unicode_tables.py). Any other pattern (PAT_REGEX) is cut
by `regex` in ``BacktrackEncoder._pieces``; PAT_NONE makes the whole text one piece.

Cost: each call reads the piece plus at most one more character, so cutting a whole text is
O(n) on average and in the worst case (no backtracking: every backtrack of the patterns is
resolved by remembering positions during one forward pass; worst input for the constant is
long runs of 4-byte letters, about 3 table reads per character). No allocation, nogil; the
tables are 38 KB of static data shared by all calls.
"""

# Performance notes (scanner alone, 1 MB corpora, see benches/bench_pretokenize.py):
#   (filled in below as measured)

from libc.stdint cimport uint8_t, uint32_t
from libcpp.vector cimport vector

from bpecore.pretokenize cimport PAT_NONE, PAT_REGEX, PAT_CL100K, PAT_O200K, PAT_R50K

cdef extern from "_unicode_tables.h":
    const int BPE_UT_SHIFT
    const char* BPE_UT_REGEX_VERSION
    const uint8_t BPE_UT_LU, BPE_UT_LL, BPE_UT_LT, BPE_UT_LM, BPE_UT_LO, BPE_UT_M, BPE_UT_N, BPE_UT_WS
    const uint8_t BPE_UT_ASCII[]
    const uint8_t BPE_UT_STAGE1[]
    const uint8_t BPE_UT_STAGE2[]


#: The patterns tiktoken 0.14 uses, verbatim; pattern_kind() maps exactly these strings to scanners.
CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+"""
    r"""|\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
O200K_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
    r"""\p{N}{1,3}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])
R50K_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""

_SCANNED = {CL100K_PATTERN: PAT_CL100K, O200K_PATTERN: PAT_O200K, R50K_PATTERN: PAT_R50K}

#: regex version the character tables were measured from (scripts/gen_unicode_tables.py).
TABLES_REGEX_VERSION = BPE_UT_REGEX_VERSION.decode("ascii")


cdef enum:
    F_L = BPE_UT_LU | BPE_UT_LL | BPE_UT_LT | BPE_UT_LM | BPE_UT_LO   #: \p{L}
    F_LN = F_L | BPE_UT_N                                              #: \p{L} or \p{N}
    F_LNS = F_LN | BPE_UT_WS                                           #: not [^\s\p{L}\p{N}]
    F_UPPER = BPE_UT_LU | BPE_UT_LT | BPE_UT_LM | BPE_UT_LO | BPE_UT_M  #: o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    F_LOWER = BPE_UT_LL | BPE_UT_LM | BPE_UT_LO | BPE_UT_M             #: o200k [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    F_BOTH = BPE_UT_LM | BPE_UT_LO | BPE_UT_M                          #: in both o200k classes


# ---------------------------------------------------------------------------------------------
# Characters

cdef inline uint8_t cp_flags(uint32_t cp) noexcept nogil:
    """BPE_UT_* flags of code point ``cp`` (< 0x110000)."""
    return BPE_UT_STAGE2[(<uint32_t>BPE_UT_STAGE1[cp >> BPE_UT_SHIFT] << BPE_UT_SHIFT)
                         | (cp & ((1 << BPE_UT_SHIFT) - 1))]


cdef inline uint8_t flags_at(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """Flags of the character starting at byte ``i``; its length in bytes goes to ``width[0]``."""
    cdef uint32_t b = s[i]
    if b < 0x80:
        width[0] = 1
        return BPE_UT_ASCII[b]
    if b < 0xE0:
        width[0] = 2
        return cp_flags(((b & 0x1F) << 6) | (s[i + 1] & 0x3F))
    if b < 0xF0:
        width[0] = 3
        return cp_flags(((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F))
    width[0] = 4
    return cp_flags(((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6)
                    | (s[i + 3] & 0x3F))


cdef inline Py_ssize_t run_any(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, uint8_t mask) noexcept nogil:
    """End of the run of characters from byte ``i`` whose flags share a bit with ``mask``."""
    cdef Py_ssize_t w
    while i < n:
        if s[i] < 0x80:
            if not (BPE_UT_ASCII[s[i]] & mask):
                break
            i += 1
        elif flags_at(s, i, &w) & mask:
            i += w
        else:
            break
    return i


cdef inline Py_ssize_t run_none(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, uint8_t mask) noexcept nogil:
    """End of the run of characters from byte ``i`` whose flags share no bit with ``mask``."""
    cdef Py_ssize_t w
    while i < n:
        if s[i] < 0x80:
            if BPE_UT_ASCII[s[i]] & mask:
                break
            i += 1
        elif flags_at(s, i, &w) & mask:
            break
        else:
            i += w
    return i


cdef inline Py_ssize_t space_run(const uint8_t* s, Py_ssize_t n, Py_ssize_t i,
                                 Py_ssize_t* last, Py_ssize_t* newline_end) noexcept nogil:
    """End of the \\s run from byte ``i`` (which is \\s); ``last[0]`` = start of its last
    character, ``newline_end[0]`` = end of its last \\r or \\n (-1 if none)."""
    cdef Py_ssize_t w
    newline_end[0] = -1
    while i < n:
        if s[i] < 0x80:
            if not (BPE_UT_ASCII[s[i]] & BPE_UT_WS):
                break
            if s[i] == 0x0A or s[i] == 0x0D:
                newline_end[0] = i + 1
            last[0] = i
            i += 1
        elif flags_at(s, i, &w) & BPE_UT_WS:
            last[0] = i
            i += w
        else:
            break
    return i


cdef inline Py_ssize_t newlines_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, bint slash) noexcept nogil:
    """End of the run of \\r and \\n (and '/' if ``slash``) from byte ``i``."""
    while i < n and (s[i] == 0x0A or s[i] == 0x0D or (slash and s[i] == 0x2F)):
        i += 1
    return i


cdef inline Py_ssize_t digits_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """End of ``\\p{N}{1,3}`` from byte ``i`` (which is \\p{N})."""
    cdef Py_ssize_t w
    cdef int k
    for k in range(3):
        if i >= n or not (flags_at(s, i, &w) & BPE_UT_N):
            break
        i += w
    return i


cdef inline Py_ssize_t contraction_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, bint fold) noexcept nogil:
    """End of ``'s 't 'm 'd 'll 've 're`` at byte ``i``, or -1.

    With ``fold`` these match as ``(?i:...)`` does in `regex`: each ASCII letter also matches
    its other case, and 's' also matches U+017F LONG S (simple case folding; no other code point
    folds to one of these letters, checked in tests/bpecore/test_pretokenize.py).
    """
    cdef uint8_t c, c2
    if i + 1 >= n or s[i] != 0x27:
        return -1
    c = s[i + 1]
    if fold:
        if c == 0xC5 and s[i + 2] == 0xBF:
            return i + 3
        c |= 0x20
    if c == 0x73 or c == 0x74 or c == 0x6D or c == 0x64:  # s t m d
        return i + 2
    if i + 2 >= n:
        return -1
    c2 = s[i + 2]
    if fold:
        c2 |= 0x20
    if (c == 0x6C and c2 == 0x6C) or ((c == 0x76 or c == 0x72) and c2 == 0x65):  # ll ve re
        return i + 3
    return -1


# ---------------------------------------------------------------------------------------------
# Scanners: one per pattern; each returns the end of the piece that starts at ``pos`` < n.

cdef Py_ssize_t cl100k_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """CL100K_PATTERN, alternatives tried in order (every character is L, N, \\s or other)."""
    cdef Py_ssize_t w, w2 = 0, e, last = pos, newline
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w), f2 = BPE_UT_WS
    if f & F_L:                                   # [^\r\n\p{L}\p{N}]?+\p{L}++, prefix empty
        return run_any(s, n, pos + w, F_L)
    if f & BPE_UT_N:                              # \p{N}{1,3}+
        return digits_end(s, n, pos)
    if c == 0x27:                                 # '(?i:[sdmt]|ll|ve|re)
        e = contraction_end(s, n, pos, True)
        if e >= 0:
            return e
    if pos + w < n:
        f2 = flags_at(s, pos + w, &w2)
    if (f2 & F_L) and c != 0x0A and c != 0x0D:    # [^\r\n\p{L}\p{N}]?+\p{L}++, one prefix char
        return run_any(s, n, pos + w + w2, F_L)
    if not (f & BPE_UT_WS):                       # ?[^\s\p{L}\p{N}]++[\r\n]*+, no space
        return newlines_end(s, n, run_none(s, n, pos + w, F_LNS), False)
    if c == 0x20 and not (f2 & F_LNS):            # ... with the space
        return newlines_end(s, n, run_none(s, n, pos + 1 + w2, F_LNS), False)
    e = space_run(s, n, pos, &last, &newline)
    if e == n:                                    # \s++$ (a possessive run never stops before a final \n)
        return n
    if newline >= 0:                              # \s*[\r\n]
        return newline
    if last > pos:                                # \s+(?!\S): all but the last \s
        return last
    return e                                      # \s


cdef Py_ssize_t r50k_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """R50K_PATTERN (gpt2), alternatives tried in order."""
    cdef Py_ssize_t w, w2, e, last = pos, newline
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w), f2
    if c == 0x27:                                 # '(?:[sdmt]|ll|ve|re)
        e = contraction_end(s, n, pos, False)
        if e >= 0:
            return e
    if f & F_L:                                   # ?\p{L}++
        return run_any(s, n, pos + w, F_L)
    if f & BPE_UT_N:                              # ?\p{N}++
        return run_any(s, n, pos + w, BPE_UT_N)
    if not (f & BPE_UT_WS):                       # ?[^\s\p{L}\p{N}]++
        return run_none(s, n, pos + w, F_LNS)
    if c == 0x20 and pos + 1 < n:                 # the same three with the space
        f2 = flags_at(s, pos + 1, &w2)
        if f2 & F_L:
            return run_any(s, n, pos + 1 + w2, F_L)
        if f2 & BPE_UT_N:
            return run_any(s, n, pos + 1 + w2, BPE_UT_N)
        if not (f2 & BPE_UT_WS):
            return run_none(s, n, pos + 1 + w2, F_LNS)
    e = space_run(s, n, pos, &last, &newline)
    if e == n:                                    # \s++$
        return n
    if last > pos:                                # \s+(?!\S)
        return last
    return e                                      # \s


cdef inline Py_ssize_t o200k_lower_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t q) noexcept nogil:
    """``[UPPER]*[LOWER]+`` at byte ``q`` with regex's backtracking, or -1.

    The greedy UPPER* run is given back one character at a time until LOWER+ can start: after
    the run that is an Ll character (then LOWER+ runs on), else the last Lm/Lo/M inside the run
    (in both classes; LOWER+ then takes just it, as the run's later characters are Lu/Lt).
    """
    cdef Py_ssize_t i = q, w, both_end = -1
    cdef uint8_t f
    while i < n:
        f = flags_at(s, i, &w)
        if not (f & F_UPPER):
            if f & BPE_UT_LL:
                return run_any(s, n, i + w, F_LOWER)
            break
        i += w
        if f & F_BOTH:
            both_end = i
    return both_end


cdef inline Py_ssize_t o200k_upper_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t q) noexcept nogil:
    """``[UPPER]+[LOWER]*`` at byte ``q``, or -1 (both greedy; nothing after them can fail)."""
    cdef Py_ssize_t i = run_any(s, n, q, F_UPPER)
    if i == q:
        return -1
    return run_any(s, n, i, F_LOWER)


cdef Py_ssize_t o200k_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """O200K_PATTERN, alternatives tried in order; the optional prefix character is tried
    first with it, then without, within each of the two word alternatives."""
    cdef Py_ssize_t w, w2, e, last = pos, newline
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w)
    cdef bint prefix = c != 0x0A and c != 0x0D and not (f & F_LN) and pos + w < n
    e = -1
    if prefix:
        e = o200k_lower_word(s, n, pos + w)
    if e < 0:
        e = o200k_lower_word(s, n, pos)
    if e < 0 and prefix:
        e = o200k_upper_word(s, n, pos + w)
    if e < 0:
        e = o200k_upper_word(s, n, pos)
    if e >= 0:                                    # (?i:'s|'t|'re|'ve|'m|'ll|'d)?
        w2 = contraction_end(s, n, e, True)
        return w2 if w2 >= 0 else e
    if f & BPE_UT_N:                              # \p{N}{1,3}
        return digits_end(s, n, pos)
    if not (f & BPE_UT_WS):                       # ?[^\s\p{L}\p{N}]+[\r\n/]*, no space
        return newlines_end(s, n, run_none(s, n, pos + w, F_LNS), True)
    if c == 0x20 and pos + 1 < n and not (flags_at(s, pos + 1, &w2) & F_LNS):   # ... with it
        return newlines_end(s, n, run_none(s, n, pos + 1 + w2, F_LNS), True)
    e = space_run(s, n, pos, &last, &newline)
    if newline >= 0:                              # \s*[\r\n]+
        return newline
    if e == n or last == pos:                     # \s+(?!\S) at the end; \s+ of one character
        return e
    return last                                   # \s+(?!\S)


cdef Py_ssize_t next_piece_end(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    if kind == PAT_CL100K:
        return cl100k_end(s, n, pos)
    if kind == PAT_O200K:
        return o200k_end(s, n, pos)
    if kind == PAT_R50K:
        return r50k_end(s, n, pos)
    return n


# ---------------------------------------------------------------------------------------------
# Python entry points

def pattern_kind(pattern):
    """The PatternKind that cuts ``pattern``: a hand-written scanner, the regex fallback or none.

    Only the exact strings CL100K_PATTERN, O200K_PATTERN and R50K_PATTERN get a scanner.
    """
    if pattern is None:
        return PAT_NONE
    if isinstance(pattern, str):
        return _SCANNED.get(pattern, PAT_REGEX)
    return PAT_REGEX


cdef int _kind_of(kind_or_pattern) except -1:
    if kind_or_pattern is None or isinstance(kind_or_pattern, str):
        return pattern_kind(kind_or_pattern)
    kind = int(kind_or_pattern)
    if kind not in (PAT_NONE, PAT_CL100K, PAT_O200K, PAT_R50K):
        raise ValueError("pattern kind %r has no scanner; pass the pattern itself" % (kind_or_pattern,))
    return kind


cdef list _scan_ends(int kind, const uint8_t* s, Py_ssize_t n):
    """Byte ends of the pieces of the valid UTF-8 ``s[:n]`` for a scanner kind or PAT_NONE."""
    cdef vector[Py_ssize_t] ends
    cdef Py_ssize_t pos = 0
    with nogil:
        while pos < n:
            pos = next_piece_end(kind, s, n, pos)
            ends.push_back(pos)
    return [e for e in ends]


def piece_ends(kind_or_pattern, const uint8_t[::1] utf8):
    """Byte offsets where the pieces of the UTF-8 text ``utf8`` end (the last one is len(utf8)).

    ``kind_or_pattern`` is a pattern string (any pattern; others are cut by `regex`), None (one
    piece) or a scanner PatternKind. Raises UnicodeDecodeError if ``utf8`` is not valid UTF-8.

    >>> piece_ends(CL100K_PATTERN, "héllo world".encode())
    [6, 12]
    """
    cdef int kind = _kind_of(kind_or_pattern)
    text = bytes(utf8).decode("utf-8")  # the scanners trust their input to be valid UTF-8
    if kind == PAT_REGEX:
        import regex
        return [len(text[:m.end()].encode("utf-8")) if not text.isascii() else m.end()
                for m in regex.finditer(kind_or_pattern, text)]
    if utf8.shape[0] == 0:
        return []
    return _scan_ends(kind, &utf8[0], utf8.shape[0])


def split(kind_or_pattern, str text):
    """The pieces of ``text``, as ``regex.findall(pattern, text)`` returns them.

    ``kind_or_pattern`` is as for piece_ends. Raises UnicodeEncodeError on lone surrogates.

    >>> split(CL100K_PATTERN, "I'm fine,  thanks!\\n")
    ['I', "'m", ' fine', ',', ' ', ' thanks', '!\\n']
    """
    cdef int kind = _kind_of(kind_or_pattern)
    if kind == PAT_REGEX:
        import regex
        return regex.findall(kind_or_pattern, text)
    data = text.encode("utf-8")
    if not data:
        return []
    cdef list ends = _scan_ends(kind, data, len(data))
    if text.isascii():
        return [text[a:b] for a, b in zip([0] + ends, ends)]
    return [data[a:b].decode("utf-8") for a, b in zip([0] + ends, ends)]


def _flags_table():
    """(flags of every code point 0..0x10FFFF, flags of the ASCII fast-path table), as bytes; for tests.

    Bits, low to high: Lu Ll Lt Lm Lo M N \\s (BPE_UT_* in _unicode_tables.h).
    """
    cdef bytearray out = bytearray(0x110000)
    cdef uint32_t cp
    for cp in range(0x110000):
        out[cp] = cp_flags(cp)
    return bytes(out), bytes([BPE_UT_ASCII[cp] for cp in range(128)])


def _count_pieces(int kind, const uint8_t[::1] utf8):
    """Number of pieces of the valid UTF-8 ``utf8`` (scanner kinds only); the scanner alone, for benches."""
    cdef Py_ssize_t pos = 0, n = utf8.shape[0], count = 0
    if kind not in (PAT_CL100K, PAT_O200K, PAT_R50K):
        raise ValueError("pattern kind %r has no scanner" % kind)
    if n == 0:
        return 0
    with nogil:
        while pos < n:
            pos = next_piece_end(kind, &utf8[0], n, pos)
            count += 1
    return count

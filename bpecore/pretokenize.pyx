"""Pre-tokenization: cutting text into the pieces that BPE encodes one by one.

``next_piece_end(kind, s, n, pos)`` returns the end (byte offset) of the piece that starts at
``pos`` in the valid UTF-8 text ``s[:n]``, exactly where ``regex.finditer(pattern, text)`` would
end it. The shipped patterns (CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN) and the open models'
(LLAMA3_PATTERN, QWEN2_PATTERN, TEKKEN_PATTERN: variants of the first two; DEEPSEEK3_PATTERN;
Falcon's chain as one regex, which ``bpecore.hf`` registers) have hand-written scanners over the UTF-8 bytes; character classes come from
``_unicode_tables.h``, measured from the `regex` module itself (scripts/gen_unicode_tables.py).
Any other pattern (PAT_REGEX) is cut by `regex` in ``BacktrackEncoder._pieces``; PAT_NONE makes
the whole text one piece.

Cost: O(n) to cut a whole text of n bytes, average and worst case. The patterns' backtracking
is resolved in one forward pass by remembering positions (last \\r/\\n, last Lm/Lo/M, start of
the last \\s), so a call reads its piece plus one more character, except that o200k may read a
run of capitals up to 3 times (worst input: "\\u0301" + "A" * k + "."). ASCII letter and digit
runs are tested 8 bytes at a time; other characters cost one or two table reads. cl100k and
o200k cut 64 ASCII bytes at a time from their classes as bitmasks (ascii_block, SSE2/AVX2). Memory: no
allocation, nogil; the code point tables are 38.5 KB of static data shared by all calls (69 KB
with the second flag byte, which only the DeepSeek V3 scanner reads).
"""

# Performance decisions that hold (numbers: the steps of docs/perf/pretokenize.md, which this
# file's "Performance notes, step N" also means):
# - Multi-byte decoding is kept out of flags_at(): with it inside, gcc stopped inlining the
#   helpers (the module is large); the flag that inlines everything is not worth a shared
#   setup.py option (3, 4).
# - ASCII letter and digit runs are tested 8 bytes at a time (SWAR range test + ctz): +15-50%
#   (5); runs of spaces are not (no gain, 6).
# - next_piece_ends cuts a block of pieces per call, with small ASCII-word paths in front of the
#   cl100k/o200k scanners rather than inside them; o200k_ascii_word decides in one branch from
#   two class tables (7, 8).
# - o200k_ascii_other cuts digits, punctuation and whitespace runs from one class table before
#   o200k_end; the chain word path -> other path -> o200k_end is written out in both
#   next_piece_end and next_piece_ends, as a shared inline helper stayed out of line (9).
# - cl100k and o200k: where 8 ASCII bytes follow a piece start that is not a digit, ascii_block
#   finds the piece starts of up to 64 bytes with bit operations on their classes (SSE2 or, where
#   the CPU has it, AVX2 compares, chosen at run time), and the scanners take the rest: one mispredicted branch per
#   piece was what they cost on ASCII text (docs/perf/pretokenize.md, "Block scanner").
# - DEEPSEEK3_PATTERN: each character gets one class (DS_*) from one table read (ASCII) or both
#   flag bytes, and deepseek3_end decides on the first two classes, which replaced `regex`'s
#   lookahead per character (docs/perf/pretokenize.md, "DeepSeek V3 scanner").
# - ``piece_horizon`` (the exact operations' bound on how far a cut may look) is as tight as the
#   patterns allow, so a piece is stable as soon as the next character is in
#   (docs/perf/prefix.md, round 2, step 5).
# The measurements behind these decisions: docs/perf/pretokenize.md.

from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.string cimport memcpy, memset
from libcpp.vector cimport vector

from bpecore._classes cimport (
    BPE_UT2_ASCII, BPE_UT2_CJK, BPE_UT2_P, BPE_UT2_S, BPE_UT_ASCII, BPE_UT_LL, BPE_UT_LM, BPE_UT_LO, BPE_UT_LT,
    BPE_UT_LU, BPE_UT_M, BPE_UT_N, BPE_UT_WS, F_BOTH, F_L, F_LN, F_LNS, F_LOWER, F_UPPER, PAT_CL100K,
    PAT_DEEPSEEK3, PAT_FALCON, PAT_LLAMA3, PAT_NONE, PAT_O200K, PAT_QWEN2, PAT_R50K, PAT_REGEX, PAT_STARCODER,
    PAT_TEKKEN, o200k_words,
)
from bpecore._simd cimport (
    BPE_AVX2, BPE_SSE2, BPE_SWAR, BpeAsciiMasks, bpe_classify64, bpe_classify64_avx2, bpe_classify64_scalar,
    bpe_classify64_sse2, bpe_ctz64, bpe_simd_level, bpe_top64,
)

cdef extern from "bpecore/_unicode_tables.h":
    const int BPE_UT_SHIFT
    const char* BPE_UT_REGEX_VERSION
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

#: Open-model patterns as their files write them (Meta's Llama 3 tokenizer and Hugging Face
#: Llama 3 files; Qwen2, 2.5 and 3; Mistral's Tekken). Each has a scanner: the differential tests
#: check it against `regex` on the corpora and generated text.
LLAMA3_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
TEKKEN_PATTERN = "|".join([
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+""",
    r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*""",
    r"""\p{N}""",
    r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
    r"""\s*[\r\n]+""",
    r"""\s+(?!\S)""",
    r"""\s+""",
])

#: DeepSeek V3's three chained Splits (digit groups, then CJK runs, then words; each Isolated,
#: bpecore.hf's _DEEPSEEK_V3_STAGES) as the one regex that cuts as the chain does. A stage
#: re-splits every piece of the one before, alone: so digit groups come first, the CJK runs are
#: cut by the word stage's classes restricted to the CJK set, the rest by its classes without
#: digits and CJK (``\s+(?!\S)`` also ends before a digit or CJK character: the end of its
#: piece), and the text no alternative matches is kept as a piece (Isolated keeps gaps) without
#: crossing into or out of the CJK set. Alternatives that can match at one position keep the word
#: stage's order ([!"#...] before `` ?[\p{P}\p{S}]+``, the letter run before ``\s+``); the others
#: start on disjoint characters, so the common ones go first (English 18% faster in `regex` than
#: in the stage's order).
DEEPSEEK3_CJK = "\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff"
_DEEPSEEK3_CORE = "|".join([
    r"\p{N}{1,3}",
    rf"[^\r\n\p{{L}}\p{{P}}\p{{S}}\p{{N}}{DEEPSEEK3_CJK}]?[[\p{{L}}\p{{M}}]--[{DEEPSEEK3_CJK}]]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+""",
    rf" ?[[\p{{P}}\p{{S}}]--[{DEEPSEEK3_CJK}]]+[\r\n]*",
    r"\s*[\r\n]+",
    rf"\s+(?:(?!\S)|(?=[\p{{N}}{DEEPSEEK3_CJK}]))",
    r"\s+",
    rf"[[{DEEPSEEK3_CJK}]--[\p{{L}}\p{{P}}\p{{S}}]]?[[\p{{L}}\p{{M}}]&&[{DEEPSEEK3_CJK}]]+",
    rf"[[\p{{P}}\p{{S}}]&&[{DEEPSEEK3_CJK}]]+",
])
DEEPSEEK3_PATTERN = (
    f"(?V1){_DEEPSEEK3_CORE}"
    f"|(?:(?!{_DEEPSEEK3_CORE})[^{DEEPSEEK3_CJK}])+|(?:(?!{_DEEPSEEK3_CORE})[{DEEPSEEK3_CJK}])+"
)

_SCANNED = {
    CL100K_PATTERN: PAT_CL100K, O200K_PATTERN: PAT_O200K, R50K_PATTERN: PAT_R50K,
    LLAMA3_PATTERN: PAT_LLAMA3, QWEN2_PATTERN: PAT_QWEN2, TEKKEN_PATTERN: PAT_TEKKEN,
    DEEPSEEK3_PATTERN: PAT_DEEPSEEK3,
}
_SCANNER_KINDS = frozenset(_SCANNED.values())

#: regex version the character tables were measured from (scripts/gen_unicode_tables.py).
TABLES_REGEX_VERSION = BPE_UT_REGEX_VERSION.decode("ascii")


# ---------------------------------------------------------------------------------------------
# Characters

cdef inline uint8_t cp_flags(uint32_t cp) noexcept nogil:
    """BPE_UT_* flags of code point ``cp`` (< 0x110000)."""
    return BPE_UT_STAGE2[(<uint32_t>BPE_UT_STAGE1[cp >> BPE_UT_SHIFT] << BPE_UT_SHIFT)
                         | (cp & ((1 << BPE_UT_SHIFT) - 1))]


cdef uint8_t multibyte_flags(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """Flags of the 2-4 byte character starting at byte ``i``; its length goes to ``width[0]``.

    Not ``inline``: keeping flags_at's ASCII path tiny let gcc inline more of the run helpers
    (Performance notes, step 3).
    """
    cdef uint32_t b = s[i]
    if b < 0xE0:
        width[0] = 2
        return cp_flags(((b & 0x1F) << 6) | (s[i + 1] & 0x3F))
    if b < 0xF0:
        width[0] = 3
        return cp_flags(((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F))
    width[0] = 4
    return cp_flags(((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6)
                    | (s[i + 3] & 0x3F))


cdef inline uint8_t flags_at(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """Flags of the character starting at byte ``i``; its length in bytes goes to ``width[0]``."""
    if s[i] < 0x80:
        width[0] = 1
        return BPE_UT_ASCII[s[i]]
    return multibyte_flags(s, i, width)


cdef inline uint64_t outside_bits(uint64_t x, uint64_t fold, uint64_t lo, uint64_t hi) noexcept nogil:
    """Bit 7 of each of the 8 bytes of ``x`` that is not ASCII or whose ``byte | fold`` is not in lo..hi."""
    cdef uint64_t low7 = (x | fold * 0x0101010101010101ULL) & 0x7F7F7F7F7F7F7F7FULL
    cdef uint64_t ge_lo = low7 + (0x80 - lo) * 0x0101010101010101ULL
    cdef uint64_t gt_hi = low7 + (0x7F - hi) * 0x0101010101010101ULL
    return ~(ge_lo & ~gt_hi & ~x) & 0x8080808080808080ULL


cdef inline Py_ssize_t run_any(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, uint8_t mask) noexcept nogil:
    """End of the run of characters from byte ``i`` whose flags share a bit with ``mask``.

    For the masks whose ASCII members are one byte range (letters, lower, upper, digits), ASCII
    is tested 8 bytes at a time.
    """
    cdef Py_ssize_t w
    cdef uint64_t x, stop, fold = 0, lo = 1, hi = 0
    if BPE_SWAR:
        if mask == F_L:
            fold, lo, hi = 0x20, 0x61, 0x7A
        elif mask == F_LOWER:
            lo, hi = 0x61, 0x7A
        elif mask == F_UPPER:
            lo, hi = 0x41, 0x5A
        elif mask == BPE_UT_N:
            lo, hi = 0x30, 0x39
    while i < n:
        if s[i] < 0x80:
            if lo <= hi and i + 8 <= n:
                memcpy(&x, s + i, 8)
                stop = outside_bits(x, fold, lo, hi)
                if stop == 0:
                    i += 8
                    continue
                i += bpe_ctz64(stop) >> 3
                if s[i] < 0x80:
                    return i
                continue
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


cdef inline Py_ssize_t digits_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, int most) noexcept nogil:
    """End of ``\\p{N}{1,most}`` from byte ``i`` (which is \\p{N})."""
    cdef Py_ssize_t w
    cdef int k
    for k in range(most):
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

cdef inline Py_ssize_t cl100k_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """CL100K_PATTERN, alternatives tried in order (every character is L, N, \\s or other)."""
    cdef Py_ssize_t w, w2 = 0, e, last = pos, newline
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w), f2 = BPE_UT_WS
    if f & F_L:                                   # [^\r\n\p{L}\p{N}]?+\p{L}++, prefix empty
        return run_any(s, n, pos + w, F_L)
    if f & BPE_UT_N:                              # \p{N}{1,3}+
        return digits_end(s, n, pos, 3)
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


cdef inline Py_ssize_t r50k_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
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


cdef inline Py_ssize_t o200k_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t q, Py_ssize_t* upper_end) noexcept nogil:
    """``[UPPER]*[LOWER]+`` at byte ``q`` with regex's backtracking, or -1; ``upper_end[0]`` = end
    of the UPPER run from ``q``.

    The greedy UPPER* run is given back one character at a time until LOWER+ can start: after
    the run that is an Ll character (then LOWER+ runs on), else the last Lm/Lo/M inside the run
    (in both classes; LOWER+ then takes just it, as the run's later characters are Lu/Lt).
    When this fails, ``[UPPER]+[LOWER]*`` at ``q`` ends at ``upper_end[0]`` if that is > q: the
    character after the run is neither UPPER nor Ll, so not LOWER either.
    """
    cdef Py_ssize_t i = q, w, both_end = -1
    cdef uint8_t f
    while i < n:
        f = flags_at(s, i, &w)
        if not (f & F_UPPER):
            if f & BPE_UT_LL:
                upper_end[0] = i
                return run_any(s, n, i + w, F_LOWER)
            break
        i += w
        if f & F_BOTH:
            both_end = i
    upper_end[0] = i
    return both_end


cdef inline Py_ssize_t o200k_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """O200K_PATTERN, alternatives tried in order; the optional prefix character is tried
    first with it, then without, within each of the two word alternatives."""
    cdef Py_ssize_t w, w2, e = -1, last = pos, newline, upper1 = 0, upper0
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w)
    cdef bint prefix = c != 0x0A and c != 0x0D and not (f & F_LN) and pos + w < n
    if prefix:
        e = o200k_word(s, n, pos + w, &upper1)
    if e < 0:
        e = o200k_word(s, n, pos, &upper0)
        if e < 0:                                 # second word alternative: UPPER+ LOWER*
            if prefix and upper1 > pos + w:
                e = upper1
            elif upper0 > pos:
                e = upper0
    if e >= 0:                                    # (?i:'s|'t|'re|'ve|'m|'ll|'d)?
        w2 = contraction_end(s, n, e, True)
        return w2 if w2 >= 0 else e
    if f & BPE_UT_N:                              # \p{N}{1,3}
        return digits_end(s, n, pos, 3)
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


cdef Py_ssize_t llama3_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos, int most) noexcept nogil:
    """LLAMA3_PATTERN (``most`` = 3) and QWEN2_PATTERN (1), alternatives tried in order. Up to the
    whitespace they cut as cl100k_end does (without possessive quantifiers, nothing after them
    could make `regex` backtrack into them); whitespace as o200k_end (no ``\\s++$``)."""
    cdef Py_ssize_t w, w2 = 0, e, last = pos, newline
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w), f2 = BPE_UT_WS
    if f & F_L:                                   # [^\r\n\p{L}\p{N}]?\p{L}+, prefix empty
        return run_any(s, n, pos + w, F_L)
    if f & BPE_UT_N:                              # \p{N}{1,most}
        return digits_end(s, n, pos, most)
    if c == 0x27:                                 # (?i:'s|'t|'re|'ve|'m|'ll|'d)
        e = contraction_end(s, n, pos, True)
        if e >= 0:
            return e
    if pos + w < n:
        f2 = flags_at(s, pos + w, &w2)
    if (f2 & F_L) and c != 0x0A and c != 0x0D:    # one prefix character
        return run_any(s, n, pos + w + w2, F_L)
    if not (f & BPE_UT_WS):                       # ?[^\s\p{L}\p{N}]+[\r\n]*, no space
        return newlines_end(s, n, run_none(s, n, pos + w, F_LNS), False)
    if c == 0x20 and not (f2 & F_LNS):            # ... with the space
        return newlines_end(s, n, run_none(s, n, pos + 1 + w2, F_LNS), False)
    e = space_run(s, n, pos, &last, &newline)
    if newline >= 0:                              # \s*[\r\n]+
        return newline
    if e == n or last == pos:                     # \s+(?!\S) at the end; \s+ of one character
        return e
    return last                                   # \s+(?!\S)


cdef Py_ssize_t tekken_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """TEKKEN_PATTERN: o200k_end without the contraction suffix, with single digits."""
    cdef Py_ssize_t w, w2, e = -1, last = pos, newline, upper1 = 0, upper0
    cdef uint8_t c = s[pos]
    cdef uint8_t f = flags_at(s, pos, &w)
    cdef bint prefix = c != 0x0A and c != 0x0D and not (f & F_LN) and pos + w < n
    if prefix:
        e = o200k_word(s, n, pos + w, &upper1)
    if e < 0:
        e = o200k_word(s, n, pos, &upper0)
        if e < 0:                                 # second word alternative: UPPER+ LOWER*
            if prefix and upper1 > pos + w:
                e = upper1
            elif upper0 > pos:
                e = upper0
    if e >= 0:
        return e
    if f & BPE_UT_N:                              # \p{N}
        return pos + w
    if not (f & BPE_UT_WS):                       # ?[^\s\p{L}\p{N}]+[\r\n/]*, no space
        return newlines_end(s, n, run_none(s, n, pos + w, F_LNS), True)
    if c == 0x20 and pos + 1 < n and not (flags_at(s, pos + 1, &w2) & F_LNS):   # ... with it
        return newlines_end(s, n, run_none(s, n, pos + 1 + w2, F_LNS), True)
    e = space_run(s, n, pos, &last, &newline)
    if newline >= 0:                              # \s*[\r\n]+
        return newline
    if e == n or last == pos:
        return e
    return last


cdef inline Py_ssize_t cl100k_ascii_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """cl100k_end for the commonest pieces, ASCII words: an ASCII letter, or an ASCII character
    that is not a letter, digit, ', \\r or \\n then an ASCII letter; then \\p{L}++. -1 for any
    other start (Performance notes, step 8). One call of run_any, so gcc inlines it once (step 10)."""
    cdef uint32_t c = s[pos]
    cdef Py_ssize_t i = pos + 1
    if c >= 0x80:
        return -1
    if not (BPE_UT_ASCII[c] & F_L):
        if (BPE_UT_ASCII[c] & BPE_UT_N) or c == 0x27 or c == 0x0A or c == 0x0D or i >= n:
            return -1
        c = s[i]
        if c >= 0x80 or not (BPE_UT_ASCII[c] & F_L):
            return -1
        i += 1
    return run_any(s, n, i, F_L)


cdef uint8_t O200K_CLASS[256]    #: 0 other ASCII ([^\\r\\n\\p{L}\\p{N}]), 1 [a-z], 2 [A-Z], 3 anything else
cdef uint8_t O200K_WORD[64]      #: by the classes of 3 bytes: 1 + index of the first [a-z], or 0
cdef int _init_o200k_tables() except -1:
    cdef int c, k, c0, c1, c2
    for c in range(256):
        if c >= 0x80 or (BPE_UT_ASCII[c] & BPE_UT_N) or c == 0x0A or c == 0x0D:
            O200K_CLASS[c] = 3
        elif 0x61 <= c <= 0x7A:
            O200K_CLASS[c] = 1
        elif 0x41 <= c <= 0x5A:
            O200K_CLASS[c] = 2
        elif BPE_UT_ASCII[c] & F_L:
            O200K_CLASS[c] = 3
        else:
            O200K_CLASS[c] = 0
    for k in range(64):
        c0, c1, c2 = k & 3, (k >> 2) & 3, k >> 4
        O200K_WORD[k] = 0
        if c0 == 1:
            O200K_WORD[k] = 1
        elif (c0 == 2 or c0 == 0) and c1 == 1:
            O200K_WORD[k] = 2
        elif c0 == 0 and c1 == 2 and c2 == 1:
            O200K_WORD[k] = 3
    return 0
_init_o200k_tables()


cdef inline Py_ssize_t o200k_ascii_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """o200k_end for the commonest pieces, ASCII words: an optional ASCII character that is not a
    letter, digit, \\r or \\n, then [a-z] or [A-Z][a-z], which the first alternative matches
    without backtracking: then LOWER+ and the optional contraction. -1 for any other start. The
    three bytes are classified by table lookups so the decision is one branch (Performance
    notes, step 8)."""
    cdef Py_ssize_t e, i
    cdef uint8_t start
    if pos + 2 >= n:
        return -1
    start = O200K_WORD[O200K_CLASS[s[pos]] | (O200K_CLASS[s[pos + 1]] << 2) | (O200K_CLASS[s[pos + 2]] << 4)]
    if start == 0:
        return -1
    e = run_any(s, n, pos + start, F_LOWER)
    i = contraction_end(s, n, e, True)
    return i if i >= 0 else e


cdef enum:
    K_PUNCT = 0     #: ASCII [^\s\p{L}\p{N}]
    K_LOWER = 1     #: [a-z]
    K_UPPER = 2     #: [A-Z]
    K_DIGIT = 3     #: [0-9]
    K_SPACE = 4     #: ASCII \s but \r and \n
    K_NEWLINE = 5   #: \r, \n
    K_WIDE = 6      #: a byte of a multi-byte character


cdef uint8_t O200K_KIND[256]
cdef int _init_o200k_kinds() except -1:
    cdef int c
    cdef uint8_t f
    for c in range(256):
        f = BPE_UT_ASCII[c] if c < 0x80 else 0
        if c >= 0x80:
            O200K_KIND[c] = K_WIDE
        elif c == 0x0A or c == 0x0D:
            O200K_KIND[c] = K_NEWLINE
        elif f & BPE_UT_WS:
            O200K_KIND[c] = K_SPACE
        elif f & BPE_UT_N:
            O200K_KIND[c] = K_DIGIT
        elif f & BPE_UT_LL:
            O200K_KIND[c] = K_LOWER
        elif f & BPE_UT_LU:
            O200K_KIND[c] = K_UPPER
        else:
            O200K_KIND[c] = K_PUNCT
    return 0
_init_o200k_kinds()


cdef inline Py_ssize_t ascii_digits_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """End of ``\\p{N}{1,3}`` from the ASCII digit at ``pos``; -1 when a byte over 0x7F (maybe
    another \\p{N}) comes before the third digit."""
    cdef Py_ssize_t i = pos + 1
    while i < n and i < pos + 3:
        if O200K_KIND[s[i]] != K_DIGIT:
            return -1 if s[i] >= 0x80 else i
        i += 1
    return i


cdef inline Py_ssize_t o200k_ascii_other(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """o200k_end for the commonest pieces after words, when every character that decides them is
    ASCII: digits (\\p{N}{1,3}), punctuation runs ( ?[^\\s\\p{L}\\p{N}]+[\\r\\n/]*) and
    whitespace runs (\\s*[\\r\\n]+, \\s+(?!\\S), \\s+). -1 when a byte it must classify
    belongs to a multi-byte character, or when a punctuation or space character is followed by a
    letter (a word alternative may take it as its prefix). Performance notes, step 9."""
    cdef uint8_t k0 = O200K_KIND[s[pos]], k1 = K_NEWLINE, k
    cdef Py_ssize_t i = pos + 1, last = pos, newline = -1
    if k0 == K_DIGIT:
        return ascii_digits_end(s, n, pos)
    if k0 == K_WIDE or k0 == K_LOWER or k0 == K_UPPER:
        return -1
    if i < n:
        k1 = O200K_KIND[s[i]]
    if k0 != K_NEWLINE and (k1 == K_LOWER or k1 == K_UPPER or k1 == K_WIDE):
        return -1
    if k0 == K_PUNCT or (s[pos] == 0x20 and k1 == K_PUNCT):
        if k0 != K_PUNCT:
            i += 1
        while i < n and O200K_KIND[s[i]] == K_PUNCT:
            i += 1
        if i < n and O200K_KIND[s[i]] == K_WIDE:
            return -1
        return newlines_end(s, n, i, True)
    i = pos
    while i < n:
        k = O200K_KIND[s[i]]
        if k == K_NEWLINE:
            newline = i + 1
        elif k != K_SPACE:
            if k == K_WIDE:
                return -1
            break
        last = i
        i += 1
    if newline >= 0:
        return newline
    if i == n or last == pos:
        return i
    return last


cdef inline Py_ssize_t cl100k_ascii_other(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """cl100k_end for the pieces cl100k_ascii_word leaves, when every character that decides them
    is ASCII: contractions, digits (\\p{N}{1,3}+), punctuation runs ( ?[^\\s\\p{L}\\p{N}]++[\\r\\n]*+)
    and whitespace runs (\\s++$, \\s*[\\r\\n], \\s+(?!\\S), \\s+), classified by O200K_KIND. -1
    when a byte it must classify belongs to a multi-byte character, or when a punctuation or
    space character is followed by a letter. o200k_ascii_other's twin (Performance notes, step 10)."""
    cdef uint8_t k0 = O200K_KIND[s[pos]], k1 = K_NEWLINE, k
    cdef Py_ssize_t i = pos + 1, last = pos, newline = -1
    if k0 == K_DIGIT:
        return ascii_digits_end(s, n, pos)
    if k0 == K_WIDE or k0 == K_LOWER or k0 == K_UPPER:
        return -1
    if s[pos] == 0x27:
        i = contraction_end(s, n, pos, True)
        if i >= 0:
            return i
        i = pos + 1
    if i < n:
        k1 = O200K_KIND[s[i]]
    if k0 != K_NEWLINE and (k1 == K_LOWER or k1 == K_UPPER or k1 == K_WIDE):
        return -1
    if k0 == K_PUNCT or (s[pos] == 0x20 and k1 == K_PUNCT):
        if k0 != K_PUNCT:
            i += 1
        while i < n and O200K_KIND[s[i]] == K_PUNCT:
            i += 1
        if i < n and O200K_KIND[s[i]] == K_WIDE:
            return -1
        return newlines_end(s, n, i, False)
    i = pos
    while i < n:
        k = O200K_KIND[s[i]]
        if k == K_NEWLINE:
            newline = i + 1
        elif k != K_SPACE:
            if k == K_WIDE:
                return -1
            break
        last = i
        i += 1
    if i == n:
        return n
    if newline >= 0:
        return newline
    if last > pos:
        return last
    return i


# The open-model kinds (Llama 3's and Qwen2's strings, Tekken) have their own copies of the ASCII
# fast paths and their own batch loop: sharing cl100k's and o200k's made gcc stop inlining
# o200k_ascii_other into next_piece_ends (o200k code count +1.2% Ir; docs/perf/pretokenize.md).

cdef inline Py_ssize_t llama3_ascii_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """cl100k_ascii_word for LLAMA3_PATTERN and QWEN2_PATTERN (their word alternatives are cl100k's)."""
    cdef uint32_t c = s[pos]
    if c >= 0x80:
        return -1
    if BPE_UT_ASCII[c] & F_L:
        return run_any(s, n, pos + 1, F_L)
    if (BPE_UT_ASCII[c] & BPE_UT_N) or c == 0x27 or c == 0x0A or c == 0x0D or pos + 1 >= n:
        return -1
    c = s[pos + 1]
    if c < 0x80 and (BPE_UT_ASCII[c] & F_L):
        return run_any(s, n, pos + 2, F_L)
    return -1


cdef inline Py_ssize_t tekken_ascii_piece(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """o200k_ascii_word then o200k_ascii_other for TEKKEN_PATTERN: words without the contraction
    suffix, single digits; -1 where those would give up."""
    cdef Py_ssize_t i = pos + 1, last = pos, newline = -1
    cdef uint8_t start, k0, k1 = K_NEWLINE, k
    if pos + 2 < n:
        start = O200K_WORD[O200K_CLASS[s[pos]] | (O200K_CLASS[s[pos + 1]] << 2) | (O200K_CLASS[s[pos + 2]] << 4)]
        if start != 0:
            return run_any(s, n, pos + start, F_LOWER)
    k0 = O200K_KIND[s[pos]]
    if k0 == K_DIGIT:
        return pos + 1
    if k0 == K_WIDE or k0 == K_LOWER or k0 == K_UPPER:
        return -1
    if i < n:
        k1 = O200K_KIND[s[i]]
    if k0 != K_NEWLINE and (k1 == K_LOWER or k1 == K_UPPER or k1 == K_WIDE):
        return -1
    if k0 == K_PUNCT or (s[pos] == 0x20 and k1 == K_PUNCT):
        if k0 != K_PUNCT:
            i += 1
        while i < n and O200K_KIND[s[i]] == K_PUNCT:
            i += 1
        if i < n and O200K_KIND[s[i]] == K_WIDE:
            return -1
        return newlines_end(s, n, i, True)
    i = pos
    while i < n:
        k = O200K_KIND[s[i]]
        if k == K_NEWLINE:
            newline = i + 1
        elif k != K_SPACE:
            if k == K_WIDE:
                return -1
            break
        last = i
        i += 1
    if newline >= 0:
        return newline
    if i == n or last == pos:
        return i
    return last


# DEEPSEEK3_PATTERN. Every character falls in one class (DS_*), from one ASCII table lookup or
# the two flag bytes of a multi-byte character; the scanner decides on the classes of the first
# two characters as the regex's alternatives would, then runs to the end of a class.

cdef extern from "bpecore/_unicode_tables.h":
    const uint8_t BPE_UT2_STAGE1[]
    const uint8_t BPE_UT2_STAGE2[]


cdef uint8_t DS_ASCII[128]
cdef int _init_deepseek_classes() except -1:
    cdef int c
    for c in range(128):
        if c == 0x0A or c == 0x0D:
            DS_ASCII[c] = DS_NEWLINE
        elif BPE_UT_ASCII[c] & BPE_UT_WS:
            DS_ASCII[c] = DS_SPACE
        elif BPE_UT_ASCII[c] & BPE_UT_N:
            DS_ASCII[c] = DS_DIGIT
        elif BPE_UT_ASCII[c] & (F_L | BPE_UT_M):
            DS_ASCII[c] = DS_WORD
        elif BPE_UT2_ASCII[c] & (BPE_UT2_P | BPE_UT2_S):
            DS_ASCII[c] = DS_PUNCT
        else:
            DS_ASCII[c] = DS_OTHER
    return 0
_init_deepseek_classes()


cdef inline uint8_t cp_flags2(uint32_t cp) noexcept nogil:
    """BPE_UT2_* flags of code point ``cp`` (< 0x110000)."""
    return BPE_UT2_STAGE2[(<uint32_t>BPE_UT2_STAGE1[cp >> BPE_UT_SHIFT] << BPE_UT_SHIFT)
                          | (cp & ((1 << BPE_UT_SHIFT) - 1))]


cdef uint8_t deepseek_wide_class(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """DS_* class of the 2-4 byte character at byte ``i``; its length goes to ``width[0]``."""
    cdef uint32_t cp, b = s[i]
    if b < 0xE0:
        width[0] = 2
        cp = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
    elif b < 0xF0:
        width[0] = 3
        cp = ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
    else:
        width[0] = 4
        cp = ((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F)
    cdef uint8_t f = cp_flags(cp), g = cp_flags2(cp)
    if f & BPE_UT_N:
        return DS_DIGIT
    if f & (F_L | BPE_UT_M):
        return DS_CJK_WORD if g & BPE_UT2_CJK else DS_WORD
    if f & BPE_UT_WS:
        return DS_SPACE
    if g & (BPE_UT2_P | BPE_UT2_S):
        return DS_CJK_PUNCT if g & BPE_UT2_CJK else DS_PUNCT
    return DS_CJK_OTHER if g & BPE_UT2_CJK else DS_OTHER


cdef inline uint8_t deepseek_class(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """DS_* class of the character at byte ``i`` (DS_END at n); its length goes to ``width[0]``."""
    if i >= n:
        width[0] = 0
        return DS_END
    if s[i] < 0x80:
        width[0] = 1
        return DS_ASCII[s[i]]
    return deepseek_wide_class(s, i, width)


cdef uint8_t deepseek_char_class(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    return deepseek_class(s, n, i, width)


cdef inline bint deepseek_cjk(uint8_t k) noexcept nogil:
    return k == DS_CJK_WORD or k == DS_CJK_PUNCT or k == DS_CJK_OTHER


cdef inline Py_ssize_t deepseek_run(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, uint8_t k) noexcept nogil:
    """End of the run of class-``k`` characters from byte ``i``; DS_WORD tests ASCII letters 8
    bytes at a time."""
    cdef Py_ssize_t w
    cdef uint64_t x, stop
    while i < n:
        if s[i] < 0x80:
            if k == DS_WORD and BPE_SWAR and i + 8 <= n:
                memcpy(&x, s + i, 8)
                stop = outside_bits(x, 0x20, 0x61, 0x7A)
                if stop == 0:
                    i += 8
                    continue
                i += bpe_ctz64(stop) >> 3
                if s[i] >= 0x80:
                    continue
            if DS_ASCII[s[i]] != k:
                break
            i += 1
        elif deepseek_wide_class(s, i, &w) == k:
            i += w
        else:
            break
    return i


cdef inline Py_ssize_t ascii_letters_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """End of the run of [A-Za-z] from byte ``i``."""
    while i < n and <uint32_t>((s[i] | 0x20) - 0x61) < 26:
        i += 1
    return i


cdef Py_ssize_t deepseek3_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """DEEPSEEK3_PATTERN, alternatives tried in order (by the classes of the first two characters)."""
    cdef Py_ssize_t w0, w1, w, e, last = pos, newline
    cdef uint8_t k0 = deepseek_class(s, n, pos, &w0), k1, k
    if k0 == DS_DIGIT:                            # \p{N}{1,3}
        return digits_end(s, n, pos, 3)
    if k0 == DS_WORD:                             # [^\r\n\p{L}\p{P}\p{S}\p{N}CJK]?[[\p{L}\p{M}]--CJK]+
        return deepseek_run(s, n, pos + w0, DS_WORD)   # (a mark as the prefix: the same run)
    k1 = deepseek_class(s, n, pos + w0, &w1)
    if (k0 == DS_SPACE or k0 == DS_OTHER) and k1 == DS_WORD:     # ... with the prefix
        return deepseek_run(s, n, pos + w0 + w1, DS_WORD)
    if k0 == DS_PUNCT:
        if s[pos] < 0x80 and pos + 1 < n and <uint32_t>((s[pos + 1] | 0x20) - 0x61) < 26:
            return ascii_letters_end(s, n, pos + 2)   # [!"#...][A-Za-z]+: every ASCII \p{P}\p{S}
        return newlines_end(s, n, deepseek_run(s, n, pos + w0, DS_PUNCT), False)   # ?[PS--CJK]+[\r\n]*
    if s[pos] == 0x20 and k1 == DS_PUNCT:         # ... with the space
        return newlines_end(s, n, deepseek_run(s, n, pos + 1 + w1, DS_PUNCT), False)
    if k0 == DS_SPACE or k0 == DS_NEWLINE:
        e = space_run(s, n, pos, &last, &newline)
        if newline >= 0:                          # \s*[\r\n]+
            return newline
        if e == n:                                # \s+(?!\S) at the end
            return e
        k = deepseek_class(s, n, e, &w)
        if k == DS_DIGIT or deepseek_cjk(k):      # \s+(?=[\p{N}CJK])
            return e
        return last if last > pos else e         # \s+(?!\S); \s+ of one character
    if k0 == DS_CJK_WORD:                         # [[CJK]--[LPS]]?[[\p{L}\p{M}]&&CJK]+
        return deepseek_run(s, n, pos + w0, DS_CJK_WORD)
    if k0 == DS_CJK_OTHER and k1 == DS_CJK_WORD:
        return deepseek_run(s, n, pos + w0 + w1, DS_CJK_WORD)
    if k0 == DS_CJK_PUNCT:                        # [[\p{P}\p{S}]&&CJK]+
        return deepseek_run(s, n, pos + w0, DS_CJK_PUNCT)
    # (?:(?!CORE)[^CJK])+ or (?:(?!CORE)[CJK])+: k0 is DS_OTHER or DS_CJK_OTHER, where no
    # alternative matches; the piece runs on while the next character is of k0's class and the
    # one after it does not make it a prefix (DS_WORD after DS_OTHER, DS_CJK_WORD after DS_CJK_OTHER).
    e = pos + w0
    while k1 == k0:
        k = deepseek_class(s, n, e + w1, &w)
        if k == (DS_WORD if k0 == DS_OTHER else DS_CJK_WORD):
            break
        e += w1
        k1 = k
        w1 = w
    return e


cdef inline Py_ssize_t deepseek3_ascii_piece(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """deepseek3_end for the commonest English pieces, a word after at most one space or other
    ASCII character, when the bytes that decide it are ASCII; -1 otherwise."""
    cdef uint32_t c = s[pos], k
    if c >= 0x80:
        return -1
    k = DS_ASCII[c]
    if k == DS_WORD:
        return deepseek_run(s, n, pos + 1, DS_WORD)
    if ((k == DS_SPACE or k == DS_OTHER) and pos + 1 < n and s[pos + 1] < 0x80
            and DS_ASCII[s[pos + 1]] == DS_WORD):
        return deepseek_run(s, n, pos + 2, DS_WORD)
    return -1


cdef Py_ssize_t deepseek3_horizon(const uint8_t* s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) noexcept nogil:
    """piece_horizon for PAT_DEEPSEEK3. The alternatives tried at ``start`` read the first two
    characters, the piece and one character past it, except: the whitespace alternatives read the
    whole \\s run from start and the character after it (its class: \\p{N} or CJK); a piece of
    the two catch-all alternatives (and a prefix + word of the same start classes) ends where the
    next character is of another class or makes a prefix with the one after it."""
    cdef Py_ssize_t w0, w, p, h = end + 1
    cdef uint8_t k0 = deepseek_class(s, n, start, &w0)
    if k0 == DS_SPACE or k0 == DS_NEWLINE:
        p = start
        while p < n and (flags_at(s, p, &w) & BPE_UT_WS):
            p += w
        if p + 1 > h:
            h = p + 1
    elif (k0 == DS_OTHER or k0 == DS_CJK_OTHER) and end < n:
        deepseek_class(s, n, end, &w)
        if end + w + 1 > h:
            h = end + w + 1
    return h


# Falcon's chain (Punctuation, ByteLevel with GPT-2's regex, Digits, groups of three digits) as
# bpecore.hf's one regex: `` ?\p{L}+``, a run of `tokenizers`' punctuation, ``[0-9]{1,3}``,
# `` ?[^\P{N}0-9]+``, `` ?[^\s\p{L}\p{N}PUNCT]+``, ``\s+(?:(?!\S)|(?=[PUNCT]))``, ``\s+``. Every
# character falls in one class (FK_*): letters, numerals and whitespace are never punctuation, so
# the first character decides, with the second after a space. The punctuation set is the
# caller's (`tokenizers`' tables, not `regex`'s \p{P}): ``register_falcon`` gives it and maps
# the pattern to PAT_FALCON. Only counting and encoding use this kind: the exact operations'
# shapes and horizons (appender, interval) do not know it, so ``piece_horizon`` answers ``n``.

cdef enum:
    FK_OTHER = 0    #: [^\s\p{L}\p{N}PUNCT]
    FK_L = 1        #: \p{L}
    FK_DIGIT = 2    #: [0-9]
    FK_NUM = 3      #: \p{N} but [0-9]
    FK_PUNCT = 4    #: the registered punctuation set
    FK_WS = 5       #: \s

cdef uint8_t FALCON_ASCII[128]
cdef vector[uint32_t] FALCON_PUNCT   #: sorted, disjoint [lo, hi] pairs of non-ASCII punctuation


cdef bint falcon_punct(uint32_t cp) noexcept nogil:
    """Whether the non-ASCII code point ``cp`` is in the registered punctuation set."""
    cdef Py_ssize_t lo = 0, hi = <Py_ssize_t>(FALCON_PUNCT.size() >> 1), mid
    while lo < hi:
        mid = (lo + hi) >> 1
        if FALCON_PUNCT[2 * mid + 1] < cp:
            lo = mid + 1
        else:
            hi = mid
    return lo < <Py_ssize_t>(FALCON_PUNCT.size() >> 1) and FALCON_PUNCT[2 * lo] <= cp


cdef uint8_t falcon_wide_class(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """FK_* class of the 2-4 byte character at byte ``i``; its length goes to ``width[0]``."""
    cdef uint32_t cp, b = s[i]
    if b < 0xE0:
        width[0] = 2
        cp = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
    elif b < 0xF0:
        width[0] = 3
        cp = ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
    else:
        width[0] = 4
        cp = ((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F)
    cdef uint8_t f = cp_flags(cp)
    if f & F_L:
        return FK_L
    if f & BPE_UT_N:
        return FK_NUM
    if f & BPE_UT_WS:
        return FK_WS
    return FK_PUNCT if falcon_punct(cp) else FK_OTHER


cdef inline uint8_t falcon_class(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    if s[i] < 0x80:
        width[0] = 1
        return FALCON_ASCII[s[i]]
    return falcon_wide_class(s, i, width)


cdef inline Py_ssize_t falcon_run(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, uint8_t k) noexcept nogil:
    """End of the run of class-``k`` characters from byte ``i``."""
    cdef Py_ssize_t w
    while i < n and falcon_class(s, i, &w) == k:
        i += w
    return i


cdef Py_ssize_t falcon_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """The piece of Falcon's one regex at ``pos``, alternatives decided by the first character's
    class (and the second's after a space)."""
    cdef Py_ssize_t w, w1, i, last = pos
    cdef uint8_t k = falcon_class(s, pos, &w)
    if k == FK_L:                                 # ?\p{L}+, no space
        return run_any(s, n, pos + w, F_L)
    if k == FK_DIGIT:                             # [0-9]{1,3}
        i = pos + 1
        while i < n and i < pos + 3 and 0x30 <= s[i] <= 0x39:
            i += 1
        return i
    if k != FK_WS:                                # a punctuation, numeral or other run
        return falcon_run(s, n, pos + w, k)
    if s[pos] == 0x20 and pos + 1 < n:            # a space before a letter, numeral or other
        k = falcon_class(s, pos + 1, &w1)
        if k == FK_L:
            return run_any(s, n, pos + 1 + w1, F_L)
        if k == FK_NUM or k == FK_OTHER:
            return falcon_run(s, n, pos + 1 + w1, k)
    i = pos                                       # \s+ run
    while i < n and falcon_class(s, i, &w) == FK_WS:
        last = i
        i += w
    if i == n or falcon_class(s, i, &w) == FK_PUNCT or last == pos:
        return i                                  # (?!\S) at the end; (?=[PUNCT]); \s+ of one
    return last                                   # \s+(?!\S)


cdef inline Py_ssize_t falcon_ascii_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """falcon_end for its commonest pieces: an ASCII letter, or a space then an ASCII letter,
    then the letter run; -1 for any other start."""
    cdef uint8_t c = s[pos]
    if c < 0x80 and FALCON_ASCII[c] == FK_L:
        return run_any(s, n, pos + 1, F_L)
    if c == 0x20 and pos + 1 < n and s[pos + 1] < 0x80 and FALCON_ASCII[s[pos + 1]] == FK_L:
        return run_any(s, n, pos + 2, F_L)
    return -1


def register_falcon(str pattern, ranges):
    """Map ``pattern`` (Falcon's one regex, bpecore.hf) to PAT_FALCON, its punctuation class being
    the inclusive code point ``ranges`` (sorted, disjoint): a BacktrackEncoder of ``pattern``
    then cuts with falcon_end. Returns PAT_FALCON."""
    global _SCANNER_KINDS, FALCON_PUNCT
    cdef uint32_t c
    cdef vector[uint32_t] wide
    cdef object a, b
    for a, b in ranges:
        if b >= 0x80:
            wide.push_back(max(a, 0x80))
            wide.push_back(b)
    for c in range(128):
        f = BPE_UT_ASCII[c]
        if f & F_L:
            FALCON_ASCII[c] = FK_L
        elif 0x30 <= c <= 0x39:
            FALCON_ASCII[c] = FK_DIGIT
        elif f & BPE_UT_N:
            FALCON_ASCII[c] = FK_NUM
        elif f & BPE_UT_WS:
            FALCON_ASCII[c] = FK_WS
        elif any(a <= c <= b for a, b in ranges):
            FALCON_ASCII[c] = FK_PUNCT
        else:
            FALCON_ASCII[c] = FK_OTHER
    FALCON_PUNCT = wide
    _SCANNED[pattern] = PAT_FALCON
    _SCANNER_KINDS = frozenset(_SCANNED.values())
    return PAT_FALCON


# StarCoder2's chain (Digits one by one, then ByteLevel with GPT-2's regex) as bpecore.hf's one
# regex: `` ?\p{L}+``, one DIGIT, ``'(?:s|t|re|ve|m|ll|d)``, `` ?[^\s\p{L}DIGIT]+``,
# ``\s+(?:(?!\S)|(?=DIGIT))``, ``\s+``. DIGIT is \p{N} and the caller's extra ranges (`tokenizers`'
# numeric class holds code points `regex`'s tables leave unassigned); ``register_starcoder`` gives
# them and maps the pattern to PAT_STARCODER. r50k's classes otherwise: the first character
# decides, the second after a space. As for PAT_FALCON, only counting and encoding use this kind
# (``piece_horizon`` answers ``n``).

cdef vector[uint32_t] STARCODER_DIGITS   #: [lo, hi] pairs of DIGIT beyond \p{N}; none \p{L} or \s


cdef uint8_t starcoder_wide_flags(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    """Flags of the 2-4 byte character at byte ``i``, BPE_UT_N for an extra DIGIT; its length goes
    to ``width[0]``."""
    cdef uint32_t cp, b = s[i]
    cdef size_t j
    if b < 0xE0:
        width[0] = 2
        cp = ((b & 0x1F) << 6) | (s[i + 1] & 0x3F)
    elif b < 0xF0:
        width[0] = 3
        cp = ((b & 0x0F) << 12) | ((s[i + 1] & 0x3F) << 6) | (s[i + 2] & 0x3F)
    else:
        width[0] = 4
        cp = ((b & 0x07) << 18) | ((s[i + 1] & 0x3F) << 12) | ((s[i + 2] & 0x3F) << 6) | (s[i + 3] & 0x3F)
    cdef uint8_t f = cp_flags(cp)
    if not (f & F_LNS):
        j = 0
        while j < STARCODER_DIGITS.size():
            if STARCODER_DIGITS[j] <= cp <= STARCODER_DIGITS[j + 1]:
                return BPE_UT_N
            j += 2
    return f


cdef inline uint8_t starcoder_flags(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    if s[i] < 0x80:
        width[0] = 1
        return BPE_UT_ASCII[s[i]]
    return starcoder_wide_flags(s, i, width)


cdef inline Py_ssize_t starcoder_other_run(const uint8_t* s, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    """End of the run of ``[^\\s\\p{L}DIGIT]`` from byte ``i``."""
    cdef Py_ssize_t w
    while i < n:
        if s[i] < 0x80:
            if BPE_UT_ASCII[s[i]] & F_LNS:
                break
            i += 1
        elif starcoder_wide_flags(s, i, &w) & F_LNS:
            break
        else:
            i += w
    return i


cdef Py_ssize_t starcoder_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """The piece of StarCoder2's one regex at ``pos``, alternatives tried in order."""
    cdef Py_ssize_t w, w2, e, last = pos, newline
    cdef uint8_t c = s[pos]
    cdef uint8_t f = starcoder_flags(s, pos, &w), f2
    if f & F_L:                                   # ?\p{L}+, no space
        return run_any(s, n, pos + w, F_L)
    if f & BPE_UT_N:                              # DIGIT
        return pos + w
    if c == 0x27:                                 # '(?:s|t|re|ve|m|ll|d)
        e = contraction_end(s, n, pos, False)
        if e >= 0:
            return e
    if not (f & BPE_UT_WS):                       # ?[^\s\p{L}DIGIT]+, no space
        return starcoder_other_run(s, n, pos + w)
    if c == 0x20 and pos + 1 < n:                 # the letters or the others with the space
        f2 = starcoder_flags(s, pos + 1, &w2)
        if f2 & F_L:
            return run_any(s, n, pos + 1 + w2, F_L)
        if not (f2 & F_LNS):
            return starcoder_other_run(s, n, pos + 1 + w2)
    e = space_run(s, n, pos, &last, &newline)
    if e == n or last == pos:                     # (?!\S) at the end; \s+ of one character
        return e
    if starcoder_flags(s, e, &w) & BPE_UT_N:      # (?=DIGIT)
        return e
    return last                                   # \s+(?!\S)


cdef inline Py_ssize_t starcoder_ascii_word(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """starcoder_end for its commonest pieces: an ASCII letter, or a space then an ASCII letter,
    then the letter run; -1 for any other start."""
    cdef uint8_t c = s[pos]
    if c < 0x80 and BPE_UT_ASCII[c] & F_L:
        return run_any(s, n, pos + 1, F_L)
    if c == 0x20 and pos + 1 < n and s[pos + 1] < 0x80 and BPE_UT_ASCII[s[pos + 1]] & F_L:
        return run_any(s, n, pos + 2, F_L)
    return -1


def register_starcoder(str pattern, ranges):
    """Map ``pattern`` (StarCoder2's one regex, bpecore.hf) to PAT_STARCODER, its digits being
    \\p{N} and the inclusive code point ``ranges``, none of them a letter or whitespace: a
    BacktrackEncoder of ``pattern`` then cuts with starcoder_end. Returns PAT_STARCODER."""
    global _SCANNER_KINDS, STARCODER_DIGITS
    cdef vector[uint32_t] extra
    cdef uint32_t c
    for a, b in ranges:
        for c in range(a, b + 1):
            if cp_flags(c) & (F_L | BPE_UT_WS) or c < 0x80:
                raise ValueError("U+%04X is a letter, whitespace or ASCII" % c)
        extra.push_back(a)
        extra.push_back(b)
    STARCODER_DIGITS = extra
    _SCANNED[pattern] = PAT_STARCODER
    _SCANNER_KINDS = frozenset(_SCANNED.values())
    return PAT_STARCODER


cdef Py_ssize_t open_piece_end(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    """next_piece_end for PAT_LLAMA3, PAT_QWEN2, PAT_TEKKEN, PAT_DEEPSEEK3, PAT_FALCON and
    PAT_STARCODER."""
    cdef Py_ssize_t e
    if kind == PAT_STARCODER:
        e = starcoder_ascii_word(s, n, pos)
        return e if e >= 0 else starcoder_end(s, n, pos)
    if kind == PAT_FALCON:
        e = falcon_ascii_word(s, n, pos)
        return e if e >= 0 else falcon_end(s, n, pos)
    if kind == PAT_DEEPSEEK3:
        e = deepseek3_ascii_piece(s, n, pos)
        return e if e >= 0 else deepseek3_end(s, n, pos)
    if kind == PAT_TEKKEN:
        e = tekken_ascii_piece(s, n, pos)
        return e if e >= 0 else tekken_end(s, n, pos)
    e = llama3_ascii_word(s, n, pos)
    return e if e >= 0 else llama3_end(s, n, pos, 3 if kind == PAT_LLAMA3 else 1)


cdef Py_ssize_t open_piece_ends(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                                Py_ssize_t* ends, Py_ssize_t k) noexcept nogil:
    """next_piece_ends for PAT_LLAMA3, PAT_QWEN2, PAT_TEKKEN, PAT_DEEPSEEK3, PAT_FALCON and
    PAT_STARCODER."""
    cdef Py_ssize_t j = 0, e
    cdef int most = 3 if kind == PAT_LLAMA3 else 1
    if kind == PAT_STARCODER:
        while j < k and pos < n:
            e = starcoder_ascii_word(s, n, pos)
            pos = e if e >= 0 else starcoder_end(s, n, pos)
            ends[j] = pos
            j += 1
        return j
    if kind == PAT_FALCON:
        while j < k and pos < n:
            e = falcon_ascii_word(s, n, pos)
            pos = e if e >= 0 else falcon_end(s, n, pos)
            ends[j] = pos
            j += 1
        return j
    if kind == PAT_DEEPSEEK3:
        while j < k and pos < n:
            e = deepseek3_ascii_piece(s, n, pos)
            pos = e if e >= 0 else deepseek3_end(s, n, pos)
            ends[j] = pos
            j += 1
        return j
    if kind == PAT_TEKKEN:
        while j < k and pos < n:
            e = tekken_ascii_piece(s, n, pos)
            pos = e if e >= 0 else tekken_end(s, n, pos)
            ends[j] = pos
            j += 1
        return j
    while j < k and pos < n:
        e = llama3_ascii_word(s, n, pos)
        pos = e if e >= 0 else llama3_end(s, n, pos, most)
        ends[j] = pos
        j += 1
    return j


# ---------------------------------------------------------------------------------------------
# The block scanner of O200K_PATTERN and CL100K_PATTERN: the piece starts of up to 64 ASCII bytes
# at once, from their classes as bitmasks (bit i for byte pos + i; "x << 1" has bit i when x has
# bit i - 1: the byte before). Every rule of the two patterns on ASCII comes down to a byte's
# class and its neighbours', but for runs: a whitespace run's last \r or \n, digits in threes,
# contractions (loops over those). Only the starts that more bytes cannot change are given: those
# before the run that reaches the window's end (or a byte over 0x7F) and before the byte ahead of
# it. Branches per piece were what the scanners below cost (a mispredicted one per piece or so).

cdef enum:
    BLOCK_BYTES = 64


cdef inline uint64_t low_bits(Py_ssize_t k) noexcept nogil:
    # The k lowest bits (0 <= k <= 64).
    return <uint64_t>0xFFFFFFFFFFFFFFFFULL if k >= 64 else (<uint64_t>1 << k) - 1


cdef inline Py_ssize_t run_end_bit(uint64_t m, Py_ssize_t r) noexcept nogil:
    # End of the run of set bits of m from bit r (64 if it reaches the top).
    cdef uint64_t x = ~(m >> r)
    return 64 if x == 0 else r + bpe_ctz64(x)


cdef inline uint64_t fill_forward(uint64_t g, uint64_t p) noexcept nogil:
    # The bits of p reached from a bit of g (g within p) by steps to the next bit while in p.
    g |= p & (g << 1)
    p &= p << 1
    g |= p & (g << 2)
    p &= p << 2
    g |= p & (g << 4)
    p &= p << 4
    g |= p & (g << 8)
    p &= p << 8
    g |= p & (g << 16)
    p &= p << 16
    g |= p & (g << 32)
    return g


cdef Py_ssize_t ascii_block(const uint8_t* s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t* ends,
                            Py_ssize_t k, bint o200k, Py_ssize_t* wide) noexcept nogil:
    """Up to ``k`` successive piece ends after ``pos`` (a piece start, pos < n) from the 64 bytes
    there, for O200K_PATTERN (``o200k``) or CL100K_PATTERN; 0 when none is certain (a byte over
    0x7F within reach, or one run over the window): the caller takes a piece the slow way. Equal
    to o200k_end's and cl100k_end's ends (tests). ``wide[0]``: where the first byte over 0x7F in
    the window is (0 if none), so the caller need not ask again before it."""
    cdef uint8_t tail[BLOCK_BYTES]
    cdef BpeAsciiMasks c
    cdef Py_ssize_t size = n - pos, j = 0, e, r, b, x, limit
    cdef bint at_end = size <= BLOCK_BYTES
    cdef uint64_t valid, L, S, WS, R, P, P2, absorbed, WSe, LS, PF, PS, starts, m, inv, group
    if at_end:
        memset(tail, 0, BLOCK_BYTES)
        memcpy(tail, s + pos, size)
        bpe_classify64(tail, &c)
    else:
        bpe_classify64(s + pos, &c)
        size = BLOCK_BYTES
    valid = low_bits(size)
    wide[0] = 0
    if c.wide & valid:
        size = bpe_ctz64(c.wide & valid)   # the window ends before it, not at the text's end
        wide[0] = pos + size
        at_end = False
        if size < 2:
            return 0
        valid = low_bits(size)
    L = (c.lower | c.upper) & valid
    S = (c.space | c.other_ws) & valid
    R = c.newline & valid
    WS = S | R
    P = valid & ~(L | c.digit | WS)
    # the \r \n right after a punctuation run are its own (o200k: and '/', `[\r\n/]*`)
    absorbed = fill_forward(R & (P << 1), (R | (c.slash & valid)) if o200k else R)
    P2 = P & ~absorbed
    WSe = WS & ~absorbed
    # words: a letter run starts one (o200k: and so does [A-Z] after [a-z], case runs); one
    # character of [^\r\n\p{L}\p{N}] before a letter run is its prefix, unless it is punctuation
    # after punctuation or after a space (a punctuation run then, ` ?[^\s\p{L}\p{N}]+`)
    LS = L & ~(L << 1)
    PF = (S | P2) & (LS >> 1) & ~(P2 & ((P2 | c.space) << 1))
    starts = (LS & ~(PF << 1)) | PF
    if o200k:
        starts |= c.upper & (c.lower << 1)
    # punctuation runs, from the space before them if there is one
    PS = P2 & ~(P2 << 1)
    starts |= (PS & ~(c.space << 1)) | (c.space & (PS >> 1))
    # whitespace runs: their first byte; the byte after their last \r \n (`\s*[\r\n]`); their
    # last byte when it follows another \s and a \S follows it (`\s+(?!\S)`)
    starts |= WSe & ~(WSe << 1)
    starts |= S & ((valid & ~WS) >> 1) & (S << 1)
    m = R & WSe
    while m:
        r = bpe_ctz64(m)
        b = run_end_bit(WSe, r)
        x = bpe_top64(m & low_bits(b))
        if x + 1 < b:
            starts |= <uint64_t>1 << (x + 1)
        m &= ~low_bits(b)
    # cl100k: `\s++$`, the whitespace run that ends the text is one piece
    if at_end and not o200k and (WSe >> (size - 1)) & 1:
        inv = valid & ~WSe
        starts &= low_bits(bpe_top64(inv) + 2) if inv else 1
    # digits: `\p{N}{1,3}`
    m = c.digit & valid & ~(c.digit << 1)
    starts |= m
    while m:
        r = bpe_ctz64(m)
        b = run_end_bit(c.digit & valid, r)
        r += 3
        while r < b:
            starts |= <uint64_t>1 << r
            r += 3
        m &= m - 1
    # where more bytes could still change a start: the run that reaches the window's end (of
    # letters, digits, whitespace or other) and the byte before it
    limit = size
    if not at_end:
        x = size - 1
        group = L if (L >> x) & 1 else (c.digit if (c.digit >> x) & 1 else (WS if (WS >> x) & 1 else P))
        inv = valid & ~group
        limit = bpe_top64(inv) if inv else 0   # the final run starts at limit + 1
        if group == c.digit:    # but digits go in threes from where their run starts
            limit = size
    # contractions, (?i:'s|'t|'re|'ve|'m|'ll|'d): o200k ends a word with one (a quote after a
    # letter, not after the letter of another contraction); cl100k makes one a piece of its own
    # wherever a piece starts at a quote (after a letter, digit, \r \n or other \s than ' ')
    if o200k:
        m = c.quote & valid & (L << 1)
    else:
        m = c.quote & valid & ~((P2 | c.space) << 1)
    b = -1                                   # where the last contraction ended
    while m:
        e = bpe_ctz64(m)
        m &= m - 1
        if e >= limit:
            break
        if o200k and e == b:                 # its letter was a contraction's: a new piece
            continue
        x = contraction_end(s, n, pos + e, True)   # reads past the window if it must
        if x >= 0:
            x -= pos + e
            if o200k:
                starts &= ~(low_bits(x) << e)
            b = e + x
            if b < size and (L >> b) & 1:
                starts |= <uint64_t>1 << b
    starts &= low_bits(limit) & ~<uint64_t>1
    while starts and j < k:
        ends[j] = pos + bpe_ctz64(starts)
        j += 1
        starts &= starts - 1
    if at_end and not starts and j < k:
        ends[j] = pos + size
        j += 1
    return j


def _block_ends(int kind, const uint8_t[::1] utf8, Py_ssize_t pos):
    """ascii_block's ends from ``pos`` (a piece start), all it gives (tests)."""
    cdef Py_ssize_t ends[BLOCK_BYTES + 1]
    if kind != PAT_O200K and kind != PAT_CL100K:
        raise ValueError("no block scanner for kind %r" % kind)
    if not 0 <= pos < utf8.shape[0]:
        return []
    cdef Py_ssize_t wide
    cdef Py_ssize_t got = ascii_block(&utf8[0], utf8.shape[0], pos, ends, BLOCK_BYTES + 1,
                                      kind == PAT_O200K, &wide)
    return [ends[i] for i in range(got)]


def _classify64(const uint8_t[::1] data, int level):
    """The classification of data[:64] at ``level`` (0 scalar, 1 SSE2, 2 AVX2), as a dict of
    masks; ValueError for a level this build or CPU lacks (tests)."""
    cdef BpeAsciiMasks c
    if data.shape[0] < 64:
        raise ValueError("64 bytes needed")
    if level == 0:
        bpe_classify64_scalar(&data[0], &c)
    elif level == 1 and BPE_SSE2:
        bpe_classify64_sse2(&data[0], &c)
    elif level == 2 and BPE_AVX2 and _simd_level() == 2:
        bpe_classify64_avx2(&data[0], &c)
    else:
        raise ValueError("no classification at level %d here" % level)
    return dict(lower=c.lower, upper=c.upper, digit=c.digit, space=c.space, other_ws=c.other_ws,
                newline=c.newline, slash=c.slash, quote=c.quote, wide=c.wide)


def _simd_level():
    """The classification level this process uses: 0 scalar, 1 SSE2, 2 AVX2 (BPECORE_SIMD)."""
    return bpe_simd_level()


cdef Py_ssize_t next_piece_end(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil:
    cdef Py_ssize_t e
    if kind == PAT_CL100K:
        e = cl100k_ascii_word(s, n, pos)
        if e < 0:
            e = cl100k_ascii_other(s, n, pos)
        return e if e >= 0 else cl100k_end(s, n, pos)
    if kind == PAT_O200K:
        e = o200k_ascii_word(s, n, pos)
        if e < 0:
            e = o200k_ascii_other(s, n, pos)
        return e if e >= 0 else o200k_end(s, n, pos)
    if kind == PAT_R50K:
        return r50k_end(s, n, pos)
    if kind >= PAT_LLAMA3:
        return open_piece_end(kind, s, n, pos)
    return n


cdef Py_ssize_t next_piece_ends(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                                Py_ssize_t* ends, Py_ssize_t k) noexcept nogil:
    """Up to ``k`` successive piece ends from ``pos``: one call (and one dispatch on ``kind``) for a
    batch of pieces instead of one per piece (Performance notes, step 8)."""
    return scan_piece_ends(kind, s, n, pos, ends, k, False)


cdef Py_ssize_t next_piece_ends_marked(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                                       Py_ssize_t* ends, Py_ssize_t k) noexcept nogil:
    """next_piece_ends, but the end of a cl100k or o200k piece of 1-3 ASCII digits that the digits'
    own path cut is given as ~end (negative), for encode_text (backtrack.pyx's cut_block)."""
    return scan_piece_ends(kind, s, n, pos, ends, k, True)


cdef inline Py_ssize_t scan_piece_ends(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                                       Py_ssize_t* ends, Py_ssize_t k, bint mark) noexcept nogil:
    # next_piece_ends (mark False) and next_piece_ends_marked (True): one body, two copies.
    cdef Py_ssize_t j = 0, e, wide = 0
    cdef uint64_t head
    cdef bint o200k = kind == PAT_O200K
    if o200k or kind == PAT_CL100K:   # one loop: gcc unswitches it on o200k
        while j < k and pos < n:
            e = -1
            if O200K_KIND[s[pos]] == K_DIGIT:   # digits: straight to their path
                e = ascii_digits_end(s, n, pos)
                if mark and e >= 0:
                    pos = e
                    ends[j] = ~e
                    j += 1
                    continue
            else:
                if pos + 8 <= n and pos >= wide:   # ASCII ahead: the block scanner
                    memcpy(&head, s + pos, 8)
                    if not (head & <uint64_t>0x8080808080808080ULL):
                        e = ascii_block(s, n, pos, ends + j, k - j, o200k, &wide)
                        if e:
                            j += e
                            pos = ends[j - 1]
                            continue
                e = o200k_ascii_word(s, n, pos) if o200k else cl100k_ascii_word(s, n, pos)
            if e < 0:   # one call site each, or gcc stops inlining them
                e = o200k_ascii_other(s, n, pos) if o200k else cl100k_ascii_other(s, n, pos)
            if e < 0:
                e = o200k_end(s, n, pos) if o200k else cl100k_end(s, n, pos)
            pos = e
            ends[j] = pos
            j += 1
    elif kind == PAT_R50K:
        while j < k and pos < n:
            pos = r50k_end(s, n, pos)
            ends[j] = pos
            j += 1
    elif kind >= PAT_LLAMA3:
        j = open_piece_ends(kind, s, n, pos, ends, k)
    elif pos < n and k > 0:
        ends[0] = n
        j = 1
    return j


# ---------------------------------------------------------------------------------------------
# Horizons: how far past a piece its cut depends on the text (the exact operations' stability rule)

cdef inline Py_ssize_t _run_end(const uint8_t* s, Py_ssize_t n, Py_ssize_t p, uint8_t mask) noexcept nogil:
    cdef Py_ssize_t w
    while p < n and (flags_at(s, p, &w) & mask):
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
    if kind == PAT_DEEPSEEK3:
        return deepseek3_horizon(s, n, start, end)
    if kind == PAT_FALCON or kind == PAT_STARCODER:
        return n                                  # not known: the whole text decides
    cdef uint8_t fl = flags_at(s, start, &w0)
    if s[start] == 0x27 and start + 4 > h:
        h = start + 4
    if fl & BPE_UT_WS:
        p = _run_end(s, n, start, BPE_UT_WS) + 1
        if p > h:
            h = p
    # the letters' one-character prefix: [^\r\n\p{L}\p{N}] (cl100k, o200k), a space (r50k); a
    # letter alternative that finds no letter has read one character past the prefix
    cdef bint prefix = (s[start] == 0x20 if kind == PAT_R50K else
                        not (fl & (F_L | BPE_UT_N)) and s[start] != 0x0A and s[start] != 0x0D)
    cdef int k
    if o200k_words(kind):
        for k in range(2):
            if k == 1 and not prefix:
                break
            p = start if k == 0 else start + w0
            if p >= n:
                break
            u = _run_end(s, n, p, F_UPPER)
            l = _run_end(s, n, u, F_LOWER)
            if l < u:
                l = u
            if l > p and l + 4 > h:
                h = l + 4
    elif fl & F_L or prefix:
        p = start if fl & F_L else start + w0
        p = _run_end(s, n, p, F_L) + 1
        if p > h:
            h = p
    return h


# ---------------------------------------------------------------------------------------------
# Python entry points

def pattern_kind(pattern):
    """The PatternKind that cuts ``pattern``: a hand-written scanner, the regex fallback or none.

    Only the exact strings CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN, LLAMA3_PATTERN,
    QWEN2_PATTERN, TEKKEN_PATTERN, DEEPSEEK3_PATTERN and the ones ``register_falcon`` and
    ``register_starcoder`` map get a scanner.
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
    if kind != PAT_NONE and kind not in _SCANNER_KINDS:
        raise ValueError("pattern kind %r has no scanner; pass the pattern itself" % (kind_or_pattern,))
    return kind


cdef list _scan_ends(int kind, const uint8_t* s, Py_ssize_t n):
    """Byte ends of the pieces of the valid UTF-8 ``s[:n]`` for a scanner kind or PAT_NONE."""
    cdef vector[Py_ssize_t] ends
    cdef Py_ssize_t pos = 0, k
    with nogil:
        while pos < n:
            k = ends.size()
            ends.resize(k + 16)
            k += next_piece_ends(kind, s, n, pos, ends.data() + k, 16)
            ends.resize(k)
            pos = ends.back()
    return [e for e in ends]


def _piece_ends_one_by_one(int kind, const uint8_t[::1] utf8):
    """piece_ends for a scanner kind, one next_piece_end call per piece (piece_ends takes them in
    batches from next_piece_ends, as encoding does); for tests."""
    cdef vector[Py_ssize_t] ends
    cdef Py_ssize_t pos = 0, n = utf8.shape[0]
    with nogil:
        while pos < n:
            pos = next_piece_end(kind, &utf8[0], n, pos)
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
        ends, start, byte_end = [], 0, 0
        for m in regex.finditer(kind_or_pattern, text):
            byte_end += len(text[start:m.end()].encode("utf-8"))
            start = m.end()
            ends.append(byte_end)
        return ends
    if utf8.shape[0] == 0:
        return []
    return _scan_ends(kind, &utf8[0], utf8.shape[0])


def split(kind_or_pattern, str text):
    """The pieces of ``text``: the whole matches of ``regex.finditer(pattern, text)``.

    ``kind_or_pattern`` is as for piece_ends. Raises UnicodeEncodeError on lone surrogates.

    >>> split(CL100K_PATTERN, "I'm fine,  thanks!\\n")
    ['I', "'m", ' fine', ',', ' ', ' thanks', '!\\n']
    """
    cdef int kind = _kind_of(kind_or_pattern)
    if kind == PAT_REGEX:
        import regex
        return [m.group() for m in regex.finditer(kind_or_pattern, text)]
    data = text.encode("utf-8")
    if not data:
        return []
    cdef list ends = _scan_ends(kind, data, len(data))
    if text.isascii():
        return [text[a:b] for a, b in zip([0] + ends, ends)]
    return [data[a:b].decode("utf-8") for a, b in zip([0] + ends, ends)]


def _piece_horizon(int kind, const uint8_t[::1] utf8, Py_ssize_t start, Py_ssize_t end):
    """``piece_horizon`` of the piece utf8[start:end] cut by a scanner kind, for tests."""
    if not 0 <= start < end <= utf8.shape[0]:
        raise ValueError("need 0 <= start < end <= len(utf8)")
    return piece_horizon(kind, &utf8[0], utf8.shape[0], start, end)


def _flags_table():
    """(flags of every code point 0..0x10FFFF, flags of the ASCII fast-path table), as bytes; for tests.

    Bits, low to high: Lu Ll Lt Lm Lo M N \\s (BPE_UT_* in _unicode_tables.h).
    """
    cdef bytearray out = bytearray(0x110000)
    cdef uint32_t cp
    for cp in range(0x110000):
        out[cp] = cp_flags(cp)
    return bytes(out), bytes([BPE_UT_ASCII[cp] for cp in range(128)])


def _flags2_table():
    """(second flag byte of every code point 0..0x10FFFF, of the ASCII fast-path table), as bytes;
    for tests. Bits, low to high: \\p{P} \\p{S} CJK (BPE_UT2_* in _unicode_tables.h)."""
    cdef bytearray out = bytearray(0x110000)
    cdef uint32_t cp
    for cp in range(0x110000):
        out[cp] = cp_flags2(cp)
    return bytes(out), bytes([BPE_UT2_ASCII[cp] for cp in range(128)])


def _count_pieces(int kind, const uint8_t[::1] utf8):
    """Number of pieces of the valid UTF-8 ``utf8`` (scanner kinds only); the scanner alone, for benches."""
    cdef Py_ssize_t pos = 0, n = utf8.shape[0], count = 0
    if kind not in _SCANNER_KINDS:
        raise ValueError("pattern kind %r has no scanner" % kind)
    if n == 0:
        return 0
    with nogil:
        while pos < n:
            pos = next_piece_end(kind, &utf8[0], n, pos)
            count += 1
    return count


cdef unsigned char char_flags(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil:
    return flags_at(s, i, width)

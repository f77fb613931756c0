from libc.stdint cimport uint8_t

from bpecore._classes cimport BPE_UT_ASCII

# ``kind`` arguments are _classes.PatternKind values.

#: End (byte offset) of the piece starting at ``pos`` < n, as regex.finditer would cut it; returns
#: n for PAT_NONE and PAT_REGEX. ``s[:n]`` must be valid UTF-8 (whole characters): the scanner
#: trusts lead bytes and treats n as the end of the text (``\s++$``, ``\s+(?!\S)`` look at it).
cdef Py_ssize_t next_piece_end(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos) noexcept nogil
#: The ends of up to ``k`` successive pieces from ``pos`` into ``ends[:j]``; returns j (0 only when
#: pos >= n). Same cuts as calling next_piece_end j times, for PAT_NONE and the scanner kinds.
cdef Py_ssize_t next_piece_ends(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                                Py_ssize_t* ends, Py_ssize_t k) noexcept nogil
#: next_piece_ends, with the end of a cl100k / o200k piece of 1-3 ASCII digits given as ~end.
cdef Py_ssize_t next_piece_ends_marked(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos,
                                       Py_ssize_t* ends, Py_ssize_t k) noexcept nogil

#: BPE_UT_* flags of the character starting at byte ``i`` (Lu=1 Ll=2 Lt=4 Lm=8 Lo=16 M=32 N=64
#: \s=128, as the `regex` module classifies it); its length in bytes goes to ``width[0]``.
cdef unsigned char char_flags(const uint8_t* s, Py_ssize_t i, Py_ssize_t* width) noexcept nogil


cdef inline uint8_t char_flags_fast(const uint8_t* s, Py_ssize_t p, Py_ssize_t* w) noexcept nogil:
    """``char_flags`` with the ASCII case inline (a table load), for the callers in other modules."""
    if s[p] < 0x80:
        w[0] = 1
        return BPE_UT_ASCII[s[p]]
    return char_flags(s, p, w)

#: Conservative bound on how far the scanner may look when it cuts the piece [start, end):
#: text up to the returned offset decides the piece (README, "Exact operations").
cdef Py_ssize_t piece_horizon(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t start, Py_ssize_t end) noexcept nogil


# DEEPSEEK3_PATTERN's character classes: every character is in one.
cdef enum:
    DS_OTHER = 0    #: none of the classes below, outside the CJK set (controls, Cf, Co, unassigned)
    DS_SPACE = 1    #: \s but \r and \n
    DS_NEWLINE = 2  #: \r, \n
    DS_DIGIT = 3    #: \p{N} (inside the CJK set too: \p{N}{1,3} is tried first)
    DS_WORD = 4     #: [[\p{L}\p{M}]--CJK]
    DS_CJK_WORD = 5 #: [[\p{L}\p{M}]&&CJK]
    DS_PUNCT = 6    #: [[\p{P}\p{S}]--CJK]
    DS_CJK_PUNCT = 7  #: [[\p{P}\p{S}]&&CJK]
    DS_CJK_OTHER = 8  #: CJK, none of the above (unassigned kana code points)
    DS_END = 9      #: past the end of the text

#: DS_* class of the character starting at byte ``i`` of the valid UTF-8 ``s[:n]`` (DS_END at n);
#: its length in bytes goes to ``width[0]``.
cdef uint8_t deepseek_char_class(const uint8_t* s, Py_ssize_t n, Py_ssize_t i, Py_ssize_t* width) noexcept nogil

# Who cuts a text into pieces (the pattern kinds), and the character classes the scanners and the
# exact operations test: the flag bits of bpecore/_unicode_tables.h (as the `regex` module
# classifies code points, scripts/gen_unicode_tables.py) and the unions the patterns name.
from libc.stdint cimport uint8_t

cdef enum PatternKind:
    PAT_NONE = 0      #: no pattern: the whole text is one piece
    PAT_REGEX = 1     #: any other pattern: the `regex` module finds the pieces
    PAT_CL100K = 2    #: CL100K_PATTERN, hand-written scanner
    PAT_O200K = 3     #: O200K_PATTERN, hand-written scanner
    PAT_R50K = 4      #: R50K_PATTERN (gpt2, r50k, p50k), hand-written scanner
    PAT_LLAMA3 = 5    #: LLAMA3_PATTERN (Meta's Llama 3 string): cl100k's words, o200k's whitespace
    PAT_QWEN2 = 6     #: QWEN2_PATTERN: PAT_LLAMA3 with single digits
    PAT_TEKKEN = 7    #: TEKKEN_PATTERN: O200K_PATTERN without contractions, single digits
    PAT_DEEPSEEK3 = 8  #: DEEPSEEK3_PATTERN: DeepSeek V3's three chained Splits as one regex
    PAT_FALCON = 9    #: Falcon's four-stage chain as one regex (pretokenize.register_falcon)
    PAT_STARCODER = 10  #: StarCoder2's Digits + ByteLevel as one regex (pretokenize.register_starcoder)


cdef extern from "bpecore/_unicode_tables.h":
    #: Flags of U+0000..U+007F (the one-byte fast path).
    const uint8_t BPE_UT_ASCII[]
    # One bit per class: Lu=1 Ll=2 Lt=4 Lm=8 Lo=16 M=32 N=64 \s=128. Constants, not an enum: with
    # enum values Cython turns run_any's if/elif chain on the mask into a switch, and run_any
    # took 3.4% more instructions (count_till_limit of 1 MB of English, cl100k).
    const uint8_t BPE_UT_LU, BPE_UT_LL, BPE_UT_LT, BPE_UT_LM, BPE_UT_LO, BPE_UT_M, BPE_UT_N, BPE_UT_WS
    #: The second flag byte (only DeepSeek V3's pattern names these): \p{P}=1 \p{S}=2 and its CJK
    #: set [\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]=4.
    const uint8_t BPE_UT2_ASCII[]
    const uint8_t BPE_UT2_P, BPE_UT2_S, BPE_UT2_CJK


cdef enum:
    F_L = BPE_UT_LU | BPE_UT_LL | BPE_UT_LT | BPE_UT_LM | BPE_UT_LO   #: \p{L}
    F_LN = F_L | BPE_UT_N                                              #: \p{L} or \p{N}
    F_LNS = F_LN | BPE_UT_WS                                           #: not [^\s\p{L}\p{N}]
    F_UPPER = BPE_UT_LU | BPE_UT_LT | BPE_UT_LM | BPE_UT_LO | BPE_UT_M  #: o200k [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
    F_LOWER = BPE_UT_LL | BPE_UT_LM | BPE_UT_LO | BPE_UT_M             #: o200k [\p{Ll}\p{Lm}\p{Lo}\p{M}]
    F_BOTH = BPE_UT_LM | BPE_UT_LO | BPE_UT_M                          #: in both o200k classes


cdef inline bint o200k_words(int kind) noexcept nogil:
    """Words are O200K_PATTERN's (case runs, marks, \\p{L} prefix rules): o200k and Tekken."""
    return kind == PAT_O200K or kind == PAT_TEKKEN


cdef inline bint o200k_spaces(int kind) noexcept nogil:
    """Whitespace is cut by ``\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+`` (no ``\\s++$``): o200k, Llama 3's
    and Qwen2's strings, Tekken; DeepSeek V3 where the whitespace ends the text (its
    ``\\s+(?=[\\p{N}CJK])`` needs a character after it)."""
    return (kind == PAT_O200K or kind == PAT_LLAMA3 or kind == PAT_QWEN2 or kind == PAT_TEKKEN
            or kind == PAT_DEEPSEEK3)


cdef inline bint leading_contraction(int kind) noexcept nogil:
    """An apostrophe may start a contraction piece ('s 't 're 've 'm 'll 'd, any case): cl100k,
    Llama 3's and Qwen2's strings."""
    return kind == PAT_CL100K or kind == PAT_LLAMA3 or kind == PAT_QWEN2

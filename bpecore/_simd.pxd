# Bit and memory helpers (bpecore/_simd.h): prefetch, popcount, count trailing zeros.
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "bpecore/_simd.h" nogil:
    #: Hint the cache to load the line at p (no-op without GCC builtins).
    void bpe_prefetch(const void* p) noexcept
    #: bpe_prefetch for a line about to be written.
    void bpe_prefetch_w(const void* p) noexcept
    #: Set bits of x.
    int popcount64 "bpe_popcount64"(uint64_t x) noexcept
    #: 1 when little-endian 8-byte loads and bpe_ctz64 are fast: the SWAR ASCII tests apply.
    const bint BPE_SWAR
    #: Trailing zero bits of x (x != 0).
    int bpe_ctz64(uint64_t x) noexcept
    #: BPE_LOW_BYTES[k]: a word with its k low bytes set (k = 0..8).
    const uint64_t BPE_LOW_BYTES[9]

cdef extern from "bpecore/_simd.h" nogil:
    #: 1 when the 16-unit UTF-8 helpers below use SSE2 (x86-64 without -DBPE_NO_SSE2).
    const bint BPE_SSE2
    #: UTF-8 bytes of p[0..16 * blocks) beyond one per code unit; -1 if one is a lone surrogate.
    int64_t bpe_utf8_extra_u8(const uint8_t* p, int64_t blocks) noexcept
    int64_t bpe_utf8_extra_u16(const uint16_t* p, int64_t blocks) noexcept
    int64_t bpe_utf8_extra_u32(const uint32_t* p, int64_t blocks) noexcept
    #: Write the low bytes of p[0..16) to out[0..16); return the mask of the units >= 0x80.
    unsigned bpe_ascii16_u8(const uint8_t* p, uint8_t* out) noexcept
    unsigned bpe_ascii16_u16(const uint16_t* p, uint8_t* out) noexcept
    unsigned bpe_ascii16_u32(const uint32_t* p, uint8_t* out) noexcept

cdef extern from "bpecore/_simd.h" nogil:
    ctypedef struct BpeAsciiMasks:
        uint64_t lower, upper, digit, space, other_ws, newline, slash, quote, wide
    #: Classes of p[0..64) as bitmasks, at the level bpe_simd_level() chose at run time.
    void bpe_classify64(const uint8_t* p, BpeAsciiMasks* m) noexcept
    #: Each level (sse2 and avx2 only where BPE_SSE2 / BPE_AVX2 and the CPU has AVX2).
    void bpe_classify64_scalar(const uint8_t* p, BpeAsciiMasks* m) noexcept
    void bpe_classify64_sse2(const uint8_t* p, BpeAsciiMasks* m) noexcept
    void bpe_classify64_avx2(const uint8_t* p, BpeAsciiMasks* m) noexcept
    #: 0 scalar, 1 SSE2, 2 AVX2: the CPU's best, or BPECORE_SIMD=sse2 / scalar.
    int bpe_simd_level() noexcept
    const bint BPE_AVX2
    #: Index of the highest set bit of x (x != 0).
    int bpe_top64(uint64_t x) noexcept

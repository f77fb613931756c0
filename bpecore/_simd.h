/* Bit and memory helpers with a portable fallback: prefetch, popcount, count trailing zeros.
   Declared for Cython in bpecore/_simd.pxd. */
#pragma once
#include <stdint.h>

#if defined(__GNUC__)
#define bpe_prefetch(p) __builtin_prefetch((const void*)(p))
#define bpe_prefetch_w(p) __builtin_prefetch((const void*)(p), 1)
#else
#define bpe_prefetch(p) ((void)0)
#define bpe_prefetch_w(p) ((void)0)
#endif

#if defined(__GNUC__)
#define bpe_popcount64(x) __builtin_popcountll(x)
#else
static int bpe_popcount64(unsigned long long x) { int c = 0; while (x) { x &= x - 1; ++c; } return c; }
#endif

/* 8-bytes-at-a-time ASCII tests (pretokenize's run_any) need little-endian loads and
   count-trailing-zeros. */
#if defined(__GNUC__) && defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define BPE_SWAR 1
static inline int bpe_ctz64(uint64_t x) { return __builtin_ctzll(x); }
#else
#define BPE_SWAR 0
static inline int bpe_ctz64(uint64_t x) { int k = 0; while (!(x & 1)) { x >>= 1; ++k; } return k; }
#endif

/* BPE_LOW_BYTES[k]: a word with its k low bytes set (k = 0..8): the mask of a k-byte head. */
static const uint64_t BPE_LOW_BYTES[9] = {
    0x0ULL, 0xFFULL, 0xFFFFULL, 0xFFFFFFULL, 0xFFFFFFFFULL, 0xFFFFFFFFFFULL, 0xFFFFFFFFFFFFULL,
    0xFFFFFFFFFFFFFFULL, 0xFFFFFFFFFFFFFFFFULL};

/* UTF-8 from PEP 393 buffers, 16 code units per step (bpecore/utf8.pxd). SSE2 is the x86-64
   baseline, so it is chosen at compile time; -DBPE_NO_SSE2 (or another CPU) takes the portable
   code, which gives the same results.
   bpe_utf8_extra_uN(p, blocks): UTF-8 bytes of p[0..16 * blocks) beyond one per code unit; -1 if
   one is a lone surrogate (kinds 2 and 4).
   bpe_ascii16_uN(p, out): writes the low bytes of p[0..16) to out[0..16) (exact for the ASCII
   ones) and returns the mask of the units that are not ASCII (bit j for p[j]). */
#if (defined(__SSE2__) || defined(_M_X64)) && !defined(BPE_NO_SSE2)
#define BPE_SSE2 1
#include <emmintrin.h>
#else
#define BPE_SSE2 0
#endif

#if BPE_SSE2
/* Flags (0 or -1 per byte) summed into two 64-bit lanes: no popcount instruction needed (it is
   not in the x86-64 baseline). */
#define BPE_SUM_FLAGS(acc, flags) \
    (acc) = _mm_add_epi64((acc), _mm_sad_epu8(_mm_sub_epi8(_mm_setzero_si128(), (flags)), _mm_setzero_si128()))

static inline int64_t bpe_sum_lanes(__m128i acc) {
    return (int64_t)_mm_cvtsi128_si64(acc) + (int64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(acc, acc));
}

static inline int64_t bpe_utf8_extra_u8(const uint8_t* p, int64_t blocks) {
    __m128i acc = _mm_setzero_si128();
    int64_t b;
    for (b = 0; b < blocks; ++b, p += 16)
        BPE_SUM_FLAGS(acc, _mm_cmplt_epi8(_mm_loadu_si128((const __m128i*)p), _mm_setzero_si128()));
    return bpe_sum_lanes(acc);
}

static inline int64_t bpe_utf8_extra_u16(const uint16_t* p, int64_t blocks) {
    const __m128i x7f = _mm_set1_epi16(0x7F), x7ff = _mm_set1_epi16(0x7FF), zero = _mm_setzero_si128();
    const __m128i f800 = _mm_set1_epi16((short)0xF800), d800 = _mm_set1_epi16((short)0xD800);
    __m128i acc = zero, sur = zero;
    int64_t b;
    for (b = 0; b < blocks; ++b, p += 16) {
        const __m128i a = _mm_loadu_si128((const __m128i*)p), c = _mm_loadu_si128((const __m128i*)(p + 8));
        /* lanes below 0x80 and below 0x800 (unsigned: the saturating difference is 0) */
        __m128i lt80 = _mm_packs_epi16(_mm_cmpeq_epi16(_mm_subs_epu16(a, x7f), zero),
                                     _mm_cmpeq_epi16(_mm_subs_epu16(c, x7f), zero));
        __m128i lt800 = _mm_packs_epi16(_mm_cmpeq_epi16(_mm_subs_epu16(a, x7ff), zero),
                                      _mm_cmpeq_epi16(_mm_subs_epu16(c, x7ff), zero));
        BPE_SUM_FLAGS(acc, _mm_add_epi8(lt80, lt800)); /* 2 per code unit minus its extra bytes */
        sur = _mm_or_si128(sur, _mm_or_si128(_mm_cmpeq_epi16(_mm_and_si128(a, f800), d800),
                                             _mm_cmpeq_epi16(_mm_and_si128(c, f800), d800)));
    }
    if (_mm_movemask_epi8(sur)) return -1;
    return 32 * blocks - bpe_sum_lanes(acc);
}

static inline int64_t bpe_utf8_extra_u32(const uint32_t* p, int64_t blocks) {
    /* code points are at most 0x10FFFF: signed 32-bit compares are exact */
    const __m128i x7f = _mm_set1_epi32(0x7F), x7ff = _mm_set1_epi32(0x7FF), xffff = _mm_set1_epi32(0xFFFF);
    const __m128i f800 = _mm_set1_epi32(~0x7FF), d800 = _mm_set1_epi32(0xD800), zero = _mm_setzero_si128();
    __m128i acc = zero, sur = zero;
    int64_t b;
    for (b = 0; b < blocks * 4; ++b, p += 4) {
        const __m128i v = _mm_loadu_si128((const __m128i*)p);
        BPE_SUM_FLAGS(acc, _mm_packs_epi16(_mm_packs_epi32(_mm_cmpgt_epi32(v, x7f), _mm_cmpgt_epi32(v, x7ff)),
                                           _mm_packs_epi32(_mm_cmpgt_epi32(v, xffff), zero)));
        sur = _mm_or_si128(sur, _mm_cmpeq_epi32(_mm_and_si128(v, f800), d800));
    }
    return _mm_movemask_epi8(sur) ? -1 : bpe_sum_lanes(acc);
}

static inline unsigned bpe_ascii16_u8(const uint8_t* p, uint8_t* out) {
    const __m128i v = _mm_loadu_si128((const __m128i*)p);
    _mm_storeu_si128((__m128i*)out, v);
    return (unsigned)_mm_movemask_epi8(v);
}

static inline unsigned bpe_ascii16_u16(const uint16_t* p, uint8_t* out) {
    const __m128i a = _mm_loadu_si128((const __m128i*)p), b = _mm_loadu_si128((const __m128i*)(p + 8));
    const __m128i high = _mm_set1_epi16((short)0xFF80), zero = _mm_setzero_si128();
    __m128i ascii = _mm_packs_epi16(_mm_cmpeq_epi16(_mm_and_si128(a, high), zero),
                                    _mm_cmpeq_epi16(_mm_and_si128(b, high), zero));
    _mm_storeu_si128((__m128i*)out, _mm_packus_epi16(a, b));
    return (unsigned)_mm_movemask_epi8(ascii) ^ 0xFFFFu;
}

static inline unsigned bpe_ascii16_u32(const uint32_t* p, uint8_t* out) {
    const __m128i v0 = _mm_loadu_si128((const __m128i*)p), v1 = _mm_loadu_si128((const __m128i*)(p + 4));
    const __m128i v2 = _mm_loadu_si128((const __m128i*)(p + 8)), v3 = _mm_loadu_si128((const __m128i*)(p + 12));
    const __m128i high = _mm_set1_epi32(~0x7F), zero = _mm_setzero_si128();
    __m128i ascii = _mm_packs_epi16(
        _mm_packs_epi32(_mm_cmpeq_epi32(_mm_and_si128(v0, high), zero), _mm_cmpeq_epi32(_mm_and_si128(v1, high), zero)),
        _mm_packs_epi32(_mm_cmpeq_epi32(_mm_and_si128(v2, high), zero), _mm_cmpeq_epi32(_mm_and_si128(v3, high), zero)));
    _mm_storeu_si128((__m128i*)out,
                     _mm_packus_epi16(_mm_packs_epi32(v0, v1), _mm_packs_epi32(v2, v3)));
    return (unsigned)_mm_movemask_epi8(ascii) ^ 0xFFFFu;
}
#else
static inline int64_t bpe_utf8_extra_u8(const uint8_t* p, int64_t blocks) {
    int64_t extra = 0, j;
    for (j = 0; j < 16 * blocks; ++j) extra += p[j] >> 7;
    return extra;
}

static inline int64_t bpe_utf8_extra_u16(const uint16_t* p, int64_t blocks) {
    int64_t extra = 0, j;
    for (j = 0; j < 16 * blocks; ++j) {
        if ((p[j] & 0xF800) == 0xD800) return -1;
        extra += (p[j] >= 0x80) + (p[j] >= 0x800);
    }
    return extra;
}

static inline int64_t bpe_utf8_extra_u32(const uint32_t* p, int64_t blocks) {
    int64_t extra = 0, j;
    for (j = 0; j < 16 * blocks; ++j) {
        if ((p[j] & ~0x7FFu) == 0xD800) return -1;
        extra += (p[j] >= 0x80) + (p[j] >= 0x800) + (p[j] >= 0x10000);
    }
    return extra;
}

static inline unsigned bpe_ascii16_u8(const uint8_t* p, uint8_t* out) {
    unsigned mask = 0, j;
    for (j = 0; j < 16; ++j) { out[j] = p[j]; mask |= (unsigned)(p[j] >> 7) << j; }
    return mask;
}

static inline unsigned bpe_ascii16_u16(const uint16_t* p, uint8_t* out) {
    unsigned mask = 0, j;
    for (j = 0; j < 16; ++j) { out[j] = (uint8_t)p[j]; mask |= (unsigned)(p[j] >= 0x80) << j; }
    return mask;
}

static inline unsigned bpe_ascii16_u32(const uint32_t* p, uint8_t* out) {
    unsigned mask = 0, j;
    for (j = 0; j < 16; ++j) { out[j] = (uint8_t)p[j]; mask |= (unsigned)(p[j] >= 0x80) << j; }
    return mask;
}
#endif

/* Classes of 64 ASCII bytes as bitmasks (bit i for p[i]), for the block scanner of
   pretokenize.pyx: [a-z], [A-Z], [0-9], ' ', the other ASCII \s but \r \n (\t \v \f), \r \n, '/',
   '\'', and bytes >= 0x80. bpe_classify64 reads exactly p[0..64). SSE2 (range tests by a signed
   compare after an offset, one movemask per class and 16 bytes) when BPE_SSE2, AVX2 (the same on
   32 bytes) when the CPU has it, else the scalar twin bpe_classify64_scalar; the tests hold each
   level to the definition. */
typedef struct {
    uint64_t lower, upper, digit, space, other_ws, newline, slash, quote, wide;
} BpeAsciiMasks;

static inline void bpe_classify64_scalar(const uint8_t* p, BpeAsciiMasks* m) {
    int i;
    m->lower = m->upper = m->digit = m->space = m->other_ws = m->newline = m->slash = m->quote =
        m->wide = 0;
    for (i = 0; i < 64; ++i) {
        uint8_t c = p[i];
        uint64_t b = (uint64_t)1 << i;
        if (c >= 'a' && c <= 'z') m->lower |= b;
        else if (c >= 'A' && c <= 'Z') m->upper |= b;
        else if (c >= '0' && c <= '9') m->digit |= b;
        else if (c == ' ') m->space |= b;
        else if (c == '\t' || c == 0x0B || c == 0x0C) m->other_ws |= b;
        else if (c == '\n' || c == '\r') m->newline |= b;
        else if (c == '/') m->slash |= b;
        else if (c == '\'') m->quote |= b;
        else if (c >= 0x80) m->wide |= b;
    }
}

#if BPE_SSE2
/* 0xFF in the lanes of v within [lo, hi] (hi - lo < 128). */
#define BPE_IN_RANGE(v, lo, hi) \
    _mm_cmplt_epi8(_mm_add_epi8((v), _mm_set1_epi8((char)(0x80 - (lo)))), \
                   _mm_set1_epi8((char)(-128 + ((hi) - (lo) + 1))))
#define BPE_MASK16(x) ((uint64_t)(uint16_t)_mm_movemask_epi8(x))

static inline void bpe_classify64_sse2(const uint8_t* p, BpeAsciiMasks* m) {
    int k;
    m->lower = m->upper = m->digit = m->space = m->other_ws = m->newline = m->slash = m->quote =
        m->wide = 0;
    for (k = 0; k < 4; ++k) {
        __m128i v = _mm_loadu_si128((const __m128i*)(p + 16 * k));
        int s = 16 * k;
        m->lower |= BPE_MASK16(BPE_IN_RANGE(v, 'a', 'z')) << s;
        m->upper |= BPE_MASK16(BPE_IN_RANGE(v, 'A', 'Z')) << s;
        m->digit |= BPE_MASK16(BPE_IN_RANGE(v, '0', '9')) << s;
        m->space |= BPE_MASK16(_mm_cmpeq_epi8(v, _mm_set1_epi8(' '))) << s;
        m->other_ws |= BPE_MASK16(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\t')),
                                               BPE_IN_RANGE(v, 0x0B, 0x0C))) << s;
        m->newline |= BPE_MASK16(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('\n')),
                                              _mm_cmpeq_epi8(v, _mm_set1_epi8('\r')))) << s;
        m->slash |= BPE_MASK16(_mm_cmpeq_epi8(v, _mm_set1_epi8('/'))) << s;
        m->quote |= BPE_MASK16(_mm_cmpeq_epi8(v, _mm_set1_epi8('\''))) << s;
        m->wide |= BPE_MASK16(v) << s;
    }
}
#else
#define bpe_classify64_sse2 bpe_classify64_scalar
#endif

/* AVX2, 32 bytes per compare, where the CPU has it: chosen at run time (the build targets the
   x86-64 baseline), once per process; BPECORE_SIMD=sse2 or scalar in the environment picks a
   lower level (tests, and to compare). bpe_simd_level(): 0 scalar, 1 SSE2, 2 AVX2. */
#if BPE_SSE2 && defined(__GNUC__) && (defined(__x86_64__) || defined(__i386__)) && !defined(BPE_NO_AVX2)
#define BPE_AVX2 1
#include <immintrin.h>
#define BPE_IN_RANGE32(v, lo, hi) \
    _mm256_cmpgt_epi8(_mm256_set1_epi8((char)(-128 + ((hi) - (lo) + 1))), \
                      _mm256_add_epi8((v), _mm256_set1_epi8((char)(0x80 - (lo)))))
#define BPE_MASK32(x) ((uint64_t)(uint32_t)_mm256_movemask_epi8(x))

__attribute__((target("avx2"), unused)) static void bpe_classify64_avx2(const uint8_t* p, BpeAsciiMasks* m) {
    int k;
    m->lower = m->upper = m->digit = m->space = m->other_ws = m->newline = m->slash = m->quote =
        m->wide = 0;
    for (k = 0; k < 2; ++k) {
        __m256i v = _mm256_loadu_si256((const __m256i*)(p + 32 * k));
        int s = 32 * k;
        m->lower |= BPE_MASK32(BPE_IN_RANGE32(v, 'a', 'z')) << s;
        m->upper |= BPE_MASK32(BPE_IN_RANGE32(v, 'A', 'Z')) << s;
        m->digit |= BPE_MASK32(BPE_IN_RANGE32(v, '0', '9')) << s;
        m->space |= BPE_MASK32(_mm256_cmpeq_epi8(v, _mm256_set1_epi8(' '))) << s;
        m->other_ws |= BPE_MASK32(_mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\t')),
                                                  BPE_IN_RANGE32(v, 0x0B, 0x0C))) << s;
        m->newline |= BPE_MASK32(_mm256_or_si256(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\n')),
                                                 _mm256_cmpeq_epi8(v, _mm256_set1_epi8('\r')))) << s;
        m->slash |= BPE_MASK32(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('/'))) << s;
        m->quote |= BPE_MASK32(_mm256_cmpeq_epi8(v, _mm256_set1_epi8('\''))) << s;
        m->wide |= BPE_MASK32(v) << s;
    }
}

static inline int bpe_cpu_avx2(void) { return __builtin_cpu_supports("avx2"); }
#else
#define BPE_AVX2 0
static inline void bpe_classify64_avx2(const uint8_t* p, BpeAsciiMasks* m) { bpe_classify64_scalar(p, m); }
static inline int bpe_cpu_avx2(void) { return 0; }
#endif

#include <stdlib.h>
#include <string.h>
static int bpe_simd_level_value = -1;

static inline int bpe_simd_level(void) {
    if (bpe_simd_level_value < 0) {  /* a race writes the same value */
        const char* want = getenv("BPECORE_SIMD");
        int level = bpe_cpu_avx2() ? 2 : BPE_SSE2;
        if (want && strcmp(want, "sse2") == 0 && level > 1) level = 1;
        if (want && strcmp(want, "scalar") == 0) level = 0;
        bpe_simd_level_value = level;
    }
    return bpe_simd_level_value;
}

/* The classification at the level bpe_simd_level() chose. */
static inline void bpe_classify64(const uint8_t* p, BpeAsciiMasks* m) {
    int level = bpe_simd_level();
#if BPE_SSE2
    if (level == 2) bpe_classify64_avx2(p, m);
    else if (level == 1) bpe_classify64_sse2(p, m);
    else bpe_classify64_scalar(p, m);
#else
    (void)level;
    bpe_classify64_scalar(p, m);
#endif
}

/* Index of the highest set bit of x (x != 0). */
#if defined(__GNUC__)
static inline int bpe_top64(uint64_t x) { return 63 - __builtin_clzll(x); }
#else
static inline int bpe_top64(uint64_t x) { int k = 63; while (!(x >> k)) --k; return k; }
#endif

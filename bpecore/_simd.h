/* Bit and memory helpers with a portable fallback: prefetch, popcount, count trailing zeros.
   Declared for Cython in bpecore/_simd.pxd. */
#pragma once
#include <stdint.h>

#if defined(__GNUC__)
#define bpe_prefetch(p) __builtin_prefetch((const void*)(p))
#else
#define bpe_prefetch(p) ((void)0)
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

# Bit and memory helpers (bpecore/_simd.h): prefetch, popcount, count trailing zeros.
from libc.stdint cimport uint64_t

cdef extern from "bpecore/_simd.h" nogil:
    #: Hint the cache to load the line at p (no-op without GCC builtins).
    void bpe_prefetch(const void* p) noexcept
    #: Set bits of x.
    int popcount64 "bpe_popcount64"(uint64_t x) noexcept
    #: 1 when little-endian 8-byte loads and bpe_ctz64 are fast: the SWAR ASCII tests apply.
    const bint BPE_SWAR
    #: Trailing zero bits of x (x != 0).
    int bpe_ctz64(uint64_t x) noexcept
    #: BPE_LOW_BYTES[k]: a word with its k low bytes set (k = 0..8).
    const uint64_t BPE_LOW_BYTES[9]

# UTF-8 from CPython's PEP 393 str buffers (Latin-1, UCS-2, UCS-4), without the GIL.
#
# utf8_size measures, utf8_fill writes: one pass each, 16 code units per step with SSE2
# (bpecore/_simd.h; the x86-64 baseline), else the scalar code (ASCII runs 8 (Latin-1) or 4 (UCS-2)
# code units per step); lone surrogates are refused (-1) by utf8_size, as CPython's encoder
# refuses them. utf8_offsets maps character offsets to byte offsets in UTF-8. No allocation:
# the caller sizes the output. Used by backtrack (long texts) and batch (each thread's texts).
from libc.stdint cimport int64_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

from bpecore._simd cimport (
    BPE_SSE2,
    bpe_ascii16_u8,
    bpe_ascii16_u16,
    bpe_ascii16_u32,
    bpe_ctz64,
    bpe_utf8_extra_u8,
    bpe_utf8_extra_u16,
    bpe_utf8_extra_u32,
    popcount64,
)

cdef extern from *:
    """
    #ifndef BPE_UTF8_BUFFER
    #define BPE_UTF8_BUFFER
    #include <cstdlib>
    // Bytes for utf8_fill, not zeroed first: std::vector<uint8_t>::resize zeroes them, a memset of
    // the whole text that utf8_fill then overwrites. Grows, never shrinks; freed with it.
    struct BpeUtf8Buffer {
        unsigned char* p = nullptr;
        size_t cap = 0;
        BpeUtf8Buffer() {}
        BpeUtf8Buffer(const BpeUtf8Buffer&) = delete;
        BpeUtf8Buffer& operator=(const BpeUtf8Buffer&) = delete;
        ~BpeUtf8Buffer() { std::free(p); }
        unsigned char* get(size_t n) {  // room for n bytes, or NULL when memory is short
            if (n > cap) {
                std::free(p);
                p = (unsigned char*)std::malloc(n ? n : 1);
                cap = p ? n : 0;
            }
            return p;
        }
    };
    #endif
    """
    #: Room for utf8_fill's output, not zeroed: ``get(n)`` gives n bytes (NULL when memory is short).
    cppclass Utf8Buffer "BpeUtf8Buffer":
        uint8_t* get(size_t n) noexcept nogil


#: Non-ASCII texts of at least this many characters are turned into UTF-8 with the GIL released
#: (backtrack's ``text_utf8``, batch's claiming threads): PyUnicode_AsUTF8AndSize holds it for
#: about 2.5 ns per character (7 ms for 2.8 M characters), time in which no other thread (a
#: server's event loop) can run. Shorter ones are converted under the GIL: by utf8_size +
#: utf8_fill in ``text_utf8`` (a few microseconds, 2.5x fewer instructions than CPython's
#: conversion; docs/perf/backtrack.md), by CPython (cached in the str) in batch's caller.
cdef enum:
    NOGIL_UTF8_CHARS = 65536


cdef inline Py_ssize_t utf8_extra(uint32_t c) noexcept nogil:
    """UTF-8 bytes of code point c beyond the first; -1 for a lone surrogate."""
    if c < 0x80:
        return 0
    if c < 0x800:
        return 1
    if c < 0x10000:
        return -1 if 0xD800 <= c < 0xE000 else 2
    return 3


cdef inline Py_ssize_t utf8_size(unsigned int kind, const void* data, Py_ssize_t m) noexcept nogil:
    """Bytes of the UTF-8 of ``m`` code points of a PEP 393 buffer; -1 if one is a lone surrogate."""
    if BPE_SSE2:
        return utf8_size_blocks(kind, data, m)
    return utf8_size_scalar(kind, data, m)


cdef inline void utf8_fill(unsigned int kind, const void* data, Py_ssize_t m, uint8_t* out) noexcept nogil:
    """Write the UTF-8 of ``m`` code points (no lone surrogates) to ``out``, sized by utf8_size."""
    if BPE_SSE2:
        utf8_fill_blocks(kind, data, m, out)
    else:
        utf8_fill_scalar(kind, data, m, out)


cdef inline uint8_t* utf8_into(unsigned int kind, const void* data, Py_ssize_t m, Utf8Buffer& buf,
                               Py_ssize_t* size) noexcept nogil:
    """utf8_size + utf8_fill into ``buf``: the UTF-8 of ``m`` code points; size[0] = its length,
    -1 (and NULL) on a lone surrogate; NULL when memory is short."""
    size[0] = utf8_size(kind, data, m)
    if size[0] < 0:
        return NULL
    cdef uint8_t* out = buf.get(size[0])
    if out != NULL:
        utf8_fill(kind, data, m, out)
    return out


cdef inline Py_ssize_t utf8_size_blocks(unsigned int kind, const void* data, Py_ssize_t m) noexcept nogil:
    """utf8_size, 16 code units per step (every code point counted in SIMD lanes), the tail scalar."""
    cdef Py_ssize_t i = 0, size = m, x
    cdef const uint8_t* d1 = <const uint8_t*>data
    cdef const uint16_t* d2 = <const uint16_t*>data
    cdef const uint32_t* d4 = <const uint32_t*>data
    cdef int64_t blocks = m // 16
    if kind == 1:
        x = bpe_utf8_extra_u8(d1, blocks)
    elif kind == 2:
        x = bpe_utf8_extra_u16(d2, blocks)
    else:
        x = bpe_utf8_extra_u32(d4, blocks)
    if x < 0:
        return -1
    size += x
    i = 16 * blocks
    if kind == 1:
        x = utf8_size_scalar(kind, d1 + i, m - i)
    elif kind == 2:
        x = utf8_size_scalar(kind, d2 + i, m - i)
    else:
        x = utf8_size_scalar(kind, d4 + i, m - i)
    return -1 if x < 0 else size - (m - i) + x


cdef inline void utf8_fill_blocks(unsigned int kind, const void* data, Py_ssize_t m, uint8_t* out) noexcept nogil:
    """utf8_fill, ASCII runs 16 code units per step (one 16-byte store), the rest one by one.

    Each step stores 16 bytes at ``out + k`` and keeps the ASCII head of them: safe, as the
    UTF-8 of the 16 or more units left is 16 bytes if they are all ASCII and longer otherwise."""
    cdef Py_ssize_t i = 0, k = 0, x
    cdef unsigned na
    cdef uint32_t c
    cdef const uint8_t* d1 = <const uint8_t*>data
    cdef const uint16_t* d2 = <const uint16_t*>data
    cdef const uint32_t* d4 = <const uint32_t*>data
    while i < m:
        if i + 16 <= m:
            if kind == 1:
                na = bpe_ascii16_u8(d1 + i, out + k)
            elif kind == 2:
                na = bpe_ascii16_u16(d2 + i, out + k)
            else:
                na = bpe_ascii16_u32(d4 + i, out + k)
            if na == 0:
                i += 16
                k += 16
                continue
            x = bpe_ctz64(na)
            i += x
            k += x
        # a run of non-ASCII code points (or the tail), one by one
        while i < m:
            c = d1[i] if kind == 1 else (d2[i] if kind == 2 else d4[i])
            k += utf8_put(c, out + k)
            i += 1
            if i + 16 <= m and (d1[i] if kind == 1 else (d2[i] if kind == 2 else d4[i])) < 0x80:
                break


cdef inline Py_ssize_t utf8_size_scalar(unsigned int kind, const void* data, Py_ssize_t m) noexcept nogil:
    """utf8_size without SIMD (other CPUs; the tail of utf8_size_blocks).

    Runs of ASCII are skipped 8 (Latin-1) or 4 (UCS-2) code units per step (backtrack.pyx's
    Performance notes, step 26)."""
    cdef Py_ssize_t i = 0, size = m, x
    cdef uint64_t w
    cdef const uint8_t* d1 = <const uint8_t*>data
    cdef const uint16_t* d2 = <const uint16_t*>data
    cdef const uint32_t* d4 = <const uint32_t*>data
    if kind == 1:
        while i + 8 <= m:
            memcpy(&w, d1 + i, 8)
            size += popcount64(w & <uint64_t>0x8080808080808080ULL)
            i += 8
        while i < m:
            size += d1[i] >> 7
            i += 1
        return size
    if kind == 2:
        while i < m:
            if i + 4 <= m:
                memcpy(&w, d2 + i, 8)
                if not (w & <uint64_t>0xFF80FF80FF80FF80ULL):
                    i += 4
                    continue
            x = utf8_extra(d2[i])
            if x < 0:
                return -1
            size += x
            i += 1
        return size
    for i in range(m):
        x = utf8_extra(d4[i])
        if x < 0:
            return -1
        size += x
    return size


cdef inline Py_ssize_t utf8_put(uint32_t c, uint8_t* out) noexcept nogil:
    """Write the UTF-8 of c (not a lone surrogate) at out; returns its length."""
    if c < 0x80:
        out[0] = <uint8_t>c
        return 1
    if c < 0x800:
        out[0] = <uint8_t>(0xC0 | (c >> 6))
        out[1] = <uint8_t>(0x80 | (c & 0x3F))
        return 2
    if c < 0x10000:
        out[0] = <uint8_t>(0xE0 | (c >> 12))
        out[1] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
        out[2] = <uint8_t>(0x80 | (c & 0x3F))
        return 3
    out[0] = <uint8_t>(0xF0 | (c >> 18))
    out[1] = <uint8_t>(0x80 | ((c >> 12) & 0x3F))
    out[2] = <uint8_t>(0x80 | ((c >> 6) & 0x3F))
    out[3] = <uint8_t>(0x80 | (c & 0x3F))
    return 4


cdef inline void utf8_fill_scalar(unsigned int kind, const void* data, Py_ssize_t m, uint8_t* out) noexcept nogil:
    """utf8_fill without SIMD (other CPUs): ASCII runs 8 (Latin-1) or 4 (UCS-2) code units per step."""
    cdef Py_ssize_t i = 0, k = 0
    cdef uint64_t w
    cdef uint32_t q
    cdef const uint8_t* d1 = <const uint8_t*>data
    cdef const uint16_t* d2 = <const uint16_t*>data
    cdef const uint32_t* d4 = <const uint32_t*>data
    if kind == 1:
        while i < m:
            if i + 8 <= m:
                memcpy(&w, d1 + i, 8)
                if not (w & <uint64_t>0x8080808080808080ULL):
                    memcpy(out + k, &w, 8)
                    i += 8
                    k += 8
                    continue
            k += utf8_put(d1[i], out + k)
            i += 1
    elif kind == 2:
        while i < m:
            if i + 4 <= m:
                memcpy(&w, d2 + i, 8)
                if not (w & <uint64_t>0xFF80FF80FF80FF80ULL):
                    # four ASCII code units, little- or big-endian alike: take them one by one
                    out[k] = <uint8_t>d2[i]
                    out[k + 1] = <uint8_t>d2[i + 1]
                    out[k + 2] = <uint8_t>d2[i + 2]
                    out[k + 3] = <uint8_t>d2[i + 3]
                    i += 4
                    k += 4
                    continue
            k += utf8_put(d2[i], out + k)
            i += 1
    else:
        for i in range(m):
            k += utf8_put(d4[i], out + k)


cdef inline void utf8_offsets(const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& chars) noexcept nogil:
    """Replace the char offsets in ``chars`` (ascending) by byte offsets into the UTF-8 ``s[:n]``."""
    cdef Py_ssize_t byte = 0, char_i = 0, k
    for k in range(<Py_ssize_t>chars.size()):
        while char_i < chars[k]:
            byte += 1
            while byte < n and (s[byte] & 0xC0) == 0x80:
                byte += 1
            char_i += 1
        chars[k] = byte


cdef inline bint is_lead(uint8_t b) noexcept nogil:
    """b starts a UTF-8 character (it is not a continuation byte)."""
    return (b & 0xC0) != 0x80

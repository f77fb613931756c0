/* Transparent huge pages for large read-only tables read at random. Declared for Cython in
   bpecore/_hugepages.pxd. */
#pragma once
#include <stddef.h>
#include <stdint.h>

#if defined(__linux__)
#include <sys/mman.h>
#ifndef MADV_HUGEPAGE
#define MADV_HUGEPAGE 14
#endif
#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25
#endif
static int bpe_huge_pages(const void* p, size_t n) {
    /* Back the 2 MB-aligned interior of p[:n] by transparent huge pages, now (MADV_COLLAPSE,
       Linux >= 6.1) and for later faults (MADV_HUGEPAGE). Contents are unchanged; readers in
       other threads are unaffected. Returns the bytes asked for, 0 if too small or refused. */
    const uintptr_t huge = (uintptr_t)2 << 20;
    uintptr_t a = ((uintptr_t)p + huge - 1) & ~(huge - 1);
    uintptr_t e = ((uintptr_t)p + n) & ~(huge - 1);
    if (e <= a) return 0;
    madvise((void*)a, e - a, MADV_HUGEPAGE);
    if (madvise((void*)a, e - a, MADV_COLLAPSE) != 0) return 0;
    return (int)((e - a) >> 20);
}
#else
static int bpe_huge_pages(const void* p, size_t n) { (void)p; (void)n; return 0; }
#endif

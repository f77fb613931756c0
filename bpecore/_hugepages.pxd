# Transparent huge pages for large read-only tables (bpecore/_hugepages.h).

cdef extern from "bpecore/_hugepages.h" nogil:
    #: Back the 2 MB-aligned interior of p[:n] by huge pages, now and for later faults (Linux);
    #: returns the megabytes asked for, 0 if too small, refused or not Linux.
    int bpe_huge_pages(const void* p, size_t n) noexcept

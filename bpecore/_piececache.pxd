# The piece cache's table (bpecore/_piececache.h); used through bpecore/piececache.pyx.

from libc.stdint cimport uint8_t, uint32_t, uint64_t

cdef extern from "bpecore/_piececache.h" nogil:
    enum:
        BPE_CACHE_KEY
        BPE_CACHE_IDS
    ctypedef struct BpeCacheSlot:
        pass
    ctypedef struct BpeCacheTable:
        uint64_t nslots
    BpeCacheTable* bpe_cache_new(uint64_t max_bytes)
    void bpe_cache_free(BpeCacheTable* t)
    const BpeCacheSlot* bpe_cache_bucket(const BpeCacheTable* t, uint64_t h)
    int bpe_cache_get(const BpeCacheTable* t, uint64_t h, const uint8_t* p, int n, uint32_t* ids)
    void bpe_cache_put(BpeCacheTable* t, uint64_t h, const uint8_t* p, int n, const uint32_t* ids, int ntok)
    int bpe_cache_read_slot(const BpeCacheTable* t, uint64_t i, uint8_t* key, uint32_t* ids, int* ntok,
                            int* has_ids)
    uint64_t bpe_cache_entries(const BpeCacheTable* t)
    void bpe_cache_count(BpeCacheTable* t, uint64_t hits, uint64_t misses)
    uint64_t bpe_cache_hits "bpe_cache_stat_hits"(const BpeCacheTable* t)
    uint64_t bpe_cache_misses "bpe_cache_stat_misses"(const BpeCacheTable* t)

// The piece cache shared across calls and threads (bpecore/piececache.pyx documents its use).
//
// A fixed table of 64-byte slots (one cache line each), two slots per bucket; the bucket is the
// top bits of the piece's hash (vocab.pxd's piece_hash, computed anyway for the whole-piece
// table). A slot holds a piece of 2..BPE_CACHE_KEY bytes, its token count and, when there are at
// most BPE_CACHE_IDS of them, its token ids. The table is allocated and zeroed once and never
// grows: its size is the memory cap, resident from the start.
// A full bucket loses the slot the new piece's hash picks (random replacement).
//
// Concurrency without the GIL: each slot is a seqlock. A reader copies the slot between two reads
// of its sequence number and trusts the copy only if the number was even and unchanged; a writer
// claims the slot by a compare-and-swap from even to odd (a writer that finds it odd or loses the
// race skips the insert: the cache is a hint), writes, then publishes the next even number.
// Readers never write shared memory, so a word read by every thread stays in every core's cache;
// hit and miss counts are summed per call and added once (relaxed atomics).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>

#define BPE_CACHE_KEY 32   // longest piece kept (bytes)
#define BPE_CACHE_IDS 6    // most ids kept per piece; longer encodings keep only their count

struct alignas(64) BpeCacheSlot {
    std::atomic<uint32_t> seq;   // even: stable; odd: being written
    uint8_t len;                 // piece length, 0 = empty
    uint8_t ntok;                // its token count
    uint8_t has_ids;             // ids[:ntok] are valid
    uint8_t pad;
    uint8_t key[BPE_CACHE_KEY];  // the piece's bytes (zero padded)
    uint32_t ids[BPE_CACHE_IDS];
};
static_assert(sizeof(BpeCacheSlot) == 64, "one cache line per slot");

struct BpeCacheTable {
    BpeCacheSlot* slots;         // 2 << bits slots, 64-byte aligned
    void* block;                 // what malloc returned
    uint32_t shift;              // bucket = hash >> shift
    uint64_t nslots;
    std::atomic<uint64_t> hits;
    std::atomic<uint64_t> misses;
    std::atomic<uint64_t> inserts;
};

// A table of at most max_bytes (rounded down to a power of two of slots, at least 2 buckets);
// NULL when max_bytes is too small for 2 buckets or malloc fails.
static inline BpeCacheTable* bpe_cache_new(uint64_t max_bytes) {
    uint64_t nslots = max_bytes / sizeof(BpeCacheSlot);
    if (nslots < 4) return nullptr;
    uint32_t bits = 1;   // buckets = 1 << bits, slots = 2 << bits
    while (((uint64_t)4 << bits) <= nslots && bits < 40) bits++;
    BpeCacheTable* t = new (std::nothrow) BpeCacheTable();
    if (!t) return nullptr;
    t->nslots = (uint64_t)2 << bits;
    t->block = std::malloc(t->nslots * sizeof(BpeCacheSlot) + 64);
    if (!t->block) {
        delete t;
        return nullptr;
    }
    t->slots = (BpeCacheSlot*)(((uintptr_t)t->block + 63) & ~(uintptr_t)63);
    // Touched now, not as slots fill: a first touch per page in the calls that fill a new table
    // cost more than the cache saved them (docs/perf/backtrack.md, piece cache).
    std::memset(t->slots, 0, t->nslots * sizeof(BpeCacheSlot));
    t->shift = 64 - bits;
    t->hits.store(0);
    t->misses.store(0);
    t->inserts.store(0);
    return t;
}

static inline void bpe_cache_free(BpeCacheTable* t) {
    if (t) {
        std::free(t->block);
        delete t;
    }
}

static inline const BpeCacheSlot* bpe_cache_bucket(const BpeCacheTable* t, uint64_t h) {
    return t->slots + ((h >> t->shift) << 1);
}

// Look p[:n] up (2 <= n <= BPE_CACHE_KEY, h its piece_hash). Returns its token count, or -1 on a
// miss; with ids != NULL only an entry with its ids counts, and they are copied to ids.
static inline int bpe_cache_get(const BpeCacheTable* t, uint64_t h, const uint8_t* p, int n,
                                uint32_t* ids) {
    const BpeCacheSlot* b = bpe_cache_bucket(t, h);
    for (int w = 0; w < 2; w++) {
        const BpeCacheSlot* s = b + w;
        uint32_t seq = s->seq.load(std::memory_order_acquire);
        if (seq & 1 || s->len != n) continue;
        uint8_t key[BPE_CACHE_KEY];
        uint32_t copy[BPE_CACHE_IDS];
        std::memcpy(key, s->key, BPE_CACHE_KEY);
        int ntok = s->ntok;
        int has_ids = s->has_ids;
        if (ids) std::memcpy(copy, s->ids, sizeof(copy));
        std::atomic_thread_fence(std::memory_order_acquire);
        if (s->seq.load(std::memory_order_relaxed) != seq) continue;
        if (std::memcmp(key, p, n) != 0) continue;
        if (ids) {
            if (!has_ids) return -1;
            std::memcpy(ids, copy, sizeof(uint32_t) * ntok);
        }
        return ntok;
    }
    return -1;
}

// Remember p[:n] -> ntok tokens (ids[:ntok] if ids != NULL and ntok <= BPE_CACHE_IDS). A slot
// being written by another thread is left alone.
static inline void bpe_cache_put(BpeCacheTable* t, uint64_t h, const uint8_t* p, int n,
                                 const uint32_t* ids, int ntok) {
    BpeCacheSlot* b = (BpeCacheSlot*)bpe_cache_bucket(t, h);
    BpeCacheSlot* s = b[0].len == 0 ? b : (b[1].len == 0 ? b + 1 : b + ((h >> 20) & 1));
    uint32_t seq = s->seq.load(std::memory_order_relaxed);
    if (seq & 1 || !s->seq.compare_exchange_strong(seq, seq + 1, std::memory_order_acquire,
                                                    std::memory_order_relaxed))
        return;
    std::atomic_thread_fence(std::memory_order_release);
    if (s->len == 0) t->inserts.fetch_add(1, std::memory_order_relaxed);
    std::memset(s->key, 0, BPE_CACHE_KEY);
    std::memcpy(s->key, p, n);
    s->len = (uint8_t)n;
    s->ntok = (uint8_t)(ntok < 255 ? ntok : 255);
    s->has_ids = ids != nullptr && ntok <= BPE_CACHE_IDS;
    if (s->has_ids) std::memcpy(s->ids, ids, sizeof(uint32_t) * ntok);
    s->seq.store(seq + 2, std::memory_order_release);
}

// Copy slot i of t into key (BPE_CACHE_KEY bytes) and, when it has them, its ids; returns the
// piece's length, or 0 for an empty slot or one being written (a torn copy is dropped, as in
// bpe_cache_get). For carrying a table's entries into a larger one (piececache.pyx).
static inline int bpe_cache_read_slot(const BpeCacheTable* t, uint64_t i, uint8_t* key,
                                      uint32_t* ids, int* ntok, int* has_ids) {
    const BpeCacheSlot* s = t->slots + i;
    uint32_t seq = s->seq.load(std::memory_order_acquire);
    if (seq & 1) return 0;
    int n = s->len;
    std::memcpy(key, s->key, BPE_CACHE_KEY);
    std::memcpy(ids, s->ids, sizeof(uint32_t) * BPE_CACHE_IDS);
    *ntok = s->ntok;
    *has_ids = s->has_ids;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (s->seq.load(std::memory_order_relaxed) != seq) return 0;
    return n;
}

// Slots in use: slots are filled, never emptied, so this is how many were first filled.
static inline uint64_t bpe_cache_entries(const BpeCacheTable* t) {
    return t->inserts.load(std::memory_order_relaxed);
}

static inline void bpe_cache_count(BpeCacheTable* t, uint64_t hits, uint64_t misses) {
    if (hits) t->hits.fetch_add(hits, std::memory_order_relaxed);
    if (misses) t->misses.fetch_add(misses, std::memory_order_relaxed);
}

static inline uint64_t bpe_cache_stat_hits(const BpeCacheTable* t) {
    return t->hits.load(std::memory_order_relaxed);
}

static inline uint64_t bpe_cache_stat_misses(const BpeCacheTable* t) {
    return t->misses.load(std::memory_order_relaxed);
}

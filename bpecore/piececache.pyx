"""The piece cache: BPE results of pieces, kept across calls and shared by threads.

Each encoder (BacktrackEncoder) owns one PieceCache. encode_text (backtrack.pyx) looks every
piece of 2-32 bytes that is not itself a token up in it before backtracking, and stores what it
computed: a hit costs one prefetched cache line and a 32-byte compare, where the backtracking of a
short piece costs a trie walk per byte. The table (_piececache.h) has a fixed size, chosen once:
that size is the cap, whatever is counted; a full bucket loses one of its two slots. Lookups and
inserts take no lock (a seqlock per slot), so batch workers and service threads share it with the
GIL released. Exactness does not depend on it: a hit returns what the encoder computed before for
the same bytes, and the key is compared in full.

Memory: at most ``get_cache_size()`` bytes per encoder (64 per slot). A table is zeroed when it
is made (one that faulted its pages in as slots filled made its first calls slower than no cache
at all): the encoder's first call makes one of START_BYTES, and a call that finds it over half
full makes one GROWTH times larger, up to the cap, and carries its entries over (learning them
again cost the calls after each growth: docs/perf/backtrack.md, piece cache, step 6). An encoder
never used takes none.
Settings: the environment variable BPECORE_PIECE_CACHE (bytes, with an optional K/M/G suffix;
0 turns the cache off) read at import, or ``set_cache_size`` at any time (it replaces every live
encoder's table; calls under way finish on the old one).
"""

import os
import threading
import weakref

from libc.stdint cimport uint8_t, uint32_t, uint64_t

from bpecore._piececache cimport (
    BPE_CACHE_IDS, BPE_CACHE_KEY, BpeCacheTable, bpe_cache_entries, bpe_cache_free, bpe_cache_hits,
    bpe_cache_misses, bpe_cache_new, bpe_cache_put, bpe_cache_read_slot,
)
from bpecore.vocab cimport load_head, piece_hash

#: Per-encoder cap when BPECORE_PIECE_CACHE is not set: 65,536 slots (the English, code and
#: multilingual corpora, 3 MB, fill 23,000 of them).
DEFAULT_CACHE_BYTES = 4 << 20
#: Bytes per slot (one cache line).
SLOT_BYTES = 64
#: A new table's size: small, so that an encoder's first call does not zero its whole cap.
START_BYTES = 64 << 10
#: A table over half full is replaced by one this many times larger (empty), up to the cap.
GROWTH = 8

_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(value) -> int:
    """``"64M"`` -> 67108864; an int is returned as is. ValueError for anything else or below 0."""
    if isinstance(value, int) and not isinstance(value, bool):
        size = value
    else:
        text = str(value).strip().upper().removesuffix("IB").removesuffix("B")
        unit = text[len(text) - 1 :] if text.endswith(("K", "M", "G")) else ""
        number = text[: len(text) - len(unit)].strip()
        if not number.isdigit():
            raise ValueError(f"not a size in bytes: {value!r} (e.g. 16777216, 64M, 0 = off)")
        size = int(number) * _UNITS[unit]
    if size < 0:
        raise ValueError(f"a cache size cannot be negative: {value!r}")
    return size


def _from_environment() -> int:
    value = os.environ.get("BPECORE_PIECE_CACHE")
    if value is None or not value.strip():
        return DEFAULT_CACHE_BYTES
    return parse_size(value)


_size = _from_environment()
_lock = threading.Lock()
_caches = weakref.WeakSet()


cdef class CacheTable:
    """A table for a cap of ``max_bytes``, of at most ``size`` bytes (default: the cap); ``ptr``
    NULL when that is under 4 slots (off)."""

    def __cinit__(self, max_bytes, size=None):
        self.max_bytes = max_bytes
        size = max_bytes if size is None else min(size, max_bytes)
        self.ptr = bpe_cache_new(size) if size >= 4 * SLOT_BYTES else NULL
        if self.ptr == NULL and size >= 4 * SLOT_BYTES:
            raise MemoryError(f"piece cache: cannot allocate {size} bytes")

    cdef bint crowded(self):
        """Over half full, and a larger table fits in its cap."""
        return (self.ptr != NULL and bpe_cache_entries(self.ptr) * 2 > self.ptr.nslots
                and self.ptr.nslots * SLOT_BYTES * 2 <= self.max_bytes)

    def __dealloc__(self):
        bpe_cache_free(self.ptr)
        self.ptr = NULL

    def info(self) -> dict:
        """entries, bytes (the table's size, the most it can take), hits, misses."""
        if self.ptr == NULL:
            return {"entries": 0, "bytes": 0, "hits": 0, "misses": 0}
        return {
            "entries": bpe_cache_entries(self.ptr),
            "bytes": self.ptr.nslots * SLOT_BYTES,
            "hits": bpe_cache_hits(self.ptr),
            "misses": bpe_cache_misses(self.ptr),
        }


cdef void carry_over(BpeCacheTable* dst, const BpeCacheTable* src) noexcept nogil:
    """Put every entry of ``src`` into ``dst`` (a larger table of the same encoder), under the hash
    encode_text gives the piece (vocab.pxd's piece_hash); ``src`` may be in use meanwhile."""
    cdef uint8_t key[BPE_CACHE_KEY]
    cdef uint32_t ids[BPE_CACHE_IDS]
    cdef int n, ntok, has_ids
    cdef uint64_t i
    cdef const uint32_t* given
    for i in range(src.nslots):
        n = bpe_cache_read_slot(src, i, key, ids, &ntok, &has_ids)
        if n:
            given = &ids[0] if has_ids else NULL
            bpe_cache_put(dst, piece_hash(key, n, load_head(key, n)), key, n, given, ntok)


cdef class PieceCache:
    """An encoder's piece cache, registered for cache_info and set_cache_size; its table is made
    (and zeroed) by the first call that uses it."""

    def __init__(self):
        self.name = None
        self.table = None
        self.own = None
        with _lock:
            _caches.add(self)

    cdef CacheTable get(self):
        cdef CacheTable table = self.table, old
        if table is None or table.crowded():
            with _lock:
                table = self.table
                if table is None:
                    table = CacheTable(_size if self.own is None else self.own, START_BYTES)
                elif table.crowded():
                    old = table
                    table = CacheTable(old.max_bytes, old.ptr.nslots * SLOT_BYTES * GROWTH)
                    with nogil:
                        carry_over(table.ptr, old.ptr)
                self.table = table
        return table

    def info(self) -> dict:
        """This cache's ``CacheTable.info()`` (zeros before its first use), its cap and name."""
        table = self.table
        if table is None:
            info = {"entries": 0, "bytes": 0, "hits": 0, "misses": 0}
        else:
            info = table.info()
        info["max_bytes"] = _size if self.own is None else self.own
        info["name"] = self.name
        return info

    def clear(self):
        """Forget every entry (the next call makes a new table)."""
        self.table = None

    def resize(self, max_bytes):
        """Give this encoder alone a cap of ``max_bytes`` (0: off), with an empty table, until the
        next set_cache_size."""
        self.own = parse_size(max_bytes)
        self.table = None


def get_cache_size() -> int:
    """The per-encoder cap, in bytes (0: off)."""
    return _size


def set_cache_size(max_bytes) -> None:
    """Set the per-encoder cap (bytes, or a string such as ``"64M"``; 0 turns the cache off).

    Every live encoder whose table has another cap loses it (the next call makes one of the new
    size); calls under way finish on their old one. A cap given to one encoder (``resize``) ends.
    """
    global _size
    size = parse_size(max_bytes)
    cdef PieceCache cache
    with _lock:
        _size = size
        for c in list(_caches):
            cache = c
            cache.own = None
            if cache.table is not None and cache.table.max_bytes != size:
                cache.table = None


def cache_info() -> dict:
    """The piece caches of the live encoders: the cap, totals, and one entry per cache.

    ``{"max_bytes": cap, "entries": ..., "bytes": ..., "hits": ..., "misses": ..., "caches":
    [{"name", "max_bytes", "entries", "bytes", "hits", "misses"}, ...]}``; ``bytes`` is what the
    tables may take (their size), at most ``max_bytes`` each.
    """
    with _lock:
        caches = [c.info() for c in list(_caches)]
    total = {k: sum(c[k] for c in caches) for k in ("entries", "bytes", "hits", "misses")}
    return {"max_bytes": _size, **total, "caches": caches}

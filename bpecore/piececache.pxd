from bpecore._piececache cimport BpeCacheTable


cdef class CacheTable:
    #: One allocation of the shared piece table; a call holds a reference to the one it uses, so
    #: a resize (which installs a new CacheTable) never frees a table under a running call.
    cdef BpeCacheTable* ptr         #: the table, or NULL (the cache is off)
    cdef readonly object max_bytes  #: the cap it was made for (its size is ptr.nslots * 64, at most this)

    cdef bint crowded(self)         #: over half full and below its cap


cdef class PieceCache:
    #: An encoder's piece cache: ``table`` is made by the first call (get), and replaced, never
    #: mutated, by set_cache_size / resize / clear (set to None).
    cdef public CacheTable table    #: None until first used
    cdef public object name         #: the encoding's name, for cache_info (set by Encoding)
    cdef public object own          #: this encoder's own cap (resize), or None: the global one
    cdef object __weakref__

    cdef CacheTable get(self)       #: the table, made now if there is none

# C types for bpecore/chunker.py, which setup.py compiles as it is (Cython's "augmenting .pxd"):
# the chunker's state becomes a struct with C fields and its per-chunk helpers C calls on C
# integers; the .py keeps the rules and still runs uncompiled (tests compare the two builds).
# Locals not listed stay Python objects; generators stay def methods. docs/perf/chunker.md.
cimport cython

from bpecore.interval cimport IntervalCounter

# (boundary, end, tokens) of a chunk; (-1, -1, -1) for none (_NO_END)
ctypedef (Py_ssize_t, Py_ssize_t, Py_ssize_t) _End


@cython.locals(c=Py_UCS4)
cpdef bint _title(str line) except? -1

@cython.locals(words=tuple, firsts=str, out=list, n=Py_ssize_t, i=Py_ssize_t, k=Py_ssize_t)
cpdef list _definition_line_starts(str text, str language)

@cython.locals(k=Py_ssize_t, c=Py_UCS4)
cpdef bint _ends_clause(str line) except? -1


cdef class _CountSearches(IntervalCounter):
    cdef object _counter
    cdef Py_ssize_t _n

    cpdef Py_ssize_t count(self, Py_ssize_t start, Py_ssize_t end) except -1

    @cython.locals(n=Py_ssize_t, lo=Py_ssize_t, c_lo=Py_ssize_t, hi=Py_ssize_t, c_hi=Py_ssize_t,
                   guess=Py_ssize_t, c=Py_ssize_t, halve=bint)
    cpdef Py_ssize_t crossing(self, Py_ssize_t s, Py_ssize_t tokens, Py_ssize_t step) except -1

    @cython.locals(near=Py_ssize_t, c_near=Py_ssize_t, far=Py_ssize_t, c_far=Py_ssize_t,
                   guess=Py_ssize_t, c=Py_ssize_t, halve=bint)
    cpdef Py_ssize_t crossing_before(
        self, Py_ssize_t e, Py_ssize_t lo, Py_ssize_t tokens, Py_ssize_t step
    ) except -1

    cpdef Py_ssize_t last_end_within(
        self, Py_ssize_t s, Py_ssize_t tokens, Py_ssize_t first, Py_ssize_t stop
    ) except -2


cdef class _NextChar:
    cdef str text
    cdef str char
    cdef Py_ssize_t n
    cdef Py_ssize_t lo
    cdef Py_ssize_t at

    @cython.locals(at=Py_ssize_t)
    cpdef Py_ssize_t after(self, Py_ssize_t i) except? -1


cdef class _Newlines:
    cdef str text
    cdef Py_ssize_t s
    cdef Py_ssize_t limit
    cdef bint paragraph
    cdef public Py_ssize_t j

    @cython.locals(text=str, s=Py_ssize_t, i=Py_ssize_t, j=Py_ssize_t)
    cpdef Py_ssize_t next(self) except? -2


cpdef bint _other_terminator(str c) except? -1
cpdef bint _other_closer(str c) except? -1


cdef class _Sentences:
    cdef str text
    cdef Py_ssize_t s
    cdef Py_ssize_t endpos
    cdef bint ascii
    cdef Py_ssize_t hi
    cdef Py_ssize_t dot
    cdef Py_ssize_t bang
    cdef Py_ssize_t ask
    cdef public Py_ssize_t end

    @cython.locals(
        text=str, s=Py_ssize_t, endpos=Py_ssize_t, hi=Py_ssize_t, p=Py_ssize_t, end=Py_ssize_t,
        k=Py_ssize_t, q=Py_ssize_t, c=Py_UCS4,
    )
    cpdef Py_ssize_t next(self) except? -2


cdef class _Chunker:
    cdef public object enc
    cdef public str text
    cdef public Py_ssize_t n
    cdef public Py_ssize_t max_tokens
    cdef public Py_ssize_t overlap
    cdef public bint trim
    cdef public bint balance
    cdef public IntervalCounter counter
    cdef public double chars_per_token
    cdef public bint ascii
    cdef public set heading_ends
    cdef public bint titles
    cdef public list sections
    cdef public Py_ssize_t at
    cdef public Py_ssize_t prev_end
    cdef _End ahead
    cdef _NextChar newline
    cdef _NextChar bang
    cdef _NextChar ask
    cdef _NextChar backslash

    @cython.locals(
        text=str, marks=str, start=Py_ssize_t, prev=Py_ssize_t, k=Py_ssize_t, step=Py_ssize_t,
        width=Py_ssize_t, last=Py_ssize_t, i=Py_ssize_t, starts=list, widths=list,
    )
    cpdef list _code_sections(self, str language)

    @cython.locals(lo=Py_ssize_t, stop=Py_ssize_t)
    cpdef Py_ssize_t _farthest_end(self, Py_ssize_t s, Py_ssize_t tokens) except? -1

    @cython.locals(n=Py_ssize_t, lo=Py_ssize_t, stop=Py_ssize_t)
    cpdef (Py_ssize_t, Py_ssize_t) _crossing(self, Py_ssize_t s, Py_ssize_t tokens)

    @cython.locals(e=Py_ssize_t)
    cpdef Py_ssize_t _look_ahead(
        self, Py_ssize_t s, Py_ssize_t tokens, Py_ssize_t lo, Py_ssize_t first, Py_ssize_t stop
    ) except? -2

    @cython.locals(step=Py_ssize_t, near=Py_ssize_t, best=Py_ssize_t, stop=Py_ssize_t)
    cpdef Py_ssize_t _nearest_start(self, Py_ssize_t e, Py_ssize_t lo, Py_ssize_t tokens) except? -1

    @cython.locals(text=str)
    cpdef Py_ssize_t _rstrip(self, Py_ssize_t s, Py_ssize_t b) except? -1

    @cython.locals(text=str, end=Py_ssize_t)
    cpdef Py_ssize_t _skip_ws(self, Py_ssize_t i, stop=*) except? -1

    @cython.locals(text=str)
    cpdef Py_ssize_t _ws_start(self, Py_ssize_t lo, Py_ssize_t j) except? -1

    @cython.locals(text=str)
    cpdef Py_ssize_t _next_word_end(self, Py_ssize_t i, Py_ssize_t stop) except? -2

    @cython.locals(text=str, before=Py_UCS4, after=Py_UCS4)
    cpdef bint _cuts_cluster(self, Py_ssize_t b) except? -1

    @cython.locals(
        text=str, n=Py_ssize_t, trim=bint, failed=Py_ssize_t, i=Py_ssize_t,
        j=Py_ssize_t, b=Py_ssize_t, end=Py_ssize_t, tokens=Py_ssize_t, walk=_Newlines,
    )
    cpdef _End _newline_level(self, bint paragraph, Py_ssize_t s, Py_ssize_t min_end, Py_ssize_t e)

    @cython.locals(b=Py_ssize_t)
    cpdef Py_ssize_t _sentence_boundary(
        self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t e, bint lower
    ) except? -2

    @cython.locals(bang=bint, ask=bint)
    cpdef _Sentences _sentence_walk(self, Py_ssize_t s, Py_ssize_t endpos)

    @cython.locals(
        failed=Py_ssize_t, start=Py_ssize_t,
        b=Py_ssize_t, end=Py_ssize_t, tokens=Py_ssize_t, walk=_Sentences,
    )
    cpdef _End _sentence_level(self, Py_ssize_t s, Py_ssize_t min_end, Py_ssize_t e, bint lower)

    @cython.locals(
        text=str, lo=Py_ssize_t, a=Py_ssize_t, nl=Py_ssize_t, nxt=Py_ssize_t, line=str, body=str
    )
    cpdef bint _title_ends(self, Py_ssize_t j, Py_ssize_t b, Py_ssize_t depth=*) except? -1

    @cython.locals(text=str, lo=Py_ssize_t, p=Py_ssize_t, prev=str)
    cpdef bint _opens(self, Py_ssize_t a, Py_ssize_t titles) except? -1

    @cython.locals(text=str, c=Py_UCS4, lo=Py_ssize_t, k=Py_ssize_t)
    cpdef bint _sentence_ends(
        self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t b, bint lower
    ) except? -1

    @cython.locals(
        limit=Py_ssize_t, n=Py_ssize_t, lo=Py_ssize_t, stop=Py_ssize_t, first=Py_ssize_t,
        e_lo=Py_ssize_t, nl=Py_ssize_t, last=Py_ssize_t, split=Py_ssize_t, e_max=Py_ssize_t,
        end=Py_ssize_t, tokens=Py_ssize_t, e=Py_ssize_t, best=_End,
    )
    cpdef _End _best_end(self, Py_ssize_t s, Py_ssize_t min_end)

    @cython.locals(text=str, limit=Py_ssize_t, ws=Py_ssize_t, e_max=Py_ssize_t, best=_End)
    cpdef _End _levels_past(
        self, Py_ssize_t s, Py_ssize_t min_end, Py_ssize_t lo, Py_ssize_t first, Py_ssize_t last
    )

    @cython.locals(level=Py_ssize_t, escapes=bint, best=_End)
    cpdef _End _levels(
        self, Py_ssize_t s, Py_ssize_t min_end, Py_ssize_t e, Py_ssize_t top, Py_ssize_t bottom
    )

    @cython.locals(failed=Py_ssize_t, b=Py_ssize_t, end=Py_ssize_t, tokens=Py_ssize_t)
    cpdef _End _first_fit(self, Py_ssize_t s, Py_ssize_t min_end, object candidates, object cap)

    @cython.locals(tokens=Py_ssize_t)
    cpdef Py_ssize_t _fits(self, Py_ssize_t s, Py_ssize_t min_end, Py_ssize_t end) except? -3

    @cython.locals(i=Py_ssize_t, pos=Py_ssize_t, lvl=Py_ssize_t, level=Py_ssize_t, best=_End)
    cpdef _End _section_levels(self, Py_ssize_t s, Py_ssize_t min_end, Py_ssize_t e, Py_ssize_t top)

    @cython.locals(u_end=Py_ssize_t, last=Py_ssize_t, x=Py_ssize_t, with_tail=Py_ssize_t)
    cpdef Py_ssize_t _with_tail(
        self, Py_ssize_t s, Py_ssize_t u, Py_ssize_t total, Py_ssize_t m, Py_ssize_t tokens
    ) except? -1

    cpdef object _overlap_start(self, Py_ssize_t prev_start, Py_ssize_t end)

    cpdef list chunk_list(self)

    @cython.locals(
        text=str, n=Py_ssize_t, s=Py_ssize_t, min_end=Py_ssize_t, b=Py_ssize_t, end=Py_ssize_t,
        tokens=Py_ssize_t, nxt=Py_ssize_t, best=_End,
    )
    cpdef object _next_chunk(self)

"""Batch encode/count on native threads: ``encode_batch(core, texts, num_threads, count_only)``.

The calling thread takes what only the GIL can give (each text's UTF-8, or the PEP 393 buffer of a
long non-ASCII one, and for PAT_REGEX the `regex` module's piece ends) and publishes the texts one
by one to num_threads - 1 std::threads already running; they and the caller (GIL released) claim
texts from one atomic counter, so the load balances itself whatever the order and sizes. Token
lists are built by the caller, in order, while the other threads keep encoding. Work is
encode_text's per text (backtrack.pyx): O(n) on average, O(n * L) in the worst case (L = longest
token; random base64), plus the `regex` scan for PAT_REGEX (serial, under the GIL, overlapped
with the encoding). Memory: per text, its ids until the caller turns them into a list (encode)
or one count; per thread, the UTF-8 of its largest non-ASCII text.
``count_long`` / ``encode_long`` take one long text on several threads: cut where no context can
move a piece boundary (``first_cut``), each thread finding the cuts of the segments it claims and
turning them into UTF-8 itself; O(n) more for the cut search (each window read twice at most).
Memory: per thread, the UTF-8 of one segment; encode, the ids of the segments not yet listed.
"""

# Performance decisions that hold (numbers: the steps of docs/perf/batch.md, which this
# file's "Performance notes" also means):
# - The threads are started before the texts are prepared, the texts are published one by one
#   and claimed from one atomic counter, and the caller builds the lists while the others
#   encode: the work splits 49-51% between two threads, where an executor with one share per
#   thread started the second thread 2-5 ms late and built the lists serially (0, 1).
# - Non-ASCII texts under NOGIL_UTF8_CHARS take CPython's UTF-8 under the GIL on the caller
#   (cached in the str, fewer instructions); longer ones are converted on the claiming thread (2).
# - The caller stops to build lists once m/16 texts wait, and frees each text's ids once listed:
#   memory bounded by the backlog, few GIL re-acquisitions, speed within the noise (5).
# - encoding.py gives a thread at least 16K characters: starting and joining one costs ~80 us
#   here, the break-even (4).
# - No persistent pool (not done).
# - One long text: cut into segments claimed like texts, shrinking from 1 / (4 * threads) of the
#   text left to 16K code units (guided), each one's cuts found and its UTF-8 made by the thread
#   that claims it (no serial step before the threads start); with the piece cache off, the
#   call's own table stands in for encode_text's local cache, which a segment would start
#   empty: count's 2-thread CPU over one thread on the multilingual corpus was +20-30% with
#   64 KB segments and one serial UTF-8 pass, +0-5% now; encode moves the segments' list items
#   into one list (7). Opt-in (num_threads=1 by default): docs/perf/batch.md, step 7.
# The measurements behind these decisions: docs/perf/batch.md.

from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport uint8_t, uint16_t, uint32_t
from libc.string cimport memcpy
from libcpp.vector cimport vector

from bpecore._classes cimport PAT_CL100K, PAT_LLAMA3, PAT_O200K, PAT_QWEN2, PAT_R50K, PAT_REGEX, PAT_TEKKEN
from bpecore._piececache cimport BpeCacheTable
from bpecore._workers cimport BpeWork
from bpecore.backtrack cimport BacktrackEncoder, encode_text
from bpecore.piececache cimport CacheTable
from bpecore.utf8 cimport NOGIL_UTF8_CHARS, Utf8Buffer, utf8_into
from bpecore.vocab cimport VocabView

from bpecore._text import clean

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)
    bint PyUnicode_IS_COMPACT(object text)
    # The UTF-8 a str caches once asked for it (compact non-ASCII strings); NULL if not yet.
    ctypedef struct PyCompactUnicodeObject:
        Py_ssize_t utf8_length
        char* utf8
    PyObject** PySequence_Fast_ITEMS(object o)
    void Py_SET_SIZE(object o, Py_ssize_t n)
    list PyList_New(Py_ssize_t n)


cdef enum:
    PENDING = 0     #: BpeWork state: not finished
    DONE = 1        #: finished, result written
    REDO = 2        #: holds a lone surrogate: the caller encodes clean(text) itself


cdef struct Text:
    # One text as the threads see it; the str is immutable and the caller holds it.
    const uint8_t* s        #: its UTF-8, or NULL: the claiming thread converts ``data``
    Py_ssize_t n            #: bytes of ``s``, or code points of ``data``
    const void* data        #: PEP 393 buffer (``s`` NULL)
    unsigned int kind       #: its code unit width, 1, 2 or 4 (``s`` NULL)


cdef struct Split:
    # One long text cut for several threads (count_long, encode_long). Window k is the code units
    # [starts[k], starts[k + 1]); segment k runs from the first cut
    # (first_cut) in window k (0 for k = 0) to the first cut in a later window, or to the end,
    # and is empty when window k holds none. Every thread finds the cuts of the segments it
    # claims: the same ones, as they depend on the text alone.
    const void* data        #: the text's UTF-8 (``utf8``) or its PEP 393 buffer
    unsigned int kind       #: bytes per code unit of ``data``: 1 (UTF-8 or Latin-1), 2 or 4
    bint utf8               #: ``data`` is UTF-8 (an ASCII str, or the str's cached UTF-8)
    Py_ssize_t size         #: code units in ``data``
    const Py_ssize_t* starts    #: windows + 1 offsets: 0, ..., size
    Py_ssize_t windows      #: how many windows
    bint newline_cuts       #: a \n followed by an ASCII letter is a cut (not for r50k)
    bint own_table          #: the piece table is the call's own (the encoder's cache is off)


cdef struct Batch:
    # One call's inputs and outputs, shared by its threads (each text written by one thread).
    BpeWork* work
    const Split* split              #: one long text: text i is its segment i (``texts`` unused)
    const VocabView* v
    int kind                        #: pretokenize.PatternKind
    bint count_only
    BpeCacheTable* shared           #: the encoder's piece cache table, or NULL
    Text* texts
    vector[Py_ssize_t]* ends        #: PAT_REGEX: byte ends of each text's pieces (and ~starts after
                                    #: gaps: BacktrackEncoder._pieces); else NULL
    Py_ssize_t* counts              #: count_only: token count of each text
    vector[uint32_t]* outs          #: encode: ids of each text (internal ids), freed once listed
    # The caller's side (encode): texts before ``scan`` are finished, lists built before ``built``.
    Py_ssize_t scan
    Py_ssize_t built
    Py_ssize_t backlog              #: the caller stops encoding to build lists once this many wait
    bint exhausted                  #: no text left to claim


cdef void encode_one(Batch* b, Py_ssize_t i, vector[uint32_t]& scratch, Utf8Buffer& buf,
                     vector[Py_ssize_t]& no_ends) noexcept nogil:
    """Encode or count text ``i`` (segment ``i`` of ``split``) into its slot, then mark it finished."""
    cdef const Text* t = &b.texts[i] if b.split == NULL else NULL
    cdef Text seg
    cdef BpeCacheTable* shared = b.shared
    if b.split != NULL:
        if not segment_of(b.split, i, &seg):
            if b.count_only:
                b.counts[i] = 0
            b.work.finish(i, DONE)
            return
        t = &seg
        if b.split.own_table and seg.n == b.split.size:
            shared = NULL   # not cut after all: encode_text's own cache, as on one thread
    cdef const uint8_t* s = t.s
    cdef Py_ssize_t n = t.n
    cdef vector[uint32_t]* out = &scratch if b.count_only else &b.outs[i]
    if s == NULL:
        s = utf8_into(t.kind, t.data, t.n, buf, &n)
        if s == NULL:   # a lone surrogate (or no memory): the caller encodes it itself
            b.work.finish(i, REDO)
            return
    if not b.count_only:
        out.reserve(n // 3 + 16)
    if b.ends != NULL:
        n = encode_text(b.v, b.kind, s, n, b.ends[i], out[0], b.count_only, shared)
    else:
        n = encode_text(b.v, b.kind, s, n, no_ends, out[0], b.count_only, shared)
    if b.count_only:
        b.counts[i] = n
    b.work.finish(i, DONE)


cdef void run_texts(void* p) noexcept nogil:
    """A thread's loop: claim the next text, wait until it is prepared, encode it; until none left."""
    cdef Batch* b = <Batch*>p
    cdef vector[uint32_t] scratch
    cdef Utf8Buffer buf
    cdef vector[Py_ssize_t] no_ends
    cdef Py_ssize_t i
    while True:
        i = b.work.claim()
        if i >= b.work.size() or not b.work.wait_ready(i):
            return
        encode_one(b, i, scratch, buf, no_ends)


cdef void caller_step(void* p) noexcept nogil:
    """The caller's loop (encode, every text prepared): as run_texts, but return once ``backlog``
    finished texts wait for their lists, or when no text is left (``exhausted``)."""
    cdef Batch* b = <Batch*>p
    cdef vector[uint32_t] scratch
    cdef Utf8Buffer buf
    cdef vector[Py_ssize_t] no_ends
    cdef Py_ssize_t i, m = b.work.size()
    while True:
        while b.scan < m and b.work.state(b.scan) != PENDING:
            b.scan += 1
        if b.scan - b.built >= b.backlog:
            return
        i = b.work.claim()
        if i >= m:
            b.exhausted = True
            return
        encode_one(b, i, scratch, buf, no_ends)


cdef int build_lists(BacktrackEncoder core, tuple items, Batch* b, list result) except -1:
    """result[i] for the finished texts ``built <= i < scan``; their id vectors are freed."""
    cdef Py_ssize_t i
    for i in range(b.built, b.scan):
        if b.work.state(i) == REDO:
            result[i] = core.encode(clean(items[i]))
        else:
            result[i] = core._to_list(b.outs[i])
            b.outs[i].clear()
            b.outs[i].shrink_to_fit()
    b.built = b.scan
    return 0


def encode_batch(BacktrackEncoder core, texts, Py_ssize_t num_threads, bint count_only=False):
    """[core.encode(t) for t in texts] (or core.count), on ``num_threads`` threads (the caller
    included; at most one per text). Lone surrogates are replaced by U+FFFD, as Encoding does for
    single texts. Raises TypeError for an item that is not a str, MemoryError if a thread ran out
    of memory.
    """
    cdef tuple items = tuple(texts)
    cdef Py_ssize_t m = len(items), i
    cdef bint regex = core.kind == PAT_REGEX
    cdef BpeWork work
    cdef Batch b
    cdef vector[Text] prepared
    cdef vector[vector[Py_ssize_t]] ends
    cdef vector[Py_ssize_t] counts
    cdef vector[vector[uint32_t]] outs
    cdef const uint8_t* s
    cdef Py_ssize_t n
    cdef str text
    cdef list result
    cdef object item
    cdef CacheTable table = core.piece_cache.get()   # held for the call: set_cache_size may replace it
    if m == 0:
        return []
    keep = []   # cleaned texts (lone surrogates): their UTF-8 must outlive the threads
    work.reset(m)
    prepared.resize(m)
    if regex:
        ends.resize(m)
    if count_only:
        counts.resize(m)
    else:
        outs.resize(m)
    b.work = &work
    b.split = NULL
    b.v = &core.vocab.view
    b.kind = core.kind
    b.count_only = count_only
    b.shared = table.ptr
    b.texts = prepared.data()
    b.ends = ends.data() if regex else NULL
    b.counts = counts.data()
    b.outs = outs.data()
    b.scan = b.built = 0
    b.backlog = max(1, m >> 4)
    b.exhausted = False
    result = [None] * m
    try:
        if num_threads > 1:
            with nogil:
                work.start(<int>min(num_threads, m) - 1, run_texts, &b)
        for i in range(m):
            item = items[i]
            if type(item) is not str:   # as the single-text calls: no subclasses either
                raise TypeError(f"texts[{i}] is {type(item).__name__}, not str")
            text = item
            if regex:
                try:
                    core._pieces(text, &s, &n, ends[i])
                except UnicodeEncodeError:
                    text = clean(text)
                    keep.append(text)
                    ends[i].clear()
                    core._pieces(text, &s, &n, ends[i])
                prepared[i].s = s
                prepared[i].n = n
            elif PyUnicode_IS_ASCII(text):
                prepared[i].s = <const uint8_t*>PyUnicode_DATA(text)
                prepared[i].n = PyUnicode_GET_LENGTH(text)
            elif PyUnicode_GET_LENGTH(text) < NOGIL_UTF8_CHARS:
                try:
                    s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
                except UnicodeEncodeError:
                    text = clean(text)
                    keep.append(text)
                    s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
                prepared[i].s = s
                prepared[i].n = n
            else:
                prepared[i].s = NULL
                prepared[i].n = PyUnicode_GET_LENGTH(text)
                prepared[i].data = PyUnicode_DATA(text)
                prepared[i].kind = PyUnicode_KIND(text)
            work.publish(i + 1)
        with nogil:
            if count_only:
                work.guarded(run_texts, &b)
            else:
                while not b.exhausted:
                    if work.guarded(caller_step, &b) < 0:
                        break
                    if b.scan > b.built:
                        with gil:
                            build_lists(core, items, &b, result)
            work.join()
        if work.failed():
            raise MemoryError("encode_batch: a thread ran out of memory")
        if count_only:
            for i in range(m):
                result[i] = counts[i] if work.state(i) == DONE else core.count(clean(items[i]))
        else:
            b.scan = m
            build_lists(core, items, &b, result)
    finally:
        work.stop()
        work.join()
    return result


# ---------------------------------------------------------------------------------------------
# One long text on several threads

cdef enum:
    SEGMENT_UNITS = 1 << 14     #: the smallest window, in code units (or bytes)
    GUIDE = 4                   #: a window is at most 1 / (GUIDE * threads) of the text left
    CALL_CACHE_BYTES = 1 << 19  #: the call's own piece table when the encoder's cache is off


ctypedef fused unit_t:
    uint8_t
    uint16_t
    uint32_t


cdef inline bint ascii_letter(uint32_t c) noexcept nogil:
    return (c | 0x20) - 0x61 < 26


cdef inline bint ascii_alnum(uint32_t c) noexcept nogil:
    return ascii_letter(c) or c - 0x30 < 10


cdef Py_ssize_t first_cut(const unit_t* u, Py_ssize_t lo, Py_ssize_t hi, bint newline_cuts) noexcept nogil:
    """The first c in [max(lo, 1), hi) (hi <= the text's length) that is a piece boundary of the
    text whatever follows it, and where the text before it ends as its pieces there do: u[c - 1]
    an ASCII letter or digit and u[c] a space or \\n, or (``newline_cuts``) u[c - 1] a \\n and
    u[c] an ASCII letter; -1 if there is none. ``u`` is UTF-8 or a PEP 393 buffer: the test
    reads ASCII code units only, the same in both.

    Why these are final, for the cl100k, o200k and r50k patterns and the open models' Llama 3,
    Qwen2 and Tekken ones: no alternative matches a letter or digit followed by whitespace
    (letter runs, contractions and digit groups end with a letter or digit; the whitespace,
    punctuation and newline alternatives hold no letter or digit), nor a \\n followed by a letter
    (the letters' one-character prefix excludes \\r and \\n; the punctuation alternative's
    [\\r\\n]* and the whitespace ones end before a letter). So every piece ends at or before c,
    or starts at or after it: the pieces of the text from c are the whole text's (a piece depends
    only on the text to its right: no lookbehind), and those before c too: a letter or digit run
    ends at c whether the text goes on with whitespace or ends (digit groups are counted from
    their left), and a whitespace run ending in \\n before a letter is one piece either way
    (cl100k's ``\\s*[\\r\\n]`` and, at the end, ``\\s++$`` both take all of it; the others'
    ``\\s*[\\r\\n]+``). Not so for r50k, which has no newline alternative: "  \\n" before a
    letter is "  " and "\\n", at the end one piece (``\\s++$``).
    The tests check it against the single-thread count and ids on the corpora and generated text.
    """
    cdef Py_ssize_t c
    cdef uint32_t a, b
    for c in range(max(lo, 1), hi):
        b = u[c]
        a = u[c - 1]
        if (b == 0x20 or b == 0x0A) and ascii_alnum(a):
            return c
        if newline_cuts and a == 0x0A and ascii_letter(b):
            return c
    return -1


cdef Py_ssize_t window_cut(const Split* sp, Py_ssize_t k) noexcept nogil:
    """first_cut in window k of ``sp`` (-1: none)."""
    cdef Py_ssize_t lo = sp.starts[k], hi = sp.starts[k + 1]
    if sp.kind == 1:
        return first_cut(<const uint8_t*>sp.data, lo, hi, sp.newline_cuts)
    if sp.kind == 2:
        return first_cut(<const uint16_t*>sp.data, lo, hi, sp.newline_cuts)
    return first_cut(<const uint32_t*>sp.data, lo, hi, sp.newline_cuts)


cdef bint segment_of(const Split* sp, Py_ssize_t k, Text* t) noexcept nogil:
    """Segment k of ``sp`` in ``t`` (its UTF-8, or its code units for the claiming thread to
    convert); False when it is empty (window k holds no cut). Each window is searched by its own
    segment and by the one before it: 2 passes at most over the text in all."""
    cdef Py_ssize_t start = 0 if k == 0 else window_cut(sp, k), end = sp.size, j, c
    if start < 0:
        return False
    for j in range(k + 1, sp.windows):
        c = window_cut(sp, j)
        if c >= 0:
            end = c
            break
    if sp.utf8:
        t.s = <const uint8_t*>sp.data + start
        t.n = end - start
    else:
        t.s = NULL
        t.n = end - start
        t.data = <const char*>sp.data + start * sp.kind
        t.kind = sp.kind
    return True


cdef int build_split(BacktrackEncoder core, Batch* b, list parts) except -1:
    """Append the list of ids of each finished segment ``built <= i < scan`` to ``parts``, in
    order; their id vectors are freed. 1 if one held a lone surrogate (nothing appended for it)."""
    cdef Py_ssize_t i
    cdef int redo = 0
    for i in range(b.built, b.scan):
        if b.work.state(i) == REDO:
            redo = 1
        elif b.outs[i].size():
            parts.append(core._to_list(b.outs[i]))
            b.outs[i].clear()
            b.outs[i].shrink_to_fit()
    b.built = b.scan
    return redo


cdef list join_lists(list parts):
    """One list of the items of ``parts``, in order; the references move (``parts`` are left
    empty): a pointer copy per item, where extending a list takes an increment and the part's
    release a decrement."""
    cdef Py_ssize_t total = 0, k
    cdef list part
    for part in parts:
        total += len(part)
    cdef list result = PyList_New(total)
    cdef PyObject** dst = PySequence_Fast_ITEMS(result)
    for part in parts:
        k = len(part)
        memcpy(dst, PySequence_Fast_ITEMS(part), k * sizeof(PyObject*))
        dst += k
        Py_SET_SIZE(part, 0)
    return result


cdef bint split_text(BacktrackEncoder core, str text, Py_ssize_t segment, Py_ssize_t threads,
                     Split* sp, vector[Py_ssize_t]& starts) except -1:
    """Fill ``sp`` (its windows in ``starts``) for ``text`` on ``threads`` threads; False when it
    is not cut (under 2 windows, or a pattern first_cut does not know). The windows shrink as the
    text is used up, from 1 / (GUIDE * threads) of it down to ``segment`` (guided scheduling):
    few segments, and small ones last, so that the threads finish together."""
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(text), pos = 0, w
    cdef PyCompactUnicodeObject* compact
    if segment < 1:
        raise ValueError("segment must be at least 1 code unit")
    if m < 2 * segment or core.kind not in (PAT_CL100K, PAT_O200K, PAT_R50K, PAT_LLAMA3, PAT_QWEN2,
                                            PAT_TEKKEN):
        return False
    sp.newline_cuts = core.kind != PAT_R50K
    if PyUnicode_IS_ASCII(text):
        sp.data = PyUnicode_DATA(text)
        sp.size = m
        sp.kind = 1
        sp.utf8 = True
    elif PyUnicode_IS_COMPACT(text) and (<PyCompactUnicodeObject*><PyObject*>text).utf8 != NULL:
        compact = <PyCompactUnicodeObject*><PyObject*>text   # converted by an earlier call: use it
        sp.data = compact.utf8
        sp.size = compact.utf8_length
        sp.kind = 1
        sp.utf8 = True
    else:
        sp.data = PyUnicode_DATA(text)
        sp.size = m
        sp.kind = PyUnicode_KIND(text)
        sp.utf8 = False
    starts.clear()
    while sp.size - pos >= 2 * segment:
        starts.push_back(pos)
        w = max(segment, (sp.size - pos) // (GUIDE * threads))
        pos += min(w, sp.size - pos - segment)
    starts.push_back(pos)
    starts.push_back(sp.size)
    sp.starts = starts.data()
    sp.windows = starts.size() - 1
    return sp.windows >= 2


cdef object run_long(BacktrackEncoder core, str text, Py_ssize_t num_threads, Py_ssize_t segment,
                     bint count_only):
    """count_long / encode_long; None when the text is not cut (the caller counts it on one
    thread)."""
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(text), i, total = 0, nthreads
    cdef Split sp
    cdef vector[Py_ssize_t] starts
    cdef BpeWork work
    cdef Batch b
    cdef vector[Py_ssize_t] counts
    cdef vector[vector[uint32_t]] outs
    cdef CacheTable table
    cdef CacheTable own = None
    cdef list parts
    cdef int redo = 0
    if num_threads <= 1 or not split_text(core, text, segment, num_threads, &sp, starts):
        return None
    nthreads = min(num_threads, sp.windows)
    table = core.piece_cache.get()
    if table.ptr == NULL:   # cache off: the call's own table stands in for encode_text's local one
        own = CacheTable(min(<Py_ssize_t>CALL_CACHE_BYTES, sp.size))
        table = own
    sp.own_table = own is not None
    work.reset(sp.windows)
    if count_only:
        counts.resize(sp.windows)
    else:
        outs.resize(sp.windows)
    b.work = &work
    b.split = &sp
    b.v = &core.vocab.view
    b.kind = core.kind
    b.count_only = count_only
    b.shared = table.ptr
    b.texts = NULL
    b.ends = NULL
    b.counts = counts.data()
    b.outs = outs.data()
    b.scan = b.built = 0
    b.backlog = max(1, sp.windows >> 4)
    b.exhausted = False
    parts = []
    try:
        with nogil:
            work.start(<int>nthreads - 1, run_texts, &b)
            work.publish(sp.windows)
            if count_only:
                work.guarded(run_texts, &b)
            else:
                while not b.exhausted:
                    if work.guarded(caller_step, &b) < 0:
                        break
                    if b.scan > b.built:
                        with gil:
                            redo |= build_split(core, &b, parts)
            work.join()
        if work.failed():
            raise MemoryError("a thread ran out of memory")
        if not count_only:
            b.scan = sp.windows
            redo |= build_split(core, &b, parts)
    finally:
        work.stop()
        work.join()
    for i in range(sp.windows):
        if work.state(i) == REDO:
            redo = 1
        elif count_only:
            total += counts[i]
    if redo:
        raise UnicodeEncodeError("utf-8", text, 0, m, "surrogates not allowed")
    return total if count_only else join_lists(parts)


def count_long(BacktrackEncoder core, str text, Py_ssize_t num_threads,
               Py_ssize_t segment=SEGMENT_UNITS):
    """core.count(text), a text of 2 segments or more counted on up to ``num_threads`` threads
    (the caller included): cut at first_cut boundaries about ``segment`` code units apart
    (SEGMENT_UNITS; UTF-8 bytes when the str is ASCII or has its UTF-8 cached; the tests cut
    smaller ones), the segments claimed from one counter as encode_batch's texts are, each turned
    into UTF-8 by the thread that claims it. Only the hand-written scanners' patterns are cut
    (first_cut's proof is theirs); other patterns count on one thread. Raises UnicodeEncodeError
    on lone surrogates, as core.count does.
    """
    cdef object total = run_long(core, text, num_threads, segment, True)
    return core.count(text) if total is None else total


def encode_long(BacktrackEncoder core, str text, Py_ssize_t num_threads,
                Py_ssize_t segment=SEGMENT_UNITS):
    """core.encode(text), on up to ``num_threads`` threads as count_long; the caller turns each
    segment's ids into the list, in order, while the others encode."""
    cdef object ids = run_long(core, text, num_threads, segment, False)
    return core.encode(text) if ids is None else ids


def long_cuts(BacktrackEncoder core, str text, Py_ssize_t num_threads,
              Py_ssize_t segment=SEGMENT_UNITS):
    """Where count_long and encode_long on ``num_threads`` threads cut ``text``: the start of each
    segment, in the code units they read (characters, or UTF-8 bytes for an ASCII str or one
    with its UTF-8 cached); [0] when it is not cut."""
    cdef Split sp
    cdef vector[Py_ssize_t] windows
    cdef Text t
    cdef Py_ssize_t k
    cdef list starts = [0]
    if not split_text(core, text, segment, num_threads, &sp, windows):
        return starts
    for k in range(1, sp.windows):
        if segment_of(&sp, k, &t):
            starts.append((t.s - <const uint8_t*>sp.data) if sp.utf8
                          else (<const char*>t.data - <const char*>sp.data) // sp.kind)
    return starts

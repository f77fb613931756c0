"""Batch encode/count on native threads: ``encode_batch(core, texts, num_threads, count_only)``.

The calling thread takes what only the GIL can give (each text's UTF-8, or the PEP 393 buffer of a
long non-ASCII one, and for PAT_REGEX the `regex` module's piece ends) and publishes the texts one
by one to num_threads - 1 std::threads already running; they and the caller (GIL released) claim
texts from one atomic counter, so the load balances itself whatever the order and sizes. Token
lists are built by the caller, in order, while the other threads keep encoding. Work is
encode_text's per text (backtrack.pyx): O(n) on average, O(n * L) in the worst case (L = longest
token; random base64), plus the `regex` scan for PAT_REGEX (serial, under the GIL, overlapped
with the encoding). Memory: per text, its ids until the caller turns them into a list (encode)
or one count; per thread, the UTF-8 of its largest non-ASCII text. ``count_text`` counts one
long text on several threads, cut where no context can move a piece boundary (``final_cut``).
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
# - One long text: count_text cuts it at final_cut boundaries into 64 KB segments claimed like
#   texts; opt-in (Encoding.count(num_threads=)): on the shared, loaded 2-core machine it did not
#   win, as a worker descheduled while holding a segment keeps the caller waiting (6).
# The measurements behind these decisions: docs/perf/batch.md.

from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport uint8_t, uint32_t
from libcpp.vector cimport vector

from bpecore._classes cimport PAT_CL100K, PAT_O200K, PAT_R50K, PAT_REGEX
from bpecore._piececache cimport BpeCacheTable
from bpecore._workers cimport BpeWork
from bpecore.backtrack cimport BacktrackEncoder, encode_text
from bpecore.piececache cimport CacheTable
from bpecore.utf8 cimport NOGIL_UTF8_CHARS, utf8_fill, utf8_size
from bpecore.vocab cimport VocabView

from bpecore._text import clean

cdef extern from "Python.h":
    bint PyUnicode_IS_ASCII(object text)


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


cdef struct Batch:
    # One call's inputs and outputs, shared by its threads (each text written by one thread).
    BpeWork* work
    const VocabView* v
    int kind                        #: pretokenize.PatternKind
    bint count_only
    BpeCacheTable* shared           #: the encoder's piece cache table, or NULL
    Text* texts
    vector[Py_ssize_t]* ends        #: PAT_REGEX: byte ends of each text's pieces; else NULL
    Py_ssize_t* counts              #: count_only: token count of each text
    vector[uint32_t]* outs          #: encode: ids of each text (internal ids), freed once listed
    # The caller's side (encode): texts before ``scan`` are finished, lists built before ``built``.
    Py_ssize_t scan
    Py_ssize_t built
    Py_ssize_t backlog              #: the caller stops encoding to build lists once this many wait
    bint exhausted                  #: no text left to claim


cdef void encode_one(Batch* b, Py_ssize_t i, vector[uint32_t]& scratch, vector[uint8_t]& buf,
                     vector[Py_ssize_t]& no_ends) noexcept nogil:
    """Encode or count text ``i`` into its slot, then mark it finished."""
    cdef const Text* t = &b.texts[i]
    cdef const uint8_t* s = t.s
    cdef Py_ssize_t n = t.n
    cdef vector[uint32_t]* out = &scratch if b.count_only else &b.outs[i]
    if s == NULL:
        n = utf8_size(t.kind, t.data, t.n)
        if n < 0:
            b.work.finish(i, REDO)
            return
        if <Py_ssize_t>buf.size() < n:
            buf.resize(n)
        utf8_fill(t.kind, t.data, t.n, buf.data())
        s = buf.data()
    if not b.count_only:
        out.reserve(n // 3 + 16)
    if b.ends != NULL:
        n = encode_text(b.v, b.kind, s, n, b.ends[i], out[0], b.count_only, b.shared)
    else:
        n = encode_text(b.v, b.kind, s, n, no_ends, out[0], b.count_only, b.shared)
    if b.count_only:
        b.counts[i] = n
    b.work.finish(i, DONE)


cdef void run_texts(void* p) noexcept nogil:
    """A thread's loop: claim the next text, wait until it is prepared, encode it; until none left."""
    cdef Batch* b = <Batch*>p
    cdef vector[uint32_t] scratch
    cdef vector[uint8_t] buf
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
    cdef vector[uint8_t] buf
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
# One text on several threads

cdef enum:
    SEGMENT_BYTES = 1 << 16     #: a long text is cut into segments of about this many bytes


cdef inline bint ascii_letter(uint8_t c) noexcept nogil:
    return <unsigned int>((c | 0x20) - 0x61) < 26


cdef inline bint ascii_alnum(uint8_t c) noexcept nogil:
    return ascii_letter(c) or <unsigned int>(c - 0x30) < 10


cdef Py_ssize_t final_cut(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t at) noexcept nogil:
    """The first c in [at, n) that is a piece boundary of s[:n] whatever precedes it, and where
    s[:c] ends as its pieces there do: s[c - 1] an ASCII letter or digit and s[c] a space or
    \\n, or (not r50k) s[c - 1] a \\n and s[c] an ASCII letter; n if there is none.

    Why these are final, for the cl100k, o200k and r50k patterns: no alternative matches a
    letter or digit followed by whitespace (letter runs, contractions and digit groups end with a
    letter or digit; the whitespace, punctuation and newline alternatives hold no letter or
    digit), nor a \\n followed by a letter (the letters' one-character prefix excludes \\r and
    \\n; the punctuation alternative's [\\r\\n]* and the whitespace ones end before a letter).
    So every piece ends at or before c, or starts at or after it: the pieces of s[c:] are the
    whole text's from c (a piece depends only on the text to its right: no lookbehind), and those
    of s[:c] too: a letter or digit run ends at c whether the text goes on with whitespace or
    ends, and a whitespace run ending in \\n before a letter is one piece either way (cl100k's
    ``\\s*[\\r\\n]`` and, at the end, ``\\s++$`` both take all of it; o200k's ``\\s*[\\r\\n]+``).
    Not so for r50k, which has no newline alternative: "  \\n" before a letter is "  " and "\\n",
    at the end one piece (``\\s++$``).
    The tests check it against the single-thread count on the corpora and generated text.
    """
    cdef Py_ssize_t c
    cdef uint8_t a, b
    for c in range(max(at, 1), n):
        a = s[c - 1]
        b = s[c]
        if (b == 0x20 or b == 0x0A) and ascii_alnum(a):
            return c
        if a == 0x0A and ascii_letter(b) and kind != PAT_R50K:
            return c
    return n


def count_text(BacktrackEncoder core, str text, Py_ssize_t num_threads,
               Py_ssize_t segment=SEGMENT_BYTES):
    """core.count(text), with a text of 2 segments or more counted on up to ``num_threads``
    threads (the caller included): cut at final_cut boundaries about ``segment`` bytes apart
    (SEGMENT_BYTES; the tests cut smaller ones), the
    segments claimed from one counter as encode_batch's texts are. Only the cl100k, o200k and
    r50k scanners are cut (final_cut's proof is theirs); other patterns count on one thread.
    Raises UnicodeEncodeError on lone surrogates, as core.count does.
    """
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(text), n, pos, c, i, total = 0
    cdef const uint8_t* s
    cdef vector[uint8_t] buf
    cdef vector[Text] segments
    cdef vector[Py_ssize_t] counts
    cdef BpeWork work
    cdef Batch b
    cdef unsigned int kind
    cdef const void* data
    cdef CacheTable table = core.piece_cache.get()
    cdef int pk = core.kind
    if segment < 1:
        raise ValueError("segment must be at least 1 byte")
    if (num_threads <= 1 or m < 2 * segment
            or core.kind not in (PAT_CL100K, PAT_O200K, PAT_R50K)):
        return core.count(text)
    if PyUnicode_IS_ASCII(text):
        s = <const uint8_t*>PyUnicode_DATA(text)
        n = m
    else:
        kind = PyUnicode_KIND(text)
        data = PyUnicode_DATA(text)
        with nogil:
            n = utf8_size(kind, data, m)
            if n >= 0:
                buf.resize(n)
                utf8_fill(kind, data, m, buf.data())
        if n < 0:
            raise UnicodeEncodeError("utf-8", text, 0, m, "surrogates not allowed")
        s = buf.data()
    with nogil:
        pos = 0
        while pos < n:
            c = final_cut(pk, s, n, pos + segment) if n - pos > segment + segment // 2 else n
            segments.push_back(Text(s + pos, c - pos, NULL, 0))
            pos = c
    if segments.size() < 2:
        return core.count(text)
    counts.resize(segments.size())
    work.reset(segments.size())
    b.work = &work
    b.v = &core.vocab.view
    b.kind = core.kind
    b.count_only = True
    b.shared = table.ptr
    b.texts = segments.data()
    b.ends = NULL
    b.counts = counts.data()
    b.outs = NULL
    try:
        with nogil:
            work.start(<int>min(num_threads, <Py_ssize_t>segments.size()) - 1, run_texts, &b)
            work.publish(segments.size())
            work.guarded(run_texts, &b)
            work.join()
        if work.failed():
            raise MemoryError("count: a thread ran out of memory")
    finally:
        work.stop()
        work.join()
    for i in range(<Py_ssize_t>segments.size()):
        total += counts[i]
    return total

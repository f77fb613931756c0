"""Streaming counters: the exact token count of a text that grows at the end or at the front.

``AppendableCounter.push(s)`` appends ``s`` (str, or bytes that may stop inside a character) and
returns ``count(everything pushed so far)``. The work is in ``appender.Appender``: stable pieces are
counted once, the last piece keeps its prefix-last-token table, and a character that provably
lengthens the last piece costs one backwards trie walk. Total cost: linear in the stream for
text (average about 3 trie walks per byte), including a 1 MB run of one letter pushed one
character at a time. Memory: the text plus 8 bytes per byte of the last piece (a word; for a
single 1 MB run, 8 MB), plus a memo of short pieces' counts (24 KB, growing to at most 384 KB
while it misses; docs/perf/prefix.md).

``PrependableCounter.push(s)`` puts ``s`` in front. Pieces cut from the new start are re-cut only
until one ends on a boundary of the previous cut (boundaries are kept by distance from the end,
which prepending does not change), so each push costs its own length plus one or two pieces;
worst case (prepending to one long piece a character at a time) quadratic in that piece.
Memory: the text plus 8 bytes per byte (suffix count at each boundary).
"""


cimport cython

from bpecore._text import PushedText, complete_utf8

from cpython.ref cimport PyObject, Py_INCREF, Py_XDECREF
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH

cdef extern from "Python.h":
    bint PyUnicode_IS_COMPACT_ASCII(object o)

from libc.stdint cimport int64_t, uint8_t, uint32_t, uint64_t
from libc.string cimport memcmp, memcpy
from libcpp.vector cimport vector

from bpecore._classes cimport PAT_NONE, PAT_REGEX
from bpecore.appender cimport Appender, push_ascii
from bpecore.backtrack cimport BacktrackEncoder, encode_piece
from bpecore.vocab cimport token_len
from bpecore.prefix cimport SuffixTrie, first_token, run_ends_shared, run_width
from bpecore.pretokenize cimport next_piece_end
from bpecore.vocab cimport VocabView


cdef class AppendableCounter:
    """Exact running token count of text pushed at the end.

    >>> import bpecore
    >>> ac = bpecore.get_encoding("cl100k_base").appendable_counter()
    >>> ac.push("hello"), ac.push(" wor"), ac.push("ld")
    (1, 2, 2)
    """

    cdef Appender app
    cdef object input   #: PushedText: the rules of pushed text
    cdef bint held      #: bytes of an unfinished character are waiting
    cdef PyObject* ints[16]       #: recently returned ints, by count % 16 (owned references or NULL)
    cdef Py_ssize_t int_vals[16]  #: their values (-1: empty)
    cdef BacktrackEncoder encoder  #: for pickling only

    def __init__(self, BacktrackEncoder encoder, SuffixTrie trie):
        self.app = Appender(encoder, trie)
        self.encoder = encoder
        self.input = PushedText()
        for i in range(16):
            self.int_vals[i] = -1

    @cython.always_allow_keywords(False)
    def push(self, data):
        """Append ``data`` (str, or bytes that may end inside a character); return the new count.

        Bytes of an unfinished character are held back until the next push completes it.
        """
        cdef const char* p
        cdef Py_ssize_t n
        if type(data) is str and not self.held:
            if PyUnicode_IS_COMPACT_ASCII(data):
                # ASCII text is its own UTF-8: no conversion, no error to catch
                p = <const char*>PyUnicode_DATA(data)
                n = PyUnicode_GET_LENGTH(data)
                if n == 1 and push_ascii(self.app, <uint8_t>p[0]):
                    return self._result(self.app.c_count())
            else:
                try:
                    p = PyUnicode_AsUTF8AndSize(data, &n)
                except UnicodeEncodeError:
                    return self.app.push_utf8(self.input.utf8(data))
            if n > 4096:
                with nogil:
                    self.app.c_push(<const uint8_t*>p, n)
            elif n:
                self.app.c_push(<const uint8_t*>p, n)
            return self._result(self.app.c_count())
        count = self.app.push_utf8(self.input.utf8(data))
        self.held = bool(self.input.pending)
        return count

    cdef inline object _result(self, Py_ssize_t count):
        # The count moves by a token or two per push, back and forth while a word is typed: a
        # ring of the ints returned last spares most pushes an int allocation.
        cdef Py_ssize_t i = count & 15
        cdef object value
        if self.int_vals[i] != count:
            value = count
            Py_XDECREF(self.ints[i])
            Py_INCREF(value)
            self.ints[i] = <PyObject*>value
            self.int_vals[i] = count
            return value
        return <object>self.ints[i]

    def __dealloc__(self):
        cdef Py_ssize_t i
        for i in range(16):
            Py_XDECREF(self.ints[i])

    def extend(self, pieces):
        """Push each of ``pieces``; return the final count."""
        for piece in pieces:
            self.push(piece)
        return self.count

    @property
    def count(self):
        """Tokens of everything pushed so far (complete characters)."""
        return self.app.count

    @property
    def bytes(self):
        """UTF-8 of the complete characters pushed so far."""
        return self.app.utf8()

    @property
    def text(self):
        return self.app.utf8().decode("utf-8")

    @property
    def pending_bytes(self):
        """Bytes of a character not yet complete."""
        return self.input.pending

    def memory_bytes(self):
        return self.app.memory_bytes()

    def _state(self):
        """The engine's state (``appender.Appender._state``), for tests."""
        return self.app._state()

    def __reduce__(self):
        """Pickles by value: the bytes pushed so far (with any unfinished character) and the Encoding."""
        from bpecore.encoding import _reduce_counter
        return _reduce_counter(self.encoder, "appendable", (self.bytes + self.pending_bytes,))


cdef class PrependableCounter:
    """Exact running token count of text pushed at the front.

    >>> import bpecore
    >>> pc = bpecore.get_encoding("cl100k_base").prependable_counter()
    >>> pc.push("ld"), pc.push(" wor"), pc.push("hello")
    (1, 1, 2)
    """

    cdef BacktrackEncoder encoder
    cdef vector[uint8_t] store        #: text occupies store[head:]
    cdef Py_ssize_t head
    cdef vector[int64_t] suffix_at    #: suffix_at[d]: count of the last d bytes, cut from their start; -1: not known
    cdef Py_ssize_t total
    # The first piece, when it is one character repeated (a pattern of ``run_ends_shared``) or
    # the whole text (no pattern): more of it in front ends where it ends, and its count comes
    # from the first-token table of store[tab_lo:anchor] (``prefix.first_token``), extended
    # leftwards by one trie walk per byte instead of a re-cut and BPE of the whole piece.
    cdef Py_ssize_t anchor            #: store index where the first piece ends; -1: no such piece
    cdef Py_ssize_t tab_lo            #: the table holds store indices tab_lo .. anchor - 1
    cdef Py_ssize_t run_w             #: bytes of the run's character (0: no pattern)
    cdef vector[uint32_t] ftab        #: first token of BPE(store[x:anchor])
    cdef vector[uint32_t] fcnt        #: its token count

    def __init__(self, BacktrackEncoder encoder):
        self.encoder = encoder
        self.suffix_at.push_back(0)
        self.anchor = -1

    cdef bint _extends_first(self, const uint8_t* data, Py_ssize_t m) noexcept nogil:
        """Whether ``data`` in front only lengthens the first piece: anything (no pattern), or
        the run's character repeated."""
        cdef Py_ssize_t k
        if self.anchor < 0:
            return False
        if self.run_w == 0:
            return True
        if m % self.run_w:
            return False
        k = 0
        while k < m:
            if memcmp(data + k, self.store.data() + self.head, self.run_w) != 0:
                return False
            k += self.run_w
        return True

    cdef void _note_first(self, Py_ssize_t e) noexcept nogil:
        """After a re-cut: the first piece is store[head:head + e]; keep it when it qualifies."""
        cdef const uint8_t* s = self.store.data() + self.head
        cdef int kind = self.encoder.kind
        cdef Py_ssize_t w, k
        self.anchor = -1
        if kind == PAT_NONE:
            w = 0
        else:
            if not run_ends_shared(kind):
                return
            w = run_width(kind, s, 0)
            if w == 0 or e < 2 * w or e % w:
                return
            k = w
            while k < e:
                if memcmp(s + k, s, w) != 0:
                    return
                k += w
        self.run_w = w
        self.anchor = self.head + e
        self.tab_lo = self.anchor
        if self.ftab.size() < self.store.size():
            self.ftab.resize(self.store.size())
            self.fcnt.resize(self.store.size())

    cdef void _prepend_first(self, Py_ssize_t n_old, Py_ssize_t n) noexcept nogil:
        """The bytes just put in front lengthen the first piece (``_extends_first``): extend its
        table to the new front; the cut after the piece is unchanged."""
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef const uint8_t* base = self.store.data()
        cdef vector[uint32_t] scratch
        cdef uint32_t t
        cdef Py_ssize_t x, stop
        if self.ftab.size() < self.store.size():
            self.ftab.resize(self.store.size())
            self.fcnt.resize(self.store.size())
        while self.tab_lo > self.head:
            x = self.tab_lo - 1
            t = first_token(v, base, x, self.anchor, self.ftab.data(), scratch)
            stop = x + token_len(v, t)
            self.ftab[x] = t
            self.fcnt[x] = 1 + (0 if stop == self.anchor else self.fcnt[stop])
            self.tab_lo = x
        self.total = self.fcnt[self.head] + self.suffix_at[self.store.size() - self.anchor]
        self.suffix_at.resize(n + 1, -1)
        self.suffix_at[n] = self.total

    cdef void _prepend(self, const uint8_t* data, Py_ssize_t m) noexcept nogil:
        cdef Py_ssize_t n_old = self.store.size() - self.head, n, pos, e, d, k
        cdef vector[uint8_t] bigger
        cdef vector[Py_ssize_t] ends
        cdef vector[int64_t] counts
        cdef vector[uint32_t] scratch
        cdef vector[uint64_t] bits
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef int kind = self.encoder.kind
        cdef int64_t acc
        if m == 0:
            return
        cdef bint first = self._extends_first(data, m)
        if self.head < m:
            bigger.resize(2 * (n_old + m) + 64)
            if n_old:
                memcpy(bigger.data() + bigger.size() - n_old, self.store.data() + self.head, n_old)
            if self.anchor >= 0:  # store indices move: the table is rebuilt from the anchor
                self.anchor += <Py_ssize_t>bigger.size() - n_old - self.head
                self.tab_lo = self.anchor
            self.head = bigger.size() - n_old
            self.store.swap(bigger)
        self.head -= m
        memcpy(self.store.data() + self.head, data, m)
        n = n_old + m
        if first:
            self._prepend_first(n_old, n)
            return
        self.suffix_at.resize(n + 1, -1)
        cdef const uint8_t* s = self.store.data() + self.head
        pos = 0
        while True:
            e = n if kind == PAT_NONE else next_piece_end(kind, s, n, pos)
            ends.push_back(e)
            scratch.clear()
            counts.push_back(encode_piece(v, s + pos, e - pos, scratch, bits))
            pos = e
            if self.suffix_at[n - e] >= 0 and n - e <= n_old:
                break
        # count(text[x:]) depends only on the suffix, which pushing in front never changes: every
        # count recorded stays true, and the re-cut stops at the first position with one (runs
        # of digits, whose triples shift with each digit in front, meet one within 3 pieces)
        d = n - ends.back()
        acc = self.suffix_at[d]
        for k in range(<Py_ssize_t>ends.size() - 1, -1, -1):
            acc += counts[k]
            self.suffix_at[n - (0 if k == 0 else ends[k - 1])] = acc
        self.total = acc
        self._note_first(ends[0])

    def push(self, data):
        """Put ``data`` (str or complete UTF-8 bytes) in front of the text; return the new count."""
        raw = complete_utf8(data)
        cdef const uint8_t* p = raw
        cdef Py_ssize_t m = len(raw)
        if self.encoder.kind == PAT_REGEX:
            self._prepend_regex(raw)
            return self.total
        with nogil:
            self._prepend(p, m)
        return self.total

    def _prepend_regex(self, bytes raw):
        text = raw + self.bytes
        cdef Py_ssize_t n_old = self.store.size() - self.head
        cdef vector[uint8_t] fresh
        fresh.assign(<const uint8_t*>text, <const uint8_t*>text + len(text))
        self.store.swap(fresh)
        self.head = 0
        self.total = self.encoder.count(text.decode("utf-8"))

    @property
    def count(self):
        return self.total

    @property
    def bytes(self):
        cdef const char* p = <const char*>self.store.data() + self.head
        return p[:self.store.size() - self.head]

    @property
    def text(self):
        return self.bytes.decode("utf-8")

    def __reduce__(self):
        """Pickles by value: the text so far and the Encoding."""
        from bpecore.encoding import _reduce_counter
        return _reduce_counter(self.encoder, "prependable", (self.bytes,))

"""Byte-level BPE training: the merge loop over counted pieces (README, "Training").

``Trainer`` holds each unique piece ("word") once with its corpus count, the count of every
adjacent token pair (64-bit, weighted by word counts), an index pair -> words holding it and a
max-heap of pairs with lazy invalidation. Each merge rewrites only the words listed for the pair,
updating the counts of the pairs next to each occurrence; nothing is ever rescanned.

Tie-break (the reference trainer uses the same rule): highest count, then the lexicographically
smallest (left bytes, right bytes). A pair whose concatenation is already a token is skipped, so
every token is formed once and token ``n_initial + k`` is merge ``k``.

Cost: building is O(total symbols); a merge costs O(total length of the words holding the pair
+ log(heap)) -- worst case a corpus of one long repeated word (e.g. "aaaa...") where every merge
rewrites the whole word. Memory: ~ 4 bytes per symbol of each unique piece, ~ 60 bytes per distinct
pair plus 4 bytes per (pair, word) index entry; independent of corpus size once pieces are counted.
"""

# Performance decisions that hold (docs/perf/trainer.md: speed, SuperBPE, peak memory):
# - Pieces are counted by the hand-written scanners (``count_pieces``: bytes keys straight into
#   a dict) instead of ``regex.findall``: 0.15 s against 0.83 s for 3 MB.
# - train.py counts in-process below two chunks (2 MiB) when ``workers`` is None: on this
#   2-core machine fork + pickling made small corpora slower.
# - An own binary heap with the tie-break in its comparator and lazy re-pushes; the pair table is
#   open addressing over (left << 32 | right); pair -> words is a vector per pair deduplicated
#   per merge by a stamp per word.
# - Peak memory: train.py drops the Trainer and the merge list before building the Vocab, which
#   reuses their freed memory (75 -> 58 MB at 32k ids).
# - SuperBPE: stage-2 pieces may end with their newlines and the default transition is 80% of
#   the BPE ids (``SUPERBPE_DEFAULT_FRACTION`` in train.py).
# The measurements behind these decisions: docs/perf/trainer.md.

from cpython.bytes cimport PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.ref cimport PyObject
from libc.stdint cimport uint8_t, uint32_t, uint64_t, int64_t
from libc.string cimport memcmp
from libcpp.string cimport string
from libcpp.vector cimport vector

from bpecore._types cimport NO_TOKEN
from bpecore.pretokenize cimport next_piece_end
from bpecore.vocab cimport hash_u64


def count_pieces(int kind, const uint8_t[::1] utf8, dict counts):
    """Add the pieces of the valid UTF-8 ``utf8`` to ``counts`` (bytes -> int), for a scanner kind.

    ``kind`` is a pretokenize PatternKind with a hand-written scanner (cl100k, o200k, r50k). The GIL
    is held throughout (each piece becomes a dict key at once; no list of piece ends is kept).
    """
    cdef Py_ssize_t n = utf8.shape[0], pos = 0, start
    cdef PyObject* old
    if n == 0:
        return
    while pos < n:
        start = pos
        pos = next_piece_end(kind, &utf8[0], n, pos)
        piece = PyBytes_FromStringAndSize(<const char*>&utf8[start], pos - start)
        old = PyDict_GetItem(counts, piece)
        if old == NULL:
            PyDict_SetItem(counts, piece, 1)
        else:
            PyDict_SetItem(counts, piece, <object>old + 1)


cdef int STEP_MERGED = 0
cdef int STEP_SKIPPED = 1
cdef int STEP_DONE = 2


cdef class Trainer:
    """BPE merge loop over counted pieces.

    Tables (token ids are ranks; ``NO_TOKEN`` is the empty sentinel of the pair hash):
    - ``tok_bytes``/``tok_start``: bytes of token ``t`` are ``tok_bytes[tok_start[t]:tok_start[t+1]]``.
    - ``sym``/``word_start``/``word_len``/``word_count``: word ``w`` is the token sequence
      ``sym[word_start[w]:word_start[w]+word_len[w]]`` seen ``word_count[w]`` times.
    - ``pair_left``/``pair_right``/``pair_count``/``pair_words``: pair ``p``, its count and the
      words that may hold it; ``hkeys``/``hvals`` map (left, right) to ``p``.
    - ``heap``: (count, pair) entries, best first; entries whose count is stale are re-pushed.
    The Trainer owns everything (C++ vectors).

    >>> t = Trainer([bytes([b]) for b in range(256)])
    >>> t.add_pieces({b"abab": 3, b"ab": 1})
    >>> t.train(2, min_frequency=1)
    [(97, 98), (256, 256)]
    """

    def __init__(self, token_bytes, min_frequency=2):
        """Start from ``token_bytes`` (list of bytes, index = rank); merges append tokens."""
        cdef bytes b
        self.tok_start.push_back(0)
        for b in token_bytes:
            if len(b) == 0:
                raise ValueError("empty token")
            for i in range(len(b)):
                self.tok_bytes.push_back(b[i])
            self.tok_start.push_back(self.tok_bytes.size())
            if not self.tok_set.insert(string(<char*>b, len(b))).second:
                raise ValueError(f"duplicate token {b!r}")
        self.n_initial = len(token_bytes)
        self.min_frequency = max(1, int(min_frequency))
        self.hkeys.resize(1 << 16, 0)
        self.hvals.resize(1 << 16, 0)
        self.hmask = (1 << 16) - 1
        self.started = False

    # ------------------------------------------------------------------ loading
    def add_pieces(self, pieces):
        """Add byte pieces (dict bytes -> count); needs the 256 single bytes as tokens 0..255."""
        cdef bytes piece
        cdef const uint8_t* p
        cdef Py_ssize_t i, n
        if self.started:
            raise RuntimeError("add words before training")
        if self.n_initial < 256 or self.tok_bytes.size() < 256:
            raise ValueError("add_pieces needs tokens 0..255 to be the single bytes")
        for i in range(256):
            if self.tok_bytes[i] != i or self.tok_start[i + 1] != <uint64_t>(i + 1):
                raise ValueError("add_pieces needs tokens 0..255 to be the single bytes")
        for piece in sorted(pieces):
            n = len(piece)
            if n < 2:
                continue
            p = <const uint8_t*>piece
            self.word_start.push_back(self.sym.size())
            for i in range(n):
                self.sym.push_back(p[i])
            self.word_len.push_back(<uint32_t>n)
            self.word_count.push_back(pieces[piece])
            self.word_stamp.push_back(0)

    def add_token_words(self, words):
        """Add words given as token sequences: iterable of (sequence of ids, count)."""
        cdef uint32_t n_tokens = self.tok_start.size() - 1
        if self.started:
            raise RuntimeError("add words before training")
        for ids, count in words:
            if len(ids) < 2:
                continue
            self.word_start.push_back(self.sym.size())
            for t in ids:
                if t >= n_tokens:
                    raise ValueError(f"token id {t} out of range")
                self.sym.push_back(t)
            self.word_len.push_back(<uint32_t>len(ids))
            self.word_count.push_back(count)
            self.word_stamp.push_back(0)

    @property
    def n_words(self):
        return self.word_len.size()

    @property
    def n_tokens(self):
        return self.tok_start.size() - 1

    def token_bytes(self):
        """All tokens' bytes in rank order."""
        cdef const char* base = <const char*>self.tok_bytes.data()
        return [base[self.tok_start[t]:self.tok_start[t + 1]] for t in range(self.tok_start.size() - 1)]

    def word_tokens(self, uint32_t w):
        """Current token sequence of word ``w`` (words are in ``add_*`` order, pieces sorted)."""
        return [self.sym[self.word_start[w] + i] for i in range(self.word_len[w])]

    # ------------------------------------------------------------------ training
    def train(self, Py_ssize_t n_merges, min_frequency=None, progress=None, Py_ssize_t block=256):
        """Do up to ``n_merges`` merges; returns the new merges as (left id, right id).

        Stops early when the best pair's count drops below ``min_frequency``. ``progress(k)`` is
        called after every ``block`` merges with the number done in this call.
        """
        cdef Py_ssize_t done = 0, goal
        cdef int status = STEP_MERGED
        cdef size_t first = self.merge_left.size()
        if min_frequency is not None:
            self.min_frequency = max(1, int(min_frequency))
        if not self.started:
            with nogil:
                self._start()
            self.started = True
        while done < n_merges and status != STEP_DONE:
            goal = min(n_merges, done + block)
            with nogil:
                while done < goal:
                    status = self._step()
                    if status == STEP_DONE:
                        break
                    if status == STEP_MERGED:
                        done += 1
            if progress is not None:
                progress(done)
        return [(self.merge_left[k], self.merge_right[k]) for k in range(first, self.merge_left.size())]

    # ------------------------------------------------------------------ internals
    cdef void _start(self) noexcept nogil:
        cdef uint32_t w, i
        cdef uint64_t s
        cdef size_t p
        for w in range(self.word_len.size()):
            s = self.word_start[w]
            for i in range(self.word_len[w] - 1):
                self._add(self.sym[s + i], self.sym[s + i + 1], self.word_count[w], w, NO_TOKEN)
        for p in range(self.pair_count.size()):
            if self.pair_count[p] >= self.min_frequency:
                self.heap.push_back(HeapEntry(self.pair_count[p], <uint32_t>p))
        # heapify (sift down from the last parent)
        cdef Py_ssize_t k = <Py_ssize_t>self.heap.size() // 2 - 1
        while k >= 0:
            self._sift_down(k, self.heap[k])
            k -= 1

    cdef uint32_t _pair_id(self, uint32_t a, uint32_t b) noexcept nogil:
        # Pair id of (a, b), created with count 0 if new.
        cdef uint64_t key = ((<uint64_t>a << 32) | b) + 1
        cdef uint64_t i = hash_u64(key) & self.hmask
        cdef uint64_t k
        cdef uint32_t p
        cdef vector[uint64_t] old_keys
        cdef vector[uint32_t] old_vals
        while True:
            k = self.hkeys[i]
            if k == key:
                return self.hvals[i]
            if k == 0:
                break
            i = (i + 1) & self.hmask
        p = <uint32_t>self.pair_count.size()
        self.pair_left.push_back(a)
        self.pair_right.push_back(b)
        self.pair_count.push_back(0)
        self.pair_words.push_back(vector[uint32_t]())
        self.pair_stamp.push_back(0)
        self.hkeys[i] = key
        self.hvals[i] = p
        if 2 * (<uint64_t>p + 1) > self.hmask:
            old_keys.swap(self.hkeys)
            old_vals.swap(self.hvals)
            self.hmask = 2 * self.hmask + 1
            self.hkeys.assign(self.hmask + 1, 0)
            self.hvals.assign(self.hmask + 1, 0)
            for j in range(old_keys.size()):
                if old_keys[j] != 0:
                    i = hash_u64(old_keys[j]) & self.hmask
                    while self.hkeys[i] != 0:
                        i = (i + 1) & self.hmask
                    self.hkeys[i] = old_keys[j]
                    self.hvals[i] = old_vals[j]
        return p

    cdef void _add(self, uint32_t a, uint32_t b, int64_t delta, uint32_t word, uint32_t new_token) noexcept nogil:
        # pair_count[(a, b)] += delta; a pair gaining a word is indexed under it; pairs holding the
        # new token are queued for a heap push at the end of the merge.
        cdef uint32_t p = self._pair_id(a, b)
        cdef vector[uint32_t]* ws
        self.pair_count[p] += delta
        if delta > 0:
            ws = &self.pair_words[p]
            if ws.size() == 0 or ws.back() != word:
                ws.push_back(word)
            if new_token != NO_TOKEN and self.pair_stamp[p] != new_token + 1:
                self.pair_stamp[p] = new_token + 1
                self.new_pairs.push_back(p)

    cdef int _cmp_token(self, uint32_t a, uint32_t b) noexcept nogil:
        cdef uint64_t sa = self.tok_start[a], la = self.tok_start[a + 1] - sa
        cdef uint64_t sb = self.tok_start[b], lb = self.tok_start[b + 1] - sb
        cdef int c
        if a == b:
            return 0
        c = memcmp(self.tok_bytes.data() + sa, self.tok_bytes.data() + sb, la if la < lb else lb)
        if c != 0:
            return c
        return -1 if la < lb else (1 if la > lb else 0)

    cdef bint _better(self, const HeapEntry& x, const HeapEntry& y) noexcept nogil:
        # x comes out of the heap before y: higher count, then smaller (left bytes, right bytes).
        cdef int c
        if x.count != y.count:
            return x.count > y.count
        if x.pair == y.pair:
            return False
        c = self._cmp_token(self.pair_left[x.pair], self.pair_left[y.pair])
        if c == 0:
            c = self._cmp_token(self.pair_right[x.pair], self.pair_right[y.pair])
        return c < 0

    cdef void _push(self, HeapEntry e) noexcept nogil:
        cdef Py_ssize_t j = self.heap.size(), parent
        self.heap.push_back(e)
        while j > 0:
            parent = (j - 1) // 2
            if not self._better(e, self.heap[parent]):
                break
            self.heap[j] = self.heap[parent]
            j = parent
        self.heap[j] = e

    cdef void _sift_down(self, Py_ssize_t j, HeapEntry e) noexcept nogil:
        """Put ``e`` at slot ``j`` and move it down until both children are worse."""
        cdef Py_ssize_t c, n = self.heap.size()
        while True:
            c = 2 * j + 1
            if c >= n:
                break
            if c + 1 < n and self._better(self.heap[c + 1], self.heap[c]):
                c += 1
            if not self._better(self.heap[c], e):
                break
            self.heap[j] = self.heap[c]
            j = c
        self.heap[j] = e

    cdef HeapEntry _pop(self) noexcept nogil:
        cdef HeapEntry top = self.heap[0]
        cdef HeapEntry e = self.heap.back()
        self.heap.pop_back()
        if self.heap.size():
            self._sift_down(0, e)
        return top

    cdef int _step(self) noexcept nogil:
        # Pop the best pair and merge it; STEP_SKIPPED for a stale or refused entry.
        cdef HeapEntry top
        cdef int64_t current
        cdef uint32_t a, b
        cdef string joined
        if self.heap.size() == 0:
            return STEP_DONE
        top = self._pop()
        current = self.pair_count[top.pair]
        if current != top.count:
            if current >= self.min_frequency:
                self._push(HeapEntry(current, top.pair))
            return STEP_SKIPPED
        if current < self.min_frequency:
            return STEP_DONE
        a = self.pair_left[top.pair]
        b = self.pair_right[top.pair]
        joined.append(<const char*>self.tok_bytes.data() + self.tok_start[a], self.tok_start[a + 1] - self.tok_start[a])
        joined.append(<const char*>self.tok_bytes.data() + self.tok_start[b], self.tok_start[b + 1] - self.tok_start[b])
        if self.tok_set.count(joined):
            return STEP_SKIPPED
        self.tok_set.insert(joined)
        self._merge(top.pair)
        return STEP_MERGED

    cdef void _merge(self, uint32_t pair) noexcept nogil:
        cdef uint32_t a = self.pair_left[pair], b = self.pair_right[pair]
        cdef uint32_t u = <uint32_t>(self.tok_start.size() - 1)
        cdef uint32_t stamp = u + 1
        cdef uint64_t k
        cdef uint32_t w, n, i, j
        cdef uint32_t* s
        cdef int64_t c
        cdef vector[uint32_t] words
        cdef HeapEntry e
        # the new token's bytes
        for k in range(self.tok_start[a], self.tok_start[a + 1]):
            self.tok_bytes.push_back(self.tok_bytes[k])
        for k in range(self.tok_start[b], self.tok_start[b + 1]):
            self.tok_bytes.push_back(self.tok_bytes[k])
        self.tok_start.push_back(self.tok_bytes.size())
        self.merge_left.push_back(a)
        self.merge_right.push_back(b)
        words.swap(self.pair_words[pair])
        self.new_pairs.clear()
        for w in words:
            if self.word_stamp[w] == stamp:
                continue
            self.word_stamp[w] = stamp
            s = self.sym.data() + self.word_start[w]
            n = self.word_len[w]
            c = self.word_count[w]
            i = 0
            j = 0
            while i < n:
                if i + 1 < n and s[i] == a and s[i + 1] == b:
                    self._add(a, b, -c, w, u)
                    if j > 0:
                        self._add(s[j - 1], a, -c, w, u)
                        self._add(s[j - 1], u, c, w, u)
                    if i + 2 < n:
                        self._add(b, s[i + 2], -c, w, u)
                        self._add(u, s[i + 2], c, w, u)
                    s[j] = u
                    j += 1
                    i += 2
                else:
                    s[j] = s[i]
                    j += 1
                    i += 1
            self.word_len[w] = j
        for k in range(self.new_pairs.size()):
            e.pair = self.new_pairs[k]
            e.count = self.pair_count[e.pair]
            if e.count >= self.min_frequency:
                self._push(e)

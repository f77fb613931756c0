"""IntervalCounter: exact token counts of any slice text[i:j], after one pass over text.

The pass cuts the whole text into pieces and records, per piece, its end, the running token count
and the running maximum of the pieces' horizons (``pretokenize.piece_horizon``: how far the scanner
may have looked to cut it); and, at every byte x inside a piece P (of 2..TABLE_MAX bytes), the
token counts of P's prefix ending at x and of its suffix starting at x (``_piece_table``: one
forward trie walk per byte and the prefix-last-token rule, README "How it works"; a repeated
piece copies them from its first occurrence). For a query [a, b):
1. Head: cut text[a:b] from a (with b as the end of the text) until a cut lands on a piece
   boundary of the whole text (usually after one piece; at once if a is a boundary). A cut that
   is a suffix of a whole-text piece reads its count at a.
2. Middle: from there, the whole text's pieces are the slice's pieces for as long as their horizon
   stays <= b (binary search over the running maximum): add their counts from the running total.
3. Tail: cut the rest up to b (usually one or two pieces); a cut that is a prefix of a whole-text
   piece reads its count at b. Any other cut (across a whole-text boundary, inside one piece, or in
   a piece without counts) is backtracked.
Average cost: O(1) on the bench's slices (two cuts, no encode), O(log pieces) at worst for the
middle. Worst case (a slice inside one long piece, e.g. a run of one letter): re-encoding the
slice, never more. Pattern-less encodings and custom patterns re-encode the slice. Build: one
trie walk per byte of each distinct piece (English: 9% of the bytes) plus the pass; runs of one
character (more than CAND_PER_BYTE tokens per byte) and longer pieces get no counts.
Memory: 4 bytes per text byte (piece index at each boundary, or the two counts packed as
~(prefix << 16 | suffix) inside a piece: no extra memory), 24 bytes per piece (one struct:
running count, end, running horizon), plus 4 bytes per character for non-ASCII text; 14.0 bytes
per byte measured on the English corpus.
``piece_tables=False`` skips the inner counts and takes each piece's count as ``count`` does
(whole-piece table, then the encoder's piece cache): the pass then costs about 1.3x a ``count`` of
the text, and queries that end inside pieces backtrack them. For callers asking few queries per
piece, like the chunker (docs/perf/chunker.md).
Threads: single ``count()`` calls up to GIL_BYTES hold the GIL and share the counter's buffers
and head cache (the GIL is their lock); longer slices and ``count_many`` release the GIL and use
their own.
"""

# Performance decisions that hold (docs/perf/interval.md: the first round, rounds 2 and 3):
# - Every piece of 2..TABLE_MAX bytes gets its prefix and suffix counts, packed into piece_at's
#   inner entries (no extra memory): head and tail cuts read them instead of backtracking, 40%
#   fewer instructions per query for a build 25% longer (round 3).
# - The stable end is found near b (``_last_stable``), with a binary search only past NEAR; the
#   scratch is owned by the caller and count_piece replaces encode_piece (first round).
# - Single count() calls up to GIL_BYTES keep the GIL and share the counter's buffers and head
#   entry, built on the first query of a start (the chunker asks ~11 ends per start);
#   count_many keeps its own and builds it for a start asked twice (round 2).
# - Build: ``_horizon`` answers word pieces without piece_horizon's rescan, one reserved vector
#   of piece structs, 2-3 byte pieces from first2x reads, repeated pieces copied from a table of
#   n/16 slots (up to 2**20) hashed with piece_hash (rounds 2 and 3).
# - A piece table gives up past CAND_PER_BYTE tokens per byte: with a table for every length,
#   runs of spaces took the build 12x the instructions (round 3).
# - Without tables the pass counts pieces as encode_text does (whole-piece table, then the shared
#   piece cache, head_and_hash, slots prefetched one block ahead of the block counted), and the
#   buffers of a text over ~2 MB get huge pages before they are filled (a quarter of the pass was
#   page faults): 18-21 -> 11 ms per English MB (docs/perf/chunker.md).
# - The piece structs are written through a pointer into a malloc'd buffer: a std::vector
#   push_back of a struct built on the stack stalled on store forwarding (a quarter of the pass).
# - Without tables piece_at (4 bytes per byte, filled with -1 before the pass) gives way to
#   first_at (the first piece ending in or after each 16-byte block, written branch-free for
#   the common piece that crosses at most one block start): 27% less memory and 2-7% off the
#   pass (docs/perf/chunker.md).
# The measurements behind these decisions: docs/perf/interval.md.

from cpython.object cimport PyObject_LengthHint
from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport int32_t, int64_t, uint8_t, uint32_t, uint64_t
from libc.stdlib cimport free, malloc, realloc
from libc.string cimport memcmp, memcpy
from libcpp.vector cimport vector

from bpecore._hugepages cimport bpe_huge_pages
from bpecore._classes cimport BPE_UT_N, F_L, PAT_NONE, PAT_R50K, PAT_REGEX, o200k_words
from bpecore._types cimport NO_TOKEN
from bpecore._piececache cimport (
    BPE_CACHE_KEY, BpeCacheTable, bpe_cache_bucket, bpe_cache_count, bpe_cache_get, bpe_cache_put,
)
from bpecore._simd cimport bpe_prefetch, popcount64
from bpecore.backtrack cimport BacktrackEncoder, backtrack_piece, count_piece, encode_piece
from bpecore.piececache cimport CacheTable
from bpecore.pretokenize cimport char_flags_fast, next_piece_end, next_piece_ends, piece_horizon
from bpecore.vocab cimport (
    VocabView, head_and_hash, is_valid_pair, mul_hash, load_head, lookup_piece, lookup_piece_hashed,
    piece_hash,
)


cdef struct _Seen:
    Py_ssize_t start      #: where the piece was first seen in the text
    Py_ssize_t length     #: its length in bytes (0: empty slot)
    Py_ssize_t count      #: its token count


cdef inline bint _head_covers(const _Head* head, Py_ssize_t a, Py_ssize_t b, Py_ssize_t j) noexcept nogil:
    """Whether ``head``'s cut serves the slice [a, b) whose last stable piece is ``j``: the same
    start, a horizon within the slice, and a boundary at or before ``j`` (``c_count``)."""
    return head.start == a and head.horizon <= b and head.m <= j


cdef enum:
    SEEN_MIN = 4          #: shorter pieces are one table lookup anyway
    SEEN_SLOTS_MAX = (1 << 20) - 1  #: slot mask cap of the repeated-piece table
    NEAR = 32             #: _last_stable: bytes scanned below b, then pieces stepped down
    AT_SHIFT = 4          #: first_at: one entry per 16 bytes
    GIL_BYTES = 16384     #: count() releases the GIL only for slices longer than this
    TABLE_MAX = 1024      #: longer pieces get no prefix/suffix counts (< 2**15: they fit piece_at's inner entries)
    CAND_PER_BYTE = 8     #: _piece_table gives up past this many tokens per byte (English: 3.4)
    CAND_SLACK = 16
    BLOCK = 16            #: pieces cut per scanner call in the pass


cdef inline Py_ssize_t _horizon(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t pos, Py_ssize_t e) noexcept nogil:
    """piece_horizon of the piece [pos, e) just cut from s[:n], without rescanning word pieces.

    cl100k, r50k, Llama 3 and Qwen2 cut a piece that starts with a letter, or with one prefix character (cl100k:
    not \\r, \\n, a letter, a digit or an apostrophe; r50k: a space) before a letter, as the whole
    letter run: piece_horizon's letter run then ends at e and its whitespace run (if any) at the
    prefix, so the horizon is max(e + 1, pos + 4). Every other piece (and o200k, Tekken) asks piece_horizon.
    """
    cdef Py_ssize_t w, w2
    cdef uint8_t f, c = s[pos]
    cdef Py_ssize_t h = e + 1 if e + 1 > pos + 4 else pos + 4
    if o200k_words(kind):
        return piece_horizon(kind, s, n, pos, e)
    f = char_flags_fast(s, pos, &w)
    if f & F_L:
        return h
    if pos + w < e and (c == 0x20 if kind == PAT_R50K else
                        not (f & BPE_UT_N) and c != 0x27 and c != 0x0A and c != 0x0D):
        if char_flags_fast(s, pos + w, &w2) & F_L:
            return h
    return piece_horizon(kind, s, n, pos, e)


cdef Py_ssize_t _piece_table(const VocabView* v, const uint8_t* p, Py_ssize_t n, Py_ssize_t maxlen,
                             int32_t* inner, vector[uint32_t]& work) noexcept nogil:
    """Token count of p[:n] (n >= 2), and inner[x - 1] = ~(pre << 16 | suf) for 0 < x < n, where
    pre = count(p[:x]) and suf = count(p[x:]) (0 when too large). Returns -1, leaving inner alone,
    when some byte has no token.

    One forward trie walk per start j lists the tokens p[j:j + l], shortest first (``tok``/``tlen``
    from ``off[j]``). Then the prefix rule (README, "How it works"): the last token of p[:x] is the
    longest token t = p[j:x] with j = 0 or last[j] compatible with t; taking starts in increasing
    order, the first such t met for x is the longest, and the single byte (met last) needs no check.
    The mirror rule gives the first token of every suffix p[k:].
    """
    cdef Py_ssize_t j, k, x, d, c, stop, bound = CAND_PER_BYTE * n + CAND_SLACK + maxlen + 1
    cdef uint64_t key, h, e, kk
    cdef uint32_t node, t
    if <Py_ssize_t>work.size() < 5 * (n + 1) + 2 * bound:
        work.resize(5 * (n + 1) + 2 * bound)
    cdef uint32_t* off = work.data()
    cdef uint32_t* last = off + (n + 1)
    cdef uint32_t* pcnt = last + (n + 1)
    cdef uint32_t* first = pcnt + (n + 1)
    cdef uint32_t* scnt = first + (n + 1)
    cdef uint32_t* tok = scnt + (n + 1)
    cdef uint32_t* tlen = tok + bound
    for x in range(n + 1):
        last[x] = NO_TOKEN
    pcnt[0] = 0
    c = 0
    for j in range(n):
        # every token ending at j starts before j and was met already: last[j] is final
        if j and last[j] == NO_TOKEN:
            return -1
        off[j] = c
        t = v.byte_token[p[j]]
        if t == NO_TOKEN:
            return -1
        tok[c] = t
        tlen[c] = 1
        c += 1
        if last[j + 1] == NO_TOKEN:
            last[j + 1] = t
            pcnt[j + 1] = pcnt[j] + 1
        if j + 1 == n:
            continue
        e = v.first2x[(<uint32_t>p[j] << 8) | p[j + 1]]
        node = <uint32_t>e
        if node == NO_TOKEN:
            continue
        if (e >> 32) != NO_TOKEN:
            t = <uint32_t>(e >> 32)
            tok[c] = t
            tlen[c] = 2
            c += 1
            if last[j + 2] == NO_TOKEN and (j == 0 or is_valid_pair(v, last[j], t)):
                last[j + 2] = t
                pcnt[j + 2] = pcnt[j] + 1
        d = j + 2
        while d < n:
            key = ((<uint64_t>node + 1) << 8) | p[d]
            h = (mul_hash(key) >> 32) & v.trie_mask
            while True:
                kk = v.trie[h].key
                if kk == key or kk == 0:
                    break
                h = (h + 1) & v.trie_mask
            if kk == 0:
                break
            node = v.trie[h].child
            d += 1
            t = v.trie[h].token
            if t != NO_TOKEN:
                tok[c] = t
                tlen[c] = <uint32_t>(d - j)
                c += 1
                if last[d] == NO_TOKEN and (j == 0 or is_valid_pair(v, last[j], t)):
                    last[d] = t
                    pcnt[d] = pcnt[j] + 1
        if c > CAND_PER_BYTE * (j + 1) + CAND_SLACK:
            # runs of one character (spaces, 'a'): a token of every length from every start
            return -1
    off[n] = c
    scnt[n] = 0
    k = n - 1
    while k >= 0:
        c = off[k + 1] - 1
        while c > <Py_ssize_t>off[k]:
            stop = k + tlen[c]
            if stop == n or is_valid_pair(v, tok[c], first[stop]):
                break
            c -= 1
        first[k] = tok[c]
        scnt[k] = scnt[k + tlen[c]] + 1
        k -= 1
    for x in range(1, n):
        inner[x - 1] = ~<int32_t>((pcnt[x] << 16) | scnt[x])
    return pcnt[n]


cdef struct _Block:
    # Pieces cut ahead by the tableless pass: their ends, load_head and piece_hash.
    Py_ssize_t ends[BLOCK]
    uint64_t heads[BLOCK]
    uint64_t hashes[BLOCK]


cdef inline Py_ssize_t _cut_hashed(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                                   Py_ssize_t* scan, _Block* b, const BpeCacheTable* shared) noexcept nogil:
    """Cut up to BLOCK pieces from scan[0] (advanced past them) into ``b``, with the head and hash
    of each (``head_and_hash``) and its whole-piece slot and ``shared`` bucket prefetched; returns
    how many were cut, 0 at the end of the text."""
    cdef Py_ssize_t m = next_piece_ends(kind, s, n, scan[0], b.ends, BLOCK), j, start = scan[0], length
    for j in range(m):
        length = b.ends[j] - start
        b.hashes[j] = head_and_hash(s + start, length, s + n, &b.heads[j])
        bpe_prefetch(&v.pieces[b.hashes[j] >> v.piece_shift])
        if length > 8:
            bpe_prefetch(&v.piece_tails[b.hashes[j] >> v.piece_shift])
        if shared != NULL and length <= BPE_CACHE_KEY:
            bpe_prefetch(bpe_cache_bucket(shared, b.hashes[j]))
        start = b.ends[j]
    scan[0] = start
    return m


cdef class IntervalCounter:
    """Counts of slices of one text.

    Fields: ``piece_at[x]`` (with piece tables) = number of pieces ending at or before byte x when
    x is a piece boundary of the whole text (x in 0..n); inside a piece P it is negative:
    ~(pre << 16 | suf), pre = tokens of P's bytes before x, suf = tokens of P's bytes from x (0:
    not known, -1 when both are: P is longer than TABLE_MAX or a one-character run). Without
    piece tables there is nothing to keep inside pieces: ``first_at[k]`` = the first piece ending
    at or after byte ``k * 16`` stands for ``piece_at`` (``_at``; 1/16 of its size, and the pass
    no longer fills 4 bytes per byte). ``pieces[m]`` (m = 0..number of pieces) =
    the running token count ``cum``, the ``end`` of piece m (1-based; ``pieces[0]`` is all zero)
    and ``reach``, the max horizon of pieces 1..m. ``char_byte[c]`` = byte offset of character c
    (empty for ASCII text). ``scratch``/``bits``/``head``: buffers and the slice-start cache of
    single ``count()`` calls, used only while the GIL is held (the GIL is their lock);
    ``count_many`` and long slices release the GIL and use their own. Keeps ``text`` alive: ``s``
    points into its UTF-8 form.
    """

    def __init__(self, BacktrackEncoder encoder, str text, bint piece_tables=True):
        free(self.pieces)   # (__init__ called again on a counter)
        self.pieces = NULL
        self.npieces = 0
        self.pcap = 0
        self.char_byte.clear()
        self.block_char.clear()
        self.piece_at.clear()
        self.first_at.clear()
        self.encoder = encoder
        self.tables = piece_tables
        self.text = text
        self.nchars = len(text)
        self.kind = encoder.kind
        self.head.eager = True
        self.head.asked = -1
        self.head.start = -1
        self.s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &self.n)
        cdef Py_ssize_t c = 0, k, t
        cdef uint64_t word
        cdef int kind = encoder.kind
        cdef uint32_t* cb
        cdef uint32_t* bc
        if self.nchars != self.n:
            self.char_byte.reserve(self.nchars + 1)
            bpe_huge_pages(self.char_byte.data(), 4 * (self.nchars + 1))
            self.char_byte.resize(self.nchars + 1)
            cb = self.char_byte.data()
            self.block_char.resize((self.n >> 6) + 1)
            bc = self.block_char.data()
            with nogil:
                # 8 ASCII bytes are 8 characters; elsewhere branch-free: every byte is written at the
                # current character, which advances past lead bytes (continuation bytes are overwritten)
                k = 0
                while k + 8 <= self.n:
                    if (k & 63) == 0:
                        bc[k >> 6] = <uint32_t>c
                    memcpy(&word, self.s + k, 8)
                    if (word & 0x8080808080808080ULL) == 0:
                        for t in range(8):
                            cb[c + t] = <uint32_t>(k + t)
                        c += 8
                    else:
                        for t in range(k, k + 8):
                            cb[c] = <uint32_t>t
                            c += (self.s[t] & 0xC0) != 0x80
                    k += 8
                while k < self.n:
                    if (k & 63) == 0:
                        bc[k >> 6] = <uint32_t>c
                    cb[c] = <uint32_t>k
                    c += (self.s[k] & 0xC0) != 0x80
                    k += 1
                cb[self.nchars] = <uint32_t>self.n
                if (self.n & 63) == 0:
                    bc[self.n >> 6] = <uint32_t>c
        if kind == PAT_NONE or kind == PAT_REGEX:
            return
        # about 4 bytes per piece in English, 3-6 in other scripts: grown at most once or twice
        self.pcap = self.n // 4 + 16
        self.pieces = <_Piece*>malloc(self.pcap * sizeof(_Piece))
        if self.pieces == NULL:
            raise MemoryError()
        bpe_huge_pages(self.pieces, sizeof(_Piece) * self.pcap)
        self.pieces[0].cum = 0
        self.pieces[0].end = 0
        self.pieces[0].reach = 0
        self.npieces = 1
        cdef CacheTable table
        cdef bint ok
        if self.tables:
            self.piece_at.reserve(self.n + 1)
            bpe_huge_pages(self.piece_at.data(), 4 * (self.n + 1))
            with nogil:
                self.piece_at.assign(self.n + 1, -1)
                self.piece_at[0] = 0
                ok = self._pass_tables()
        else:
            # without tables a piece needs only its count: the encoder's piece cache has it
            table = encoder.piece_cache.get()   # held for the pass: a resize may replace it
            with nogil:
                self.first_at.assign((self.n >> AT_SHIFT) + 2, 0)
                ok = self._pass_counts(table.ptr)
        if not ok:
            raise MemoryError()

    def __dealloc__(self):
        free(self.pieces)

    cdef inline _Piece* _next_piece(self) noexcept nogil:
        """Room for one more piece (NULL when memory is refused); npieces is not advanced."""
        cdef _Piece* q
        if self.npieces == self.pcap:
            q = <_Piece*>realloc(self.pieces, 2 * self.pcap * sizeof(_Piece))
            if q == NULL:
                return NULL
            self.pieces = q
            self.pcap *= 2
        return self.pieces + self.npieces

    cdef inline Py_ssize_t _add_piece(self, Py_ssize_t pos, Py_ssize_t e, int64_t cum,
                                      Py_ssize_t top) noexcept nogil:
        """Record the piece [pos, e) cut by the pass, ``cum`` tokens up to its end, given ``top``,
        the running horizon before it (the caller records where it ends: piece_at or first_at).
        Returns the running horizon after it, -1 when memory is refused."""
        cdef Py_ssize_t h = _horizon(self.kind, self.s, self.n, pos, e)
        cdef _Piece* q = self._next_piece()
        if q == NULL:
            return -1
        if h > top:
            top = h
        q.cum = cum
        q.end = e
        q.reach = top
        self.npieces += 1
        return top

    cdef bint _pass_tables(self) noexcept nogil:
        """The pass with the inner prefix/suffix counts (``piece_tables=True``)."""
        cdef int kind = self.kind
        cdef vector[_Seen] seen
        cdef _Seen* slot
        cdef uint64_t mask = 255, hashed
        cdef int shift = 56
        cdef Py_ssize_t pos = 0, e, top = 0, pcount, nb, i
        cdef int64_t cum = 0
        cdef Py_ssize_t ends[BLOCK]
        cdef int32_t* at = self.piece_at.data()
        cdef vector[uint32_t] work
        while mask < SEEN_SLOTS_MAX and (<Py_ssize_t>mask << 4) < self.n:
            mask = (mask << 1) | 1
            shift -= 1
        seen.resize(mask + 1)
        while pos < self.n:
            nb = next_piece_ends(kind, self.s, self.n, pos, ends, BLOCK)
            for i in range(nb):
                e = ends[i]
                if e - pos >= SEEN_MIN:
                    # repeated pieces (words, CJK runs) are encoded once per pass; their inner
                    # prefix/suffix counts are copied from the first occurrence
                    hashed = piece_hash(self.s + pos, e - pos, load_head(self.s + pos, e - pos)) >> shift
                    slot = &seen[hashed]
                    if slot.length == e - pos and memcmp(self.s + slot.start, self.s + pos, e - pos) == 0:
                        pcount = slot.count
                        memcpy(at + pos + 1, at + slot.start + 1, (e - pos - 1) * sizeof(int32_t))
                    else:
                        pcount = self._count_new(pos, e, work)
                        slot.start = pos
                        slot.length = e - pos
                        slot.count = pcount
                else:
                    pcount = self._count_new(pos, e, work)
                cum += pcount
                top = self._add_piece(pos, e, cum, top)
                if top < 0:
                    return False
                at[e] = <int32_t>(self.npieces - 1)
                pos = e
        return True

    cdef bint _pass_counts(self, BpeCacheTable* shared) noexcept nogil:
        """The pass without inner counts: each piece counted as encode_text counts it (a byte, a
        token of the whole-piece table, the shared piece cache, else backtracked and cached), its
        slots hashed and prefetched one block ahead so that their cache misses overlap. Pieces
        longer than the cache's key (73 of 216,000 in English), and with the cache off (``shared``
        NULL) every piece of SEEN_MIN bytes or more, are counted once per pass."""
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef int kind = self.kind
        cdef const uint8_t* s = self.s
        cdef Py_ssize_t n = self.n
        cdef vector[_Seen] seen
        cdef _Seen* slot
        cdef uint64_t mask = 255, hashed, hits = 0, misses = 0
        cdef int shift = 56
        cdef Py_ssize_t pos = 0, scan = 0, e, top = 0, length, pcount, i, cur_n, next_n
        cdef int64_t cum = 0
        cdef _Block ring[2]
        cdef _Block* cur = &ring[0]
        cdef _Block* nxt = &ring[1]
        cdef _Block* swap
        cdef uint32_t* first = self.first_at.data()
        cdef Py_ssize_t k
        while mask < SEEN_SLOTS_MAX and (<Py_ssize_t>mask << (4 if shared == NULL else 10)) < n:
            mask = (mask << 1) | 1
            shift -= 1
        cur_n = _cut_hashed(v, kind, s, n, &scan, cur, shared)
        while cur_n:
            next_n = _cut_hashed(v, kind, s, n, &scan, nxt, shared)
            for i in range(cur_n):
                e = cur.ends[i]
                length = e - pos
                if lookup_piece_hashed(v, s + pos, length, cur.heads[i], cur.hashes[i]) != NO_TOKEN:
                    pcount = 1
                elif shared != NULL and length <= BPE_CACHE_KEY:
                    pcount = self._count_cached(pos, e, cur.hashes[i], shared, &hits, &misses)
                elif length < SEEN_MIN:
                    pcount = count_piece(v, s + pos, length, self.scratch, self.bits)
                else:
                    hashed = cur.hashes[i] >> shift
                    if seen.size() == 0:
                        seen.resize(mask + 1)
                    slot = &seen[hashed]
                    if slot.length == length and memcmp(s + slot.start, s + pos, length) == 0:
                        pcount = slot.count
                    else:
                        pcount = count_piece(v, s + pos, length, self.scratch, self.bits)
                        slot.start = pos
                        slot.length = length
                        slot.count = pcount
                cum += pcount
                top = self._add_piece(pos, e, cum, top)
                if top < 0:
                    return False
                # first_at of the blocks whose first byte is in (pos, e]: the next block's entry
                # is written whether or not the piece reaches it (the piece that does comes later
                # and writes it again), so the common case has no branch to mispredict
                k = (pos >> AT_SHIFT) + 1
                first[k] = <uint32_t>(self.npieces - 1)
                if ((k + 1) << AT_SHIFT) <= e:
                    k += 1
                    while (k << AT_SHIFT) <= e:
                        first[k] = <uint32_t>(self.npieces - 1)
                        k += 1
                pos = e
            cur_n = next_n
            swap = cur
            cur = nxt
            nxt = swap
        if shared != NULL:
            bpe_cache_count(shared, hits, misses)
        return True

    cdef Py_ssize_t _count_cached(self, Py_ssize_t pos, Py_ssize_t e, uint64_t h,
                                  BpeCacheTable* shared, uint64_t* hits, uint64_t* misses) noexcept nogil:
        """Tokens of the piece [pos, e) (2..BPE_CACHE_KEY bytes, not a token; ``h``: its
        piece_hash) as encode_text counts it: the shared piece cache, or backtracked and cached."""
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef const uint8_t* q = self.s + pos
        cdef Py_ssize_t length = e - pos, c
        cdef int got = bpe_cache_get(shared, h, q, <int>length, NULL)
        if got >= 0:
            hits[0] += 1
            return got
        misses[0] += 1
        self.scratch.clear()
        c = backtrack_piece(v, q, length, self.scratch, self.bits)
        bpe_cache_put(shared, h, q, <int>length, self.scratch.data(), <int>c)
        return c

    cdef Py_ssize_t _count_new(self, Py_ssize_t pos, Py_ssize_t e, vector[uint32_t]& work) noexcept nogil:
        """Tokens of the piece [pos, e) met for the first time; fills its inner piece_at entries."""
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef const uint8_t* q = self.s + pos
        cdef int32_t* inner = self.piece_at.data() + pos + 1
        cdef Py_ssize_t c
        cdef uint32_t two, three
        if not self.tables:
            return count_piece(v, q, e - pos, self.scratch, self.bits)
        if e - pos == 2 or e - pos == 3:
            # every prefix and suffix is one byte or two: a first2x read each
            if v.byte_token[q[0]] != NO_TOKEN and v.byte_token[q[1]] != NO_TOKEN:
                two = (v.first2x[(<uint32_t>q[0] << 8) | q[1]] >> 32) != NO_TOKEN
                if e - pos == 2:
                    inner[0] = ~<int32_t>((1 << 16) | 1)
                    return 2 - two
                if v.byte_token[q[2]] != NO_TOKEN:
                    three = (v.first2x[(<uint32_t>q[1] << 8) | q[2]] >> 32) != NO_TOKEN
                    inner[0] = ~<int32_t>((1 << 16) | (2 - three))
                    inner[1] = ~<int32_t>(((2 - two) << 16) | 1)
                    if lookup_piece(v, q, 3) != NO_TOKEN:
                        return 1
                    return 2 if two or three else 3
        elif 4 <= e - pos <= TABLE_MAX:
            c = _piece_table(v, q, e - pos, self.encoder.vocab.max_token_len, inner, work)
            if c >= 0:
                return c
        return count_piece(&self.encoder.vocab.view, self.s + pos, e - pos, self.scratch, self.bits)

    cdef inline Py_ssize_t _piece_count(self, Py_ssize_t x, Py_ssize_t e, vector[uint32_t]& scratch,
                                        vector[uint64_t]& bits) noexcept nogil:
        """Tokens of the slice piece [x, e) (cut from a slice): from the tables when it is a whole
        piece of the text, a suffix of one (x inside it, e its end) or a prefix of one (x its start, e
        inside it); else backtracked."""
        cdef const int32_t* at = self.piece_at.data()
        cdef const _Piece* p = self.pieces
        cdef int32_t mx, me
        cdef uint32_t raw
        if not self.tables:   # whole pieces only
            me = <int32_t>self._at(e)
            if me > 0 and p[me - 1].end == x:
                return p[me].cum - p[me - 1].cum
            return count_piece(&self.encoder.vocab.view, self.s + x, e - x, scratch, bits)
        mx = at[x]
        me = at[e]
        if me >= 0:
            if mx < 0:
                if p[me - 1].end < x:
                    raw = <uint32_t>(~mx) & 0xFFFF
                    if raw:
                        return raw
            elif me == mx + 1:
                return p[me].cum - p[mx].cum
        elif mx >= 0 and e < p[mx + 1].end:
            raw = <uint32_t>(~me) >> 16
            if raw:
                return raw
        return count_piece(&self.encoder.vocab.view, self.s + x, e - x, scratch, bits)

    def __len__(self):
        return self.nchars

    def __reduce__(self):
        """Pickles by value: the text, the table choice and the Encoding; the pass reruns on load."""
        from bpecore.encoding import _reduce_counter
        return _reduce_counter(self.encoder, "interval", (self.text, self.tables))

    @property
    def total(self):
        """Tokens of the whole text."""
        return self.count(0, self.nchars)

    cdef Py_ssize_t _byte(self, Py_ssize_t c) noexcept nogil:
        return c if self.char_byte.size() == 0 else self.char_byte[c]

    cdef inline Py_ssize_t _at(self, Py_ssize_t x) noexcept nogil:
        """``piece_at[x]``: the index of the piece ending at byte x, negative when none does."""
        cdef const _Piece* p = self.pieces
        cdef Py_ssize_t m
        if self.tables:
            return self.piece_at[x]
        m = self.first_at[x >> AT_SHIFT]
        while p[m].end < x:
            m += 1
        return m if p[m].end == x else -1

    cdef inline Py_ssize_t _at_or_before(self, Py_ssize_t b) noexcept nogil:
        """Without piece tables: the index of the last piece ending at or before byte b."""
        cdef const _Piece* p = self.pieces
        cdef Py_ssize_t m = self.first_at[b >> AT_SHIFT]
        if p[m].end > b:
            return m - 1   # (the piece before m ends before this block's first byte)
        while m + 1 < self.npieces and p[m + 1].end <= b:
            m += 1
        return m

    cdef Py_ssize_t _last_stable(self, Py_ssize_t b) noexcept nogil:
        """The last piece J whose running horizon reach[J] is <= b (reach is nondecreasing).

        Every piece ends before its horizon, so J is at or before the last piece ending at or
        before b: find that piece from piece_at within NEAR bytes below b (from first_at without
        piece tables), then step down while the
        reach passes b (a step or two: only pieces whose scanner looked past b). Long pieces and
        long horizons (runs of one character class) fall back to binary search.
        """
        cdef Py_ssize_t x = b, lim = b - NEAR if b > NEAR else 0, m, lo, hi, mid, steps = 0
        cdef const _Piece* p = self.pieces
        if self.tables:
            while x > lim and self.piece_at[x] < 0:
                x -= 1
            m = self.piece_at[x]
        else:
            m = self._at_or_before(b)
        if m >= 0:
            while m > 0 and p[m].reach > b and steps < NEAR:
                m -= 1
                steps += 1
            if p[m].reach <= b:
                return m
            hi = m
        else:
            hi = self.npieces - 1
        lo = 0
        while lo < hi:
            mid = (lo + hi + 1) >> 1
            if p[mid].reach <= b:
                lo = mid
            else:
                hi = mid - 1
        return lo

    cdef Py_ssize_t _from_boundary(self, Py_ssize_t m, Py_ssize_t j, Py_ssize_t b,
                                   vector[uint32_t]& scratch, vector[uint64_t]& bits) noexcept nogil:
        """Tokens of [ends[m], b) for a whole-text piece index m <= j = _last_stable(b)."""
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef int kind = self.kind
        cdef const _Piece* p = self.pieces
        cdef Py_ssize_t total = p[j].cum - p[m].cum, pos = p[j].end, e
        m = j
        while pos < b:
            e = next_piece_end(kind, self.s, b, pos)
            if e == p[m + 1].end:
                # cut as in the whole text (b is a boundary): same bytes, same count
                total += p[m + 1].cum - p[m].cum
                m += 1
                pos = e
            else:
                total += self._piece_count(pos, e, scratch, bits)
                pos = e
                break
        while pos < b:
            e = next_piece_end(kind, self.s, b, pos)
            total += self._piece_count(pos, e, scratch, bits)
            pos = e
        return total

    cdef Py_ssize_t c_count(self, Py_ssize_t a, Py_ssize_t b, vector[uint32_t]& scratch,
                            vector[uint64_t]& bits, _Head* head) noexcept nogil:
        """Tokens of the bytes [a, b) (both on character boundaries); scratch/bits are reused.

        ``head`` (may be NULL) caches the head of the last start (see _Head): a hit skips
        re-cutting and re-encoding the partial piece at a.
        """
        cdef const VocabView* v = &self.encoder.vocab.view
        cdef int kind = self.kind
        cdef Py_ssize_t total = 0, pos = a, e, j, m, hmax = 0, h
        cdef bint build = False
        if a >= b:
            return 0
        j = self._last_stable(b)
        if head != NULL:
            if _head_covers(head, a, b, j):
                return head.count + self._from_boundary(head.m, j, b, scratch, bits)
            build = head.eager or head.asked == a
            head.asked = a
        while pos < b:
            m = self._at(pos)
            if m >= 0:
                if m <= j:
                    if build and pos > a and hmax <= b:
                        head.start = a
                        head.m = m
                        head.count = total
                        head.horizon = hmax
                    return total + self._from_boundary(m, j, b, scratch, bits)
                build = False
            e = next_piece_end(kind, self.s, b, pos)
            total += self._piece_count(pos, e, scratch, bits)
            if build:
                # horizon within s[:b]: a piece whose horizon is <= b is also cut so from s[:n]
                h = _horizon(kind, self.s, b, pos, e)
                if h > hmax:
                    hmax = h
            pos = e
        return total

    cpdef Py_ssize_t count(self, Py_ssize_t start, Py_ssize_t end) except -1:
        """Token count of ``text[start:end]``, exactly ``encoding.count(text[start:end])``.

        >>> import bpecore
        >>> ic = bpecore.get_encoding("cl100k_base").interval_counter("hello world, hello")
        >>> ic.count(0, 11), ic.count(6, 18)
        (2, 3)
        """
        if not (0 <= start <= end <= self.nchars):
            raise IndexError(f"interval [{start}, {end}) is not within [0, {self.nchars}]")
        return self._count_chars(start, end)

    cdef Py_ssize_t _count_chars(self, Py_ssize_t start, Py_ssize_t end) except -1:
        """``count(start, end)`` for ``0 <= start <= end <= nchars`` (not checked)."""
        cdef int kind = self.kind
        if kind == PAT_REGEX:
            return self.encoder.count(self.text[start:end])
        cdef Py_ssize_t a = self._byte(start), b = self._byte(end), total
        cdef vector[uint32_t] scratch
        cdef vector[uint64_t] bits
        if b - a <= GIL_BYTES:
            # short: the GIL stays held, so the shared buffers and head cache need no other lock
            if kind == PAT_NONE:
                return count_piece(&self.encoder.vocab.view, self.s + a, b - a, self.scratch, self.bits) if b > a else 0
            return self.c_count(a, b, self.scratch, self.bits, &self.head)
        with nogil:
            if kind == PAT_NONE:
                total = count_piece(&self.encoder.vocab.view, self.s + a, b - a, scratch, bits)
            else:
                total = self.c_count(a, b, scratch, bits, NULL)
        return total

    # The chunker's searches (bpecore/chunker.py), as the Python loops they replace: the same
    # queries in the same order, so the same answers, without a Python call per query.
    cdef Py_ssize_t _char(self, Py_ssize_t x) noexcept nogil:
        """The character at byte x, a character boundary (char_byte's inverse): the character at
        the start of x's 64-byte block, plus the lead bytes from there to x (8 at a time: a
        continuation byte has bit 7 set and bit 6 clear). A binary search over char_byte cost
        about 20 cache-missing probes, two or three per crossing."""
        cdef Py_ssize_t k = x & ~(<Py_ssize_t>63), c
        cdef uint64_t w
        if self.char_byte.size() == 0:
            return x
        c = self.block_char[x >> 6]
        while k + 8 <= x:
            memcpy(&w, self.s + k, 8)
            c += 8 - popcount64(w & ~(w << 1) & <uint64_t>0x8080808080808080ULL)
            k += 8
        while k < x:
            c += (self.s[k] & 0xC0) != 0x80
            k += 1
        return c

    cdef (Py_ssize_t, Py_ssize_t) _piece_bracket(self, Py_ssize_t start, Py_ssize_t tokens) noexcept nogil:
        """Characters ``(lo, hi)``, ``start <= lo < hi``: the ends of the whole-text piece in which
        the running count from the first boundary at or after ``start`` passes ``tokens`` (``hi``
        is the text's end when it never does). An estimate: the head piece's tokens and the
        pieces cut differently near the ends are left out."""
        cdef const _Piece* p = self.pieces
        cdef Py_ssize_t a = self._byte(start), lo = 0, hi = self.npieces - 1, mid, k, target
        if self.tables:
            while lo < hi:  # k: the first piece boundary at or after a
                mid = (lo + hi) >> 1
                if p[mid].end < a:
                    lo = mid + 1
                else:
                    hi = mid
        else:
            lo = self.first_at[a >> AT_SHIFT]
            while p[lo].end < a:
                lo += 1
        k = lo
        target = p[k].cum + tokens
        # every piece holds a token at least: the boundary sought is at most ``tokens`` pieces on
        hi = k + tokens if k + tokens < self.npieces - 1 else self.npieces - 1
        while lo < hi:  # the last piece boundary whose running count is within target
            mid = (lo + hi + 1) >> 1
            if p[mid].cum <= target:
                lo = mid
            else:
                hi = mid - 1
        mid = self._char(p[lo].end) if p[lo].end > a else start
        return mid, (self._char(p[lo + 1].end) if lo + 1 < self.npieces else self.nchars)

    cdef (Py_ssize_t, Py_ssize_t) _piece_bracket_before(self, Py_ssize_t end, Py_ssize_t tokens) noexcept nogil:
        """``_piece_bracket``'s mirror: characters ``(near, far)``, ``far < near <= end``, the ends of
        the piece in which the running count back from the last boundary at or before ``end``
        passes ``tokens`` (``far`` is 0 when it never does)."""
        cdef const _Piece* p = self.pieces
        cdef Py_ssize_t b = self._byte(end), lo = 0, hi = self.npieces - 1, mid, target
        if self.tables:
            while lo < hi:  # the last piece boundary at or before b
                mid = (lo + hi + 1) >> 1
                if p[mid].end <= b:
                    lo = mid
                else:
                    hi = mid - 1
        else:
            lo = self._at_or_before(b)
        target = p[lo].cum - tokens
        hi = lo
        lo = hi - tokens if hi > tokens else 0   # (a token per piece at least, as above)
        while lo < hi:  # the first piece boundary whose running count is within tokens of it
            mid = (lo + hi) >> 1
            if p[mid].cum >= target:
                hi = mid
            else:
                lo = mid + 1
        mid = self._char(p[lo].end) if p[lo].end < b else end
        return mid, (self._char(p[lo - 1].end) if lo > 0 else 0)

    cpdef Py_ssize_t crossing(self, Py_ssize_t start, Py_ssize_t tokens, Py_ssize_t step) except -1:
        """An end ``lo`` with ``count(start, lo) <= tokens < count(start, lo + 1)``, or ``len(self)``
        when the whole rest fits. The first probes are the ends of the piece where the pass's
        running count from ``start`` passes ``tokens``, when it lies within ``2 * step``; else (or
        when those ends do not bracket the crossing) a gallop out by ``step``, doubling; then
        interpolation steps towards ``tokens + 1/2`` alternating with halvings (counts are not
        monotonic inside a piece, so this is *a* crossing: the one these probes meet).

        >>> import bpecore
        >>> ic = bpecore.get_encoding("cl100k_base").interval_counter("one two three four five")
        >>> ic.crossing(0, 2, 16), ic.crossing(4, 9, 16)
        (7, 23)
        """
        cdef Py_ssize_t n = self.nchars, lo = start, c_lo = 0, hi, c_hi, guess, c, back = 16
        cdef bint halve = False, bracket = False
        if not (0 <= start <= n) or tokens < 0 or step < 1:
            raise ValueError(f"crossing({start}, {tokens}, {step}) on a text of {n} characters")
        if self.npieces > 1:
            # The pass's running counts name the piece where the count from start passes tokens
            # (up to the head piece's share): probe its two ends, which are piece boundaries,
            # then gallop from whichever side is wrong; most chunks need no gallop at all. Not
            # when that piece lies past 2 * step: inside a long piece a query can cost a re-encode
            # of its slice, so the gallop from start asks about little more than step.
            lo, hi = self._piece_bracket(start, tokens)
            bracket = hi - start <= 2 * step
            if not bracket:
                lo = start
        if bracket:
            c_lo = self._count_chars(start, lo) if lo > start else 0
            if c_lo > tokens:
                while c_lo > tokens:
                    hi = lo
                    c_hi = c_lo
                    lo = lo - back if lo - back > start else start
                    back *= 2
                    c_lo = self._count_chars(start, lo) if lo > start else 0
                step = 0
            else:
                c_hi = self._count_chars(start, hi)
                if c_hi <= tokens:
                    if hi == n:
                        return n
                    lo = hi
                    c_lo = c_hi
                else:
                    step = 0
        while step:
            hi = lo + step if lo + step < n else n
            c_hi = self._count_chars(start, hi)
            if c_hi > tokens:
                break
            if hi == n:
                return n
            lo = hi
            c_lo = c_hi
            step *= 2
        if hi - lo > 1 and self._exceeds(start, lo + 1, tokens):
            # The stable pieces put every end after lo over tokens (the bound only grows with the
            # end): lo is the crossing the steps below would reach. The common case, a crossing
            # at the start of a one-token word.
            return lo
        # all terms positive (c_lo <= tokens < c_hi): C's division is Python's floor division here
        guess = lo + (hi - lo) * (2 * tokens + 1 - 2 * c_lo) // (2 * (c_hi - c_lo))
        while hi - lo > 1:
            if halve or not lo < guess < hi:
                guess = (lo + hi) // 2
            c = self._count_chars(start, guess)
            if c <= tokens:
                lo = guess
                c_lo = c
            else:
                hi = guess
                c_hi = c
            guess = lo + (hi - lo) * (2 * tokens + 1 - 2 * c_lo) // (2 * (c_hi - c_lo))
            halve = not halve
        return lo

    cpdef Py_ssize_t crossing_before(self, Py_ssize_t end, Py_ssize_t lo, Py_ssize_t tokens, Py_ssize_t step) except -1:
        """The mirror of ``crossing``: a start ``near >= lo`` with ``count(near, end) <= tokens <
        count(near - 1, end)``, or ``lo`` when ``count(lo, end) <= tokens``: the ends of the piece
        where the pass's running count back from ``end`` passes ``tokens`` first (within
        ``2 * step``), else a gallop back from ``end`` by ``step``, doubling; then interpolation
        steps alternating with halvings.

        >>> import bpecore
        >>> ic = bpecore.get_encoding("cl100k_base").interval_counter("one two three four five")
        >>> ic.crossing_before(23, 0, 2, 16), ic.crossing_before(23, 14, 9, 16)
        (13, 14)
        """
        cdef Py_ssize_t n = self.nchars, near = end, c_near = 0, far = lo, c_far, guess, c, fwd = 16
        cdef bint halve = False, bracket = False
        if not (0 <= lo <= end <= n) or tokens < 0 or step < 1:
            raise ValueError(f"crossing_before({end}, {lo}, {tokens}, {step}) on a text of {n} characters")
        if self.npieces > 1:
            near, far = self._piece_bracket_before(end, tokens)
            bracket = end - far <= 2 * step
            if not bracket:
                near = end
        if bracket:
            if near < lo:
                near = lo
            if far < lo:
                far = lo
            c_near = self._count_chars(near, end) if near < end else 0
            if c_near > tokens:
                while c_near > tokens:
                    far = near
                    c_far = c_near
                    near = near + fwd if near + fwd < end else end
                    fwd *= 2
                    c_near = self._count_chars(near, end) if near < end else 0
                step = 0
            elif near == lo:
                return lo
            else:
                c_far = self._count_chars(far, end)
                if c_far <= tokens:
                    if far == lo:
                        return lo
                    near = far
                    c_near = c_far
                else:
                    step = 0
        while step:
            far = near - step if near - step > lo else lo
            c_far = self._count_chars(far, end)
            if c_far > tokens:
                break
            if far == lo:
                return lo
            near = far
            c_near = c_far
            step *= 2
        guess = near - (near - far) * (2 * tokens + 1 - 2 * c_near) // (2 * (c_far - c_near))
        while near - far > 1:
            if halve or not far < guess < near:
                guess = (far + near) // 2
            c = self._count_chars(guess, end)
            if c <= tokens:
                near = guess
                c_near = c
            else:
                far = guess
                c_far = c
            guess = near - (near - far) * (2 * tokens + 1 - 2 * c_near) // (2 * (c_far - c_near))
            halve = not halve
        return near

    cpdef Py_ssize_t last_end_within(self, Py_ssize_t start, Py_ssize_t tokens, Py_ssize_t first, Py_ssize_t stop) except -2:
        """The largest ``e`` in ``[first, stop]`` with ``count(start, e) <= tokens`` (asked from
        ``stop`` down), or -1 when there is none; ends past the text are not asked.

        >>> import bpecore
        >>> ic = bpecore.get_encoding("cl100k_base").interval_counter("one two three four five")
        >>> ic.last_end_within(0, 2, 3, 12), ic.last_end_within(0, 0, 1, 5)
        (7, -1)
        """
        cdef Py_ssize_t e
        if not 0 <= start <= self.nchars:
            raise IndexError(f"start {start} is not within [0, {self.nchars}]")
        if first < start:
            first = start
        e = stop if stop < self.nchars else self.nchars
        while e >= first:
            if not self._exceeds(start, e, tokens) and self._count_chars(start, e) <= tokens:
                return e
            e -= 1
        return -1

    cdef bint _exceeds(self, Py_ssize_t start, Py_ssize_t end, Py_ssize_t tokens) noexcept:
        """Whether ``count(start, end) > tokens`` follows from the pieces alone (False: ask).

        With the head of ``start`` cached, ``c_count`` is the head's tokens, the whole-text pieces
        up to the last stable one J (``_last_stable``), then the pieces re-cut from J's end to
        ``end``: at least one token when J ends before ``end``. When that lower bound passes
        ``tokens`` the re-cut (a backtracking encode of the last piece) is not needed. The
        look-ahead past a crossing asks about the next word's ends, whose bound already passes
        (the whole word before them is stable there).
        """
        cdef Py_ssize_t a, b, j
        cdef const _Piece* p = self.pieces
        if self.kind == PAT_REGEX or self.kind == PAT_NONE or self.head.start < 0:
            return False
        a = self._byte(start)
        if self.head.start != a:
            return False
        b = self._byte(end)
        if b - a > GIL_BYTES:  # (_count_chars keeps the head for such slices only)
            return False
        j = self._last_stable(b)
        if not _head_covers(&self.head, a, b, j):
            return False
        return self.head.count + (p[j].cum - p[self.head.m].cum) + (p[j].end < b) > tokens

    def count_many(self, ranges):
        """``[count(i, j) for i, j in ranges]``, with the GIL released while counting.

        >>> import bpecore
        >>> bpecore.get_encoding("cl100k_base").interval_counter("hello world").count_many([(0, 5), (0, 11)])
        [1, 2]
        """
        cdef Py_ssize_t nchars = self.nchars, k, m, i, j
        cdef vector[Py_ssize_t] a, b
        cdef vector[Py_ssize_t] out
        cdef vector[uint32_t] scratch
        cdef vector[uint64_t] bits
        cdef _Head head
        cdef int kind = self.kind
        head.eager = False
        head.asked = -1
        head.start = -1
        if kind == PAT_REGEX or kind == PAT_NONE:
            return [self.count(i, j) for i, j in ranges]
        m = PyObject_LengthHint(ranges, 0)
        if m > 0:
            a.reserve(m)
            b.reserve(m)
        for r in ranges:
            i, j = r
            if not (0 <= i <= j <= nchars):
                raise IndexError(f"interval [{i}, {j}) is not within [0, {nchars}]")
            a.push_back(self._byte(i))
            b.push_back(self._byte(j))
        m = a.size()
        out.resize(m)
        with nogil:
            for k in range(m):
                out[k] = self.c_count(a[k], b[k], scratch, bits, &head)
        return [out[k] for k in range(m)]

    def memory_bytes(self):
        """Bytes held by the tables (not counting the text itself)."""
        return (4 * self.piece_at.capacity() + 4 * self.first_at.capacity()
                + sizeof(_Piece) * self.pcap + 4 * self.char_byte.capacity()
                + 4 * self.block_char.capacity())

"""Backtracking BPE encoder: BPE's exact output without a merge loop.

For each piece, take the longest token that prefixes the rest of the piece; if BPE would not keep
it next to the previous token (``is_valid_pair``), try the next shorter prefix token; if none fits,
pop the previous token and mark the position it started from as a dead end (README, "How it
works", backtracking in 3 steps). Every position is popped at most once, so a piece of n bytes
costs O(n * L) pair checks in the worst case (L = longest token, 128 here; worst input: long runs
that hit many dead ends, e.g. random base64) and about one trie walk per output token on average.
Memory: the output vector plus n/8 bytes of dead-end bits per piece (and, once a whitespace or
repetitive piece is seen, a pair memo of 2-32 KB for the call); a piece over 32 bytes of other
than whitespace or a few repeated bytes also holds 4 bytes per byte of it in the output vector
while it is encoded (its token stack, cut back to its tokens after). A run of one byte costs
O(M * P) for its period P (M = longest run token) plus O(1) per token, whatever its length.

Pieces that are themselves a token (90-96% of pieces in English and code) take one probe of the
whole-piece table (VocabView.pieces, one cache line for tokens up to 8 bytes). Other pieces of up
to 32 bytes are looked up in the encoder's piece cache, shared across calls and threads
(piececache.pyx, capped); longer ones, in texts of 4 KB or more, in a per-call direct-mapped cache
(at most 16384 slots, 384 KB); so a repeated word costs a compare and a copy. Memory per call:
the output vector (4 bytes per token) plus that per-call cache, about 5 KB of stack for the
pieces that wait to be merged, and about 5 KB of stack per piece (longest matches of pieces up
to 32 bytes, the pair memo of longer ones). The
encoder asks the kernel to back the vocab's large tables by huge pages (no extra memory).
"""

# Performance decisions that hold (numbers: the steps of docs/perf/backtrack.md, which this
# file's "Performance notes, step N" also means):
# - A piece that is a token costs one probe of the whole-piece table: 16-byte slots with the
#   first 8 bytes inline, the tail of a 9-16 byte token in piece_tails, one line each (1, 29, 30).
# - Pieces are cut BLOCK = 8 at a time and their slots (whole-piece, tail, piece cache)
#   prefetched while the block before is encoded: one miss per piece hidden (6, 9, 22).
# - Non-token pieces of up to 32 bytes go through the shared piece cache (piececache.pyx: -25%
#   instructions on 1 KB texts; docs/perf/backtrack.md, "The piece cache"); longer ones, in texts
#   of 4 KB or more, through a per-call cache (below 4 KB it does not pay) (3).
# - Pieces of up to 32 bytes that are no token are merged (merge_tokens, the merge loop over the
#   pair table: 1.4-4x faster than backtracking them, which probes the trie from every position;
#   docs/perf/backtrack.md, "Short pieces by merging"). Longer ones backtrack: backtrack_long, and
#   backtrack_memo (runs of whitespace or of a few bytes: pair memo and spine_rejects) (16, 20,
#   21, 24); the memo is kept for the whole call in the caller's ``bits``, as pieces ask each
#   other's pairs. short_backtrack (and short_tokens_probed) serve a vocab missing a byte's token.
# - The pieces that miss the shared cache wait and are merged 16 side by side (merge_pending,
#   merge_group): a merge's lookups miss the cache on text first seen and the next merge waits for
#   them, so one piece at a time queues those misses (docs/perf/backtrack.md, "Pieces first seen").
# - A run of one byte over 32 bytes is read from the periodic last tokens of its prefixes
#   (backtrack_run), its repeats counted at once (docs/perf/backtrack.md, "The adversarial corpora").
# - Misses are cut before the trie and pair tables: first2x, step3_filter, the pair filter and
#   the byte-pair bitmap; the vocab tables get huge pages (TLB misses) (5, 8, 14, 25, 33, 35).
# - Token lists come from shared int objects; a str's cached UTF-8 is used as is (4, 26).
# The measurements behind these decisions: docs/perf/backtrack.md.

from cpython cimport array
from cpython.long cimport PyLong_FromUnsignedLong
from cpython.ref cimport PyObject
from cpython.unicode cimport PyUnicode_AsUTF8AndSize, PyUnicode_DATA, PyUnicode_GET_LENGTH, PyUnicode_KIND
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, free
from libc.string cimport memcmp, memcpy, memmove
from libcpp.vector cimport vector

from bpecore._hugepages cimport bpe_huge_pages
from bpecore._piececache cimport (
    BPE_CACHE_KEY, BpeCacheTable, bpe_cache_bucket, bpe_cache_count, bpe_cache_entries, bpe_cache_get,
    bpe_cache_put,
)  # the vocab's random-access tables (Performance notes, step 14)
from bpecore._simd cimport bpe_prefetch, bpe_prefetch_w
from bpecore._types cimport NO_TOKEN
from bpecore.utf8 cimport NOGIL_UTF8_CHARS, Utf8Buffer, utf8_into, utf8_offsets
from bpecore._classes cimport PAT_NONE, PAT_REGEX
from bpecore.piececache cimport CacheTable, PieceCache
from bpecore.pretokenize cimport next_piece_end, next_piece_ends, next_piece_ends_marked
from bpecore.vocab cimport (
    PairEntry, PieceEntry, TrieEntry, Vocab, VocabView, digit_index, is_valid_pair, hash_u64, head_and_hash, load_head, lookup_piece, lookup_piece_hashed,
    lookup_whole,
    bytes_stay_apart, mul_hash, next_match, pair_lookup, piece_hash, spine_rejects, step3_passes, token_len,
)

import array as _array

from bpecore.pretokenize import pattern_kind

cdef extern from "Python.h":
    # The UTF-8 a str caches once asked for it (CPython's compact non-ASCII strings); NULL if not yet.
    ctypedef struct PyCompactUnicodeObject:
        Py_ssize_t utf8_length
        char* utf8
    bint PyUnicode_IS_COMPACT(object o)
    bint PyUnicode_IS_ASCII(object o)
    PyObject** PySequence_Fast_ITEMS(object o)
    void Py_INCREF_p "Py_INCREF"(PyObject* o)
    void PyList_SET_ITEM_p "PyList_SET_ITEM"(object lst, Py_ssize_t i, PyObject* o)
    object PyList_New(Py_ssize_t n)


cdef Py_ssize_t encode_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                             vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """Append the BPE encoding of p[:n] to out; return how many tokens were appended."""
    if n <= 0:
        return 0
    cdef uint32_t token = lookup_piece(v, p, n)
    if token != NO_TOKEN:
        out.push_back(token)
        return 1
    return backtrack_piece(v, p, n, out, bits)


cdef Py_ssize_t count_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                            vector[uint32_t]& scratch, vector[uint64_t]& bits) noexcept nogil:
    """len(BPE of p[:n]) (n >= 1); ``scratch`` is clobbered."""
    if lookup_piece(v, p, n) != NO_TOKEN:
        return 1
    scratch.clear()
    return backtrack_piece(v, p, n, scratch, bits)


cdef enum:
    SHORT_PIECE = 32    #: pieces up to this many bytes are merged (short_tokens)
    PROBE_PIECE = 16    #: short_backtrack: ASCII pieces up to this many bytes find their longest
                        #: matches in the whole-piece table (the others all at once, in the trie)
    MEMO_PIECE = 256    #: pieces over this many bytes of at most MEMO_DISTINCT bytes use the memo
    PAIR_MEMO_BITS = 12 #: backtrack_memo's pair answers, kept per call: up to 2**12 entries
    MEMO_SAMPLE = 64    #: leading bytes of a long piece looked at to decide on the memo
    MEMO_DISTINCT = 8   #: the memo is used when they hold at most this many distinct bytes
    STACK_START = 1024  #: tokens of room a long piece's stack starts with (doubled when full)


cdef void longest_matches(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                          uint32_t* best) noexcept nogil:
    """best[i] = next_match(v, p + i, n - i) for every i < n (2 <= n <= SHORT_PIECE).

    The n trie walks advance together, one byte per round: a round first prefetches the slot of
    every live walk, then probes them, so their cache misses overlap instead of queueing along
    one dependent chain per token (Performance notes, step 15).
    """
    cdef uint32_t node[SHORT_PIECE]
    cdef uint64_t slot[SHORT_PIECE]
    cdef uint8_t live[SHORT_PIECE]
    cdef Py_ssize_t i, d, m = 0, k, j
    cdef uint64_t x, key, h, kk
    cdef uint64_t mask = v.trie_mask
    cdef const TrieEntry* trie = v.trie
    for i in range(n):
        best[i] = v.byte_token[p[i]]
        if i + 1 < n:
            x = v.first2x[(<uint32_t>p[i] << 8) | p[i + 1]]
            if <uint32_t>x != NO_TOKEN:
                if (x >> 32) != NO_TOKEN:
                    best[i] = <uint32_t>(x >> 32)
                if i + 2 < n:
                    if step3_passes(v, mul_hash(((x & <uint64_t>0xFFFFFFFF) + 1) << 8 | p[i + 2])):
                        node[i] = <uint32_t>x
                        live[m] = <uint8_t>i
                        m += 1
    d = 2
    while m:
        for k in range(m):
            i = live[k]
            h = (mul_hash(((<uint64_t>node[i] + 1) << 8) | p[i + d]) >> 32) & mask
            slot[k] = h
            bpe_prefetch(&trie[h])
        j = 0
        for k in range(m):
            i = live[k]
            key = ((<uint64_t>node[i] + 1) << 8) | p[i + d]
            h = slot[k]
            while True:
                kk = trie[h].key
                if kk == key or kk == 0:
                    break
                h = (h + 1) & mask
            if kk == 0:
                continue
            node[i] = trie[h].child
            if trie[h].token != NO_TOKEN:
                best[i] = trie[h].token
            if i + d + 1 < n:
                live[j] = <uint8_t>i
                j += 1
        m = j
        d += 1


cdef Py_ssize_t backtrack_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """encode_piece without the whole-piece lookup of reachable tokens (n >= 1)."""
    cdef uint32_t token
    if 2 <= n <= SHORT_PIECE:
        return backtrack_short(v, p, n, out)
    if v.n_whole_only and n > 1:
        token = lookup_whole(v, p, n)
        if token != NO_TOKEN:
            out.push_back(token)
            return 1
    cdef Py_ssize_t k
    if n > SHORT_PIECE and p[0] == p[n - 1] and p[0] == p[1] and memcmp(p, p + 1, n - 1) == 0:
        k = backtrack_run(v, p, n, out)
        if k >= 0:
            return k
    if (is_space(p[0]) and is_space(p[n - 1])) or (n > MEMO_PIECE and few_distinct_bytes(p)):
        return backtrack_memo(v, p, n, out, bits)
    return backtrack_long(v, p, n, out, bits)


cdef enum:
    RUN_KINDS = 64      #: most run tokens (b, bb, bbb, ...) of one byte the run path handles
    RUN_WINDOW = 4096   #: prefixes of a run searched for the period of its last tokens
    RUN_SKIP = 1024     #: periods up to this long have their walk's cycle skipped (run_walk)


cdef Py_ssize_t run_walk(const uint8_t* last, const Py_ssize_t* klen, Py_ssize_t n,
                         Py_ssize_t base, Py_ssize_t P, const uint32_t* ktok,
                         uint32_t* dst_end) noexcept nogil:
    """The token count of backtrack_run's encoding of a run of n bytes, from its last tokens
    (``last[x]`` for x <= base, periodic with period P above base); with ``ktok``, also writes
    the tokens, the last one at dst_end[-1], the first at dst_end[-count].

    Above base the walk's position modulo P decides its next step, so within P steps it meets a
    residue again: from there it repeats that cycle (cs tokens, D bytes) while it stays above
    base, and the repeats are counted at once (and copied in doubling blocks when writing)."""
    cdef Py_ssize_t seen_k[RUN_SKIP]
    cdef Py_ssize_t seen_x[RUN_SKIP]
    cdef Py_ssize_t x = n, r = 0, k = 0, j, q, cs, D, done, c
    cdef bint skip = P <= RUN_SKIP
    cdef uint32_t* e
    if n > base:
        r = (n - base - 1) % P
        if skip:
            for j in range(P):
                seen_k[j] = -1
    while x > base:
        if skip:
            if seen_k[r] < 0:
                seen_k[r] = k
                seen_x[r] = x
            else:
                skip = False
                cs = k - seen_k[r]
                D = seen_x[r] - x
                q = (x - base) // D
                if ktok != NULL and q > 0:
                    # dst_end[-k:-k + cs] is one cycle; its repeats go left of it.
                    e = dst_end - k
                    done = 0
                    while done < q * cs:
                        c = cs + done if cs + done < q * cs - done else q * cs - done
                        memcpy(e - done - c, e + cs - c, c * sizeof(uint32_t))
                        done += c
                k += q * cs
                x -= q * D
                if x <= base:
                    break
        j = last[base + 1 + r]
        k += 1
        if ktok != NULL:
            dst_end[-k] = ktok[j]
        x -= klen[j]
        r -= klen[j]
        while r < 0:
            r += P
    while x > 0:
        j = last[x]
        k += 1
        if ktok != NULL:
            dst_end[-k] = ktok[j]
        x -= klen[j]
    return k


cdef Py_ssize_t backtrack_run(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                              vector[uint32_t]& out) noexcept nogil:
    """BPE of a run of one byte (p[:n] all equal, n > SHORT_PIECE) appended to out, from the
    periodic last tokens of its prefixes; returns the token count, or -1 (nothing appended) when
    the run is not handled here (more than RUN_KINDS run tokens, or no period found).

    The last token of BPE(p[:i]) is the longest token t ending at i that is compatible with the
    last token at i - len(t) (README, "How it works"; prefix.pyx), so in a run, where every such t
    is a run token b^k, it is a function F of the last tokens at i - 1 .. i - M (M = the longest
    run token) once i > M. If those M values at i equal the ones at i - P (P <= i - M), every
    later last token repeats with period P: the values at x and x - P are F of equal windows, by
    induction. The table is computed until such a P is found (at most RUN_WINDOW prefixes, with a
    run-token compatibility matrix instead of is_valid_pair per step), then the encoding is read
    backwards from n through it: O(M * P) work plus O(1) per output token, whatever n is."""
    cdef uint32_t ktok[RUN_KINDS]
    cdef Py_ssize_t klen[RUN_KINDS]
    cdef uint8_t ok[RUN_KINDS * RUN_KINDS]   # 0 unknown, 1 apart (invalid), 2 compatible
    cdef uint8_t last[RUN_WINDOW + 1]        # last[i]: index in ktok of the last token of p[:i]
    cdef uint32_t t = next_match(v, p, n)
    cdef Py_ssize_t m = 0, i, j, a, M, w, check, P, base, k, c
    cdef size_t start
    cdef bint found = False
    while t != NO_TOKEN:
        if m == RUN_KINDS:
            return -1
        ktok[m] = t
        klen[m] = token_len(v, t)
        m += 1
        t = v.next_prefix[t]
    # ktok from the longest down: reverse so that index grows with length.
    for i in range(m // 2):
        t = ktok[i]
        ktok[i] = ktok[m - 1 - i]
        ktok[m - 1 - i] = t
        j = klen[i]
        klen[i] = klen[m - 1 - i]
        klen[m - 1 - i] = j
    M = klen[m - 1]
    for i in range(m * m):
        ok[i] = 0
    w = n if n < RUN_WINDOW else RUN_WINDOW
    check = 4 * M if 4 * M > 64 else 64
    P = 0
    last[0] = 0
    for i in range(1, w + 1):
        j = m - 1
        while True:
            if klen[j] <= i:
                if klen[j] == i:
                    break
                a = last[i - klen[j]]
                c = a * m + j
                if ok[c] == 0:
                    ok[c] = 2 if is_valid_pair(v, ktok[a], ktok[j]) else 1
                if ok[c] == 2:
                    break
            if j == 0:
                return -1   # no compatible last token: not a BPE table (never for a BPE vocab)
            j -= 1
        last[i] = <uint8_t>j
        if i == check and i < n:
            # The smallest P with the M last values at i equal to those at i - P.
            for P in range(1, i - M + 1):
                for k in range(M):
                    if last[i - k] != last[i - P - k]:
                        break
                else:
                    found = True
                    break
            if found:
                w = i
                break
            check = 2 * check if 2 * check < w else w
    if w < n and not found:
        return -1
    # The tokens from n backwards, last(x) = last[base + 1 + (x - base - 1) % P] for x > base:
    # counted in a first walk, written from the end of their room in a second.
    base = w - P if found else n
    k = run_walk(last, klen, n, base, P, NULL, NULL)
    start = out.size()
    out.resize(start + k)
    run_walk(last, klen, n, base, P, ktok, out.data() + start + k)
    return k


cdef inline bint is_space(uint8_t c) noexcept nogil:
    """c is an ASCII space, tab, \\n or \\r: a piece that starts and ends with one is a
    whitespace run in the shipped patterns (a choice of loop only; any piece is encoded exactly)."""
    return c == 0x20 or c == 0x09 or c == 0x0A or c == 0x0D


cdef inline bint few_distinct_bytes(const uint8_t* p) noexcept nogil:
    """Whether p[:MEMO_SAMPLE] holds at most MEMO_DISTINCT distinct bytes (runs of a letter or
    of whitespace ask about the same pairs again and again; CJK or base64 text does not)."""
    cdef uint64_t seen[4]
    cdef Py_ssize_t i
    cdef uint32_t distinct = 0
    seen[0] = seen[1] = seen[2] = seen[3] = 0
    for i in range(MEMO_SAMPLE):
        if not (seen[p[i] >> 6] >> (p[i] & 63)) & 1:
            seen[p[i] >> 6] |= <uint64_t>1 << (p[i] & 63)
            distinct += 1
    return distinct <= MEMO_DISTINCT


cdef inline bint pair_stays(const VocabView* v, uint32_t last, uint32_t token, const uint8_t* p,
                            Py_ssize_t pos, Py_ssize_t end) noexcept nogil:
    """is_valid_pair(last, token) for ``last`` ending at p[pos - 1] and ``token`` spelling
    p[pos:end]: a pair of single bytes (most pairs in text that is not in the vocab, e.g. rare CJK)
    is one bit of an 8 KB table instead of a probe of the 256 KB filter (Performance notes, 25)."""
    if end - pos == 1 and last == v.byte_token[p[pos - 1]]:
        return bytes_stay_apart(v, p[pos - 1], p[pos])
    return is_valid_pair(v, last, token)


cdef inline bint word_shaped(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """p[:n] (2 <= n <= 16) looks like a word: an ASCII character, an ASCII letter, then ASCII
    letters all of one case (" word", " Word", "_WORD"; random base64 rarely is)."""
    cdef Py_ssize_t i
    cdef uint32_t case
    if p[0] >= 0x80 or <uint32_t>((p[1] | 0x20) - 0x61) > 25:
        return False
    if n == 2:
        return True
    case = p[2] & 0x20
    for i in range(2, n):
        if <uint32_t>((p[i] | 0x20) - 0x61) > 25 or (p[i] & 0x20) != case:
            return False
    return True


cdef inline uint32_t probe_longest(const VocabView* v, const uint8_t* p, Py_ssize_t r) noexcept nogil:
    """next_match(v, p, r) for 1 <= r <= PROBE_PIECE from the whole-piece table: every length from
    3 to r is hashed and its slot prefetched, then looked up longest first, so the lookups' cache
    misses overlap (one round) where the trie's form a chain (Performance notes, step 28)."""
    cdef uint64_t hs[PROBE_PIECE + 1]
    cdef Py_ssize_t l
    cdef uint64_t x
    cdef uint32_t t
    for l in range(3, r + 1):
        hs[l] = piece_hash(p, l, load_head(p, l))
        bpe_prefetch(&v.pieces[hs[l] >> v.piece_shift])
    for l in range(r, 2, -1):
        t = lookup_piece_hashed(v, p, l, load_head(p, l), hs[l])
        if t != NO_TOKEN:
            return t
    if r >= 2:
        x = v.first2x[(<uint32_t>p[0] << 8) | p[1]]
        if <uint32_t>x != NO_TOKEN and (x >> 32) != NO_TOKEN:
            return <uint32_t>(x >> 32)
    return v.byte_token[p[0]]


cdef Py_ssize_t short_tokens_probed(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                    uint32_t* stack) noexcept nogil:
    """short_tokens for 2 <= n <= PROBE_PIECE, with the longest match of a position found when the
    loop first reaches it (probe_longest), not for every position beforehand."""
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter, token
    cdef uint64_t alive = <uint64_t>0xFFFFFFFFFFFFFFFFULL
    cdef uint64_t known = 0
    cdef uint32_t best[PROBE_PIECE]
    token = probe_longest(v, p, n)
    while True:
        end = pos + token_len(v, token)
        if ((alive >> end) & 1) and (last == NO_TOKEN or pair_stays(v, last, token, p, pos, end)):
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                return k
            if not ((known >> pos) & 1):
                best[pos] = probe_longest(v, p + pos, n - pos)
                known |= <uint64_t>1 << pos
            token = best[pos]
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive &= ~(<uint64_t>1 << pos)
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN


cdef inline uint32_t byte_pair_rank(const VocabView* v, uint8_t a, uint8_t b) noexcept nogil:
    # The token the tokens of bytes a and b merge into, NO_TOKEN if they do not: the merge loops'
    # first ranks, from the byte-pair bitmap and first2x (no pair-table probe).
    return NO_TOKEN if bytes_stay_apart(v, a, b) else <uint32_t>(v.first2x[(<uint32_t>a << 8) | b] >> 32)


cdef Py_ssize_t merge_tokens(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                             uint32_t* stack) noexcept nogil:
    """BPE of p[:n] (2 <= n <= SHORT_PIECE) by the merge loop: the adjacent pair whose merged
    token ranks lowest (leftmost on a tie) is merged until no pair merges. Returns -1 when a byte
    has no token."""
    cdef uint32_t rank[SHORT_PIECE]
    cdef Py_ssize_t m = n, i, best
    cdef uint32_t r
    for i in range(n):
        stack[i] = v.byte_token[p[i]]
        if stack[i] == NO_TOKEN:
            return -1
    for i in range(n - 1):
        rank[i] = byte_pair_rank(v, p[i], p[i + 1])
    while m > 1:
        best = 0
        r = rank[0]
        for i in range(1, m - 1):
            if rank[i] < r:
                r = rank[i]
                best = i
        if r == NO_TOKEN:
            break
        stack[best] = r
        m -= 1
        for i in range(best + 1, m):
            stack[i] = stack[i + 1]
        for i in range(best + 1, m - 1):   # rank[m - 1] is no pair now
            rank[i] = rank[i + 1]
        if best > 0:
            rank[best - 1] = pair_lookup(v, stack[best - 1], r)
        if best < m - 1:
            rank[best] = pair_lookup(v, r, stack[best + 1])
    return m


cdef enum:
    MERGE_GROUP = 16    #: pieces merged side by side by merge_group


cdef struct MergeState:
    # One piece of a merge_group: merge_tokens' tokens and ranks (4 entries of room for
    # drop_at), and the pair keys whose lookups its last merge left pending (0: none).
    uint32_t tok[SHORT_PIECE + 4]
    uint32_t rank[SHORT_PIECE + 4]
    const uint8_t* p
    Py_ssize_t n
    Py_ssize_t m        #: tokens in tok (-1: a byte has no token)
    Py_ssize_t best     #: position of the last merge
    uint64_t left       #: key of (tok[best - 1], tok[best]), or 0
    uint64_t right      #: key of (tok[best], tok[best + 1]), or 0


cdef inline void drop_at(uint32_t* a, Py_ssize_t i, Py_ssize_t m) noexcept nogil:
    # a[i:m] = a[i + 1:m + 1], 4 entries per step (one 16-byte load and store; a has 4 entries of
    # room past m).
    while i < m:
        memmove(&a[i], &a[i + 1], 16)
        i += 4


cdef inline uint64_t pair_key_fetched(const VocabView* v, uint32_t a, uint32_t b) noexcept nogil:
    # pair_lookup's key of (a, b), with the filter word and first table slot it reads prefetched.
    cdef uint64_t key = ((<uint64_t>a << 32) | b) + 1
    cdef uint64_t hk = mul_hash(key)
    cdef uint64_t f = hk >> v.pair_filter_shift
    bpe_prefetch(&v.pair_filter[f >> 6])
    bpe_prefetch(&v.pairs[(hk >> 32) & v.pair_mask])
    return key


cdef void merge_group(const VocabView* v, MergeState* st, Py_ssize_t g) noexcept nogil:
    """merge_tokens of st[:g] side by side (st[j].p, st[j].n set, 2 <= n <= SHORT_PIECE; fills
    st[j].tok[:m]). A pass over the pieces still merging reads each one's pending pair lookups
    (prefetched a pass before), makes its next merge and prefetches what that merge leaves to
    look up: on text first seen, a merge's lookups miss the cache and the next merge waits for
    them, so merging one piece at a time queues those misses; here g pieces' misses overlap."""
    cdef Py_ssize_t j, i, a, m, best, live = 0
    cdef uint32_t r, x
    cdef MergeState* q
    cdef uint32_t* tok
    cdef uint32_t* rank
    cdef Py_ssize_t active[MERGE_GROUP]
    for j in range(g):
        q = &st[j]
        q.m = q.n
        for i in range(q.n):
            q.tok[i] = v.byte_token[q.p[i]]
            if q.tok[i] == NO_TOKEN:
                q.m = -1
        for i in range(q.n - 1):
            bpe_prefetch(&v.first2x[(<uint32_t>q.p[i] << 8) | q.p[i + 1]])
    for j in range(g):
        q = &st[j]
        if q.m < 0:
            continue
        for i in range(q.n - 1):
            q.rank[i] = byte_pair_rank(v, q.p[i], q.p[i + 1])
        q.left = 0
        q.right = 0
        active[live] = j
        live += 1
    while live:
        a = 0
        for j in range(live):
            q = &st[active[j]]
            tok = q.tok
            rank = q.rank
            best = q.best
            if q.left:
                rank[best - 1] = pair_lookup(v, <uint32_t>((q.left - 1) >> 32), tok[best])
            if q.right:
                rank[best] = pair_lookup(v, tok[best], <uint32_t>(q.right - 1))
            m = q.m
            if m <= 1:
                continue
            best = 0
            r = rank[0]
            for i in range(1, m - 1):   # conditional moves: the prefetches hide the misses here
                x = rank[i]
                best = i if x < r else best
                r = x if x < r else r
            if r == NO_TOKEN:
                continue
            tok[best] = r
            m -= 1
            drop_at(tok, best + 1, m)
            drop_at(rank, best + 1, m - 1)   # rank[m - 1] is no pair now
            q.m = m
            q.best = best
            q.left = pair_key_fetched(v, tok[best - 1], r) if best > 0 else 0
            q.right = pair_key_fetched(v, r, tok[best + 1]) if best < m - 1 else 0
            active[a] = active[j]
            a += 1
        live = a


cdef Py_ssize_t short_tokens(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                             uint32_t* stack) noexcept nogil:
    """BPE of p[:n] (2 <= n <= SHORT_PIECE, not itself a token or not) into stack[:k]; returns k.
    A vocab with WHOLE_ONLY tokens (Vocab.enable_whole_pieces) first looks p[:n] up among them
    (here and in backtrack_piece, off encode_text's loop: other vocabs pay one test per piece
    that is not a token). Then the merge loop (merge_tokens: 1.4-4x faster than backtracking on
    such pieces, docs/perf/backtrack.md "Short pieces by merging"), or short_backtrack when a byte
    has no token.
    """
    cdef uint32_t token
    cdef Py_ssize_t k
    if v.n_whole_only:
        token = lookup_whole(v, p, n)
        if token != NO_TOKEN:
            stack[0] = token
            return 1
    k = merge_tokens(v, p, n, stack)
    return k if k >= 0 else short_backtrack(v, p, n, stack)


cdef Py_ssize_t short_backtrack(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                uint32_t* stack) noexcept nogil:
    """short_tokens by backtracking (for a vocab missing a byte's token; and the reference the
    tests hold merge_tokens to). Longest matches of all positions first (longest_matches); the
    token stack, the last token and the dead-end bits (one word: bit i clear = position i is a
    dead end) stay in registers and on the stack instead of in vectors (Performance notes, step
    21).
    """
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter, token
    cdef uint64_t alive = <uint64_t>0xFFFFFFFFFFFFFFFFULL
    cdef uint32_t best[SHORT_PIECE]
    if n <= PROBE_PIECE and word_shaped(p, n):
        return short_tokens_probed(v, p, n, stack)
    longest_matches(v, p, n, best)
    token = best[0]
    while True:
        end = pos + token_len(v, token)
        if ((alive >> end) & 1) and (last == NO_TOKEN or pair_stays(v, last, token, p, pos, end)):
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                return k
            token = best[pos]
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive &= ~(<uint64_t>1 << pos)
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN


def _short_loop(BacktrackEncoder enc, bytes data, offsets, int which, int reps):
    """Tokens of the pieces data[offsets[i]:offsets[i + 1]] (2..SHORT_PIECE bytes each), encoded
    ``reps`` times by short_backtrack (which = 0), short_tokens (1: the merge loop) or
    merge_group (2: MERGE_GROUP pieces side by side), in one loop without the GIL; with reps = 0
    the token lists of one round instead (tests compare them)."""
    cdef const VocabView* v = &enc.vocab.view
    cdef const uint8_t* d = data
    cdef vector[Py_ssize_t] off = offsets
    cdef uint32_t stack[SHORT_PIECE]
    cdef MergeState group[MERGE_GROUP]
    cdef Py_ssize_t total = 0, i, k, r, g, j, pieces = off.size() - 1
    out = []
    if reps == 0 and which != 2:
        for i in range(pieces):
            k = (short_tokens if which else short_backtrack)(v, d + off[i], off[i + 1] - off[i], stack)
            out.append([stack[r] for r in range(k)])
        return out
    for r in range(reps if reps else 1):
        if which != 2:
            with nogil:
                for i in range(pieces):
                    if which:
                        total += short_tokens(v, d + off[i], off[i + 1] - off[i], stack)
                    else:
                        total += short_backtrack(v, d + off[i], off[i + 1] - off[i], stack)
            continue
        i = 0
        while i < pieces:
            with nogil:
                g = 0
                while g < MERGE_GROUP and i < pieces:
                    group[g].p = d + off[i]
                    group[g].n = off[i + 1] - off[i]
                    g += 1
                    i += 1
                merge_group(v, group, g)
                for j in range(g):
                    total += group[j].m
            if not reps:
                out += [[group[j].tok[k] for k in range(group[j].m)] for j in range(g)]
    return total if reps else out


cdef Py_ssize_t backtrack_short(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                vector[uint32_t]& out) noexcept nogil:
    """backtrack_piece for 2 <= n <= SHORT_PIECE (short_tokens, appended to out)."""
    cdef uint32_t stack[SHORT_PIECE]
    cdef Py_ssize_t k = short_tokens(v, p, n, stack), i
    for i in range(k):
        out.push_back(stack[i])
    return k


cdef Py_ssize_t grow_stack(vector[uint32_t]& out, size_t start, Py_ssize_t cap, Py_ssize_t n) noexcept nogil:
    """Make room for twice ``cap`` tokens (at most n) after out[:start]; returns the new room."""
    cap = 2 * cap if 2 * cap < n else n
    out.resize(start + cap)
    return cap


cdef inline bint long_pair_rejected(const VocabView* v, uint32_t last, uint32_t token,
                                   Py_ssize_t token_bytes) noexcept nogil:
    """spine_rejects(last, token) when both are merged tokens (their walk in is_valid_pair is 3+
    steps); False otherwise, where that check would only repeat the walk's first probe."""
    return token_bytes > 1 and v.split_right[last] != last and spine_rejects(v, last, token)


cdef uint64_t* alive_bits(const VocabView* v, vector[uint64_t]& bits, Py_ssize_t n,
                          bint with_memo) noexcept nogil:
    """The dead-end bits of a piece of n bytes in ``bits``, all set (alive), after the pair memo
    when ``bits`` holds one for v or ``with_memo`` asks for one.

    The memo (backtrack_memo's answers) lives in the caller's ``bits`` for the whole call
    (encode_text's, or an interval or appending counter's), shared by its pieces: bits[0] = the
    tag of v (its address: even), bits[1] = b, bits[2:2 + 2 * 2**b] = 2**b entries of two words
    (key, answer; empty: key all ones), 2**b = two entries per byte of the longest memo piece so
    far, 256 to 2**PAIR_MEMO_BITS (a longer piece starts a larger, empty memo); the dead-end bits
    follow. Without a memo the dead-end bits start at bits[0], whose bit 0 (position 0, never a
    dead end) stays set: an odd word, never taken for a tag."""
    cdef size_t words = (n >> 6) + 1, i, at
    cdef uint64_t tag = <uint64_t><size_t>v
    cdef uint64_t mb = 8
    cdef uint64_t* b
    while mb < PAIR_MEMO_BITS and (<Py_ssize_t>1 << mb) < 2 * n:
        mb += 1
    if bits.size() > 2 and bits[0] == tag and (bits[1] >= mb or not with_memo):
        mb = bits[1]
    elif with_memo:
        if bits.size() < 2 + (<size_t>2 << mb) + words:
            bits.resize(2 + (<size_t>2 << mb) + words)
        b = bits.data()
        b[0] = tag
        b[1] = mb
        for i in range(2, 2 + (<size_t>2 << mb), 2):
            b[i] = <uint64_t>0xFFFFFFFFFFFFFFFFULL   # never asked: no key is two NO_TOKENs
    else:
        bits.assign(words, <uint64_t>0xFFFFFFFFFFFFFFFFULL)
        return bits.data()
    at = 2 + (<size_t>2 << mb)
    if bits.size() < at + words:
        bits.resize(at + words)
    b = bits.data() + at
    for i in range(words):
        b[i] = <uint64_t>0xFFFFFFFFFFFFFFFFULL
    return b


cdef Py_ssize_t backtrack_long(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                               vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """backtrack_piece for n == 1 or n > SHORT_PIECE, without the pair memo.

    The token stack lives in out's storage, grown once by n (a piece of n bytes has at most n
    tokens; growing on demand cost 5% Ir here) and cut back to the tokens at the end; the last
    token stays in a register (Performance notes, step 21)."""
    cdef size_t start = out.size()
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter
    cdef uint32_t token
    cdef uint32_t* stack
    cdef uint64_t* alive = alive_bits(v, bits, n, False)
    out.resize(start + n)
    stack = out.data() + start
    token = next_match(v, p, n)
    while True:
        end = pos + token_len(v, token)
        if ((alive[end >> 6] >> (end & 63)) & 1) and (last == NO_TOKEN or pair_stays(v, last, token, p, pos, end)):
            stack[k] = token
            k += 1
            last = token
            pos = end
            if pos == n:
                break
            token = next_match(v, p + pos, n - pos)
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                alive[pos >> 6] &= ~(<uint64_t>1 << (pos & 63))
                k -= 1
                token = last
                pos -= token_len(v, token)
                last = stack[k - 1] if k else NO_TOKEN
    out.resize(start + k)
    return k


cdef Py_ssize_t backtrack_memo(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                               vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """backtrack_long with the pair checks remembered in ``bits`` for the call (alive_bits):
    whitespace runs and repetitive pieces over MEMO_PIECE bytes ask about the same pairs again and
    again, within a piece and across pieces. An entry answers (last, token) with the first token
    of token, next_prefix[token], ... that may follow last (NO_TOKEN: none), so the shorter
    tokens a run's longest match steps down through are skipped at once. A copy of
    backtrack_long's loop, not a flag in it: the flag cost pieces without the memo 4-5% Ir
    (Performance notes, step 20)."""
    cdef size_t start = out.size()
    cdef Py_ssize_t pos = 0, k = 0
    cdef Py_ssize_t end
    cdef uint32_t last = NO_TOKEN, shorter
    cdef uint32_t token, t
    cdef uint32_t* stack
    cdef Py_ssize_t cap
    cdef uint64_t* alive = alive_bits(v, bits, n, True)
    cdef uint64_t* memo = bits.data() + 2
    cdef int shift = <int>(64 - bits[1])
    cdef uint64_t pk
    cdef size_t mi
    cap = n if n < STACK_START else STACK_START
    out.resize(start + cap)
    stack = out.data() + start
    token = next_match(v, p, n)
    while True:
        if last != NO_TOKEN:
            pk = (<uint64_t>last << 32) | token
            mi = 2 * <size_t>(hash_u64(pk) >> shift)
            if memo[mi] == pk:
                token = <uint32_t>memo[mi + 1]
            else:
                t = token
                while t != NO_TOKEN and (long_pair_rejected(v, last, t, token_len(v, t))
                                         or not is_valid_pair(v, last, t)):
                    t = v.next_prefix[t]
                memo[mi] = pk
                memo[mi + 1] = t
                token = t
        if token != NO_TOKEN:
            end = pos + token_len(v, token)
            if (alive[end >> 6] >> (end & 63)) & 1:
                if k == cap:
                    cap = grow_stack(out, start, cap, n)
                    stack = out.data() + start
                stack[k] = token
                k += 1
                last = token
                pos = end
                if pos == n:
                    break
                token = next_match(v, p + pos, n - pos)
                continue
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
                continue
        # No token from pos on stays: pos is a dead end; take back the token before it.
        alive[pos >> 6] &= ~(<uint64_t>1 << (pos & 63))
        k -= 1
        token = last
        pos -= token_len(v, token)
        last = stack[k - 1] if k else NO_TOKEN
    out.resize(start + k)
    return k


cdef Py_ssize_t merge_pending(const VocabView* v, MergeState* group, const uint64_t* hashes,
                              const size_t* at, Py_ssize_t g, BpeCacheTable* shared,
                              vector[uint32_t]& out, bint count_only) noexcept nogil:
    """The pieces group[:g] that missed the shared cache, merged (merge_group; short_backtrack for
    a piece with a byte that has no token) and remembered in ``shared`` under their hashes.
    Returns their token count; unless ``count_only``, their tokens are also put where each piece
    was met: at[j], the size ``out`` had then (ascending), the tokens after it moved up."""
    cdef Py_ssize_t j, k, total = 0
    cdef size_t src_end, dst_end, seg
    merge_group(v, group, g)
    for j in range(g):
        k = group[j].m
        if k < 0:
            k = short_backtrack(v, group[j].p, group[j].n, group[j].tok)
            group[j].m = k
        total += k
        bpe_cache_put(shared, hashes[j], group[j].p, <int>group[j].n, group[j].tok, <int>k)
    if count_only:
        return total
    src_end = out.size()
    out.resize(src_end + total)
    dst_end = out.size()
    j = g - 1
    while j >= 0:   # from the last piece back, so nothing is overwritten before it moves
        seg = src_end - at[j]
        dst_end -= seg
        if seg:
            memmove(&out[dst_end], &out[at[j]], seg * sizeof(uint32_t))
        dst_end -= <size_t>group[j].m
        memcpy(&out[dst_end], group[j].tok, group[j].m * sizeof(uint32_t))
        src_end = at[j]
        j -= 1
    return total


cdef struct CacheSlot:
    uint64_t hash       #: piece_hash of the piece
    uint32_t start      #: byte offset of an earlier occurrence in the text
    uint32_t len        #: its length (0 = empty slot)
    uint32_t first      #: index in ``out`` of its first token (encode)
    uint32_t ntok       #: its token count


cdef enum:
    CACHE_MAX_BITS = 14     #: at most 16384 slots x 24 bytes = 384 KB
    CACHE_MIN_TEXT = 4096   #: texts shorter than this do not use the cache
    SHARED_TRIAL = 1024     #: shared-cache misses after which a call with few hits leaves it
    SHARED_WARM = 4096      #: entries from which the shared cache's hit rate says the text is random



cdef struct Pending:
    # A piece cut ahead of the one being encoded (encode_text's look-ahead blocks).
    Py_ssize_t start            #: byte offset in the text
    Py_ssize_t end              #: end offset
    uint64_t head               #: load_head of the piece (pieces of 2+ bytes)
    uint64_t h                  #: piece_hash of the piece (pieces of 2+ bytes)


cdef enum:
    BLOCK = 8                   #: pieces cut (and their whole-piece slot prefetched) per block
    SCAN_AHEAD = 64             #: piece ends asked of the scanner at once (ScanBuffer)


cdef struct ScanBuffer:
    # Piece ends the scanner gave ahead of the blocks (encode_text): the block scanner finds every
    # start in its 64-byte window, ~14 on prose, and asking for one block's 8 classified each
    # window twice.
    Py_ssize_t ends[SCAN_AHEAD]
    Py_ssize_t at               #: the next end not yet cut
    Py_ssize_t n                #: ends held


cdef Py_ssize_t fill_scan(int kind, const uint8_t* s, Py_ssize_t n, Py_ssize_t start,
                          const vector[Py_ssize_t]& ends, size_t* e, ScanBuffer* sb,
                          bint mark) noexcept nogil:
    """Up to SCAN_AHEAD piece ends after ``start`` into ``sb`` (read from 0): the scanner's (with
    ``mark``, ~end for a piece of ASCII digits: next_piece_ends_marked), or for PAT_REGEX the next
    of ``ends`` (e[0] advanced; empty matches skipped). Returns how many."""
    cdef Py_ssize_t m = 0, end
    cdef size_t n_ends
    sb.at = 0
    if kind != PAT_REGEX:
        if mark:
            sb.n = next_piece_ends_marked(kind, s, n, start, sb.ends, SCAN_AHEAD)
        else:
            sb.n = next_piece_ends(kind, s, n, start, sb.ends, SCAN_AHEAD)
        return sb.n
    n_ends = ends.size()
    while m < SCAN_AHEAD and e[0] < n_ends:
        end = ends[e[0]]
        e[0] += 1
        if end > start:
            sb.ends[m] = end
            start = end
            m += 1
    sb.n = m
    return m


cdef inline Py_ssize_t cut_block(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                                 const vector[Py_ssize_t]& ends, size_t* e, Py_ssize_t* scan,
                                 ScanBuffer* sb, Pending* block, const CacheSlot* cache,
                                 int cache_bits, const BpeCacheTable* shared,
                                 Py_ssize_t* digits) noexcept nogil:
    """Cut up to BLOCK pieces from scan[0] (advanced past them) into ``block``, hash them and
    prefetch their whole-piece slot (and their cache slot once ``cache`` exists, their
    ``shared`` bucket when they fit in it); the ends come through ``sb`` (fill_scan).
    When counting (``digits`` not NULL), a piece of 1-3 ASCII digits that is a token (the scanner
    marks it) is only counted there: no hash, no prefetch, no lookup. (Carrying such a token to
    encode's loop cost that loop a test per piece: -5% on code, docs/perf/backtrack.md.)
    Returns how many were cut, 0 at the end of the text."""
    cdef Py_ssize_t m = 0, start = scan[0], end, length
    while m < BLOCK:
        if sb.at == sb.n and fill_scan(kind, s, n, start, ends, e, sb, digits != NULL) == 0:
            break
        end = sb.ends[sb.at]
        sb.at += 1
        if end < 0:   # digits (counting only): adv_digits' every piece, rare elsewhere
            end = ~end
            if v.digit_tokens[digit_index(s + start, end - start)] != NO_TOKEN:
                digits[0] += 1
                start = end
                continue
        block[m].start = start
        block[m].end = end
        length = end - start
        block[m].h = head_and_hash(s + start, length, s + n, &block[m].head)
        bpe_prefetch(&v.pieces[block[m].h >> v.piece_shift])
        if length > 8:
            bpe_prefetch(&v.piece_tails[block[m].h >> v.piece_shift])
        if cache != NULL:
            bpe_prefetch(&cache[block[m].h >> (64 - cache_bits)])
        if shared != NULL and length <= BPE_CACHE_KEY:
            bpe_prefetch(bpe_cache_bucket(shared, block[m].h))
        start = end
        m += 1
    scan[0] = start
    return m


cdef Py_ssize_t encode_pieces(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                              const vector[Py_ssize_t]& ends, vector[uint32_t]& out,
                              bint count_only, BpeCacheTable* shared) noexcept nogil:
    """Encode (append to ``out``) or count the UTF-8 text s[:n]; returns its token count.

    Pieces come from the scanner ``kind`` (SCAN_AHEAD ends per call, ScanBuffer), or are cut at
    ``ends`` for PAT_REGEX. They are cut one block (BLOCK pieces) ahead and the whole-piece slot of
    each is prefetched, so the table's cache misses overlap instead of queueing one per piece. A
    piece that is a token costs one probe of the whole-piece table. Other pieces
    go through backtrack_piece. Those of up to BPE_CACHE_KEY bytes are looked up in, or added to,
    the ``shared`` piece cache (piececache.pyx) when there is one (the ones it misses wait and are
    merged MERGE_GROUP at a time, merge_pending); the others, in texts of
    CACHE_MIN_TEXT bytes or more, are remembered in a direct-mapped cache local to this call (key:
    the piece's bytes, found again by memcmp against the text), and so are all of them once a
    call has left the shared cache (below). Either way a repeated word is copied instead of
    encoded again. With ``count_only``, ``out`` is scratch space.
    """
    cdef vector[uint64_t] bits
    cdef vector[CacheSlot] cache
    cdef CacheSlot* slot = NULL
    cdef bint use_cache = (n >= CACHE_MIN_TEXT) & (n < <Py_ssize_t>0xFFFFFFFFU)
    cdef Py_ssize_t pos, end, length, total = 0, k, ntok, scan = 0, i, cur_n, next_n
    cdef size_t e = 0
    cdef uint64_t h
    cdef uint32_t token, first
    cdef const uint8_t* p
    cdef Pending ring[2 * BLOCK]
    cdef Pending* cur = ring
    cdef Pending* nxt = ring + BLOCK
    cdef Pending* q
    cdef uint32_t stack[SHORT_PIECE]
    cdef int cache_bits = 8   # one slot per 64 bytes of text, 256 to 2**CACHE_MAX_BITS slots
    cdef int got, keep   # keep: 2 = add the piece to ``shared``, 1 = to the local cache
    cdef uint64_t hits = 0, misses = 0
    # Text whose pieces the shared cache does not know (random strings: base64, hashes) leaves
    # it after SHARED_TRIAL misses with a hit rate under 1/16, or under 1/3 once the cache holds
    # SHARED_WARM entries (natural text hits it 54-75%; one that is still filling is not asked),
    # and uses only the cache of this call, if it is long enough to have one: a lookup and an
    # insert that both miss cost a quarter of such a count (docs/perf/backtrack.md, "Short
    # pieces by merging", "Leaving the shared cache").
    cdef bint local_only = False
    # The pieces that miss the shared cache wait and are merged MERGE_GROUP at a time
    # (merge_pending: their lookups' cache misses overlap); before the call's own cache is read
    # or written (its slots hold positions in ``out``), the ones waiting are done.
    cdef MergeState group[MERGE_GROUP]
    cdef uint64_t group_hash[MERGE_GROUP]
    cdef size_t group_at[MERGE_GROUP]
    cdef Py_ssize_t pending = 0
    cdef bint defer = shared != NULL and v.n_whole_only == 0
    cdef const BpeCacheTable* ahead = shared   # whose buckets cut_block prefetches
    cdef ScanBuffer sb
    while cache_bits < CACHE_MAX_BITS and (n >> (cache_bits + 6)) > 0:
        cache_bits += 1
    sb.at = 0
    sb.n = 0
    cur_n = cut_block(v, kind, s, n, ends, &e, &scan, &sb, cur, NULL, cache_bits, ahead,
                      &total if count_only else NULL)
    while cur_n:
        next_n = cut_block(v, kind, s, n, ends, &e, &scan, &sb, nxt,
                           cache.data() if cache.size() else NULL, cache_bits, ahead,
                           &total if count_only else NULL)
        for i in range(cur_n):
            q = &cur[i]
            pos = q.start
            end = q.end
            p = s + pos
            length = end - pos
            h = q.h
            token = lookup_piece_hashed(v, p, length, q.head, h)
            if token != NO_TOKEN:
                if count_only:
                    total += 1
                else:
                    out.push_back(token)
                continue
            keep = 0
            if not local_only and shared != NULL and length <= BPE_CACHE_KEY:   # BPE_CACHE_KEY <= SHORT_PIECE
                got = bpe_cache_get(shared, h, p, <int>length, <uint32_t*>NULL if count_only else &stack[0])
                if got >= 0:
                    hits += 1
                    if count_only:
                        total += got
                    else:
                        for k in range(got):
                            out.push_back(stack[k])
                    continue
                misses += 1
                keep = 2
                if (use_cache and misses == SHARED_TRIAL and
                        (hits * 16 < misses or
                         (hits * 2 < misses and bpe_cache_entries(shared) >= SHARED_WARM))):
                    local_only = True   # every piece below takes the local cache (elif)
                    ahead = NULL
                if defer:
                    group[pending].p = p
                    group[pending].n = length
                    group_hash[pending] = h
                    group_at[pending] = out.size()
                    pending += 1
                    if pending == MERGE_GROUP:
                        total += merge_pending(v, group, group_hash, group_at, pending, shared, out,
                                               count_only)
                        pending = 0
                    continue
            elif use_cache:
                if pending:
                    total += merge_pending(v, group, group_hash, group_at, pending, shared, out,
                                           count_only)
                    pending = 0
                if cache.size() == 0:
                    cache.resize(1 << cache_bits)
                slot = &cache[h >> (64 - cache_bits)]
                if slot.len == <uint32_t>length and slot.hash == h and memcmp(s + slot.start, p, length) == 0:
                    if count_only:
                        total += slot.ntok
                    else:
                        first = slot.first
                        for k in range(slot.ntok):
                            token = out[first + k]
                            out.push_back(token)
                    continue
                keep = 1
            if length <= SHORT_PIECE:   # not via backtrack_piece: gcc then inlines both loops there
                if count_only:
                    ntok = short_tokens(v, p, length, stack)
                else:
                    ntok = backtrack_short(v, p, length, out)
            else:
                if count_only:
                    out.clear()
                ntok = backtrack_piece(v, p, length, out, bits)
            if count_only:
                total += ntok
            if keep == 2:
                bpe_cache_put(shared, h, p, <int>length,
                              &stack[0] if count_only else &out[out.size() - ntok], <int>ntok)
            elif keep == 1:
                slot.hash = h
                slot.start = <uint32_t>pos
                slot.len = <uint32_t>length
                slot.first = <uint32_t>(out.size() - ntok)
                slot.ntok = <uint32_t>ntok
        q = cur
        cur = nxt
        nxt = q
        cur_n = next_n
    if pending:
        total += merge_pending(v, group, group_hash, group_at, pending, shared, out, count_only)
    if shared != NULL:
        bpe_cache_count(shared, hits, misses)
    return total if count_only else <Py_ssize_t>out.size()


cdef Py_ssize_t encode_text(const VocabView* v, int kind, const uint8_t* s, Py_ssize_t n,
                            const vector[Py_ssize_t]& ends, vector[uint32_t]& out,
                            bint count_only, BpeCacheTable* shared) noexcept nogil:
    """encode_pieces; for PAT_REGEX ends that hold gaps (a ~start before the end of a match that
    does not start where the one before it ended: BacktrackEncoder._pieces), each stretch of
    matches between two gaps on its own, so the text no match covers is in no piece and has no
    token, as in tiktoken. (Skipping a gap inside encode_pieces' block loop, one more branch there,
    cost English and code encode 4-8%: gcc inlined that loop's helpers differently.)"""
    cdef Py_ssize_t base = 0, total = 0, k, e
    cdef vector[Py_ssize_t] stretch
    if kind == PAT_REGEX:
        for k in range(<Py_ssize_t>ends.size()):
            if ends[k] < 0:
                break
        else:
            return encode_pieces(v, kind, s, n, ends, out, count_only, shared)
        for k in range(<Py_ssize_t>ends.size() + 1):
            e = ends[k] if k < <Py_ssize_t>ends.size() else -1
            if e >= 0:
                stretch.push_back(e - base)
                continue
            if stretch.size():   # (encoding, the sum is of out's sizes and goes unused)
                total += encode_pieces(v, kind, s + base, stretch.back(), stretch, out, count_only,
                                       shared)
                stretch.clear()
            base = ~e
        return total if count_only else <Py_ssize_t>out.size()
    return encode_pieces(v, kind, s, n, ends, out, count_only, shared)


cdef PyObject** _ints = NULL   #: _ints[i] is the int i once some list held it, else NULL
cdef Py_ssize_t _ints_size = 0   #: entries in _ints


cdef PyObject** int_table(uint32_t max_id) except NULL:
    """_ints, made to hold ids up to ``max_id`` (new entries NULL). Called with the GIL held."""
    global _ints, _ints_size
    cdef PyObject** grown
    if _ints_size <= <Py_ssize_t>max_id:
        grown = <PyObject**>calloc(<size_t>max_id + 1, sizeof(PyObject*))
        if grown == NULL:
            raise MemoryError()
        if _ints_size:
            memcpy(grown, _ints, _ints_size * sizeof(PyObject*))
        free(_ints)
        _ints = grown
        _ints_size = <Py_ssize_t>max_id + 1
    return _ints


cdef PyObject* new_int(PyObject** ints, uint32_t i) except NULL:
    """ints[i] made: the int object i, kept for every later list (one reference held here)."""
    cdef object o = PyLong_FromUnsignedLong(i)
    Py_INCREF_p(<PyObject*>o)
    ints[i] = <PyObject*>o
    return ints[i]


cdef enum:
    LIST_AHEAD = 32   #: ids_to_list prefetches the int object this many items ahead, its slot twice as far


cdef inline uint32_t list_id(const uint32_t* ids, Py_ssize_t i, const uint32_t* id_map) noexcept nogil:
    return id_map[ids[i]] if id_map != NULL else ids[i]


cdef list ids_to_list(const uint32_t* ids, Py_ssize_t k, const uint32_t* id_map, uint32_t max_id):
    """[id_map[ids[i]] (or ids[i] when id_map is NULL) for i < k]; each item is the one int object
    of its id, made the first time a list holds it (not a table of every id up front: the first
    encode of a process paid 2-4 ms for that). Each item costs two dependent misses, its slot in
    ``_ints`` and the object's reference count: both are prefetched ahead (LIST_AHEAD; code
    5.6-8.8 -> 3.6-5.6 ns per token; docs/perf/backtrack.md "Building the list")."""
    cdef Py_ssize_t i
    cdef uint32_t t
    cdef PyObject** ints = int_table(max_id)
    cdef PyObject* o
    cdef list result = PyList_New(k)
    for i in range(k):
        if i + 2 * LIST_AHEAD < k:
            bpe_prefetch(&ints[list_id(ids, i + 2 * LIST_AHEAD, id_map)])
        if i + LIST_AHEAD < k:
            bpe_prefetch_w(ints[list_id(ids, i + LIST_AHEAD, id_map)])   # NULL for a new int: harmless
        t = list_id(ids, i, id_map)
        o = ints[t]
        if o == NULL:
            o = new_int(ints, t)
        Py_INCREF_p(o)
        PyList_SET_ITEM_p(result, i, o)
    return result


cdef array.array _UINT32 = _array.array("I")


cdef void byte_offsets(const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& ends) noexcept nogil:
    """utf8_offsets over ``_pieces``' ends: character offsets to byte offsets in the UTF-8
    ``s[:n]``, a gap's ~start to ~(its byte offset)."""
    cdef Py_ssize_t k, c
    cdef vector[Py_ssize_t] gaps   # indices of the ~start entries
    for k in range(<Py_ssize_t>ends.size()):
        c = ends[k]
        if c < 0:
            gaps.push_back(k)
            ends[k] = ~c
    utf8_offsets(s, n, ends)
    for k in gaps:
        ends[k] = ~ends[k]


cdef int text_utf8(BacktrackEncoder enc, str text, const uint8_t** s, Py_ssize_t* n,
                   vector[Py_ssize_t]& ends, Utf8Buffer& buf) except -1:
    """``enc._pieces(text, s, n, ends)``, but a non-ASCII text (hand-written scanners only) whose
    UTF-8 the str does not hold yet is turned into UTF-8 in ``buf`` by utf8_size + utf8_fill: with
    the GIL released from NOGIL_UTF8_CHARS characters on, under it below (a few microseconds; 2.5x
    fewer instructions than CPython's conversion, and nothing is kept in the str). The str is
    immutable and the caller holds it. Lone surrogates raise UnicodeEncodeError, as
    PyUnicode_AsUTF8AndSize does."""
    cdef Py_ssize_t m, size
    cdef unsigned int kind
    cdef const void* data
    cdef PyCompactUnicodeObject* cached
    cdef uint8_t* out = NULL
    if enc.kind == PAT_REGEX or PyUnicode_IS_ASCII(text):
        return enc._pieces(text, s, n, ends)
    if PyUnicode_IS_COMPACT(text):
        cached = <PyCompactUnicodeObject*><PyObject*>text
        if cached.utf8 != NULL:   # already converted (by an earlier call elsewhere): use it
            s[0] = <const uint8_t*>cached.utf8
            n[0] = cached.utf8_length
            return 0
    m = PyUnicode_GET_LENGTH(text)
    kind = PyUnicode_KIND(text)
    data = PyUnicode_DATA(text)
    if m < NOGIL_UTF8_CHARS:
        out = utf8_into(kind, data, m, buf, &size)
    else:
        with nogil:
            out = utf8_into(kind, data, m, buf, &size)
    if size < 0:
        raise UnicodeEncodeError("utf-8", text, 0, m, "surrogates not allowed")
    if out == NULL:
        raise MemoryError()
    s[0] = out
    n[0] = size
    return 0


cdef class BacktrackEncoder:
    """Pre-tokenizer + backtracking BPE over one Vocab; every method releases the GIL while it encodes.

    ``kind`` says who cuts pieces: a hand-written scanner (pretokenize.pyx), the `regex` module
    (``_regex``, for any other pattern), or nobody (``pattern is None``: one piece).
    Returned ids are external ids (the ranks of ``mergeable_ranks``). Nothing is mutated while
    encoding: any number of threads may use one encoder at once.
    """

    def __init__(self, Vocab vocab, pattern):
        import regex
        if _UINT32.itemsize != 4:
            raise RuntimeError("array('I') is not 32-bit on this platform")
        self.vocab = vocab
        self.pattern = pattern
        self.kind = pattern_kind(pattern)
        self.piece_cache = PieceCache()
        self._regex = regex.compile(pattern) if pattern is not None else None
        cdef const VocabView* v = &vocab.view
        with nogil:
            # The whole-piece, trie and pair tables are read at random (4-16 MB for o200k): on
            # 4 KB pages nearly every probe is also a TLB miss. Read-only from here on.
            if v.pieces != NULL:
                bpe_huge_pages(v.pieces, sizeof(PieceEntry) << (64 - v.piece_shift))
                bpe_huge_pages(v.piece_tails, sizeof(uint64_t) << (64 - v.piece_shift))
            if v.trie != NULL:
                bpe_huge_pages(v.trie, sizeof(TrieEntry) * (v.trie_mask + 1))
            if v.pairs != NULL:
                bpe_huge_pages(v.pairs, sizeof(PairEntry) * (v.pair_mask + 1))

    cdef int _pieces(self, str text, const uint8_t** s, Py_ssize_t* n, vector[Py_ssize_t]& ends) except -1:
        """UTF-8 of ``text`` in s/n; for PAT_REGEX also the byte ends of its pieces in ``ends``.

        The matches of a custom pattern need not cover the text: tiktoken encodes the matches
        only, so the characters between two of them are in no piece. A match that does not
        start where the one before it ended is announced by ~start (negative) before its end.
        When the matches' lengths add up to the text's, they tile it and are read from
        ``findall`` (no match objects: a 1 MB count 15% faster than ``finditer``'s ``end()``);
        otherwise, or when the pattern has groups (``findall`` gives groups), from
        ``finditer``'s spans."""
        cdef Py_ssize_t start, end, prev = 0
        cdef bint tiled = False
        s[0] = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, n)
        if self.kind != PAT_REGEX:
            return 0
        if self._regex.groups == 0:
            for piece in self._regex.findall(text):
                prev += len(<str>piece)
                ends.push_back(prev)
            tiled = prev == len(text)
            if not tiled:   # gaps, or text after the last match
                ends.clear()
                prev = 0
        if not tiled:
            for m in self._regex.finditer(text):
                start, end = m.span()
                if start != prev:
                    ends.push_back(~start)
                ends.push_back(end)
                prev = end
        if not text.isascii():
            byte_offsets(s[0], n[0], ends)
        return 0

    cdef Py_ssize_t _encode_pieces(self, const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& ends,
                                   vector[uint32_t]& out, bint count_only) noexcept nogil:
        return encode_text(&self.vocab.view, self.kind, s, n, ends, out, count_only, NULL)

    cdef list _to_list(self, vector[uint32_t]& out):
        return ids_to_list(out.data(), out.size(),
                           self.vocab.ids.data() if self.vocab.ids.size() else NULL, self.vocab.max_id)

    def encode(self, str text):
        """Token ids of ``text`` (no special tokens). Raises UnicodeEncodeError on lone surrogates."""
        cdef const uint8_t* s
        cdef Py_ssize_t n
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] out
        cdef Utf8Buffer buf
        cdef CacheTable table = self.piece_cache.get()   # held for the call: set_cache_size may replace it
        text_utf8(self, text, &s, &n, ends, buf)
        with nogil:
            out.reserve(n // 3 + 16)
            encode_text(&self.vocab.view, self.kind, s, n, ends, out, False, table.ptr)
        return self._to_list(out)

    def encode_to_buffer(self, str text):
        """Token ids of ``text`` as an ``array.array("I")`` (one buffer, no int objects)."""
        cdef const uint8_t* s
        cdef Py_ssize_t n, k
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] out
        cdef const uint32_t* id_map = self.vocab.ids.data() if self.vocab.ids.size() else NULL
        cdef Utf8Buffer buf
        cdef CacheTable table = self.piece_cache.get()   # held for the call: set_cache_size may replace it
        text_utf8(self, text, &s, &n, ends, buf)
        with nogil:
            out.reserve(n // 3 + 16)
            encode_text(&self.vocab.view, self.kind, s, n, ends, out, False, table.ptr)
            if id_map != NULL:
                for k in range(<Py_ssize_t>out.size()):
                    out[k] = id_map[out[k]]
        cdef array.array result = array.clone(_UINT32, out.size(), False)
        if out.size():
            memcpy(result.data.as_uints, out.data(), out.size() * 4)
        return result

    def count(self, str text):
        """len(encode(text)), without building Python objects per token."""
        cdef const uint8_t* s
        cdef Py_ssize_t n, total
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] scratch
        cdef Utf8Buffer buf
        cdef CacheTable table = self.piece_cache.get()   # held for the call: set_cache_size may replace it
        text_utf8(self, text, &s, &n, ends, buf)
        with nogil:
            total = encode_text(&self.vocab.view, self.kind, s, n, ends, scratch, True, table.ptr)
        return total

    def count_till_limit(self, str text, Py_ssize_t limit):
        """The count of ``text`` if it is <= limit, else None; work grows with ``limit``.

        Pieces are encoded in order and the scan stops as soon as the total passes ``limit``; a piece
        too long to fit (more than limit * L bytes, L the longest token) is rejected unencoded.
        """
        if limit < 0:
            return None
        cdef const uint8_t* s
        cdef Py_ssize_t n, pos = 0, e, total = 0, k
        cdef const VocabView* v = &self.vocab.view
        cdef Py_ssize_t maxlen = self.vocab.max_token_len
        cdef vector[uint32_t] out
        cdef vector[uint64_t] bits
        cdef int kind = self.kind
        s = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, &n)
        if kind == PAT_REGEX:
            for m in self._regex.finditer(text):
                start, stop = m.span()
                piece = text[start:stop].encode("utf-8")
                if total + (len(piece) + maxlen - 1) // maxlen > limit:
                    return None
                total += count_bytes(v, <const uint8_t*>piece, len(piece), out, bits)
                if total > limit:
                    return None
            return total
        with nogil:
            while pos < n:
                e = n if kind == PAT_NONE else next_piece_end(kind, s, n, pos)
                if total + (e - pos + maxlen - 1) // maxlen > limit:
                    total = limit + 1
                    break
                total += count_bytes(v, s + pos, e - pos, out, bits)
                if total > limit:
                    break
                pos = e
        return None if total > limit else total

    def encode_single_piece(self, const uint8_t[::1] data):
        """BPE of ``data`` as one piece (no pre-tokenization)."""
        cdef vector[uint32_t] out
        cdef vector[uint64_t] bits
        if data.shape[0]:
            with nogil:
                encode_piece(&self.vocab.view, &data[0], data.shape[0], out, bits)
        return self._to_list(out)

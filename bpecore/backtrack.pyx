"""Backtracking BPE encoder: BPE's exact output without a merge loop.

For each piece, take the longest token that prefixes the rest of the piece; if BPE would not keep
it next to the previous token (``is_valid_pair``), try the next shorter prefix token; if none fits,
pop the previous token and mark the position it started from as a dead end (README, "How it
works", backtracking in 3 steps). Every position is popped at most once, so a piece of n bytes
costs O(n * L) pair checks in the worst case (L = longest token, 128 here; worst input: long runs
that hit many dead ends, e.g. random base64) and about one trie walk per output token on average.
Memory: the output vector plus n/8 bytes of dead-end bits per piece.

Pieces that are themselves a token (most of them in real text) take one hash lookup.
"""

from cpython.unicode cimport PyUnicode_AsUTF8AndSize
from libc.stdint cimport uint8_t, uint32_t, uint64_t
from libcpp.vector cimport vector

from bpecore._types cimport NO_TOKEN
from bpecore.pretokenize cimport PAT_NONE, PAT_REGEX, next_piece_end
from bpecore.vocab cimport (
    Vocab, VocabView, is_valid_pair, lookup_piece, next_match, token_len,
)

from bpecore.pretokenize import pattern_kind


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


cdef Py_ssize_t backtrack_piece(const VocabView* v, const uint8_t* p, Py_ssize_t n,
                                vector[uint32_t]& out, vector[uint64_t]& bits) noexcept nogil:
    """encode_piece without the whole-piece lookup (n >= 1)."""
    cdef size_t start = out.size()
    cdef Py_ssize_t pos = 0
    cdef Py_ssize_t end
    cdef uint32_t last, shorter
    cdef uint32_t token
    bits.assign((n >> 6) + 1, <uint64_t>0xFFFFFFFFFFFFFFFFULL)
    token = next_match(v, p, n)
    while True:
        last = out.back() if out.size() > start else NO_TOKEN
        end = pos + token_len(v, token)
        if ((bits[end >> 6] >> (end & 63)) & 1) and (last == NO_TOKEN or is_valid_pair(v, last, token)):
            out.push_back(token)
            pos = end
            if pos == n:
                break
            token = next_match(v, p + pos, n - pos)
        else:
            shorter = v.next_prefix[token]
            if shorter != NO_TOKEN:
                token = shorter
            else:
                bits[pos >> 6] &= ~(<uint64_t>1 << (pos & 63))
                out.pop_back()
                pos -= token_len(v, last)
                token = last
    return out.size() - start


cdef void utf8_offsets(const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& chars) noexcept nogil:
    """Replace the char offsets in ``chars`` (ascending) by byte offsets into the UTF-8 ``s[:n]``."""
    cdef Py_ssize_t byte = 0, char_i = 0, k
    for k in range(<Py_ssize_t>chars.size()):
        while char_i < chars[k]:
            byte += 1
            while byte < n and (s[byte] & 0xC0) == 0x80:
                byte += 1
            char_i += 1
        chars[k] = byte


cdef class BacktrackEncoder:
    """Pre-tokenizer + backtracking BPE over one Vocab; every method releases the GIL while it encodes.

    ``kind`` says who cuts pieces: a hand-written scanner (pretokenize.pyx), the `regex` module
    (``_regex``, for any other pattern), or nobody (``pattern is None``: one piece).
    Returned ids are external ids (the ranks of ``mergeable_ranks``).
    """

    def __init__(self, Vocab vocab, pattern):
        import regex
        self.vocab = vocab
        self.pattern = pattern
        self.kind = pattern_kind(pattern)
        self._regex = regex.compile(pattern) if pattern is not None else None

    cdef int _pieces(self, str text, const uint8_t** s, Py_ssize_t* n, vector[Py_ssize_t]& ends) except -1:
        """UTF-8 of ``text`` in s/n; for PAT_REGEX also the byte ends of its pieces in ``ends``."""
        s[0] = <const uint8_t*>PyUnicode_AsUTF8AndSize(text, n)
        if self.kind == PAT_REGEX:
            for m in self._regex.finditer(text):
                ends.push_back(m.end())
            if not text.isascii():
                utf8_offsets(s[0], n[0], ends)
        return 0

    cdef Py_ssize_t _encode_pieces(self, const uint8_t* s, Py_ssize_t n, vector[Py_ssize_t]& ends,
                                   vector[uint32_t]& out, bint count_only) noexcept nogil:
        """Encode (append to ``out``) or count (``out`` is scratch) the pieces of s[:n]; returns the count."""
        cdef const VocabView* v = &self.vocab.view
        cdef vector[uint64_t] bits
        cdef Py_ssize_t pos = 0, end, total = 0
        cdef size_t k
        cdef int kind = self.kind
        if kind == PAT_REGEX:
            for k in range(ends.size()):
                if ends[k] > pos:
                    if count_only:
                        total += count_piece(v, s + pos, ends[k] - pos, out, bits)
                    else:
                        encode_piece(v, s + pos, ends[k] - pos, out, bits)
                pos = ends[k]
        else:
            while pos < n:
                end = next_piece_end(kind, s, n, pos)
                if count_only:
                    total += count_piece(v, s + pos, end - pos, out, bits)
                else:
                    encode_piece(v, s + pos, end - pos, out, bits)
                pos = end
        return total if count_only else <Py_ssize_t>out.size()

    def encode(self, str text):
        """Token ids of ``text`` (no special tokens). Raises UnicodeEncodeError on lone surrogates."""
        cdef const uint8_t* s
        cdef Py_ssize_t n
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] out
        self._pieces(text, &s, &n, ends)
        with nogil:
            out.reserve(n // 3 + 16)
            self._encode_pieces(s, n, ends, out, False)
        return self._to_list(out)

    def count(self, str text):
        """len(encode(text)), without building Python objects per token."""
        cdef const uint8_t* s
        cdef Py_ssize_t n, total
        cdef vector[Py_ssize_t] ends
        cdef vector[uint32_t] scratch
        self._pieces(text, &s, &n, ends)
        with nogil:
            total = self._encode_pieces(s, n, ends, scratch, True)
        return total

    def encode_single_piece(self, const uint8_t[::1] data):
        """BPE of ``data`` as one piece (no pre-tokenization)."""
        cdef vector[uint32_t] out
        cdef vector[uint64_t] bits
        if data.shape[0]:
            with nogil:
                encode_piece(&self.vocab.view, &data[0], data.shape[0], out, bits)
        return self._to_list(out)

    cdef list _to_list(self, vector[uint32_t]& out):
        cdef size_t k
        cdef list result
        if self.vocab.ids.size() == 0:
            return out
        result = [None] * out.size()
        for k in range(out.size()):
            result[k] = self.vocab.ids[out[k]]
        return result

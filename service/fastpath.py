"""The lean path for ``POST /v1/count``: well-formed requests are answered here, in the middleware,
without FastAPI's routing, dependency solving and pydantic model passes; anything else falls through
to the FastAPI route, which stays the definition (and the OpenAPI description) of the endpoint.

What is answered here is exactly what the route would answer with 200: a JSON object whose keys are
among ``CountRequest``'s, ``text`` a str or ``texts`` a list of str (never both), ``encoding`` a
str of 1-200 characters or ``encodings`` a non-empty list of them, ``limit`` a non-negative int
(not a bool, not "1", not 1.0), every encoding loaded and every server limit respected. For those
inputs pydantic's result is the input itself (texts with lone surrogates cleaned the same way), so
the answer is the route's, byte for byte: the same counts, the same JSON body, the same metrics and
log fields. Everything else (a value of the wrong type, any error) returns None here and the
route answers, so every error status and body stays the documented one.
``tests/service/test_fastpath.py`` checks the two answers are equal over many inputs.

Large bodies are handled in a worker thread (``THREAD_BYTES``) and, above ``PIECE_CHARS``, decoded
in pieces: the UTF-8 decode, the JSON string scan and the UTF-8 check each run over about 64K
characters at a time, so no single call holds the GIL for long and the event loop can keep
answering (refusals under overload, /readyz) while a 3 MB body is parsed. Bodies above
``SERIAL_BYTES`` are answered one at a time, so the loop competes for the GIL with one such thread,
not with every one (smaller bodies are still counted in parallel). ``count`` turns a long non-ASCII
text into UTF-8 with the GIL released (``bpecore.backtrack.text_utf8``; under the GIL that step
held it about 7 ms for 2.8 M characters).

Performance notes (1 KB English text, in-process, same machine, side by side): the FastAPI route
with the middleware cost ~330 µs per request against ~170 µs for a bare FastAPI + tiktoken app;
half of ours was the threadpool hop for the ``def`` endpoint, the rest routing, dependency solving
and the request/response model passes. Counting 1 KB takes 15-25 µs with the GIL released, so small
bodies are counted on the loop (a thread hop would cost more than the count). Through the whole
app the fast path costs 83-89 µs per 1 KB count, against 600-750 µs for the route (load average 7).
Overload with 2.8 MB bodies in flight (429 p99, tests/reliability/test_backpressure.py's load, side
by side): the route 55-87 ms (``json.loads`` of such a body alone holds the GIL ~20 ms); parsed
in a thread in pieces with no one-at-a-time rule 50-74 ms, one body parsed at a time 47 ms, one
body parsed and counted at a time 38 ms (single runs at load 5, before the other changes); the
one-at-a-time rule for every body above 64K characters also serialised 100 KB counts (one core of
two), hence ``SERIAL_BYTES``; GIL switch interval 1 ms against Python's 5 ms: p99 12.3-12.8 ms against
21-30 ms (three runs each, load 4-6).
"""

from __future__ import annotations

import codecs
import json
import threading
import time
from json import decoder as _json_decoder
from json import scanner as _json_scanner

from pydantic_core import to_json

from bpecore._text import clean

COUNT_PATH = "/v1/count"
COUNT_TEMPLATE = "/v1/count"  # the route's template, for request metrics and the log line
THREAD_BYTES = 16 * 1024  # bodies above this are parsed and counted in a worker thread
PIECE_CHARS = 64 * 1024  # bodies above this are decoded and checked this many characters at a time
SERIAL_BYTES = 1024 * 1024  # bodies above this are answered one at a time

_KEYS = frozenset({"text", "texts", "encoding", "encodings", "limit"})
_scanstring = _json_decoder.scanstring
_LOW_SURROGATE_ESCAPE = frozenset("cdefCDEF")


def json_content_type(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the first Content-Type is application/json (any parameters): FastAPI then parses it
    with ``json.loads``. Missing or any other type: the route decides (it refuses)."""
    for k, v in headers:
        if k == b"content-type":
            return v.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


# ----------------------------------------------------------------------------------- parsing
def _scanstring_pieces(s: str, end: int, strict: bool = True) -> tuple[str, int]:
    """``json.decoder.scanstring(s, end, strict)``, scanning at most ~PIECE_CHARS per call.

    A piece is cut only where the whole scan would not look across the cut: before a backslash that
    starts an escape (its predecessor is not a backslash) unless that escape is a low surrogate (the
    whole scan may pair it with a high one just before), or where no escape is in the 6 characters
    before the cut. Each piece gets a closing quote; a piece ending before it found the real one.
    """
    n = len(s)
    if n - end <= PIECE_CHARS:
        return _scanstring(s, end, strict)
    parts = []
    pos = end
    while True:
        cut = pos + PIECE_CHARS
        if cut >= n:
            text, stop = _scanstring(s, pos, strict)
            parts.append(text)
            return "".join(parts), stop
        while True:
            k = s.rfind("\\", pos, cut)
            if k == -1 or k < cut - 6:
                break  # no escape reaches the cut
            while k > pos and s[k - 1] == "\\":
                k -= 1  # the start of the run of backslashes starts an escape
            if k <= pos:
                return _scanstring(s, end, strict)  # no cut found: scan it whole
            cut = k
            if not (s.startswith("\\u", k) and s[k + 2:k + 3] in ("d", "D") and s[k + 3:k + 4] in _LOW_SURROGATE_ESCAPE):
                break
        piece = s[pos:cut] + '"'
        text, stop = _scanstring(piece, 0, strict)
        parts.append(text)
        if stop < len(piece):  # the string's real closing quote was inside this piece
            return "".join(parts), pos + stop
        pos = cut


class _PiecewiseDecoder(json.JSONDecoder):
    """``json.JSONDecoder`` with the pure-Python scanner and long strings scanned in pieces."""

    def __init__(self) -> None:
        super().__init__()
        self.parse_string = _scanstring_pieces
        self.scan_once = _json_scanner.py_make_scanner(self)


def loads(body: bytes):
    """``json.loads(body)``; a large UTF-8 body is decoded and scanned in pieces (same result)."""
    if len(body) <= PIECE_CHARS:
        return json.loads(body)
    codec = json.detect_encoding(body)
    if codec != "utf-8":
        return json.loads(body)
    dec = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    view = memoryview(body)
    step = PIECE_CHARS * 2
    s = "".join([dec.decode(view[i:i + step]) for i in range(0, len(body), step)] + [dec.decode(b"", True)])
    if s.startswith("\ufeff"):
        return json.loads(body)  # not reached for "utf-8" (a BOM means utf-8-sig); kept for safety
    return _PiecewiseDecoder().decode(s)


def text_and_size(text: str) -> tuple[str, int]:
    """``schemas._clean_text(text)`` and its UTF-8 length, encoding at most PIECE_CHARS at a time."""
    if text.isascii():
        return text, len(text)
    n = 0
    try:
        for i in range(0, len(text), PIECE_CHARS):
            n += len(text[i:i + PIECE_CHARS].encode("utf-8"))
    except UnicodeEncodeError:
        text = clean(text)
        return text, sum(len(text[i:i + PIECE_CHARS].encode("utf-8")) for i in range(0, len(text), PIECE_CHARS))
    return text, n


def _name_ok(name) -> bool:
    return type(name) is str and 1 <= len(name) <= 200


# ----------------------------------------------------------------------------------- answering
class CountFastPath:
    """Answers ``POST /v1/count`` for the requests described above; None means "ask the route"."""

    def __init__(self, state, settings, metrics) -> None:
        self.state = state
        self.settings = settings
        self.metrics = metrics
        self._names: dict[str, bytes] = {}
        self._large = threading.Lock()

    def _name_json(self, name: str) -> bytes:
        out = self._names.get(name)
        if out is None:
            out = self._names[name] = to_json(name)
        return out

    def answer(self, body: bytes, info: dict) -> bytes | None:
        """The route's response body for ``body``, or None when the route must answer."""
        state = self.state
        if not state.loaded:
            return None
        if len(body) > SERIAL_BYTES:
            with self._large:  # one large body at a time: the loop has one thread to wait for, not many
                return self._answer(body, info)
        return self._answer(body, info)

    def _answer(self, body: bytes, info: dict) -> bytes | None:
        state = self.state
        try:
            req = loads(body)
        except (ValueError, RecursionError):
            return None
        if type(req) is not dict or not _KEYS.issuperset(req):
            return None
        s = self.settings
        text = req.get("text")
        texts = req.get("texts")
        name = req.get("encoding")
        names = req.get("encodings")
        limit = req.get("limit")
        if name is not None and names is not None:
            return None
        if names is None:
            if name is None:
                name = s.default_encoding
            elif not _name_ok(name):
                return None
            names = [name]
        elif type(names) is not list or not names or len(names) > s.max_encodings or not all(map(_name_ok, names)):
            return None
        if limit is not None and (type(limit) is not int or limit < 0 or limit > s.max_tokens):
            return None
        encodings = state.encodings
        encs = [encodings.get(n) for n in names]
        if None in encs:
            return None
        if (text is None) == (texts is None):
            return None
        nbytes = 0
        if texts is None:
            if type(text) is not str:
                return None
            text, nbytes = text_and_size(text)
            items = [text]
        else:
            if type(texts) is not list or len(texts) > s.max_texts:
                return None
            items = []
            for t in texts:
                if type(t) is not str:
                    return None
                t, size = text_and_size(t)
                items.append(t)
                nbytes += size
        observe = self.metrics.observe_op
        parts = []
        tokens_total = 0
        for enc in encs:
            t0 = time.perf_counter()
            if limit is None:
                count = enc.count
                counts = [count(t) for t in items]
            else:
                count_till_limit = enc.count_till_limit
                counts = [count_till_limit(t, limit) for t in items]
            tokens = sum(c for c in counts if c is not None)
            observe("count", enc.name, nbytes, tokens, time.perf_counter() - t0)
            tokens_total += tokens
            fits = None not in counts
            parts.append(b'{"encoding":%s,"count":%s,"counts":%s,"within_limit":%s}' % (
                self._name_json(enc.name),
                str(sum(counts)).encode() if fits else b"null",
                b"null" if texts is None else b"[" + b",".join(b"null" if c is None else b"%d" % c for c in counts) + b"]",
                b"null" if limit is None else (b"true" if fits else b"false"),
            ))
        info["op"] = "count"
        info["encoding"] = encs[0].name if all(e.name == encs[0].name for e in encs) else "multiple"
        info["bytes"] = nbytes * len(encs)
        info["tokens"] = tokens_total
        return parts[0][:-1] + b',"results":[' + b",".join(parts) + b"]}"

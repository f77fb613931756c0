"""Request bodies parsed without holding the GIL for long: ``loads`` is ``json.loads`` for any body,
and ``text_and_size`` is ``schemas._clean_text`` with the UTF-8 length, for any text.

Above ``PIECE_CHARS`` the UTF-8 decode, the JSON string scan and the UTF-8 check each run over about
64K characters at a time, so no single call holds the GIL for long and the event loop can keep
answering (refusals under overload, /readyz) while a worker thread parses a 3 MB body. The result
is ``json.loads``'s, value for value (``tests/service/test_body.py``), errors included: a body
``json.loads`` refuses raises ``ValueError`` here too.
"""

from __future__ import annotations

import codecs
import json
from json import decoder as _json_decoder
from json import scanner as _json_scanner

from bpecore._text import clean

PIECE_CHARS = (
    64 * 1024
)  # bodies and texts above this are decoded and checked this many characters at a time

_scanstring = _json_decoder.scanstring
_LOW_SURROGATE_ESCAPE = frozenset("cdefCDEF")


def json_content_type(headers: list[tuple[bytes, bytes]]) -> bool:
    """Whether the first Content-Type is application/json (any parameters): FastAPI then parses it
    with ``json.loads``. Missing or any other type: the route decides."""
    for k, v in headers:
        if k == b"content-type":
            return v.split(b";", 1)[0].strip().lower() == b"application/json"
    return False


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
            if not (
                s.startswith("\\u", k)
                and s[k + 2 : k + 3] in ("d", "D")
                and s[k + 3 : k + 4] in _LOW_SURROGATE_ESCAPE
            ):
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
    """``json.loads(body)``; a large UTF-8 body is decoded and scanned in pieces (same result).

    A UTF-8 body never starts with U+FEFF here: ``json.detect_encoding`` names a body with a BOM
    "utf-8-sig", which goes to ``json.loads`` whole.
    """
    if len(body) <= PIECE_CHARS or json.detect_encoding(body) != "utf-8":
        return json.loads(body)
    dec = codecs.getincrementaldecoder("utf-8")("surrogatepass")
    view = memoryview(body)
    step = PIECE_CHARS * 2
    s = "".join(
        [dec.decode(view[i : i + step]) for i in range(0, len(body), step)]
        + [dec.decode(b"", True)]
    )
    return _PiecewiseDecoder().decode(s)


def text_and_size(text: str) -> tuple[str, int]:
    """``schemas._clean_text(text)`` and its UTF-8 length, encoding at most PIECE_CHARS at a time."""
    if text.isascii():
        return text, len(text)
    n = 0
    try:
        for i in range(0, len(text), PIECE_CHARS):
            n += len(text[i : i + PIECE_CHARS].encode("utf-8"))
    except UnicodeEncodeError:
        text = clean(text)
        return text, sum(
            len(text[i : i + PIECE_CHARS].encode("utf-8")) for i in range(0, len(text), PIECE_CHARS)
        )
    return text, n


def replay(body: bytes, receive):
    """An ASGI ``receive`` that hands the app ``body`` (already read in full) once, then defers to
    ``receive`` (a disconnect): for a layer that read the body before passing the request on."""
    replayed = False

    async def receive_again():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return receive_again

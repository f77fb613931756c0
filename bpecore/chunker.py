"""Token-exact RAG chunking: ``chunk(text, max_tokens)`` and ``chunk_batch(texts, ...)``.

Every chunk's count is exact (the count of ``text[start:end]`` sent on its own), never more than
``max_tokens``. Each chunk is as large as it can be while ending at the best boundary available:
Markdown heading (H1 best, ``markdown=True``), paragraph, line, escaped blank line and escaped
newline (``\\n`` in JSON or a repr), sentence, sentence end before a lower-case letter (text
written in lower case), word, punctuation, word part (Unicode word boundaries), grapheme,
character. See DESIGN.md "Chunking" and the README's "Chunking" section for the rule; this
docstring only names the steps.

Per chunk starting at ``s``:
  1. ``e_max``: the largest end with ``count(text[s:e_max]) <= max_tokens``, found with the
     interval counter (a gallop out from ``s``, interpolation steps, then a look-ahead to the
     next word's end, since prefix counts are not monotonic); tests check it equals
     ``Encoding.split_at``, which costs ~2 us per token where this costs ~10 O(1) queries. The
     look-ahead only matters through the boundaries it lets into the window, so its ends are
     checked only where one would come in (``_best_end``);
  2. from the best boundary level down, walk that level's boundaries right to left from ``e_max``
     (``str.rfind`` for paragraphs, lines and sentence ends, a reverse regex search for the
     others, so only the tail of the window is scanned) and take the first whose chunk verifies
     exactly with the interval counter (a boundary left of ``e_max`` may still not fit: then
     step back);
  3. with ``overlap``, the next chunk starts at the first word start ``s'`` with
     ``count(text[s':end]) <= overlap`` (the mirror search, equal to ``split_at_end``);
  4. with ``balance``, an end inside a line may move to another end of its level, nearer an
     even share of the line and of what would follow its last piece in one chunk
     (``_balanced``: three more searches like step 1's).
Before the first chunk, ``language=None`` reads the first 8 KB for definitions of a language
(``_detect_language``).
Cost: one interval-counter pass over the text, then O(1) queries and regex scans over each
chunk's tail: about one pass.

Decisions that hold: queries go to the interval counter, never ``split_at`` per window (5 ms per
2048-token chunk against about ten O(1) queries); separators are matched alone and the whitespace
after them skipped forwards (a reverse search for both was quadratic in a whitespace run); the
look-ahead checks only the ends that would let a newline into the window; blank lines are found
with ``str.rfind`` over the newlines, and so are sentence ends (``_Sentences``), by walks that are
objects, not generators (a compiled generator dropped unfinished costs a thrown GeneratorExit);
a character a window lacks (newline, ``!``, ``?``, backslash) is looked for past it once
(``_NextChar``); whole-text scans for
Markdown headings and definitions try their ``regex`` pattern only at the line starts a stdlib
``re`` scan finds (the ``regex`` module's ``^`` scan of every line cost 2-3x a ``count`` of the
text). Whitespace runs, the next word's end, the word before a dot and the title checks are
walked a character at a time, not matched (a C loop once compiled, where a regex call cost a
matcher's set-up). The module is compiled (setup.py, with the C types of ``chunker.pxd``: the
state's fields, the per-chunk helpers' integers and calls, the interval counter's searches
through ``interval.pxd``, answers as C tuples); the same source runs uncompiled, and
tests/bpecore/test_chunker_compiled.py holds the two to the same chunks. ``Chunk`` objects are
made by ``bpecore._slots.Maker4`` (the frozen dataclass's ``__init__`` costs 8x). The
measurements: docs/perf/chunker.md.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING

import regex

from bpecore._slots import Maker4
from bpecore.interval import IntervalCounter

if TYPE_CHECKING:
    from bpecore.encoding import Encoding

__all__ = ["Chunk", "chunk", "chunk_batch"]


@dataclass(frozen=True, slots=True)
class Chunk:
    """One chunk: ``text == source[start:end]`` and ``tokens == count(text)``, exactly.

    ``start``/``end`` are character (code point) offsets into the source string.
    """

    start: int
    end: int
    text: str
    tokens: int


# Chunk(start, end, text, tokens) without the frozen dataclass's __init__, which sets each field
# through object.__setattr__ from Python (bpecore/_slots.pyx; tests compare the two).
_new_chunk = Maker4(Chunk, ("start", "end", "text", "tokens"))


# ---------------------------------------------------------------------------- boundary levels
# Higher is better. A boundary position ``b`` is where the next unit starts; the chunk before it
# is ``text[s:b]`` (whitespace-trimmed on the right when ``trim``).
_CHAR = 0  # any code point boundary
_GRAPHEME = 1  # extended grapheme cluster boundary (regex ``\X``)
_WORDPART = 2  # Unicode default word boundary (regex ``(?w)\b``): code, JSON, CJK runs
_PUNCT = 3  # after , ; : or a closing bracket (minified JSON, code)
_WORD = 4  # after a whitespace run
_LOWER_SENTENCE = 5  # a sentence end followed by a lower-case letter (text written in lower case)
_SENTENCE = 6  # after a sentence terminator (Unicode STerm/ATerm, closers, whitespace)
_ESCAPED_LINE = 7  # after an escaped newline "\\n" (JSON, a repr, a log of strings)
_ESCAPED_PARAGRAPH = 8  # after an escaped blank line "\\n\\n"
_LINE = 9  # after a newline
_PARAGRAPH = 10  # after a blank line
_SECTION = 11  # before a Markdown heading: _SECTION + (6 - depth), so H1 = 16 is the best

_REV = regex.REVERSE | regex.VERSION1
# Whitespace as ``str.isspace`` sees it (so ``str.strip`` agrees with trimming): Unicode
# White_Space plus the information separators U+001C..U+001F.
_S = r"[\s\x1c-\x1f]"
_WS_TAIL = regex.compile(_S + "+", _REV)  # anchored at endpos by .match in reverse mode
_WS_HEAD = regex.compile(_S + "+", regex.VERSION1)
# From a non-space: the rest of this word, whitespace, the next word; followed by whitespace when
# it ends before endpos.
_NEXT_WORD_END = regex.compile(r"[^\s\x1c-\x1f]*" + _S + r"+[^\s\x1c-\x1f]*", regex.VERSION1)
# Separators are matched without the whitespace that follows them (the boundary is moved past it
# afterwards): a reverse search for "separator + whitespace*" rescans a whitespace run at every
# position, quadratic in the run's length. Paragraph ("\n", whitespace but newline, "\n") and
# line ("\n") boundaries are found with str.rfind (``_newline_level``).
# A sentence ends at a run of terminators, then closing quotes/brackets, then whitespace; the
# full-width CJK terminators need no whitespace after them.
_SENTENCE_RE = regex.compile(
    r"[\p{SB=STerm}\p{SB=ATerm}]+\p{SB=Close}*(?=[\s\x1c-\x1f])"
    r"|[\u3002\uff01\uff1f\uff61\ufe52\ufe56\ufe57]+\p{SB=Close}*",
    _REV,
)
_WORD_RE = regex.compile(_S + "+", _REV)
_PUNCT_RE = regex.compile(r"[,;:\p{Pe}]+", _REV)
_WORDPART_RE = regex.compile(r"(?w)\b", _REV)
_GRAPHEME_RE = regex.compile(r"\X", regex.VERSION1)
# A cut just before one of these would split a grapheme cluster.
_NO_CUT_BEFORE = regex.compile(r"[\p{GCB=Extend}\p{GCB=SpacingMark}\p{GCB=ZWJ}]")
_NO_CUT_AFTER = regex.compile(r"[\p{GCB=ZWJ}\p{GCB=Prepend}]")
# Below these code points neither class has a member (U+0300 is the first combining mark, U+0600
# the first Prepend), so most cuts need no regex call; a test checks the bounds.
_FIRST_NO_CUT_BEFORE = "\u0300"
_FIRST_NO_CUT_AFTER = "\u0600"
_ASCII_CLOSE = frozenset("\"'()[]{}")  # the ASCII members of SB=Close (a test checks them)
# the ASCII characters that end a clause (terminators, "," and ";")
_ASCII_CLAUSE_ENDS = frozenset("!.?,;")
_LOWER = regex.compile(r"\p{Ll}")
# A title line (``_title_ends``) is at most this long and does not end like a sentence or a
# clause; the line under it is body text when it is longer or ends like one.
_TITLE_CHARS = 80
_NOT_TITLE_END = regex.compile(r"[\p{SB=STerm}\p{SB=ATerm},;]\p{SB=Close}*$", regex.VERSION1)
# Its first letter is not lower-case (text written in lower case has no titles to tell), and it
# is no table row.
_TITLE_START = regex.compile(r"[^\p{L}|\t]*[\p{L}--\p{Ll}][^|\t]*$", regex.VERSION1)


# One character of those classes, for the non-ASCII characters of the walks below.
_CLOSE_CHAR = regex.compile(r"\p{SB=Close}")
_CLAUSE_END_CHAR = regex.compile(r"[\p{SB=STerm}\p{SB=ATerm},;]")


def _title(line: str) -> bool:
    """Whether a stripped line can be a title (``_Chunker._title_ends``): ``_TITLE_START.match``
    and no ``_NOT_TITLE_END.search``, the first as a walk to the first letter (a test checks the
    two agree)."""
    if not 0 < len(line) <= _TITLE_CHARS or "|" in line or "\t" in line:
        return False
    for c in line:
        if c.isalpha():  # (\p{L}: str.isalpha is the L categories)
            if c.islower() if c < "\x80" else _LOWER.match(c) is not None:
                return False
            return not _ends_clause(line)
    return False


def _ends_clause(line: str) -> bool:
    """``_NOT_TITLE_END.search(line) is not None`` for a line without a newline: walk back over
    the closers, then look at one character (SB=Close and the terminators, ``,`` and ``;`` do
    not meet, so this is the regex's only possible match)."""
    k = len(line)
    while k:
        c = line[k - 1]
        if c in _ASCII_CLOSE or (c >= "\x80" and _CLOSE_CHAR.match(c) is not None):
            k -= 1
        else:
            return c in _ASCII_CLAUSE_ENDS or (
                c >= "\x80" and _CLAUSE_END_CHAR.match(c) is not None
            )
    return False


_WORD_BEFORE_DOT = regex.compile(r"(\w+)\.$")
# A list item's number ("2. Next step") at a line start, or after an escaped newline ("\\n2.")
# in JSON or a repr: not a sentence end.
_LIST_NUMBER = regex.compile(r"(?:(?<![^\n])|\\n)[ \t]*\d{1,3}\.$", regex.VERSION1)
# Tokens that end with "." without ending a sentence ("Dr. Smith", "e.g. this"), lower-cased.
_ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st rev gen gov sen rep hon mt ft "
    "e.g i.e eg ie cf vs viz al approx ca etc "
    "fig figs eq eqs vol vols pp ch sec no nos art op ed eds "
    "jan feb mar apr jun jul aug sep sept oct nov dec".split()
)
_ABBREVIATION_CHARS = max(map(len, _ABBREVIATIONS))
# ATX heading ("## Title"), setext heading ("Title\n====="), or a code fence (headings inside
# fences are not headings).
_MARKDOWN_RE = regex.compile(
    r"^(?P<fence>```|~~~)|^(?P<atx>#{1,6})(?:[ \t]|$)|^(?P<setext>[^\s][^\n]*)\n[ ]{0,3}(?P<under>=+|-+)[ \t]*$",
    regex.MULTILINE | regex.VERSION1,
)
# Line starts where ``_MARKDOWN_RE`` can match, for a stdlib ``re`` scan (``_markdown_matches``):
# a fence or ATX heading line, and the line above a setext underline.
_MARKDOWN_LINE = re.compile(r"\n(?=```|~~~|#)")
_SETEXT_UNDERLINE = re.compile(r"\n[ ]{0,3}(?:=+|-+)[ \t]*(?=\n|\Z)")

# Definitions per ``language=``: a line whose code starts one (group ``indent`` is its
# indentation), and the lines that belong to the definition below them when directly above it
# (decorators, attributes, comments, doc comments).
_DEFINITIONS = {
    "python": regex.compile(
        r"^(?P<indent>[ \t]*)(?:async[ \t]+def|def|class)[ \t]+[^\W\d]", regex.MULTILINE
    ),
    "javascript": regex.compile(
        r"^(?P<indent>[ \t]*)(?:export[ \t]+(?:default[ \t]+)?)?(?:async[ \t]+)?"
        r"(?:function\b|class\b|(?:const|let|var)[ \t]+[\w$]+[ \t]*=[ \t]*(?:async[ \t]*)?"
        r"(?:function\b|\([^()\n]*\)[ \t]*=>|[\w$]+[ \t]*=>))",
        regex.MULTILINE,
    ),
    "typescript": regex.compile(
        r"^(?P<indent>[ \t]*)(?:export[ \t]+(?:default[ \t]+)?)?(?:declare[ \t]+)?"
        r"(?:abstract[ \t]+)?(?:async[ \t]+)?"
        r"(?:function\b|class\b|interface\b|enum\b|namespace\b|type[ \t]+\w+[^\n=]*="
        r"|(?:const|let|var)[ \t]+[\w$]+[^\n=]*=[ \t]*(?:async[ \t]*)?"
        r"(?:function\b|\([^()\n]*\)[^\n=]*=>|[\w$]+[ \t]*=>))",
        regex.MULTILINE,
    ),
    "go": regex.compile(r"^(?P<indent>)(?:func|type)[ \t(]", regex.MULTILINE),
    "rust": regex.compile(
        r"^(?P<indent>[ \t]*)(?:pub(?:\([^)\n]*\))?[ \t]+)?(?:(?:const|async|unsafe)[ \t]+)*"
        r"(?:extern[ \t]+\S+[ \t]+)?(?:fn|struct|enum|trait|impl|mod|union|macro_rules!)\b",
        regex.MULTILINE,
    ),
}
_DEFINITIONS["tsx"] = _DEFINITIONS["typescript"]
_DEFINITIONS["jsx"] = _DEFINITIONS["javascript"]
# The words a definition line can start with (after its indentation), per language: a stdlib
# ``re`` scan for them after a newline finds a superset of the definition lines, 5x faster than
# the ``regex`` module's scan for the definition pattern (``_definition_matches``; "\n" first, not
# "^", lets the scan skip to newlines).
_DEFINITION_WORDS = {
    "python": "async def class",
    "javascript": "export async function class const let var",
    "typescript": "export declare abstract async function class interface enum namespace type "
    "const let var",
    "go": "func type",
    "rust": "pub const async unsafe extern fn struct enum trait impl mod union macro_rules",
}
_DEFINITION_WORDS["tsx"] = _DEFINITION_WORDS["typescript"]
_DEFINITION_WORDS["jsx"] = _DEFINITION_WORDS["javascript"]
_DEFINITION_WORD_TUPLES = {language: tuple(w.split()) for language, w in _DEFINITION_WORDS.items()}
_DEFINITION_FIRSTS = {
    language: "".join({w[0] for w in ws}) for language, ws in _DEFINITION_WORD_TUPLES.items()
}
_DEFINITION_LINES = {
    language: re.compile(r"\n[ \t]*(?:" + "|".join(words.split()) + ")")
    for language, words in _DEFINITION_WORDS.items()
}
_ATTACHED = {
    "python": regex.compile(r"[ \t]*[@#]"),
    "javascript": regex.compile(r"[ \t]*(?://|/\*|\*|@)"),
    "go": regex.compile(r"[ \t]*(?://|/\*|\*)"),
    "rust": regex.compile(r"[ \t]*(?://|/\*|\*|#\[|#!\[)"),
}
_ATTACHED["typescript"] = _ATTACHED["tsx"] = _ATTACHED["jsx"] = _ATTACHED["javascript"]
# The characters an attached line can start with after its indentation (a test checks them
# against the patterns): other lines are rejected without a regex call.
_ATTACHED_MARKS = {"python": "@#", "javascript": "/*@", "go": "/*", "rust": "/*#"}
_ATTACHED_MARKS["typescript"] = _ATTACHED_MARKS["tsx"] = _ATTACHED_MARKS["jsx"] = "/*@"
LANGUAGES = ("markdown", "text", *sorted(_DEFINITIONS))
# Detection (``language=None``): the keywords that can start a definition line, and the
# languages to check the line against (the JavaScript family is read as TypeScript, whose
# definitions include JavaScript's).
_KEYWORDS = {
    "def": ("python",),
    "class": ("python", "typescript"),
    "function": ("typescript",),
    "interface": ("typescript",),
    "const": ("typescript",),
    "let": ("typescript",),
    "var": ("typescript",),
    "func": ("go",),
    "type": ("go", "typescript"),
    "fn": ("rust",),
    "struct": ("rust",),
    "impl": ("rust",),
    "trait": ("rust",),
    "enum": ("rust", "typescript"),
}
# "\n" first lets the scan skip to newlines; possessive, as a code line's indentation would
# otherwise be re-read once per alternative.
_KEYWORD_AT_LINE_START = re.compile(
    r"\n[ \t]*+(?:(?:export|default|async|pub|declare|abstract|unsafe)[ \t]++)*+"
    r"(?P<keyword>" + "|".join(_KEYWORDS) + r")\b"
)
# How the first line of a definition ends (a body, a parameter list or a type follows).
_CODE_LINE_ENDS = ("{", ":", "(", "[", ",", "=", ">", ";")
_DETECT_CHARS = 8192  # the prefix of the text that detection reads
_DETECT_LINES_PER_DEFINITION = 40  # at most this many lines per definition, and 3 at least

_LOOKAHEAD = 16  # ends checked past a crossing: prefix counts are not monotonic inside a piece
_WS_LOOKAHEAD = 130  # ... and inside whitespace, whose tokens are up to 128 characters long
_NO_END = (-1, -1, -1)  # (boundary, end, tokens) of no chunk: none fits
_OVER, _ENDS_TOO_SOON = -1, -2  # _fits: the chunk has too many tokens; it ends too soon
_MAX_FAILED_PER_LEVEL = (
    8  # exact checks that may fail (non-monotone counts) before going a level down
)


def _detect_language(text: str) -> str | None:
    """The language whose definitions start at least one line in 40 (and 3 lines) of the
    text's first 8 KB, the most of them if several do; ``None`` for anything else.

    One scan for a definition keyword at a line start; each line found that ends as a
    definition's first line does (``{``, ``:``, ``(``, ...) is matched with the definition
    pattern of the languages the keyword can start. 5-10 us on 8 KB of prose, 25 of code.
    """
    sample = text[:_DETECT_CHARS]
    most = max(2, sample.count("\n") // _DETECT_LINES_PER_DEFINITION)
    found: dict[str, int] = {}
    for m in _KEYWORD_AT_LINE_START.finditer(sample):
        eol = sample.find("\n", m.end())
        if not sample[m.end() : None if eol < 0 else eol].rstrip().endswith(_CODE_LINE_ENDS):
            continue  # "class A is here." is prose
        for language in _KEYWORDS[m.group("keyword")]:
            if _DEFINITIONS[language].match(sample, m.start() + 1):
                found[language] = found.get(language, 0) + 1
    best = max(found, key=found.__getitem__, default=None)
    return best if best is not None and found[best] > most else None


def _definition_matches(language: str, text: str) -> Iterator[regex.Match]:
    """The matches of ``_DEFINITIONS[language].finditer(text)``, in order: the definition pattern
    is tried only at the line starts that ``_DEFINITION_LINES`` finds (every definition match
    starts at a line start with one of those words and stays within its line, so the two agree;
    a test checks it). 1 MB of Python: 17 ms -> 3.5 ms."""
    definition = _DEFINITIONS[language]
    m = definition.match(text)
    if m is not None:
        yield m
    for start in _definition_line_starts(text, language):
        m = definition.match(text, start)
        if m is not None:
            yield m


def _definition_line_starts(text: str, language: str) -> list[int]:
    """The line starts (after a newline) where ``_DEFINITION_LINES[language]`` matches: the
    line's code, after spaces and tabs, starts with one of the language's words. Found by walking
    the newlines with ``str.find`` (a test checks the two agree); compiled, 2.3 -> 1 ms per MB."""
    words = _DEFINITION_WORD_TUPLES[language]
    firsts = _DEFINITION_FIRSTS[language]
    out = []
    n = len(text)
    i = text.find("\n")
    while i >= 0:
        k = i + 1
        while k < n and (text[k] == " " or text[k] == "\t"):
            k += 1
        if k < n and text[k] in firsts and text.startswith(words, k):
            out.append(i + 1)
        i = text.find("\n", k)
    return out


def _markdown_matches(text: str) -> Iterator[regex.Match]:
    """The matches of ``_MARKDOWN_RE.finditer(text)``, in order: the pattern is tried only at the
    text's start and the line starts that ``_MARKDOWN_LINE`` and ``_SETEXT_UNDERLINE`` find
    (each of its three forms starts at a line start that these find; a test checks it). 1.4 MB
    of prose (one heading): 21 ms -> 1 ms."""
    starts = {0}
    starts.update(m.start() + 1 for m in _MARKDOWN_LINE.finditer(text))
    starts.update(text.rfind("\n", 0, m.start()) + 1 for m in _SETEXT_UNDERLINE.finditer(text))
    done = 0
    for p in sorted(starts):
        if p < done:
            continue
        m = _MARKDOWN_RE.match(text, p)
        if m is not None:
            done = m.end()
            yield m


def _resolve(encoding: str | Encoding) -> Encoding:
    if isinstance(encoding, str):
        from bpecore.registry import get_encoding

        return get_encoding(encoding)
    return encoding


class _CountSearches(IntervalCounter):
    """``IntervalCounter``'s searches (``crossing``, ``crossing_before``, ``last_end_within``) for
    a counter that has only ``count(i, j)`` (the slice counters of pipeline encodings): the same
    probes, asked from Python. A subclass, so that the chunker holds one type of counter and
    calls it from C (no pass of its own: every method is overridden)."""

    def __init__(self, counter) -> None:
        self._counter = counter
        self._n = len(counter)

    def __len__(self) -> int:
        return self._n

    def count(self, start: int, end: int) -> int:
        return self._counter.count(start, end)

    def crossing(self, s: int, tokens: int, step: int) -> int:
        count, n = self._counter.count, self._n
        lo, c_lo = s, 0
        while True:
            hi = min(n, lo + step)
            c_hi = count(s, hi)
            if c_hi > tokens:
                break
            if hi == n:
                return n
            lo, c_lo = hi, c_hi
            step *= 2
        guess = lo + (hi - lo) * (2 * tokens + 1 - 2 * c_lo) // (2 * (c_hi - c_lo))
        halve = False
        while hi - lo > 1:
            if halve or not lo < guess < hi:
                guess = (lo + hi) // 2
            c = count(s, guess)
            if c <= tokens:
                lo, c_lo = guess, c
            else:
                hi, c_hi = guess, c
            guess = lo + (hi - lo) * (2 * tokens + 1 - 2 * c_lo) // (2 * (c_hi - c_lo))
            halve = not halve
        return lo

    def crossing_before(self, e: int, lo: int, tokens: int, step: int) -> int:
        count = self._counter.count
        near, c_near = e, 0
        while True:
            far = max(lo, near - step)
            c_far = count(far, e)
            if c_far > tokens:
                break
            if far == lo:
                return lo
            near, c_near = far, c_far
            step *= 2
        guess = near - (near - far) * (2 * tokens + 1 - 2 * c_near) // (2 * (c_far - c_near))
        halve = False
        while near - far > 1:
            if halve or not far < guess < near:
                guess = (far + near) // 2
            c = count(guess, e)
            if c <= tokens:
                near, c_near = guess, c
            else:
                far, c_far = guess, c
            guess = near - (near - far) * (2 * tokens + 1 - 2 * c_near) // (2 * (c_far - c_near))
            halve = not halve
        return near

    def last_end_within(self, s: int, tokens: int, first: int, stop: int) -> int:
        count = self._counter.count
        for e in range(min(stop, self._n), max(first, s) - 1, -1):
            if count(s, e) <= tokens:
                return e
        return -1


class _NextChar:
    """The first ``char`` at or after a position, remembered: the chunker's windows move forward,
    so a character that a window lacks (a newline in a long paragraph, ``!``, a backslash) is
    looked for past it once, not once per window and level."""

    def __init__(self, text: str, char: str) -> None:
        self.text = text
        self.char = char
        self.n = len(text)
        self.lo = 0  # the first char at or after lo is at ``at`` (nothing known while lo > at)
        self.at = -1

    def after(self, i: int) -> int:
        """The first ``char`` at or after ``i``; the text's length when there is none."""
        if not self.lo <= i <= self.at:
            at = self.text.find(self.char, i)
            self.lo = i
            self.at = self.n if at < 0 else at
        return self.at


class _Newlines:
    """The matches of a reverse search of ``\\n`` (``paragraph=False``) or of
    ``\\n(whitespace but newline)*\\n`` (``paragraph=True``) in ``text[s:e]``, right to left,
    with the newlines found by ``str.rfind``: each ``next()`` gives a match's last newline ``i``
    (-1 when none is left) and sets ``j`` to its first (``j == i`` for lines).

    An object with a method, not a generator: the chunker takes the first candidate that fits
    and drops the rest, and closing a compiled generator unfinished costs more than its walk.
    """

    def __init__(self, text: str, s: int, e: int, paragraph: bool) -> None:
        self.text = text
        self.s = s
        self.limit = e  # the next match ends before this
        self.paragraph = paragraph
        self.j = -1

    def next(self) -> int:
        text, s = self.text, self.s
        i = text.rfind("\n", s, self.limit)
        while i >= 0:
            j = text.rfind("\n", s, i) if self.paragraph else i
            if j < 0:
                break
            if j == i or j + 1 == i or (text[i - 1].isspace() and text[j + 1 : i].isspace()):
                self.j = self.limit = j
                return i
            i = j  # no match ends at i; the next one to try ends at j
        self.limit = s
        return -1


_TERMINATOR_CHAR = regex.compile(r"[\p{SB=STerm}\p{SB=ATerm}]")
_OTHER_TERMINATORS: dict[str, bool] = {}  # memo of _TERMINATOR_CHAR, and of _CLOSE_CHAR below
_OTHER_CLOSERS: dict[str, bool] = {}


def _other_terminator(c: str) -> bool:
    """Whether ``c`` (outside ASCII) is SB=STerm or SB=ATerm."""
    t = _OTHER_TERMINATORS.get(c)
    if t is None:
        t = _OTHER_TERMINATORS[c] = _TERMINATOR_CHAR.match(c) is not None
    return t


def _other_closer(c: str) -> bool:
    """Whether ``c`` (outside ASCII) is SB=Close."""
    t = _OTHER_CLOSERS.get(c)
    if t is None:
        t = _OTHER_CLOSERS[c] = _CLOSE_CHAR.match(c) is not None
    return t


class _Sentences:
    """The matches of the reverse ``_SENTENCE_RE`` search of ``text[s:endpos]``, right to left,
    without the regex: each ``next()`` gives a match's start (-1 when none is left) and sets
    ``end`` to its end.

    A match is a run of terminators (SB=STerm, ATerm), the closing quotes and brackets after it
    (SB=Close), then whitespace; or, without the whitespace, a run of the CJK terminators and
    its closers. The last ``.``, ``!`` and ``?`` are found with ``str.rfind`` (searched again
    only once the walk has passed them); unless ``ascii``, the characters after them are walked
    for the other terminators. A test holds the walk to the regex on random text: the regex
    checks SB properties at every position it passes, at about four times the cost.
    """

    def __init__(
        self, text: str, s: int, endpos: int, ascii: bool, bang: bool = True, ask: bool = True
    ) -> None:
        self.text = text
        self.s = s
        self.endpos = endpos
        self.ascii = ascii  # text[s:endpos] is ASCII
        # the last of each before hi (searched at the first next()); -1: the window has none
        self.hi = self.dot = endpos
        self.bang = endpos if bang else -1
        self.ask = endpos if ask else -1
        self.end = -1

    def next(self) -> int:
        text, s, endpos = self.text, self.s, self.endpos
        while True:
            hi = self.hi
            if self.dot >= hi:
                self.dot = text.rfind(".", s, hi)
            if self.bang >= hi:
                self.bang = text.rfind("!", s, hi)
            if self.ask >= hi:
                self.ask = text.rfind("?", s, hi)
            p = max(self.dot, self.bang, self.ask)
            if not self.ascii:
                k = hi - 1
                while k >= s and k > p:
                    c = text[k]
                    # (no character outside ASCII below U+0589 is a terminator)
                    if c >= "\u0589" and _other_terminator(c):
                        p = k
                        break
                    k -= 1
            if p < 0:
                self.hi = s
                return -1
            end = p + 1  # past the closers
            while end < endpos:
                c = text[end]
                # (the ASCII members of SB=Close)
                if not (c in "\"'()[]{}" or (c >= "\x80" and _other_closer(c))):
                    break
                end += 1
            hi = p  # the run's start
            while hi > s:
                c = text[hi - 1]
                # (the ASCII members of SB=STerm and SB=ATerm)
                if not (c in "!.?" or (c >= "\u0589" and _other_terminator(c))):
                    break
                hi -= 1
            self.hi = hi
            if end < endpos and text[end].isspace():
                self.end = end
                return hi
            if not self.ascii:
                # No whitespace follows: the CJK terminators of _SENTENCE_RE's second
                # alternative still end a sentence, at the run's end (with its closers) or
                # inside it.
                q = p
                while q >= hi and text[q] not in "\u3002\uff01\uff1f\uff61\ufe52\ufe56\ufe57":
                    q -= 1
                if q >= hi:
                    k = q
                    while k > hi and text[k - 1] in "\u3002\uff01\uff1f\uff61\ufe52\ufe56\ufe57":
                        k -= 1
                    self.hi = k
                    self.end = end if q == p else q + 1
                    return k


# ---------------------------------------------------------------------------- the chunker
class _Chunker:
    """State for chunking one text: the interval counter and a chars-per-token estimate."""

    def __init__(
        self,
        enc: Encoding,
        text: str,
        max_tokens: int,
        overlap: int,
        trim: bool,
        markdown: bool,
        language: str | None = None,
        balance: bool = False,
    ):
        self.enc = enc
        self.text = text
        self.n = len(text)
        self.max_tokens = max_tokens
        self.overlap = overlap
        self.trim = trim
        self.balance = balance
        # about one query per 30 tokens: the per-piece tables would cost more than they save
        counter = enc.interval_counter(text, piece_tables=False)
        if not isinstance(counter, IntervalCounter):
            # a pipeline encoding's: its plain encoding's compiled counter, or one that counts
            compiled = getattr(counter, "compiled", None)
            counter = compiled if isinstance(compiled, IntervalCounter) else _CountSearches(counter)
        self.counter = counter
        self.chars_per_token = 4.0
        self.at = 0  # where the next chunk starts (past leading whitespace when trimming)
        self.prev_end = 0
        self.ahead = _NO_END
        self.ascii = text.isascii()
        self.heading_ends: set[int] = set()  # where a heading's body starts: no cut there
        if language is None and not markdown:
            language = _detect_language(text)
        # Title lines of plain text are kept with what follows them; code lines are not titles.
        self.titles = language is None or language in ("markdown", "text")
        self.newline = _NextChar(text, "\n")
        self.bang = _NextChar(text, "!")
        self.ask = _NextChar(text, "?")
        self.backslash = _NextChar(text, "\\")
        if not self.titles:
            self.sections = self._code_sections(language)
        else:
            self.sections = self._markdown_sections() if markdown or language == "markdown" else []
        if trim:
            self.at = self._skip_ws(0)

    # ------------------------------------------------------------------ helpers
    def _farthest_end(self, s: int, tokens: int) -> int:
        """The largest ``e`` with ``count(text[s:e]) <= tokens``, from exact interval counts."""
        lo, stop = self._crossing(s, tokens)
        return lo if lo == self.n else self._look_ahead(s, tokens, lo, lo + 2, stop)

    def _crossing(self, s: int, tokens: int) -> tuple[int, int]:
        """``(lo, stop)``: a crossing ``count(s, lo) <= tokens < count(s, lo + 1)`` and the last end
        the look-ahead past it checks; ``(n, n)`` when the rest of the text fits.

        A gallop from ``s`` brackets the answer, then interpolation steps (alternating with
        halvings) close in on a crossing; counts are not monotonic inside a pre-token piece ("worl"
        may be 2 tokens and "world" 1), so the ends ``lo + 2 .. stop`` must be checked too
        (``_look_ahead``). About 10-30 O(1) queries per chunk, against a ``split_at`` whose work
        grows with ``tokens``.
        """
        n = self.n
        # A gallop from s, then interpolation (in integers) alternating with halvings, in
        # compiled code; a query can cost as much as re-encoding its slice when s falls inside a
        # huge pre-token piece, so the first step asks about little more than the chunk.
        lo = self.counter.crossing(s, tokens, max(16, int(tokens * self.chars_per_token * 1.25)))
        if lo == n:
            return n, n
        stop = lo + 1 + _LOOKAHEAD
        if self.text[lo].isspace():  # whitespace tokens run up to 128 characters
            stop = max(stop, self._skip_ws(lo, min(n, lo + _WS_LOOKAHEAD)) + 1)
        else:
            # Pieces end at whitespace, but a space left at the end costs a token that the next
            # word would absorb (" for"): look up to the whitespace after the next word.
            w = self._next_word_end(lo, min(n, stop))
            if 0 <= w < min(n, stop):
                stop = w + 1
        return lo, min(n, stop)

    def _look_ahead(self, s: int, tokens: int, lo: int, first: int, stop: int) -> int:
        """The largest ``e`` in ``[first, stop]`` with ``count(s, e) <= tokens``, else ``lo``."""
        e = self.counter.last_end_within(s, tokens, first, stop)
        return lo if e < 0 else e

    def _nearest_start(self, e: int, lo: int, tokens: int) -> int:
        """The smallest ``s >= lo`` with ``count(text[s:e]) <= tokens`` (the mirror image)."""
        counter = self.counter
        step = max(16, int(tokens * self.chars_per_token * 1.25))
        near = counter.crossing_before(e, lo, tokens, step)
        if near == lo:
            return lo
        best = near
        stop = near - 1 - _LOOKAHEAD
        if near > 0 and self.text[near - 1].isspace():
            stop = min(stop, self._ws_start(max(lo, near - _WS_LOOKAHEAD), near) - 1)
        for s in range(near - 2, max(lo, stop) - 1, -1):
            if counter.count(s, e) <= tokens:
                best = s
        return best

    # Whitespace runs are walked a character at a time (str.isspace is _S): in the compiled
    # module a C loop, where a regex match costs a call and a matcher's set-up.
    def _rstrip(self, s: int, b: int) -> int:
        """``b`` moved back over whitespace to ``s`` at most, when trimming."""
        if self.trim:
            text = self.text
            while b > s and text[b - 1].isspace():
                b -= 1
        return b

    def _skip_ws(self, i: int, stop: int | None = None) -> int:
        """The end of the whitespace run at ``i`` (``i`` when none), ``stop`` at most."""
        text = self.text
        end = self.n if stop is None else min(stop, self.n)
        while i < end and text[i].isspace():
            i += 1
        return i

    def _ws_start(self, lo: int, j: int) -> int:
        """The start of the whitespace run that ends at ``j``, ``lo`` at least (``j`` when none)."""
        text = self.text
        while j > lo and text[j - 1].isspace():
            j -= 1
        return j

    def _next_word_end(self, i: int, stop: int) -> int:
        """``_NEXT_WORD_END.match(text, i, stop).end()``, -1 when it does not match: the end of
        the word after the rest of this one and the whitespace that follows it."""
        text = self.text
        while i < stop and not text[i].isspace():
            i += 1
        if i == stop:
            return -1
        while i < stop and text[i].isspace():
            i += 1
        while i < stop and not text[i].isspace():
            i += 1
        return i

    def _cuts_cluster(self, b: int) -> bool:
        text = self.text
        if not 0 < b < self.n:
            return False
        before, after = text[b - 1], text[b]
        if after < _FIRST_NO_CUT_BEFORE and before < _FIRST_NO_CUT_AFTER:
            return before == "\r" and after == "\n"
        return (
            _NO_CUT_BEFORE.match(text, b) is not None
            or _NO_CUT_AFTER.match(text, b - 1) is not None
            or (before == "\r" and after == "\n")
        )

    def _code_sections(self, language: str) -> list[tuple[int, int]]:
        """(position, level) of each definition's first line, in order: a definition indented
        ``d`` steps is level ``_SECTION + 5 - d`` (top-level definitions are the best boundaries).

        The decorators, attributes and comments directly above a definition start it, and no
        cut falls between them and it (``heading_ends``). A step of indentation is the smallest
        indentation of a definition that has one (4 columns when none has).
        """
        text, starts, widths = self.text, [], []
        attached, marks = _ATTACHED[language], _ATTACHED_MARKS[language]
        for m in _definition_matches(language, text):
            start = m.start()
            # the width of its indentation, tabs to the next multiple of 4 (expandtabs(4))
            width = 0
            k = start
            while text[k] == " " or text[k] == "\t":
                width = width + 4 - width % 4 if text[k] == "\t" else width + 1
                k += 1
            # Walk up over the lines that belong to it.
            while start > 0:
                prev = text.rfind("\n", 0, start - 1) + 1
                k = prev
                while k < start - 1 and (text[k] == " " or text[k] == "\t"):
                    k += 1
                if text[k] not in marks or not attached.match(text, prev, start - 1):
                    break
                self.heading_ends.add(self._skip_ws(start))
                start = prev
            starts.append(start)
            widths.append(width)
        step = min([width for width in widths if width], default=4)
        out: list[tuple[int, int]] = []
        last = -1
        for i in range(len(starts)):
            start = starts[i]
            if start != last:
                out.append((start, _SECTION + 5 - min(5, widths[i] // step)))
                last = start
        return out

    def _markdown_sections(self) -> list[tuple[int, int]]:
        """(position, level) of each heading line start outside code fences, in order."""
        out: list[tuple[int, int]] = []
        fence: str | None = None
        for m in _markdown_matches(self.text):
            if m.group("fence"):
                marker = m.group("fence")
                fence = None if fence == marker else (fence or marker)
            elif fence is not None:
                continue
            elif m.group("atx"):
                out.append((m.start(), _SECTION + 6 - len(m.group("atx"))))
                eol = self.text.find("\n", m.start())
                self.heading_ends.add(self._skip_ws(self.n if eol < 0 else eol))
            else:
                depth = 1 if m.group("under").startswith("=") else 2
                out.append((m.start(), _SECTION + 6 - depth))
                self.heading_ends.add(self._skip_ws(m.end()))
                self.heading_ends.add(
                    self.text.rfind("\n", 0, m.start("under")) + 1
                )  # its underline
        return out

    # ------------------------------------------------------------------ boundary candidates
    def _candidates(self, level: int, s: int, e: int) -> Iterator[int]:
        """Boundaries ``b`` of at least ``level`` with ``s < b <= e``, right to left."""
        text = self.text
        if level >= _SECTION:
            sections = self.sections
            for i in range(bisect_right(sections, (e, _SECTION + 6)) - 1, -1, -1):
                pos, lvl = sections[i]
                if pos <= s:
                    return
                if lvl >= level:
                    yield pos
            return
        if level == _CHAR:
            yield from range(e, s, -1)
            return
        if level == _ESCAPED_LINE or level == _ESCAPED_PARAGRAPH:
            yield from self._escaped_newlines(level == _ESCAPED_PARAGRAPH, s, e)
            return
        if level == _GRAPHEME:
            # Segment a stretch around ``e``; well after its start it is in sync with the text.
            ends = [
                m.end() for m in _GRAPHEME_RE.finditer(text, max(s, e - 256), min(self.n, e + 64))
            ]
            for b in reversed(ends):
                if s < b <= e and not self._cuts_cluster(b):
                    yield b
            return
        if level == _SENTENCE or level == _LOWER_SENTENCE:
            # (the sentence pattern looks one character ahead: whitespace after the terminator)
            for start, end in self._sentence_spans(s, min(self.n, e + 1)):
                b = self._sentence_boundary(start, end, e, level == _LOWER_SENTENCE)
                if b >= 0:
                    yield b
            return
        skip = level in _WS_FOLLOWS
        for m in _LEVEL_PATTERNS[level].finditer(text, s, e):
            b = m.end()
            if b <= s:
                return
            if skip:
                b = self._skip_ws(b, e)
            if b > e or self._cuts_cluster(b):
                continue
            if b in self.heading_ends:
                continue  # keep a heading with the text under it
            yield b

    def _sentence_boundary(self, start: int, end: int, e: int, lower: bool) -> int:
        """The boundary after the sentence end matched at ``text[start:end]`` (the whitespace
        after it skipped, up to ``e``), or -1 when there is none: past ``e``, inside a grapheme
        cluster, no sentence end (an abbreviation; unless ``lower``, a lower-case letter next), or
        where a heading's body starts."""
        b = self._skip_ws(end, e)
        if b > e or self._cuts_cluster(b) or not self._sentence_ends(start, end, b, lower):
            return -1
        if self.heading_ends and b in self.heading_ends:
            return -1  # keep a heading with the text under it
        return b

    def _sentence_walk(self, s: int, endpos: int) -> _Sentences:
        """The walk over the sentence ends in ``text[s:endpos]``, told which terminators it lacks."""
        bang, ask = self.bang.after(s) < endpos, self.ask.after(s) < endpos
        return _Sentences(self.text, s, endpos, self.ascii, bang, ask)

    def _sentence_spans(self, s: int, endpos: int) -> Iterator[tuple[int, int]]:
        """``(start, end)`` of the matches of the reverse ``_SENTENCE_RE`` search of
        ``text[s:endpos]``, in its order (``_Sentences``)."""
        walk = self._sentence_walk(s, endpos)
        start = walk.next()
        while start >= 0:
            yield start, walk.end
            start = walk.next()

    def _sentence_level(self, s: int, min_end: int, e: int, lower: bool) -> tuple[int, int, int]:
        """``_first_fit`` over ``_candidates`` of the sentence level (``lower``: of the sentence
        end before a lower-case letter), without a generator."""
        failed = 0
        # (the pattern looks at the whitespace after a terminator)
        walk = self._sentence_walk(s, min(self.n, e + 1))
        while True:
            start = walk.next()
            if start < 0:
                return _NO_END
            # _candidates' boundary, then _first_fit's check
            b = self._sentence_boundary(start, walk.end, e, lower)
            if b < 0:
                continue
            end = self._rstrip(s, b)
            tokens = self._fits(s, min_end, end)
            if tokens >= 0:
                return b, end, tokens
            failed += 1
            if tokens == _ENDS_TOO_SOON or failed >= _MAX_FAILED_PER_LEVEL:
                return _NO_END

    def _newline_level(self, paragraph: bool, s: int, min_end: int, e: int) -> tuple[int, int, int]:
        """``_levels`` for the paragraph or the line level, without a reverse regex search.

        The candidates, in order, are those of a reverse search of ``\\n`` or of
        ``\\n(whitespace but newline)*\\n`` in ``text[s:e]`` (a test checks it), with the newlines
        found by ``str.rfind``.
        """
        if self.newline.after(s) >= e:
            return _NO_END  # no newline in the window
        text, n, trim = self.text, self.n, self.trim
        heading_ends = self.heading_ends
        failed = 0
        walk = _Newlines(text, s, e, paragraph)
        while True:
            i = walk.next()
            if i < 0:
                return _NO_END
            # text[j:i + 1] is whitespace, starting and ending with a newline
            j = walk.j
            b = self._skip_ws(i + 1, e)
            if b < n and (
                text[b] >= _FIRST_NO_CUT_BEFORE
                or text[b - 1] >= _FIRST_NO_CUT_AFTER
                or text[b - 1] == "\r"
            ):
                if self._cuts_cluster(b):
                    continue
            if (heading_ends and b in heading_ends) or (self.titles and self._title_ends(j, b)):
                continue
            # text[j:b] is whitespace: the trimmed end is j unless whitespace comes before it.
            if not trim:
                end = b
            elif j > s and not text[j - 1].isspace():
                end = j
            else:
                end = self._rstrip(s, b)
            tokens = self._fits(s, min_end, end)
            if tokens >= 0:
                return b, end, tokens
            failed += 1
            if tokens == _ENDS_TOO_SOON or failed >= _MAX_FAILED_PER_LEVEL:
                return _NO_END

    def _title_ends(self, j: int, b: int, depth: int = 0) -> bool:
        """Whether the line ending at the newline ``j`` is a title of the text from ``b`` (the
        next line's start): a cut at ``b`` would leave a heading without its body.

        A title line is short (at most ``_TITLE_CHARS`` characters) and ends without a sentence
        terminator, comma or semicolon ("Results", "Expression Profiling of the IDC", " = =
        Gameplay = = ", "Background:"), and the line after it is body text (longer than that, or
        ending a sentence) or another title line ("Results\\nExpression Profiling\\nThe ...").
        Table rows and lists of short lines are not titles: what follows them is no body.
        """
        text = self.text
        if b >= self.n:
            return False
        # (the line level meets a blank line at its second newline)
        j = self._ws_start(max(0, j - _WS_LOOKAHEAD), j)
        lo = max(0, j - 2 * _TITLE_CHARS - 1)  # (a longer line is no title: look no further)
        a = text.rfind("\n", lo, j) + 1
        if a == 0 and lo > 0:
            return False
        line = text[a:j].strip()
        if not _title(line):
            return False
        if depth == 0 and not self._opens(a, 1):
            return False
        nl = text.find("\n", b, b + 4 * _TITLE_CHARS)
        body = text[b : b + 4 * _TITLE_CHARS if nl < 0 else nl].rstrip()
        if len(body) > _TITLE_CHARS or _ends_clause(body):
            return True  # (a sentence, or a long line: body text)
        if depth >= 2 or nl < 0 or not body:
            return False
        nxt = self._skip_ws(nl)
        return "\n" not in text[nl + 1 : nxt] and self._title_ends(nl, nxt, depth + 1)

    def _opens(self, a: int, titles: int) -> bool:
        """Whether the line starting at ``a`` opens a part: it follows a blank line, the text's
        start, body text, or (up to ``titles`` times) a title line that opens one."""
        text = self.text
        if a == 0:
            return True
        lo = max(0, a - 2 * _TITLE_CHARS - 1)  # (a longer line is body text: look no further)
        p = text.rfind("\n", lo, a - 1) + 1
        if p == 0 and lo > 0:
            return True
        prev = text[p : a - 1].strip()
        if not prev or len(prev) > _TITLE_CHARS or _ends_clause(prev):
            return True
        return titles > 0 and self._opens(p, titles - 1)

    def _escaped_newlines(self, paragraph: bool, s: int, e: int) -> Iterator[int]:
        """Boundaries after an escaped newline (backslash, ``n``) or blank line (two of them) in
        ``text[s:e]``, right to left; found with ``str.rfind``, like the real ones."""
        text, find = self.text, self.text.rfind
        mark = "\\n\\n" if paragraph else "\\n"
        i = find(mark, s, e)
        while i > s:
            if text[i - 1] != "\\":  # "\\\\n" is an escaped backslash, then "n"
                b = i + len(mark)
                b = self._skip_ws(b, e)
                if b not in self.heading_ends:
                    yield b
            i = find(mark, s, i)

    def _sentence_ends(self, start: int, end: int, b: int, lower: bool) -> bool:
        """Whether the terminator matched at ``text[start:end]`` ends a sentence at ``b``: not after
        an abbreviation or an initial, and (unless ``lower``) not before a lower-case letter."""
        text = self.text
        if not lower and b < self.n:
            c = text[b]
            if c.islower() if c < "\x80" else _LOWER.match(c) is not None:
                return False
        if end - start == 1 and text[start] == ".":
            # _WORD_BEFORE_DOT's search, as a walk back over ASCII word characters; a non-ASCII
            # character before them leaves it to the regex.
            lo = max(0, start - 24)
            k = start
            while k > lo:
                c = text[k - 1]
                if not ("a" <= c <= "z" or "A" <= c <= "Z" or "0" <= c <= "9" or c == "_"):
                    break  # (not ASCII \w)
                k -= 1
            if k > lo and text[k - 1] >= "\x80":
                w = _WORD_BEFORE_DOT.search(text, lo, start + 1)
                k = start if w is None else w.start(1)
            # text[k:start] is the word before the dot (none when k == start)
            if k < start:
                if start - k == 1:
                    if text[k].isalpha():
                        return False  # an initial
                elif start - k <= _ABBREVIATION_CHARS and text[k:start].lower() in _ABBREVIATIONS:
                    return False
                if text[start - 1].isdigit() and _LIST_NUMBER.search(
                    text, max(0, start - 8), start + 1
                ):
                    return False
        return True

    # ------------------------------------------------------------------ one chunk
    def _best_end(self, s: int, min_end: int) -> tuple[int, int, int]:
        """(boundary, end, tokens) of the best chunk starting at ``s`` ending after ``min_end``;
        ``_NO_END`` when none fits (so do the levels' searches below: a C tuple once compiled,
        no object per answer)."""
        limit, n = self.max_tokens, self.n
        lo, stop = self._crossing(s, limit)
        first = lo + 2
        if lo < n and first <= stop < n:
            # The look-ahead only matters through the newline candidates it lets in (sections
            # start at line starts: they are newline candidates too), so check just the ends
            # that would let one in (docs/perf/chunker.md).
            e_lo = self._skip_ws(lo) if self.trim else lo
            nl = self.text.find("\n", e_lo, self._skip_ws(stop) if self.trim else stop)
            last = -1 if self.trim else self.text.rfind("\n", s, e_lo)
            if last < 0 or self._skip_ws(last + 1) <= e_lo:
                if nl < 0:
                    split = stop + 1
                elif self.trim:
                    split = self._ws_start(lo, nl)
                else:
                    split = nl + 1
                split = max(first, split)
                e_max = self._look_ahead(s, limit, -1, split, stop) if split <= stop else -1
                if e_max < 0:
                    # Every end left (first <= e < split) gives the section, paragraph and line
                    # candidates that e_lo gives, so those levels decide the same way for all.
                    best = _NO_END
                    if self.sections:
                        best = self._section_levels(s, min_end, e_lo, _SECTION + 5)
                    if best[0] < 0:
                        best = self._newline_level(True, s, min_end, e_lo)
                    if best[0] < 0:
                        best = self._newline_level(False, s, min_end, e_lo)
                    if best[0] >= 0:
                        return best
                    # (not for code, whose chunks seldom end at the sentence or word levels:
                    # there the split look-ahead measured 2-4% slower on the code set)
                    if (
                        self.trim
                        and not self.sections
                        and self.backslash.after(s) >= self._skip_ws(split - 1)
                    ):
                        return self._levels_past(s, min_end, lo, first, split - 1)
                    e_max = self._look_ahead(s, limit, lo, first, split - 1)
                    return self._levels(
                        s,
                        min_end,
                        self._skip_ws(e_max) if self.trim else e_max,
                        _ESCAPED_PARAGRAPH,
                        _CHAR,
                    )
            else:
                e_max = self._look_ahead(s, limit, lo, first, stop)
        else:
            e_max = lo if lo == n else self._look_ahead(s, limit, lo, first, stop)
        if e_max == n:
            end = self._rstrip(s, n)
            if end > min_end:
                tokens = self.counter.count(s, end)
                if tokens <= limit:
                    return n, end, tokens
        e = self._skip_ws(e_max) if self.trim else e_max
        return self._levels(s, min_end, e, _SECTION + 5 if self.sections else _PARAGRAPH, _CHAR)

    def _levels_past(
        self, s: int, min_end: int, lo: int, first: int, last: int
    ) -> tuple[int, int, int]:
        """``_levels(s, min_end, skip_ws(e_max), _ESCAPED_PARAGRAPH, _CHAR)`` for the ``e_max`` of
        the look-ahead over ``[first, last]`` past the crossing ``lo`` (trimming, no backslash up
        to ``last``'s whitespace), asking the look-ahead only what the levels need.

        The sentence and word levels see the window through the whitespace runs it holds: with
        ``e = skip_ws(e_max)`` a run is in if it starts at or before ``e_max``. So unless an end
        at or past the first run that starts after ``lo`` fits (asked first: the ends in the next
        word cost a lower bound each, ``IntervalCounter._exceeds``), they decide as ``lo``'s
        window does, and the ends inside the crossing's word (a re-encoded piece each) are asked
        only if the levels below the word are reached.
        """
        text, limit = self.text, self.max_tokens
        ws = lo + 1  # the first run of whitespace that starts after lo (last + 1: none)
        while ws <= last and not (text[ws].isspace() and not text[ws - 1].isspace()):
            ws += 1
        if ws <= last:
            e_max = self.counter.last_end_within(s, limit, max(ws, first), last)
            if e_max >= 0:  # (the look-ahead's answer: no end after it fits)
                return self._levels(s, min_end, self._skip_ws(e_max), _ESCAPED_PARAGRAPH, _CHAR)
        best = self._levels(s, min_end, self._skip_ws(lo), _SENTENCE, _WORD)
        if best[0] >= 0:
            return best
        e_max = self._look_ahead(s, limit, lo, first, min(last, ws - 1))
        return self._levels(s, min_end, self._skip_ws(e_max), _PUNCT, _CHAR)

    def _levels(self, s: int, min_end: int, e: int, top: int, bottom: int) -> tuple[int, int, int]:
        """The first candidate from level ``top`` down to ``bottom`` whose chunk ``s..end`` fits."""
        if top >= _SECTION and bottom <= _SECTION:
            best = self._section_levels(s, min_end, e, top)
            if best[0] >= 0:
                return best
            top = _SECTION - 1
        # Escaped newlines start with a backslash: without one in the window, skip their levels.
        escapes = self.backslash.after(s) < e
        for level in range(top, bottom - 1, -1):
            if level == _PARAGRAPH or level == _LINE:
                best = self._newline_level(level == _PARAGRAPH, s, min_end, e)
                if best[0] >= 0:
                    return best
                continue
            if (level == _ESCAPED_PARAGRAPH or level == _ESCAPED_LINE) and not escapes:
                continue
            if level == _SENTENCE or level == _LOWER_SENTENCE:
                best = self._sentence_level(s, min_end, e, level == _LOWER_SENTENCE)
                if best[0] >= 0:
                    return best
                continue
            cap = None if level == _CHAR else _MAX_FAILED_PER_LEVEL
            best = self._first_fit(s, min_end, self._candidates(level, s, e), cap)
            if best[0] >= 0:
                return best
        return _NO_END

    def _first_fit(
        self, s: int, min_end: int, candidates: Iterable[int], cap: int | None
    ) -> tuple[int, int, int]:
        """The first candidate ``b`` (right to left) whose chunk ``(s, rstrip(b))`` fits:
        ``(b, end, tokens)``; ``_NO_END`` at one that ends at or before ``min_end`` or after
        ``cap`` candidates that did not fit."""
        failed = 0
        for b in candidates:
            end = self._rstrip(s, b)
            tokens = self._fits(s, min_end, end)
            if tokens >= 0:
                return b, end, tokens
            failed += 1
            if tokens == _ENDS_TOO_SOON or (cap is not None and failed >= cap):
                return _NO_END
        return _NO_END

    def _fits(self, s: int, min_end: int, end: int) -> int:
        """The tokens of the chunk ``s..end`` when it fits; ``_OVER`` when it does not,
        ``_ENDS_TOO_SOON`` when it ends at or before ``min_end`` (no candidate after it can do
        better: they are asked right to left)."""
        if end <= min_end:
            return _ENDS_TOO_SOON
        tokens = self.counter.count(s, end)
        return tokens if tokens <= self.max_tokens else _OVER

    def _section_levels(self, s: int, min_end: int, e: int, top: int) -> tuple[int, int, int]:
        """``_levels`` from ``top`` down to ``_SECTION``, with the sections in ``(s, e]`` looked up
        once, not once per level, and a level skipped when its candidates are those of the level
        above (which all failed, and would fail again)."""
        sections, found = self.sections, []
        for i in range(bisect_right(sections, (e, _SECTION + 6)) - 1, -1, -1):
            pos, lvl = sections[i]
            if pos <= s:
                break
            found.append((pos, lvl))
        if not found:
            return _NO_END
        tried = None
        for level in range(top, _SECTION - 1, -1):
            candidates = [pos for pos, lvl in found if lvl >= level]
            if candidates == tried:
                continue
            tried = candidates
            best = self._first_fit(s, min_end, candidates, _MAX_FAILED_PER_LEVEL)
            if best[0] >= 0:
                return best
        return _NO_END

    def chunks(self) -> Iterator[Chunk]:
        chunk = self._next_chunk()
        while chunk is not None:
            yield chunk
            chunk = self._next_chunk()

    def chunk_list(self) -> list[Chunk]:
        """``list(self.chunks())``, without a generator (a compiled loop)."""
        out = []
        chunk = self._next_chunk()
        while chunk is not None:
            out.append(chunk)
            chunk = self._next_chunk()
        return out

    def _next_chunk(self) -> Chunk | None:
        """The chunk that starts at ``self.at`` (None past the text's end); ``self.at`` moves to
        the next chunk's start."""
        text, n, s = self.text, self.n, self.at
        if s >= n:
            return None
        min_end = max(s, self.prev_end)  # the previous chunk's (trimmed) end: end after it
        best = self.ahead  # the next chunk's search, made for the overlap
        self.ahead = _NO_END
        if best[0] < 0:
            best = self._best_end(s, min_end)
        if best[0] < 0:
            raise ValueError(
                f"max_tokens={self.max_tokens} cannot hold the character {text[s]!r} at offset {s} "
                f"({self.enc.count(text[s])} tokens on its own)"
            )
        if self.balance:
            best = self._balanced(s, min_end, best)
        b, end, tokens = best
        chunk = _new_chunk(s, end, text[s:end], tokens)
        if tokens:
            self.chars_per_token = 0.5 * self.chars_per_token + 0.5 * max(1.0, (end - s) / tokens)
        nxt = self._skip_ws(b) if self.trim and b < n and text[b].isspace() else b
        if nxt < n and self.overlap:
            # Start inside the previous chunk if that still lets this one end after it.
            start = self._overlap_start(s, end)
            if start is not None:
                self.ahead = self._best_end(start, end)
                if self.ahead[0] >= 0:
                    nxt = start
        self.at, self.prev_end = nxt, end
        return chunk

    def _balanced(self, s: int, min_end: int, best: tuple[int, int, int]) -> tuple[int, int, int]:
        """``best``, or another end of its level that shares the rest of its line evenly.

        Only a chunk that ends inside a line (at a sentence, punctuation or word boundary) moves:
        the line's rest from ``s`` needs ``m`` chunks however it is cut, and of the two ends of
        that level around ``1/m`` of it (and the greedy end) the one whose count is nearest
        ``1/m`` is taken (the larger on a tie), if ``m - 1`` chunks can still hold the rest.
        What the greedy would put in one chunk with the line's last piece (the short paragraphs
        after the line) counts as part of the rest (``_with_tail``), so balancing adds no chunk.
        """
        b, end, tokens = best
        text, n, limit, counter = self.text, self.n, self.max_tokens, self.counter
        gap = _WS_TAIL.match(text, s, b) if text[b - 1].isspace() else None
        if b >= n or (gap and "\n" in gap.group()) or text.endswith("\\n", s, end):
            return best  # the end of a line or paragraph, or an escaped one: nothing to share
        for level in (_SENTENCE, _LOWER_SENTENCE, _PUNCT, _WORD):
            if next(self._candidates(level, max(s, b - 64), b), None) == b:
                break
        else:
            return best
        # The line's end, looked for within 8 chunk lengths (a longer line is not balanced).
        bound = min(n, b + 8 * (b - s))
        u = text.find("\n", b, bound)
        if u < 0:
            if bound < n:
                return best
            u = n
        esc = text.find("\\n", b, u)
        if esc >= 0:
            u = esc + 2
        total = counter.count(s, self._rstrip(s, u))
        m = -(-total // limit)
        if m < 2:
            return best
        if u < n:
            total = self._with_tail(s, u, total, m, tokens)
        want = total / m
        if tokens <= want:
            return best
        least = total - (m - 1) * limit  # what this chunk must hold for m chunks to do
        options = [best]
        e_t = self._farthest_end(s, -(-total // m))
        if self.trim:
            e_t = self._skip_ws(e_t)
        before = self._levels(s, min_end, e_t, level, level)
        if before[0] >= 0 and before[2] >= least:
            options.append(before)
        after = None
        for c in self._candidates(level, e_t, b):
            if c < b:
                after = c
        if after is not None:
            end_after = self._rstrip(s, after)
            if end_after > min_end:
                t = counter.count(s, end_after)
                if least <= t <= limit:
                    options.append((after, end_after, t))
        return min(options, key=lambda o: (abs(o[2] - want), -o[2]))

    def _with_tail(self, s: int, u: int, total: int, m: int, tokens: int) -> int:
        """``total`` (the count of the line's rest ``s..u``) plus what follows the line in the
        chunk that would hold the line's last piece.

        Filled greedily, the line's last piece (about ``total - (m - 1) * tokens``) is a chunk
        with the lines and paragraphs after it that fit; an even share of the line alone makes
        that piece larger, and what followed it moves to a chunk of its own (one chunk more).
        Sharing the line and that tail between the ``m`` chunks keeps their number.
        """
        limit, counter = self.max_tokens, self.counter
        u_end = self._rstrip(s, u)
        # Where the last piece starts if each chunk holds what this one does (an estimate).
        last = min(limit, max(total - (m - 1) * limit, total - (m - 1) * tokens))
        x = self.counter.crossing_before(
            u_end, s, last, max(16, int(last * self.chars_per_token * 1.25))
        )
        if self.trim:
            x = self._skip_ws(x)
        if x >= u_end:
            return total
        tail = self._best_end(x, x)
        if tail[0] < 0 or tail[1] <= u_end:
            return total
        with_tail = counter.count(s, tail[1])
        return with_tail if -(-with_tail // limit) == m else total

    def _overlap_start(self, prev_start: int, end: int) -> int | None:
        """First word start ``s'`` in ``(prev_start, end)`` with ``count(text[s':end]) <= overlap``.

        Falls back to a grapheme or character position when no word starts there; ``None`` when
        not even the last character fits in ``overlap`` tokens.
        """
        text, counter, limit = self.text, self.counter, self.overlap
        k = max(self._nearest_start(end, prev_start, limit), prev_start + 1)
        if k >= end:
            return None
        # Word starts at or after k: k itself, then the end of each whitespace run.
        starts: list[int] = []
        if text[k - 1].isspace() and not text[k].isspace():
            starts.append(k)
        for m in _WS_HEAD.finditer(text, k, end):
            if m.end() < end:
                starts.append(m.end())
            if len(starts) >= _MAX_FAILED_PER_LEVEL:
                break
        for start in starts:
            if counter.count(start, end) <= limit:
                return start
        if self.trim:
            k = self._skip_ws(k)
        while k < end and self._cuts_cluster(k):
            k += 1
        while k < end and counter.count(k, end) > limit:
            k += 1
        return k if k < end else None


# The boundary moves past the whitespace after the match.
_WS_FOLLOWS = frozenset({_SENTENCE, _LOWER_SENTENCE, _PUNCT})
_LEVEL_PATTERNS = {
    _WORD: _WORD_RE,
    _PUNCT: _PUNCT_RE,
    _WORDPART: _WORDPART_RE,
}


def _check(max_tokens: int, overlap: int, markdown: bool = False, language: str | None = None):
    if language is not None and language not in LANGUAGES:
        raise ValueError(
            f"language must be None or one of {', '.join(LANGUAGES)}; got {language!r}"
        )
    if markdown and language not in (None, "markdown"):
        raise ValueError(f"markdown=True with language={language!r}: choose one")
    if not isinstance(max_tokens, int) or max_tokens < 1:
        raise ValueError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
    if not isinstance(overlap, int) or not 0 <= overlap < max_tokens:
        raise ValueError(f"overlap must be an int with 0 <= overlap < max_tokens, got {overlap!r}")


def chunk(
    text: str,
    encoding: str | Encoding = "cl100k_base",
    max_tokens: int = 512,
    overlap: int = 0,
    trim: bool = True,
    markdown: bool = False,
    language: str | None = None,
    balance: bool = False,
) -> list[Chunk]:
    """Split ``text`` into chunks of at most ``max_tokens`` tokens each, exactly.

    Each chunk is as large as it can be while ending at the best boundary available: Markdown
    heading (with ``markdown=True``; H1 before H2 ...), paragraph (blank line), line, escaped
    blank line, escaped newline (the ``\\n`` of JSON strings and reprs), sentence, sentence end
    before a lower-case letter, word, punctuation, Unicode word boundary, grapheme, character. A
    number at a line start ("2. Next") ends no sentence, nor does an abbreviation. A title line
    of plain text (short, ending no sentence, above body text: "Results", " = = Plot = = ") stays
    with the text under it: no cut falls between them.

    Args:
        text: the text to split.
        encoding: an encoding name (``"cl100k_base"``, ``"o200k_base"``) or an ``Encoding``.
        max_tokens: the most tokens any chunk may have (``count(chunk.text) <= max_tokens``).
        overlap: each chunk after the first starts with at most this many tokens of the previous
            chunk's end, at a word start where one exists (``0 <= overlap < max_tokens``).
        trim: strip whitespace at chunk edges (offsets stay true; only whitespace falls between
            chunks). With ``trim=False`` and no overlap the chunks tile the text exactly.
        markdown: treat ``#`` headings and setext headings as the best boundaries.
        language: source code in this language (``"python"``, ``"javascript"``,
            ``"typescript"``, ``"go"``, ``"rust"``; ``"markdown"`` is ``markdown=True``): the
            first line of each definition (function, class, method; with the decorators and
            comments directly above it) is the best boundary, top-level definitions before
            nested ones, and no cut falls between a decorator or comment and its definition.
            ``None`` (and no ``markdown``): detected, when definitions of one language start
            at least 1 line in 40 of the text's first 8 KB (JavaScript is read as
            TypeScript); ``"text"``: no detection, plain text. On the code set of
            ``benches/bench_chunk_quality.py`` (180 documented functions in 1 MB of CPython
            modules) ``"python"`` (or detection) leaves 0.43/0.22/0.11/0.06 of the functions
            cut by a chunk boundary at 128/256/512/1024 tokens, against 0.51/0.39/0.26/0.14 as
            plain text; it chunks at 37-69 MB/s there (52-121 as plain text).
        balance: when a line (a paragraph without line breaks) needs ``m`` chunks, end them
            near ``1/m`` of it each instead of filling each chunk up and leaving a short last
            piece (the ends stay at the same level: sentence, punctuation or word); the short
            paragraphs that would share a chunk with that last piece count as part of the line,
            so no chunk is added. Lines and paragraphs are never moved. On the prose set of
            ``benches/bench_chunk_quality.py`` at 128/256/512/1024 tokens: recall 0.803/0.897/
            0.938/0.963 against 0.796/0.877/0.938/0.963 without it (the best other splitter:
            0.789/0.894/0.937/0.963), spans cut 0.019/0.005/0/0 against 0.019/0.006/0/0, at
            0.55-0.96x the speed (less at small budgets). Code is not changed by it.

    Returns:
        ``Chunk(start, end, text, tokens)`` in text order, with ``text == source[start:end]``.

    Raises:
        ValueError: bad arguments, or ``max_tokens`` below 4 and a single character needs more.

    >>> [(c.start, c.end, c.tokens) for c in chunk("One. Two three.\\n\\nFour five six.", max_tokens=6)]
    [(0, 15, 5), (17, 31, 4)]
    """
    _check(max_tokens, overlap, markdown, language)
    enc = _resolve(encoding)
    if not text:
        return []
    return _Chunker(enc, text, max_tokens, overlap, trim, markdown, language, balance).chunk_list()


def _iter_chunks(
    text: str,
    encoding: str | Encoding = "cl100k_base",
    max_tokens: int = 512,
    overlap: int = 0,
    trim: bool = True,
    markdown: bool = False,
    language: str | None = None,
    balance: bool = False,
) -> Iterator[Chunk]:
    """``chunk`` as a generator (the CLI uses it to show progress)."""
    _check(max_tokens, overlap, markdown, language)
    enc = _resolve(encoding)
    if text:
        yield from _Chunker(
            enc, text, max_tokens, overlap, trim, markdown, language, balance
        ).chunks()


def chunk_batch(
    texts: Sequence[str],
    encoding: str | Encoding = "cl100k_base",
    max_tokens: int = 512,
    overlap: int = 0,
    trim: bool = True,
    markdown: bool = False,
    language: str | None = None,
    balance: bool = False,
    *,
    num_threads: int = 8,
) -> list[list[Chunk]]:
    """``chunk`` over many texts, in threads (the counting core releases the GIL)."""
    _check(max_tokens, overlap, markdown, language)
    enc = _resolve(encoding)

    def one(text: str) -> list[Chunk]:
        return chunk(text, enc, max_tokens, overlap, trim, markdown, language, balance)

    if num_threads <= 1 or len(texts) <= 1:
        return [one(t) for t in texts]
    with ThreadPoolExecutor(min(num_threads, len(texts))) as pool:
        return list(pool.map(one, texts))

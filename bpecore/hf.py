"""Hugging Face ``tokenizer.json`` (byte-level BPE), encoded exactly as `tokenizers` encodes it.

``load_hf(path)`` reads the file's four parts and reproduces each, or raises ``VocabError`` naming
the part it cannot reproduce (never a silently different encoding):

- model ``BPE``: merge priority is the position in ``merges``, not the id. The core works in rank
  space (token ``i`` = the ``i``-th token formed, single bytes first) and the Vocab's id map
  turns ranks into the file's ids at the boundary (``Vocab._assign_ids``), so encoding pays
  nothing for it; counting never needs it. A file is accepted only when BPE by rank provably
  makes the merges the list makes: every token's split found by BPE on its own bytes must be
  the first merge of the list that forms it (README, "How it works"); ``ignore_merges``
  (a piece that is a whole vocab token is that token) is honoured. A file converted from a
  tiktoken rank file (Llama 3's: ``ignore_merges``, every split of every token listed, token by
  token in id order) is read as BPE by rank with the ids as ranks (``_rank_file``), which also
  takes tokens ranked before their parts and tokens BPE never forms: the
  whole-piece encoding, compiled, every exact operation.
- normalizers NFC, NFD, NFKC, NFKD, Prepend, Replace and Sequence of them;
- pre-tokenizers Split (every ``behavior``, ``invert``), Digits, Punctuation, ByteLevel
  (``add_prefix_space``, ``use_regex``) and a Sequence of any number of them, each stage
  re-splitting the previous stage's pieces (those after ByteLevel split its byte-level
  characters, as Falcon's Digits do);
- bytes the vocab has no token for are dropped, as `tokenizers` drops them (no ``unk_token``);
- added tokens with their ``special``, ``normalized``, ``lstrip``, ``rstrip`` and ``single_word``
  flags: non-special ones are cut out of ordinary text as `tokenizers` does; special ones are
  read as text by ``encode_ordinary`` (`tokenizers` with ``encode_special_tokens=True``) and
  become their ids in ``encode`` when allowed.

Two paths. A file that is one regex split (Split ``Isolated`` + ByteLevel without regex, or
ByteLevel alone), no normalizer, no non-special added token, no stripping flag and no
``ignore_merges`` token outside the merges gets a plain ``Encoding``: the compiled scanners or the
``regex`` fallback, and every exact operation. Anything else gets ``HFEncoding``: added tokens
and the normalizer run in Python; a one-regex pre-tokenizer (Qwen2: NFC + one Split; DeepSeek
V3's three Splits, which one derived regex cuts alike) then splits and encodes each segment in
the compiled core (text already normalized with no added token in it: one call, no pipeline),
while other chained stages run in Python (``regex`` module, linear per stage) and send each
piece to the compiled BPE. Where Unicode tables differ, `tokenizers`' are used
(``_UNNORMALIZED_RANGES``, ``_PUNCT_RANGES``, ``_DIGIT``).

Exact operations on an ``HFEncoding`` (DESIGN.md's definitions; README, "Open models: which
path"). A text "left alone" (no added token's text in it, and only characters the normalizer
can change in no slice: ASCII, or inert under its Unicode forms) under a one-regex
pre-tokenizer is the plain encoding's text, so ``interval_counter`` (and ``split_at`` /
``split_at_end`` when the pattern has a compiled scanner) hand it to the compiled operations.
``split_at`` / ``split_at_end`` of any other text with no added token's text in it and no
character the normalizer could change take one pass over the pre-tokenizer's stages
(``longest_prefix_by_horizon``, ``shortest_suffix_by_horizon``; a one-regex file as the stages
it was derived from): the leading stages that cut a prefix or suffix where they cut the text
(one character class or a run of it: Digits, Punctuation, ``[\r\n]``, CJK runs), then for the
next stage the read horizon of each regex attempt (``_Reach``) or, for suffixes, the attempt at
every position (DeepSeek LLM's trailing-whitespace split by its own rule), with the pieces'
counts summed. About 10-20 ms for ``n`` = 1000 on 50 KB of
DeepSeek-Coder-, Falcon- or StarCoder-style chains (docs/perf/hf.md); a run of one class inside
the ``n`` tokens' window is re-read per candidate (quadratic in that run). Anything else takes
the slower exact path, from the definitions:
- ``split_at`` / ``split_at_end`` of a text holding added tokens' texts, when no token strips
  or needs a whole word and one level (raw or normalized) holds the non-special ones found: cut
  at them (``longest_prefix_by_added``, ``shortest_suffix_by_added``: leftmost-longest matching
  reads nothing before a match);
- ``split_at`` / ``split_at_end`` of a text the normalizer changes or with other added tokens'
  text in it (and ``split_at_end`` past the cut stages of one ``_Reach`` does not read: lookbehind,
  anchors, a prefix-space ByteLevel with its regex; ``split_at`` counts such a stage's
  candidates from the start of their cut piece): one token stands for at most ``max_token_len`` bytes of the normalized text, and
  a normalizer made of Unicode forms keeps at least one byte per ASCII character and a quarter
  of any other's bytes, so only the prefixes (suffixes) within ``n`` tokens' worth of input can
  fit; they are tried from the longest down with ``count_till_limit`` (pipeline stages run
  lazily and stop soon after ``n``) and the first that fits is the answer. Cost about (``n`` x
  128 bytes) candidates x ``n`` tokens' worth of text each: ~5 s for ``n`` = 100 on a chained
  file, quadratic in ``n``. A pipeline that can drop text (Replace, added tokens that strip)
  has no such bound: every prefix is a candidate;
- interval counts: each queried slice is counted (answers memoized);
- appending and prepending counters: the plain encoding's (compiled, or ``_RegexAppender`` /
  ``_RegexPrepender`` for a pattern without a scanner) while each push keeps the text left
  alone (``_GuardedCounter``), cut at added tokens as the stream grows (``_CutAppender``,
  ``_CutPrepender``); from the first push that is not left alone, each push recounts the text
  (quadratic from there);
- the chunker: its interval-counter queries, so about one count of each chunk per query.
Llama 3's whole-piece encoding (``WholePieceEncoding``, below) inherits these (its pattern is one stage).
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import json
import os
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import regex

from bpecore._text import PushedText, complete_text
from bpecore.backtrack import BacktrackEncoder
from bpecore.batch import count_long as _count_long
from bpecore.batch import encode_long as _encode_long
from bpecore.encoding import Encoding, _rebuild_counter, _RecountingCounter, _valid
from bpecore.load import VocabError, bytes_to_unicode, read_file
from bpecore.patterns import BYTELEVEL_PATTERN
from bpecore.prefix import KIND_REGEX as _PAT_REGEX
from bpecore.pretokenize import (
    DEEPSEEK3_PATTERN,
    R50K_PATTERN,
    register_falcon,
    register_starcoder,
)
from bpecore.vocab import Vocab

_BEHAVIORS = ("Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous")
#: `tokenizers`' Digits test (Rust's ``char::is_numeric``: Nd, Nl, No, in Rust's Unicode, which
#: has 13 more than the `regex` module's) and its Punctuation test (ASCII punctuation or a P*
#: category in the older tables of its ``unicode_categories`` crate: 726 characters, where
#: ``\p{P}`` now has 864), as one-character patterns: each matching character is one match.
#: Both sets were read from tokenizers 0.23.3 over every code point
#: (``test_hf.py::test_character_classes`` re-checks them).
_DIGIT_SET = r"\p{N}\U00011DE0-\U00011DE9\U00016FF4-\U00016FF6"
_DIGIT = f"[{_DIGIT_SET}]"
_PUNCT_RANGES = (
    (0x0021, 0x002F),
    (0x003A, 0x0040),
    (0x005B, 0x0060),
    (0x007B, 0x007E),
    (0x00A1, 0x00A1),
    (0x00A7, 0x00A7),
    (0x00AB, 0x00AB),
    (0x00B6, 0x00B7),
    (0x00BB, 0x00BB),
    (0x00BF, 0x00BF),
    (0x037E, 0x037E),
    (0x0387, 0x0387),
    (0x055A, 0x055F),
    (0x0589, 0x058A),
    (0x05BE, 0x05BE),
    (0x05C0, 0x05C0),
    (0x05C3, 0x05C3),
    (0x05C6, 0x05C6),
    (0x05F3, 0x05F4),
    (0x0609, 0x060A),
    (0x060C, 0x060D),
    (0x061B, 0x061B),
    (0x061E, 0x061F),
    (0x066A, 0x066D),
    (0x06D4, 0x06D4),
    (0x0700, 0x070D),
    (0x07F7, 0x07F9),
    (0x0830, 0x083E),
    (0x085E, 0x085E),
    (0x0964, 0x0965),
    (0x0970, 0x0970),
    (0x0AF0, 0x0AF0),
    (0x0DF4, 0x0DF4),
    (0x0E4F, 0x0E4F),
    (0x0E5A, 0x0E5B),
    (0x0F04, 0x0F12),
    (0x0F14, 0x0F14),
    (0x0F3A, 0x0F3D),
    (0x0F85, 0x0F85),
    (0x0FD0, 0x0FD4),
    (0x0FD9, 0x0FDA),
    (0x104A, 0x104F),
    (0x10FB, 0x10FB),
    (0x1360, 0x1368),
    (0x1400, 0x1400),
    (0x166D, 0x166E),
    (0x169B, 0x169C),
    (0x16EB, 0x16ED),
    (0x1735, 0x1736),
    (0x17D4, 0x17D6),
    (0x17D8, 0x17DA),
    (0x1800, 0x180A),
    (0x1944, 0x1945),
    (0x1A1E, 0x1A1F),
    (0x1AA0, 0x1AA6),
    (0x1AA8, 0x1AAD),
    (0x1B5A, 0x1B60),
    (0x1BFC, 0x1BFF),
    (0x1C3B, 0x1C3F),
    (0x1C7E, 0x1C7F),
    (0x1CC0, 0x1CC7),
    (0x1CD3, 0x1CD3),
    (0x2010, 0x2027),
    (0x2030, 0x2043),
    (0x2045, 0x2051),
    (0x2053, 0x205E),
    (0x207D, 0x207E),
    (0x208D, 0x208E),
    (0x2308, 0x230B),
    (0x2329, 0x232A),
    (0x2768, 0x2775),
    (0x27C5, 0x27C6),
    (0x27E6, 0x27EF),
    (0x2983, 0x2998),
    (0x29D8, 0x29DB),
    (0x29FC, 0x29FD),
    (0x2CF9, 0x2CFC),
    (0x2CFE, 0x2CFF),
    (0x2D70, 0x2D70),
    (0x2E00, 0x2E2E),
    (0x2E30, 0x2E42),
    (0x3001, 0x3003),
    (0x3008, 0x3011),
    (0x3014, 0x301F),
    (0x3030, 0x3030),
    (0x303D, 0x303D),
    (0x30A0, 0x30A0),
    (0x30FB, 0x30FB),
    (0xA4FE, 0xA4FF),
    (0xA60D, 0xA60F),
    (0xA673, 0xA673),
    (0xA67E, 0xA67E),
    (0xA6F2, 0xA6F7),
    (0xA874, 0xA877),
    (0xA8CE, 0xA8CF),
    (0xA8F8, 0xA8FA),
    (0xA8FC, 0xA8FC),
    (0xA92E, 0xA92F),
    (0xA95F, 0xA95F),
    (0xA9C1, 0xA9CD),
    (0xA9DE, 0xA9DF),
    (0xAA5C, 0xAA5F),
    (0xAADE, 0xAADF),
    (0xAAF0, 0xAAF1),
    (0xABEB, 0xABEB),
    (0xFD3E, 0xFD3F),
    (0xFE10, 0xFE19),
    (0xFE30, 0xFE52),
    (0xFE54, 0xFE61),
    (0xFE63, 0xFE63),
    (0xFE68, 0xFE68),
    (0xFE6A, 0xFE6B),
    (0xFF01, 0xFF03),
    (0xFF05, 0xFF0A),
    (0xFF0C, 0xFF0F),
    (0xFF1A, 0xFF1B),
    (0xFF1F, 0xFF20),
    (0xFF3B, 0xFF3D),
    (0xFF3F, 0xFF3F),
    (0xFF5B, 0xFF5B),
    (0xFF5D, 0xFF5D),
    (0xFF5F, 0xFF65),
    (0x10100, 0x10102),
    (0x1039F, 0x1039F),
    (0x103D0, 0x103D0),
    (0x1056F, 0x1056F),
    (0x10857, 0x10857),
    (0x1091F, 0x1091F),
    (0x1093F, 0x1093F),
    (0x10A50, 0x10A58),
    (0x10A7F, 0x10A7F),
    (0x10AF0, 0x10AF6),
    (0x10B39, 0x10B3F),
    (0x10B99, 0x10B9C),
    (0x11047, 0x1104D),
    (0x110BB, 0x110BC),
    (0x110BE, 0x110C1),
    (0x11140, 0x11143),
    (0x11174, 0x11175),
    (0x111C5, 0x111C9),
    (0x111CD, 0x111CD),
    (0x111DB, 0x111DB),
    (0x111DD, 0x111DF),
    (0x11238, 0x1123D),
    (0x112A9, 0x112A9),
    (0x114C6, 0x114C6),
    (0x115C1, 0x115D7),
    (0x11641, 0x11643),
    (0x1173C, 0x1173E),
    (0x12470, 0x12474),
    (0x16A6E, 0x16A6F),
    (0x16AF5, 0x16AF5),
    (0x16B37, 0x16B3B),
    (0x16B44, 0x16B44),
    (0x1BC9F, 0x1BC9F),
    (0x1DA87, 0x1DA8B),
)
_PUNCT = "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _PUNCT_RANGES) + "]"

_Piece = str | bytes
#: A pre-tokenizer stage: the previous stage's pieces in, its pieces out, lazily (so that
#: ``count_till_limit`` stops reading the text soon after the count passes the limit); pieces
#: are text, or bytes after stages that follow ByteLevel. A stage that may drop text (a
#: ``Removed`` behavior) has ``removes = True``.
_Stage = Callable[[Iterable[_Piece]], Iterator[_Piece]]


# ---------------------------------------------------------------------------------- pre-tokenizers
def _find_matches(rx: regex.Pattern, text: str, invert: bool) -> Iterator[tuple[int, int, bool]]:
    """(start, end, is_match) segments covering ``text``, as `tokenizers`' ``Pattern::find_matches``."""
    if not text:
        yield (0, 0, False)
        return
    prev = 0
    for m in rx.finditer(text):
        start, end = m.span()
        if prev != start:
            yield (prev, start, invert)
        yield (start, end, not invert)
        prev = end
    if prev != len(text):
        yield (prev, len(text), invert)


def _spans(text: str, rx: regex.Pattern, behavior: str, invert: bool) -> Iterator[tuple[int, int]]:
    """`tokenizers`' ``NormalizedString::split``: the kept spans of ``text``, in order, lazily
    (each behavior needs at most one segment of look-ahead)."""
    return _kept(_find_matches(rx, text, invert), behavior)


def _kept(matches: Iterator[tuple[int, int, bool]], behavior: str) -> Iterator[tuple[int, int]]:
    """The spans ``behavior`` keeps of the (start, end, is_match) segments ``matches``."""
    if behavior == "Isolated":
        for s, e, _ in matches:
            yield s, e
    elif behavior == "Removed":
        for s, e, m in matches:
            if not m:
                yield s, e
    elif behavior == "Contiguous":
        open_span = None
        for s, e, m in matches:
            if open_span is not None and m == open_span[2]:
                open_span[1] = e
                continue
            if open_span is not None:
                yield open_span[0], open_span[1]
            open_span = [s, e, m]
        if open_span is not None:
            yield open_span[0], open_span[1]
    elif behavior == "MergedWithPrevious":
        open_span = None
        prev = False
        for s, e, m in matches:
            if open_span is not None and m and not prev:
                open_span[1] = e
            else:
                if open_span is not None:
                    yield open_span[0], open_span[1]
                open_span = [s, e]
            prev = m
        if open_span is not None:
            yield open_span[0], open_span[1]
    else:  # MergedWithNext: a match joins the segment after it when that one is not a match
        pending = None
        for s, e, m in matches:
            if pending is not None:
                if not m:
                    yield pending[0], e
                    pending = None
                    continue
                yield pending
                pending = None
            if m:
                pending = (s, e)
            else:
                yield s, e
        if pending is not None:
            yield pending


def _split(text: str, rx: regex.Pattern, behavior: str, invert: bool) -> Iterator[str]:
    """The kept, non-empty pieces of ``text`` split by ``rx`` with ``behavior``."""
    for s, e in _spans(text, rx, behavior, invert):
        if e > s:
            yield text[s:e]


def _split_stage(rx: regex.Pattern, behavior: str, invert: bool) -> _Stage:
    def stage(pieces: Iterable[str]) -> Iterator[str]:
        for piece in pieces:
            yield from _split(piece, rx, behavior, invert)

    stage.removes = behavior == "Removed"  # type: ignore[attr-defined]
    stage.split = (rx, behavior, invert)  # type: ignore[attr-defined]
    return stage


def _byte_level_stage(add_prefix_space: bool, use_regex: bool) -> _Stage:
    rx = regex.compile(BYTELEVEL_PATTERN)

    def stage(pieces: Iterable[str]) -> Iterator[str]:
        for piece in pieces:
            if add_prefix_space and not piece.startswith(" "):
                piece = " " + piece
            if use_regex:
                yield from _split(piece, rx, "Isolated", False)
            else:
                yield piece

    stage.removes = False  # type: ignore[attr-defined]
    # as a split of the pieces, when it is one: none without regex, GPT-2's with it (a piece it
    # prefixes with a space is no span of the text, so that stage is no split)
    stage.split = (  # type: ignore[attr-defined]
        None if add_prefix_space else (rx, "Isolated", False) if use_regex else False
    )
    return stage


def _on_byte_level_chars(after: list[_Stage]) -> _Stage:
    """The stages that follow ByteLevel (Falcon's Digits and Split): they see each piece as
    its byte-level characters (one per byte, GPT-2's table: a cut may fall inside a character's
    UTF-8, at a continuation byte shown as "²" or "½"), and their pieces go on as bytes."""
    b2u = bytes_to_unicode()
    to_chars = {b: ord(c) for b, c in b2u.items()}
    to_bytes = {ord(c): b for b, c in b2u.items()}

    def stage(pieces: Iterable[str | bytes]) -> Iterator[bytes]:
        for piece in pieces:
            data = piece if type(piece) is bytes else piece.encode("utf-8")
            chars: Iterable[str] = [data.decode("latin-1").translate(to_chars)]
            for inner in after:
                chars = inner(chars)
            for c in chars:
                yield c.translate(to_bytes).encode("latin-1")

    stage.removes = any(getattr(inner, "removes", True) for inner in after)  # type: ignore[attr-defined]
    return stage


def _pre_tokenizer(pre: Any, source: str) -> list[_Stage]:
    """The stages of a pre-tokenizer, in order; VocabError for one that is not reproduced."""
    stages, byte_level = _stages(pre, source)
    if not byte_level:
        raise VocabError(f"{source}: no ByteLevel pre-tokenizer: the BPE model would not see bytes")
    return stages


def _stages(pre: Any, source: str) -> tuple[list[_Stage], bool]:
    if pre is None:
        return [], False
    if not isinstance(pre, dict):
        raise VocabError(f"{source}: malformed pre_tokenizer {pre!r}")
    kind = pre.get("type")
    if kind == "Sequence":
        stages: list[_Stage] = []
        after: list[_Stage] = []  # stages after ByteLevel: they split byte-level characters
        byte_level = False
        for sub in pre.get("pretokenizers") or []:
            more, bytes_in = _stages(sub, source)
            if byte_level and bytes_in:
                raise VocabError(f"{source}: a second ByteLevel pre-tokenizer is not supported")
            (after if byte_level else stages).extend(more)
            byte_level = byte_level or bytes_in
        if after:
            stages.append(_on_byte_level_chars(after))
        return stages, byte_level
    if kind == "ByteLevel":
        return [
            _byte_level_stage(
                _flag(pre, "add_prefix_space", False, source), _flag(pre, "use_regex", True, source)
            )
        ], True
    if kind == "Split":
        return [
            _split_stage(
                _split_regex(pre, source),
                _behavior(pre, source),
                _flag(pre, "invert", False, source),
            )
        ], False
    if kind == "Digits":
        behavior = "Isolated" if _flag(pre, "individual_digits", False, source) else "Contiguous"
        return [_split_stage(regex.compile(_DIGIT), behavior, False)], False
    if kind == "Punctuation":
        return [_split_stage(regex.compile(_PUNCT), _behavior(pre, source), False)], False
    raise VocabError(
        f"{source}: pre-tokenizer {kind!r} is not supported "
        "(ByteLevel, Split, Digits, Punctuation, Sequence)"
    )


def _flag(obj: dict, key: str, default: bool, source: str) -> bool:
    """A boolean field (absent or null: ``default``); anything else is refused, as `tokenizers` does."""
    value = obj.get(key)
    if value is None:
        return default
    if type(value) is not bool:
        raise VocabError(
            f"{source}: {obj.get('type', 'added token')} {key}={value!r} is not true or false"
        )
    return value


def _behavior(pre: dict, source: str) -> str:
    behavior = pre.get("behavior", "Isolated")
    if behavior not in _BEHAVIORS:
        raise VocabError(
            f"{source}: Split behavior {behavior!r} is not one of {', '.join(_BEHAVIORS)}"
        )
    return behavior


#: Patterns rewritten to match alike in linear time. DeepSeek LLM's ``\s+$`` retries its
#: whitespace run from every position of a run that does not end the piece (1 MB of spaces then
#: a digit: hours); a match can only start where no whitespace precedes, which the lookbehind
#: checks at once, so every run is read once.
_LINEAR = {r"\s+$": r"(?<!\s)\s+$"}


def _split_regex(pre: dict, source: str) -> regex.Pattern:
    pattern = pre.get("pattern")
    if isinstance(pattern, dict) and isinstance(pattern.get("Regex"), str):
        text = _LINEAR.get(pattern["Regex"], pattern["Regex"])
    elif isinstance(pattern, dict) and isinstance(pattern.get("String"), str):
        if not pattern["String"]:
            return regex.compile(r"(?!)")  # an empty string pattern matches nothing
        text = regex.escape(pattern["String"])
    else:
        raise VocabError(f"{source}: Split pre-tokenizer without a pattern")
    try:
        return regex.compile(text)
    except regex.error as e:
        raise VocabError(f"{source}: Split pattern {text!r} does not compile: {e}") from e


#: DeepSeek V3's three chained Splits (digit groups, then CJK runs, then words; each Isolated).
#: ``pretokenize.DEEPSEEK3_PATTERN`` is the one regex that cuts as the chain does (the reasoning
#: is beside it), and it has a scanner (PAT_DEEPSEEK3).
_CJK = "一-龥぀-ゟ゠-ヿ"
_DEEPSEEK_V3_STAGES = (
    r"\p{N}{1,3}",
    f"[{_CJK}]+",
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
    r"""| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+""",
)
_DEEPSEEK_V3_PATTERN = DEEPSEEK3_PATTERN

#: StarCoder2's Digits (one by one) then ByteLevel with GPT-2's regex, as one regex: a digit
#: (`tokenizers`' numeric class ``_DIGIT``) alone, and between digits GPT-2's alternatives, none
#: of which crosses a digit: no ``\p{N}`` is left there (``_DIGIT`` holds them all), so
#: `` ?\p{N}+`` is dropped and the other class excludes the digits; ``\s+(?!\S)`` also ends
#: before a digit (the end of its piece). Greedy ``\s+`` first tries the whole run, whose end
#: is a digit, another character or the end, so the added ``(?=digit)`` changes nothing else.
#: The letter run goes first (no other alternative starts on a letter, or on a space before
#: one) and the contractions share their apostrophe: ``finditer`` 15% faster.
_STARCODER_PATTERN = (
    f" ?\\p{{L}}+|{_DIGIT}|'(?:s|t|re|ve|m|ll|d)| ?[^\\s\\p{{L}}{_DIGIT_SET}]+"
    f"|\\s+(?:(?!\\S)|(?={_DIGIT}))|\\s+"
)
#: A compiled scanner cuts it (``pretokenize.starcoder_end``, with ``_DIGIT_SET``'s ranges beyond
#: ``\p{N}``) for count and encode; ``HFEncoding._plain`` keeps the regex (``_STARCODER_REGEX``),
#: as for Falcon's.
register_starcoder(_STARCODER_PATTERN, ((0x11DE0, 0x11DE9), (0x16FF4, 0x16FF6)))
_STARCODER_REGEX = f"(?:{_STARCODER_PATTERN})"

#: DeepSeek-Coder v1's five chained Splits (line breaks, letter runs, punctuation runs, its
#: "CJK" range U+0800-U+9FA5 and Hangul, digits; each Isolated) and the one regex that cuts as
#: the chain does. Line breaks are pieces alone; a letter run with the whitespace character
#: before it is a piece of the second stage (the search always reaches that character: no match
#: ends on whitespace), and so, where there are no letters, is a punctuation run with the
#: whitespace before it for the third; the fourth cuts each of those pieces where the CJK range
#: starts or stops and the fifth cuts out every digit. So: each alternative is one part of one
#: kind, CJK or not; whitespace followed by a letter or punctuation starts that part.
_DEEPSEEK_CODER_STAGES = (
    r"[\r\n]",
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
    r"\p{N}",
)
_CODER_CJK = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]"
_CODER_SPACE = r"[\s--[\r\n]]"


def _deepseek_coder_pattern(digits: str) -> str:
    """The one regex of DeepSeek-Coder v1's chain whose last stage cuts out each character of the
    class ``digits`` (a set's body: ``\\p{N}`` for its Split, ``_DIGIT_SET`` for Digits)."""
    other = f"[^\\p{{L}}\\p{{P}}{digits}\\s]"
    return "(?V1)" + "|".join(
        [
            f"[\\p{{L}}--{_CODER_CJK}]+",
            f"[\\p{{L}}&&{_CODER_CJK}]+",
            f"[{_CODER_SPACE}--{_CODER_CJK}](?=\\p{{L}})[\\p{{L}}--{_CODER_CJK}]*",
            f"[{_CODER_SPACE}&&{_CODER_CJK}](?=\\p{{L}})[\\p{{L}}&&{_CODER_CJK}]*",
            f"[{_CODER_SPACE}--{_CODER_CJK}](?=\\p{{P}})[\\p{{P}}--{_CODER_CJK}]*",
            f"[{_CODER_SPACE}&&{_CODER_CJK}](?=\\p{{P}})[\\p{{P}}&&{_CODER_CJK}]*",
            f"[\\p{{P}}--{_CODER_CJK}]+",
            f"[\\p{{P}}&&{_CODER_CJK}]+",
            f"[{digits}]",
            r"[\r\n]",
            f"(?:[{other}--{_CODER_CJK}]|[{_CODER_SPACE}--{_CODER_CJK}](?![\\p{{L}}\\p{{P}}]))+",
            f"(?:[{other}&&{_CODER_CJK}]|[{_CODER_SPACE}&&{_CODER_CJK}](?![\\p{{L}}\\p{{P}}]))+",
        ]
    )


_DEEPSEEK_CODER_PATTERN = _deepseek_coder_pattern(r"\p{N}")
#: The same chain with ``Digits(individual_digits=True)`` as its last stage (the model's own file
#: and llama.cpp's GGUF rebuild of it): `tokenizers`' numeric class instead of ``\p{N}``.
_DEEPSEEK_CODER_DIGITS_PATTERN = _deepseek_coder_pattern(_DIGIT_SET)


#: DeepSeek LLM's letters: Latin, Greek, Cyrillic, Armenian, Georgian, Cherokee, Glagolitic,
#: Coptic, ... as one class of ranges (its file's, character for character; ``gguf`` uses it).
_DEEPSEEK_LLM_LETTERS = (
    "A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293\u0295-\u02af"
    "\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c\u038e-\u03a1"
    "\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5\u13a0-\u13f5"
    "\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77\u1d79-\u1d9a"
    "\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59\u1f5b\u1f5d"
    "\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc\u1fd0-\u1fd3"
    "\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107\u210a-\u2113\u2115"
    "\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139\u213c-\u213f"
    "\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee\u2cf2\u2cf3"
    "\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e\uab70-\uabbf"
    "\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a\U00010400-\U0001044f"
    "\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2\U00010cc0-\U00010cf2"
    "\U000118a0-\U000118df\U0001e900-\U0001e943"
)

#: DeepSeek LLM's chain, as its file spells it (then Digits one by one, then the bytes): line
#: breaks; a letter run of its scripts (``_DEEPSEEK_LLM_LETTERS``) with one whitespace character
#: before it; a run of its punctuation (ASCII's printable characters but digits, which takes in
#: ASCII letters too, fullwidth forms, curly quotes, U+3000-U+3002) likewise; a whitespace run
#: that ends its piece; runs of DeepSeek-Coder's CJK range; each Isolated.
_DEEPSEEK_LLM_STAGES = (
    r"[\r\n]",
    f"\\s?[{_DEEPSEEK_LLM_LETTERS}]+",
    "\\s?[!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002]+",
    r"\s+$",
    "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+",
)


def _ranges(body: str) -> list[tuple[int, int]]:
    """The code point ranges of a character class body of characters and ``a-b`` ranges."""
    out, i = [], 0
    while i < len(body):
        if body[i + 1 : i + 2] == "-" and i + 2 < len(body):
            out.append((ord(body[i]), ord(body[i + 2])))
            i += 3
        else:
            out.append((ord(body[i]), ord(body[i])))
            i += 1
    return out


def _and(ranges: list[tuple[int, int]], other: list[tuple[int, int]]) -> list[tuple[int, int]]:
    return sorted(
        (max(a, s), min(b, e)) for a, b in ranges for s, e in other if max(a, s) <= min(b, e)
    )


def _but(ranges: list[tuple[int, int]], cut: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out = []
    for a, b in ranges:
        for s, e in sorted(cut):
            if s <= b and e >= a:
                if s > a:
                    out.append((a, s - 1))
                a = e + 1
        if a <= b:
            out.append((a, b))
    return out


def _spell(ranges: list[tuple[int, int]]) -> str:
    return "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in sorted(ranges))


def _deepseek_llm_pattern() -> str:
    r"""The one regex that cuts as DeepSeek LLM's chain does (``test_hf.py`` checks its pieces
    against `tokenizers`' on every corpus and on hypothesis text where the classes meet).

    Classes: L its letters, P its punctuation, A = L & P (ASCII and fullwidth letters), Q = P - A,
    C the CJK range (it holds letters of L, the quotes and U+3000-U+3002 of Q, whitespace such
    as U+2003 and U+3000, digits), D `tokenizers`' digits; U+3000 is whitespace and in Q.
    The letter stage takes ``s?L+`` (s: one whitespace character) and leaves gaps without
    letters; the punctuation stage re-cuts a letter piece into its A runs and its L - A runs,
    s going with the first run (alone when it is U+3000 before L - A), and a gap into ``s?Q+``
    and the rest; the ``\s+$`` stage cuts off a piece's trailing whitespace: the U+3000 run
    ending a Q piece, the whitespace ending a gap (so a gap is the part up to its last
    non-whitespace character, W, then the whitespace after it). The last two stages cut every
    piece where C starts or stops and around each digit: every alternative below is one class
    of one side of C, without digits, and a digit is a piece alone. Whitespace belongs to the
    piece of the letter or Q run right after it (U+3000 directly before a letter is the
    letter stage's), else to the gap: gap whitespace (``gap``) is followed by neither; gap
    whitespace of one side of C is in W (with the characters of its side before it) while
    some other character of the gap follows it (``(?=gap*+O)``), else alone. Each
    alternative starts on characters no other takes at that point, save whitespace, whose
    alternatives are in the chain's order; the commonest go first and whitespace-only gap
    runs before the gap runs that start with whitespace (``finditer`` 31 -> 18 ms per 200 KB).
    """
    cjk = _ranges("\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff")
    punct = _ranges("!-/:-~\uff01-\uff0f\uff1a-\uff5e\u2018-\u201f\u3000-\u3002")
    letters = _ranges(_DEEPSEEK_LLM_LETTERS)
    both = _and(letters, punct)  # A
    q_out = _spell(_but(_but(punct, letters), cjk))  # Q outside C
    q_in = _spell(_but(_and(punct, cjk), [(0x3000, 0x3000)]))  # Q inside C, but U+3000
    letter = f"[{_DEEPSEEK_LLM_LETTERS}]"
    ws_out = r"[\t\x0b\x0c \x85\xa0]"  # whitespace outside C, but line breaks
    ws_in = r"[\u1680\u2000-\u200a\u2028\u2029\u202f\u205f]"  # and inside, but U+3000
    ws = r"[^\S\r\n]"
    q_gap = f"(?:[{q_out}{q_in}]|\u3000(?!{letter}))"  # starts a Q piece of a gap
    gap_out = f"(?:{ws_out}(?!{letter}|{q_gap}))"
    gap_in = f"(?:{ws_in}(?!{letter}|{q_gap}))"
    gap = f"(?:[^\\S\\r\\n\u3000](?!{letter}|{q_gap}))"
    other = f"[^{_DEEPSEEK_LLM_LETTERS}{_spell(punct)}\\s]"
    other_out = f"[^{_DEEPSEEK_LLM_LETTERS}{_spell(punct)}\\s{_spell(cjk)}{_DIGIT_SET}]"
    other_in = f"(?![{_DEEPSEEK_LLM_LETTERS}{_spell(punct)}\\s{_DIGIT_SET}])[{_spell(cjk)}]"
    return "|".join(
        [
            f"{ws_out}?[{_spell(both)}]+",
            f"{ws_out}?[{q_out}]+",
            _DIGIT,
            r"[\r\n]",
            f"{gap_out}++(?!{other_out})",
            f"{ws_out}?[{_spell(_but(_but(letters, punct), cjk))}]+",
            f"{ws_in}?[{_spell(_and(letters, cjk))}]+",
            f"{ws}(?={letter})",
            f"{ws_in}?(?:(?:\u3000*[{q_in}])+(?:\u3000+(?=[{q_out}]))?|\u3000+(?=[{q_out}]))",
            f"{ws_in}?(?:\u3000(?!{letter}))+",
            f"{ws}(?={q_gap})",
            f"(?:{gap_out}*+{other_out})+(?:{gap_out}++(?={gap}*+{other}))?",
            f"{gap_in}++(?!{other_in})",
            f"(?:{gap_in}*+{other_in})+(?:{gap_in}++(?={gap}*+{other}))?",
        ]
    )


_DEEPSEEK_LLM_PATTERN = _deepseek_llm_pattern()


#: Falcon's chain: Punctuation (Contiguous), ByteLevel with GPT-2's regex, Digits (runs), then a
#: Split isolating groups of three ASCII digits. Its stage configs, as its file spells them:
_FALCON_STAGES = (
    {"type": "Punctuation", "behavior": "Contiguous"},
    {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
    {"type": "Digits", "individual_digits": False},
    {"type": "Split", "pattern": {"Regex": "[0-9][0-9][0-9]"}, "behavior": "Isolated"},
)
#: ... and the one regex that cuts as that chain does, on text without a ``_FALCON_BYTE_CUT``
#: character. A punctuation run (``_PUNCT``) is a piece alone: GPT-2's regex takes it whole
#: (it holds no letter, digit or space) and no other piece holds punctuation; the apostrophe is
#: punctuation, so the contractions never match. Between punctuation runs GPT-2's alternatives
#: run as they are, except that ``\s+(?!\S)`` also ends before punctuation (its piece ends
#: there; greedy ``\s+`` tries the whole run first, so nothing else changes). The last two
#: stages run on ByteLevel's characters, where the only digits are ASCII digits (bytes 0x30-0x39
#: map to themselves) and the ``¹²³¼½¾`` that bytes 0xB2, 0xB3, 0xB9, 0xBC-0xBE map to: on text
#: without a character holding one of those bytes they cut each ASCII digit run out of its
#: `` ?\p{N}+`` piece (a space before one is a piece alone) and into groups of three from its
#: left, which ``[0-9]{1,3}`` (no other alternative takes an ASCII digit) does; the rest of the
#: piece, other numerals with the space before them, stays whole. Text holding such a character
#: (they are cut inside: ByteLevel's pieces are bytes) takes the stages. No letter, numeral or
#: whitespace is punctuation (``test_hf.py::test_falcon_classes_disjoint``), so the classes need
#: no set operations (with ``(?V1)`` differences ``finditer`` took 4x as long) and the letter
#: run, the commonest piece, goes first (the alternatives start on disjoint characters).
_FALCON_PUNCT = _PUNCT[1:-1]
_FALCON_PATTERN = "|".join(
    [
        r" ?\p{L}+",
        f"[{_FALCON_PUNCT}]+",
        "[0-9]{1,3}",
        r" ?[^\P{N}0-9]+",
        f" ?[^\\s\\p{{L}}\\p{{N}}{_FALCON_PUNCT}]+",
        f"\\s+(?:(?!\\S)|(?=[{_FALCON_PUNCT}]))",
        r"\s+",
    ]
)
#: A compiled scanner cuts it (``pretokenize.falcon_end``, with this punctuation set) for count
#: and encode; ``HFEncoding._plain`` keeps the regex (``_FALCON_REGEX``, the same pattern in a
#: group), as the exact operations' compiled machinery does not know the scanner's shapes.
register_falcon(_FALCON_PATTERN, _PUNCT_RANGES)
_FALCON_REGEX = f"(?:{_FALCON_PATTERN})"
#: The UTF-8 bytes ByteLevel maps to a numeral other than an ASCII digit (``¹²³¼½¾``: ``Digits``
#: cuts at them, inside a character).
#: Where Falcon's pieces always end, whatever comes before or after: before a space between two
#: non-space characters, and after a whitespace character (not a space) that follows a non-space
#: one and precedes another: no piece holds a non-space character and then whitespace, and the
#: only whitespace a piece starting with whitespace runs into is a space before a non-space one.
#: Text cut there runs as its parts do, so the parts with no character the stages cut inside
#: take the one regex and only the others the stages.
_FALCON_WORD_CUT = re.compile(r"(?<=\S)(?= \S)|(?<=\S[^\S ])(?=\S)")
_FALCON_BYTE_CUT = re.compile(rb"[\xb2\xb3\xb9\xbc-\xbe]")  # `re`: 2.7x `regex` here


def _is_falcon(stages: list[dict]) -> bool:
    """Whether ``stages`` are Falcon's chain (``_FALCON_STAGES``; unnamed keys at their defaults)."""
    if len(stages) != len(_FALCON_STAGES):
        return False
    defaults = {"invert": False, "trim_offsets": True}
    for stage, want in zip(stages, _FALCON_STAGES):
        extra = {k: v for k, v in stage.items() if k not in want}
        if any(stage.get(k) != v for k, v in want.items()) or any(
            defaults.get(k, object()) != v for k, v in extra.items()
        ):
            return False
    return True


def _single_pattern(pre: Any) -> str | None:
    """The one regex the whole pre-tokenizer amounts to, or None when it is not that simple."""
    if not isinstance(pre, dict):
        return None
    kind = pre.get("type")
    if kind == "ByteLevel" and not pre.get("add_prefix_space") and pre.get("use_regex", True):
        return R50K_PATTERN  # GPT-2's pattern cuts exactly like r50k's possessive form
    stages = pre.get("pretokenizers") or [] if kind == "Sequence" else []
    if not stages or not all(isinstance(stage, dict) for stage in stages):
        return None
    if (
        len(stages) == 2
        and stages[0].get("type") == "Digits"
        and stages[0].get("individual_digits") is True
        and stages[1].get("type") == "ByteLevel"
        and not stages[1].get("add_prefix_space")
        and stages[1].get("use_regex", True) is True
    ):
        return _STARCODER_PATTERN
    if _is_falcon(stages):
        return _FALCON_PATTERN
    *splits, byte_level = stages
    digits = bool(splits) and splits[-1] == {"type": "Digits", "individual_digits": True}
    if digits:
        splits = splits[:-1]  # DeepSeek-Coder v1's own file ends its chain with Digits
    if not (
        byte_level.get("type") == "ByteLevel"
        and not byte_level.get("add_prefix_space")
        and not byte_level.get("use_regex", True)
        and all(
            split.get("type") == "Split"
            and split.get("behavior", "Isolated") == "Isolated"
            and not split.get("invert")
            and isinstance(split.get("pattern"), dict)
            and isinstance(split["pattern"].get("Regex"), str)
            for split in splits
        )
    ):
        return None
    patterns = tuple(split["pattern"]["Regex"] for split in splits)
    spelled = tuple(p.replace("\r", r"\r").replace("\n", r"\n") for p in patterns)
    if digits:
        if spelled == _DEEPSEEK_LLM_STAGES:
            return _DEEPSEEK_LLM_PATTERN
        return _DEEPSEEK_CODER_DIGITS_PATTERN if spelled == _DEEPSEEK_CODER_STAGES[:4] else None
    if len(patterns) == 1:
        return patterns[0]
    if spelled == _DEEPSEEK_V3_STAGES:  # the file spells \r and \n as characters
        return _DEEPSEEK_V3_PATTERN
    if spelled == _DEEPSEEK_CODER_STAGES:
        return _DEEPSEEK_CODER_PATTERN
    return None


# ---------------------------------------------------------------------------------- normalizers
#: Code points that `tokenizers`' Unicode tables (an older Unicode than Python's unicodedata)
#: do not normalize: characters assigned later, with a decomposition, a composition or a
#: combining class `tokenizers` does not know, so it leaves them as they are and treats them as
#: starters. Found by comparing every code point, alone and between combining marks, under
#: NFC/NFD/NFKC/NFKD of Python 3.11 (Unicode 14.0) and tokenizers 0.23.3
#: (``test_hf.py::test_unnormalized_table`` re-checks them).
_UNNORMALIZED_RANGES = (
    (0x07FD, 0x07FD),
    (0x0898, 0x089F),
    (0x08CA, 0x08D3),
    (0x09FE, 0x09FE),
    (0x0C3C, 0x0C3C),
    (0x0D3B, 0x0D3C),
    (0x0EBA, 0x0EBA),
    (0x1715, 0x1715),
    (0x1ABF, 0x1ACE),
    (0x1DF6, 0x1DFA),
    (0x32FF, 0x32FF),
    (0xA7F2, 0xA7F4),
    (0xA82C, 0xA82C),
    (0xAB69, 0xAB69),
    (0x10781, 0x10785),
    (0x10787, 0x107B0),
    (0x107B2, 0x107BA),
    (0x10D24, 0x10D27),
    (0x10EAB, 0x10EAC),
    (0x10F46, 0x10F50),
    (0x10F82, 0x10F85),
    (0x11070, 0x11070),
    (0x1133B, 0x1133B),
    (0x1145E, 0x1145E),
    (0x11839, 0x1183A),
    (0x11938, 0x11938),
    (0x1193D, 0x1193E),
    (0x11943, 0x11943),
    (0x119E0, 0x119E0),
    (0x11A34, 0x11A34),
    (0x11A47, 0x11A47),
    (0x11A99, 0x11A99),
    (0x11D42, 0x11D42),
    (0x11D44, 0x11D45),
    (0x11D97, 0x11D97),
    (0x16FF0, 0x16FF1),
    (0x1E130, 0x1E136),
    (0x1E2AE, 0x1E2AE),
    (0x1E2EC, 0x1E2EF),
    (0x1F16C, 0x1F16C),
    (0x1FBF0, 0x1FBF9),
)
_UNNORMALIZED = regex.compile(
    "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in _UNNORMALIZED_RANGES) + "]+"
)


def _unicode_normalize(form: str, text: str) -> str:
    """``unicodedata.normalize`` as `tokenizers` does it: the characters its tables do not know
    stay as they are and cut the text (a starter without decomposition or composition, as
    `tokenizers` sees them, is a boundary no normalization crosses)."""
    if text.isascii() or unicodedata.is_normalized(form, text):
        return text  # every slice of a normalized text is normalized: no piece would change
    if _UNNORMALIZED.search(text) is None:
        return unicodedata.normalize(form, text)
    out = []
    pos = 0
    for m in _UNNORMALIZED.finditer(text):
        out.append(unicodedata.normalize(form, text[pos : m.start()]))
        out.append(m.group())
        pos = m.end()
    out.append(unicodedata.normalize(form, text[pos:]))
    return "".join(out)


def _normalizer(norm: Any, source: str) -> Callable[[str], str] | None:
    """The normalizer as a function of one segment's text, or None for no normalizer.

    The function carries what the exact operations need to know of it: ``forms``, the set of
    Unicode forms when it is only NF* normalizers (else None), and ``shrink``, how far it may
    shrink text: ``"none"`` (Prepend), ``"nf"`` (Unicode forms: never to less than a quarter of
    a non-ASCII character's bytes, never an ASCII character's byte) or ``"any"`` (Replace).
    """
    if norm is None:
        return None
    if not isinstance(norm, dict):
        raise VocabError(f"{source}: malformed normalizer {norm!r}")
    kind = norm.get("type")
    if kind in ("NFC", "NFD", "NFKC", "NFKD"):
        return _tagged(lambda text, form=kind: _unicode_normalize(form, text), {kind}, "nf")
    if kind == "Sequence":
        parts = [_normalizer(n, source) for n in norm.get("normalizers") or []]
        funcs = [f for f in parts if f is not None]
        if not funcs:
            return None

        def sequence(text: str) -> str:
            for f in funcs:
                text = f(text)
            return text

        forms = [f.forms for f in funcs]  # type: ignore[attr-defined]
        shrinks = {f.shrink for f in funcs}  # type: ignore[attr-defined]
        return _tagged(
            sequence,
            set().union(*forms) if all(f is not None for f in forms) else None,
            "any" if "any" in shrinks else "nf" if "nf" in shrinks else "none",
        )
    if kind == "Prepend":
        prefix = norm.get("prepend")
        if not isinstance(prefix, str):
            raise VocabError(f"{source}: Prepend normalizer without a string")
        return _tagged(lambda text: prefix + text if text else text, None, "none")
    if kind == "Replace":
        pattern, content = norm.get("pattern"), norm.get("content")
        if not isinstance(content, str) or not isinstance(pattern, dict):
            raise VocabError(f"{source}: malformed Replace normalizer {norm!r}")
        if isinstance(pattern.get("String"), str):
            old = pattern["String"]
            return _tagged(lambda text: text.replace(old, content) if old else text, None, "any")
        if isinstance(pattern.get("Regex"), str):
            try:
                rx = regex.compile(pattern["Regex"])
            except regex.error as e:
                raise VocabError(f"{source}: Replace pattern does not compile: {e}") from e
            return _tagged(lambda text: rx.sub(lambda m: content, text), None, "any")
        raise VocabError(f"{source}: Replace normalizer without a pattern")
    raise VocabError(
        f"{source}: normalizer {kind!r} is not supported (NFC, NFD, NFKC, NFKD, Prepend, "
        "Replace, Sequence)"
    )


def _tagged(func: Callable[[str], str], forms: set[str] | None, shrink: str) -> Callable:
    func.forms = frozenset(forms) if forms is not None else None  # type: ignore[attr-defined]
    func.shrink = shrink  # type: ignore[attr-defined]
    return func


#: Per Unicode form, a class of the characters that are not "inert": a character is inert when
#: it is its own normal form, has combining class 0 and is never the second character of a
#: composition (nor a Hangul vowel or final jamo). A string of inert characters is normalized,
#: and so is every slice of it, so the normalizer changes none of its slices. Built on first use.
_NOT_INERT: dict[frozenset[str], regex.Pattern] = {}


def _not_inert(forms: frozenset[str]) -> regex.Pattern:
    rx = _NOT_INERT.get(forms)
    if rx is not None:
        return rx
    seconds = {*range(0x1161, 0x1176), *range(0x11A8, 0x11C3)}
    odd: set[int] = set()
    for cp in range(0x80, 0x110000):
        c = chr(cp)
        decomposition = unicodedata.decomposition(c)
        if decomposition:
            parts = decomposition.split()
            if len(parts) == 2 and not parts[0].startswith("<"):
                seconds.add(int(parts[1], 16))
        if unicodedata.combining(c) or (
            (decomposition or 0xAC00 <= cp <= 0xD7A3)
            and any(unicodedata.normalize(form, c) != c for form in forms)
        ):
            odd.add(cp)
    odd |= seconds
    odd -= {cp for cp in odd if 0xD800 <= cp < 0xE000}
    ranges: list[list[int]] = []
    for cp in sorted(odd):
        if ranges and ranges[-1][1] == cp - 1:
            ranges[-1][1] = cp
        else:
            ranges.append([cp, cp])
    rx = regex.compile("[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]")
    _NOT_INERT[forms] = rx
    return rx


# ---------------------------------------------------------------------------------- added tokens
class _Added:
    """One added token and its matching flags."""

    __slots__ = ("content", "id", "special", "normalized", "lstrip", "rstrip", "single_word")

    def __init__(self, entry: Any, source: str) -> None:
        if (
            not isinstance(entry, dict)
            or not isinstance(entry.get("content"), str)
            or type(entry.get("id")) is not int
        ):
            raise VocabError(f"{source}: malformed added_tokens entry {entry!r}")
        self.content: str = entry["content"]
        self.id: int = entry["id"]
        self.special = _flag(entry, "special", False, source)
        self.normalized = _flag(entry, "normalized", not self.special, source)
        self.lstrip = _flag(entry, "lstrip", False, source)
        self.rstrip = _flag(entry, "rstrip", False, source)
        self.single_word = _flag(entry, "single_word", False, source)


_WORD_AT_END = regex.compile(r"\w\Z")
_WORD_AT_START = regex.compile(r"\w")
_SPACE_AT_END = regex.compile(r"\s*\Z")
_SPACE_AT_START = regex.compile(r"\s*")


def _trie_pattern(texts: Iterable[str] | Iterable[bytes]) -> str:
    """One regex matching exactly ``texts``, the longest one where several start at a position:
    their trie, where a node that ends a text makes the rest optional (greedy, so the longest
    is tried first and the search backs off to the shorter). A flat alternation of GPT-NeoX's
    178 runs of spaces tries every run at every position; the trie reads each space once (and
    Llama 3's 588 whole-piece tokens: 1 MB of spaces 2.6 s -> 0.08 s). Bytes are spelled
    ``\\xHH``, for a bytes pattern (``.encode("ascii")``)."""
    trie: dict = {}
    for text in texts:
        node = trie
        for char in text:
            node = node.setdefault(char, {})
        node[""] = {}

    def escape(char: str | int) -> str:
        return regex.escape(char) if type(char) is str else f"\\x{char:02x}"

    def spell(node: dict) -> str:
        branches = [escape(char) + spell(child) for char, child in node.items() if char != ""]
        if not branches:
            return ""
        body = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
        if "" in node:
            # one character with nothing after it is one atom: "x?" instead of "(?:x)?"
            atom = len(branches) == 1 and all(list(n) == [""] for c, n in node.items() if c != "")
            return body + "?" if atom else f"(?:{body})?"
        return body

    return spell(trie)


class _Matcher:
    """Leftmost-longest search for a set of added tokens, cut as `tokenizers` cuts (flags included)."""

    def __init__(self, tokens: list[tuple[str, _Added]]) -> None:
        self.by_text = {text: tok for text, tok in tokens if text}
        self.rx = regex.compile(_trie_pattern(self.by_text)) if self.by_text else None
        # Every token's first two characters (or its one), when they are few: a text holding
        # none of them holds no token, which ``str.__contains__`` tells at C speed.
        heads = tuple({text[:2] for text in self.by_text})
        self.heads = heads if len(heads) <= 16 else None

    def _may_hold(self, text: str) -> bool:
        """False when ``text`` holds no token's first characters (so no token)."""
        return self.heads is None or any(head in text for head in self.heads)

    def search(self, text: str) -> bool:
        """Whether some token's text occurs in ``text``."""
        return self.rx is not None and self._may_hold(text) and self.rx.search(text) is not None

    def cut(self, text: str, skip: frozenset[int]) -> list[tuple[str, int | None]]:
        """(segment, id or None) covering ``text``; matches of tokens whose id is in ``skip`` are
        read as text (and still hide what they overlap, as in `tokenizers`)."""
        if self.rx is None or not text or not self._may_hold(text):
            return [(text, None)]
        out: list[tuple[str, int | None]] = []
        start_offset = 0
        for m in self.rx.finditer(text):
            start, stop = m.span()
            tok = self.by_text[m.group()]
            if tok.id in skip:
                continue
            if tok.single_word:
                if (start > 0 and _WORD_AT_END.search(text, 0, start)) or (
                    stop < len(text) and _WORD_AT_START.match(text, stop)
                ):
                    continue
            if tok.lstrip:
                start = max(_SPACE_AT_END.search(text, 0, start).start(), start_offset)
            if tok.rstrip:
                stop = _SPACE_AT_START.match(text, stop).end()
            if start_offset < start:
                out.append((text[start_offset:start], None))
            out.append((text[start:stop], tok.id))
            start_offset = stop
        if start_offset != len(text):
            out.append((text[start_offset:], None))
        return out


# ---------------------------------------------------------------------------------- the model
def _model(doc: dict, source: str) -> tuple[Vocab, dict[bytes, int], bool, bytes]:
    """(Vocab in merge-priority order with the file's ids, vocab tokens no merge forms,
    ignore_merges, the bytes the vocab has no token for).

    A byte without a token is dropped by `tokenizers` (no ``unk_token``), its neighbours then
    merging as if adjacent; the core keeps a single-byte token for it, with an id above all
    others that no encoding ever holds, since ``HFEncoding`` removes such bytes first."""
    model = doc["model"]
    if model.get("type", "BPE") != "BPE":
        raise VocabError(f"{source}: model type {model.get('type')!r} is not BPE")
    for key in ("dropout", "continuing_subword_prefix", "end_of_word_suffix"):
        if model.get(key):
            raise VocabError(f"{source}: BPE {key}={model[key]!r} is not supported")
    if model.get("byte_fallback"):
        raise VocabError(
            f"{source}: BPE byte_fallback is not supported (a byte-level model needs none)"
        )
    vocab = model.get("vocab")
    merges = model.get("merges")
    if not isinstance(vocab, dict) or not isinstance(merges, list):
        raise VocabError(f"{source}: model needs a 'vocab' object and a 'merges' list")
    for token, tid in vocab.items():
        if type(tid) is not int or tid < 0 or tid >= 0xFFFFFFFF:
            raise VocabError(f"{source}: vocab id of {token!r} is {tid!r}, not an integer >= 0")
    b2u = bytes_to_unicode()
    byte_of = {c: b for b, c in b2u.items()}

    # Each vocab token's bytes, once: str.translate to Latin-1 then encode, in C (a per-character
    # Python loop over every merge's three tokens was 3 of the 7 s of a Qwen2-sized file).
    table = {ord(c): b for c, b in byte_of.items()}
    table.update({c: 0xFFFF for c in range(256) if c not in table})  # fails the Latin-1 encode
    spelled: dict[str, bytes | None] = {}
    for token in vocab:
        try:
            spelled[token] = token.translate(table).encode("latin-1")
        except UnicodeEncodeError:
            spelled[token] = None

    def to_bytes(token: str, where: str) -> bytes:
        data = spelled.get(token)
        if data is None:
            raise VocabError(f"{source}: {where}: {token!r} is not a byte-level token")
        return data

    order: dict[bytes, int] = {}  # token bytes -> rank (position in merge priority)
    ids: list[int] = []
    missing = bytearray()  # bytes without a token: `tokenizers` drops them (HFEncoding)
    for b in range(256):
        char = b2u[b]
        order[bytes([b])] = b
        if char not in vocab:
            if 0x80 <= b < 0xC0:
                raise VocabError(
                    f"{source}: vocab lacks the byte-level token {char!r} for byte 0x{b:02x}"
                )
            missing.append(b)
            ids.append(-1)  # an id above every other one, given below
        else:
            ids.append(vocab[char])
    first_merge: dict[
        int, tuple[str, str, int]
    ] = {}  # rank -> its first merge (left, right, index)
    block: dict[int, list[int]] = {}  # rank -> [index of its last merge, number of its merges]
    pairs: list[tuple[str, str, int]] = []  # (left, right, rank formed) per merge, in list order
    seen: set[tuple[str, str]] = set()
    for i, merge in enumerate(merges):
        where = f"merges[{i}]"
        if isinstance(merge, str):
            parts = merge.split(" ")
        elif isinstance(merge, list):
            parts = merge
        else:
            raise VocabError(f"{source}: {where}: expected 'a b' or ['a', 'b'], got {merge!r}")
        if (
            len(parts) != 2
            or type(parts[0]) is not str
            or type(parts[1]) is not str
            or not parts[0]
            or not parts[1]
        ):
            raise VocabError(f"{source}: {where}: expected two tokens, got {merge!r}")
        left, right = parts
        whole_token = left + right
        if left not in vocab or right not in vocab or whole_token not in vocab:
            missing = next(t for t in (left, right, whole_token) if t not in vocab)
            raise VocabError(f"{source}: {where}: token {missing!r} is not in the vocab")
        key = (left, right)
        if key in seen:
            raise VocabError(f"{source}: {where}: merge {left!r} + {right!r} is listed twice")
        seen.add(key)
        merged = spelled[whole_token]
        if merged is None:
            to_bytes(whole_token, where)
        rank = order.get(merged)
        if rank is None:
            rank = order[merged] = len(ids)
            ids.append(vocab[whole_token])
            first_merge[rank] = (left, right, i)
            block[rank] = [i, 1]
        else:
            entry = block[rank]
            entry[0] = i
            entry[1] += 1
        pairs.append((left, right, rank))
    try:
        core = Vocab(order)
    except ValueError as e:
        raise VocabError(f"{source}: {e}") from e
    # BPE by rank (rank = first merge forming a token) makes the list's merges when, for every
    # token, its own split (BPE by rank on its bytes) is its first merge; or, for files listing
    # every split of a token (converted from rank files), when its merges are adjacent in the
    # list and the list's BPE on the token's own bytes ends with that same split.
    pair_map: dict[tuple[int, int], tuple[int, int]] | None = None
    for rank, (left, right, i) in first_merge.items():
        want = (order.get(spelled[left], -1), order.get(spelled[right], -1))  # rank == core index
        if core.is_reachable(rank) and core.split(rank) == want:
            continue
        if pair_map is None:
            pair_map = {}
            for k, (a, b, formed) in enumerate(pairs):
                la, lb = order.get(spelled[a], -1), order.get(spelled[b], -1)  # rank == core index
                if la >= 0 and lb >= 0:
                    pair_map[(la, lb)] = (k, formed)
        last, count = block[rank]
        split = core.split(rank) if core.is_reachable(rank) else None
        if (
            split is None
            or last - i + 1 != count
            or pair_map.get(split, (0, -1))[1] != rank
            or _list_bpe(core.token_bytes(rank), pair_map) != ([rank], split)
        ):
            raise VocabError(
                f"{source}: merges[{i}] ({left!r} + {right!r}) differs from BPE by rank: the token is "
                "formed first by another pair"
            )
    if _possible(missing) and model.get("unk_token") is not None:
        raise VocabError(
            f"{source}: BPE unk_token with byte-level tokens missing (bytes "
            f"{', '.join(f'0x{b:02x}' for b in _possible(missing))}) is not supported"
        )
    if missing:
        added = doc.get("added_tokens") if isinstance(doc.get("added_tokens"), list) else []
        top = max(
            [
                *vocab.values(),
                *(a.get("id") for a in added if isinstance(a, dict) and type(a.get("id")) is int),
            ]
        )
        for k, b in enumerate(missing):
            ids[b] = top + 1 + k
    try:
        core._assign_ids(ids)
    except ValueError as e:
        raise VocabError(f"{source}: {e}") from e
    whole = {}
    for token, tid in vocab.items():
        data = spelled[token]
        if data is not None and data not in order:  # not byte-level: no piece can spell it
            whole[data] = tid
    return core, whole, _flag(model, "ignore_merges", False, source), bytes(missing)


def _rank_file(doc: dict, source: str) -> tuple[Vocab, dict[bytes, int]] | None:
    """(Vocab, whole-piece tokens) of a file converted from a tiktoken rank file (Llama 3's), or
    None when the file is not laid out as one.

    Such a file (``ignore_merges``; transformers' tiktoken converter) lists, token by token in
    id order, every split of the token into two vocab tokens, sorted by the parts' ids. The merge
    list then gives each pair the priority (id of the token it forms, its place among that
    token's splits), and BPE by rank gives it (id of the token, its position in the piece): the
    two differ only in which of two different splits of one token, both present at once, goes
    first. That is checked here (strictly increasing (token, left, right) ids along the list,
    every split present) and on the text side by tests (tests/bpecore/test_hf_llama3.py: the
    pieces that put two splits of one token side by side, every corpus, hypothesis text, all
    equal to `tokenizers`). The ranks are then the ids, which Llama 3 orders out of merge order
    (81 tokens before a part) and with 588 tokens BPE never forms: ``_reranked``
    moves the first after their parts and puts the others in a whole-piece table, as for Meta's
    ``tokenizer.model``. ~2.5 s for Llama 3's 280,147 merges (docs/perf/hf.md)."""
    model = doc["model"]
    vocab, merges = model.get("vocab"), model.get("merges")
    if model.get("ignore_merges") is not True or not isinstance(vocab, dict):
        return None
    if not isinstance(merges, list) or len(set(vocab.values())) != len(vocab):
        return None
    byte_of = {c: b for b, c in bytes_to_unicode().items()}
    table = {ord(c): b for c, b in byte_of.items()}
    table.update({c: 0xFFFF for c in range(256) if c not in table})  # fails the Latin-1 encode
    ranks: dict[bytes, int] = {}
    for token, tid in vocab.items():
        if type(tid) is not int or tid < 0:
            return None
        try:
            ranks[token.translate(table).encode("latin-1")] = tid
        except UnicodeEncodeError:
            return None
    if len(ranks) != len(vocab) or any(bytes([b]) not in ranks for b in range(256)):
        return None
    listed: set[tuple[int, int]] = set()
    last = (-1, -1, -1)
    for merge in merges:
        parts = merge.split(" ") if isinstance(merge, str) else merge
        if not isinstance(parts, list) or len(parts) != 2:
            return None
        left, right = parts
        key = (vocab.get(left + right), vocab.get(left), vocab.get(right))
        if None in key or key <= last:
            return None
        last = key
        listed.add(key[1:])
    for data in ranks:
        for k in range(1, len(data)):
            a = ranks.get(data[:k])
            if a is not None:
                b = ranks.get(data[k:])
                if b is not None and (a, b) not in listed:
                    return None
    return _reranked(ranks, source)


def _possible(missing: bytes) -> bytes:
    """The bytes of ``missing`` that valid UTF-8 can hold (not 0xC0, 0xC1, 0xF5-0xFF)."""
    return bytes(b for b in missing if b < 0xC0 or 0xC2 <= b <= 0xF4)


def _dropped_chars(missing: bytes) -> re.Pattern | None:
    """The characters whose UTF-8 holds one of the ``missing`` bytes (ASCII or lead bytes), as a
    `re` class (its search of 100 KB of English for Falcon's 15 ranges: 0.74 ms in `regex`)."""
    spans = []
    for b in _possible(missing):
        if b < 0x80:
            lo, hi = b, b
        elif b < 0xE0:
            lo, hi = (b & 0x1F) << 6, ((b & 0x1F) << 6) | 0x3F
        elif b < 0xF0:
            lo, hi = max((b & 0x0F) << 12, 0x800), ((b & 0x0F) << 12) | 0xFFF
        else:
            lo, hi = max((b & 0x07) << 18, 0x10000), min(((b & 0x07) << 18) | 0x3FFFF, 0x10FFFF)
        spans.append(f"\\U{lo:08x}-\\U{hi:08x}")
    return re.compile(f"[{''.join(spans)}]") if spans else None


def _list_bpe(
    data: bytes, pair_map: dict[tuple[int, int], tuple[int, int]]
) -> tuple[list[int], tuple | None]:
    """`tokenizers`' BPE of ``data`` alone (lowest merge index first, leftmost on ties): the
    symbols it ends with and its last merge. Single bytes are their own ranks."""
    symbols = list(data)
    last = None
    while len(symbols) > 1:
        best = None
        for j in range(len(symbols) - 1):
            entry = pair_map.get((symbols[j], symbols[j + 1]))
            if entry is not None and (best is None or entry[0] < best[0]):
                best = (entry[0], j, entry[1])
        if best is None:
            break
        _, j, formed = best
        last = (symbols[j], symbols[j + 1])
        symbols[j : j + 2] = [formed]
    return symbols, last


# ---------------------------------------------------------------------------------- horizons
# The exact ``split_at`` of a pipeline in one pass (README, "Open models: which path"). The
# stages re-split pieces, so only the first stage that is no "cut" (below) decides where the
# pieces of a prefix differ from those of the text: its pieces are final once the regex has read
# no further than the prefix's end. ``_Reach`` bounds what a match attempt reads.
_MANY = 1 << 62


class _NoReach(Exception):
    """A pattern outside what ``_Reach`` reads (lookbehind, anchors, backreferences, empty
    matches, full case folding ...): its stage is treated as one piece per input piece."""


def _norm(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Sorted, merged inclusive position intervals."""
    out: list[tuple[int, int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1] + 1:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def _minus(spans: list[tuple[int, int]], seen: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The positions of ``spans`` not in ``seen`` (both normalized)."""
    out = []
    for a, b in spans:
        for s, e in seen:
            if e < a or s > b:
                continue
            if s > a:
                out.append((a, s - 1))
            a = e + 1
            if a > b:
                break
        if a <= b:
            out.append((a, b))
    return out


class _Reach:
    """How far a `regex` match attempt of one pattern may read, by walking its syntax over the
    text: every position some path of the backtracking matcher can test, over-approximated as
    intervals (a repeated class reads to the end of its run and one past it; a lookahead reads
    what its own pattern reads and lets every path through). The attempt's result can differ on
    a prefix of the text only when it read at or past the prefix's end, so ``horizon(q)`` (1 + the
    furthest position read, the end of the text counting as a position) bounds where the
    attempt at ``q`` is final. Covered: classes, escapes, literals, ``.``, groups (capturing,
    ``(?:``, ``(?i:``), lookaheads, alternation and every quantifier; anything else is _NoReach.
    """

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        flags = regex.match(r"(?:\((\?[a-zA-Z0-9]+)\))*", pattern)
        self._v1 = False
        for group in regex.findall(r"\(\?([a-zA-Z0-9]+)\)", flags.group()):
            for flag in regex.findall(r"V[01]|.", group):
                if flag == "V1":
                    self._v1 = True
                elif flag != "V0":
                    raise _NoReach(f"flag {flag!r}")
        self._classes: list[regex.Pattern] = []
        self._member: list[dict[str, bool]] = []
        self._folds = False
        self.root, end = self._alt(flags.end(), False)
        if end != len(pattern):
            raise _NoReach("unbalanced")
        if self._v1 and self._folds:
            raise _NoReach("full case folding")  # one character may match several
        if _min_len(self.root) == 0:
            raise _NoReach("empty match")  # finditer steps past empty matches its own way

    # -- syntax
    def _alt(self, i: int, ci: bool):
        seqs = []
        while True:
            seq, i = self._seq(i, ci)
            seqs.append(seq)
            if i < len(self.pattern) and self.pattern[i] == "|":
                i += 1
                continue
            return ("alt", seqs), i

    def _seq(self, i: int, ci: bool):
        items = []
        p = self.pattern
        while i < len(p) and p[i] not in "|)":
            node, i = self._atom(i, ci)
            lo, hi, i = self._quantifier(i)
            if node[0] == "look" and (lo, hi) != (1, 1):
                raise _NoReach("quantified lookahead")
            items.append((node, lo, hi))
        return items, i

    def _atom(self, i: int, ci: bool):
        p = self.pattern
        c = p[i]
        if c == "(":
            look = p.startswith("(?=", i) or p.startswith("(?!", i)
            if look or p.startswith("(?:", i):
                start = i + 3
            elif p.startswith("(?i:", i):
                start, ci = i + 4, True
            elif p.startswith("(?", i):
                raise _NoReach("group kind")
            else:
                start = i + 1
            node, j = self._alt(start, ci)
            if j >= len(p) or p[j] != ")":
                raise _NoReach("unbalanced")
            return (("look", node) if look else node), j + 1
        if c == "[":
            j = self._class_end(i)
        elif c == "\\":
            d = p[i + 1 : i + 2]
            if d in ("p", "P", "x"):
                j = p.index("}", i) + 1 if p[i + 2 : i + 3] == "{" else i + (3 if d != "x" else 4)
            elif d == "u":
                j = i + 6
            elif d == "U":
                j = i + 10
            elif d and (d in "sSdDwWrntfv" or not d.isalnum()):
                j = i + 2
            else:
                raise _NoReach(f"escape \\{d}")  # \b \A \Z \G \X \N, backreferences ...
        elif c in "^$*+?{":
            raise _NoReach(f"{c!r}")
        else:
            j = i + 1
        return self._class(p[i:j], ci), j

    def _class_end(self, i: int) -> int:
        p = self.pattern
        j, depth = self._set_start(i + 1), 1
        while j < len(p):
            c = p[j]
            if c == "\\":
                j += 2
                continue
            if c == "[":
                if p[j + 1 : j + 2] == ":":
                    raise _NoReach("POSIX class")
                if self._v1:  # a nested set (V1)
                    depth += 1
                    j = self._set_start(j + 1)
                    continue
            elif c == "]":
                depth -= 1
                if depth == 0:
                    return j + 1
            j += 1
        raise _NoReach("unbalanced class")

    def _set_start(self, j: int) -> int:
        """Past a set's leading ``^`` and a ``]`` right after it (a member, not the end)."""
        if self.pattern[j : j + 1] == "^":
            j += 1
        return j + 1 if self.pattern[j : j + 1] == "]" else j

    def _class(self, text: str, ci: bool):
        self._folds = self._folds or ci
        body = f"(?i:{text})" if ci else text
        try:
            rx = regex.compile(("(?V1)" if self._v1 else "") + body)
        except regex.error as e:
            raise _NoReach(str(e)) from e
        self._classes.append(rx)
        self._member.append({})
        return ("cls", len(self._classes) - 1)

    def _quantifier(self, i: int):
        p = self.pattern
        if i >= len(p) or p[i] not in "?*+{":
            return 1, 1, i
        if p[i] == "{":
            m = regex.match(r"\{(\d*)(,?)(\d*)\}", p[i:])
            if m is None or not (m.group(1) or m.group(3)):
                raise _NoReach("brace")
            lo = int(m.group(1) or 0)
            hi = int(m.group(3)) if m.group(3) else _MANY if m.group(2) else lo
            i += m.end()
        else:
            lo, hi = {"?": (0, 1), "*": (0, _MANY), "+": (1, _MANY)}[p[i]]
            i += 1
        if i < len(p) and p[i] in "?+":
            i += 1  # lazy or possessive: the same positions, in another order or fewer
        return lo, hi, i

    def single_class(self) -> tuple[int, int] | None:
        """(lo, hi) when the pattern is one class repeated lo..hi times, else None."""
        seqs = self.root[1]
        if len(seqs) == 1 and len(seqs[0]) == 1 and seqs[0][0][0][0] == "cls":
            return seqs[0][0][1], seqs[0][0][2]
        return None

    # -- reading
    def horizon(self, text: _ReachText, q: int) -> int:
        """1 + the furthest position the attempt at ``q`` can read (``len`` = the end test)."""
        text.read = q
        self._walk(self.root, [(q, q)], text)
        return text.read + 1

    def _walk(self, node, spans, text):
        out: list[tuple[int, int]] = []
        for seq in node[1]:
            cur = spans
            for item in seq:
                cur = self._item(item, cur, text)
                if not cur:
                    break
            out += cur
        return _norm(out)

    def _item(self, item, spans, text):
        node, lo, hi = item
        if node[0] == "cls":
            return self._repeat_class(node[1], lo, hi, spans, text)
        if node[0] == "look":
            self._walk(node[1], spans, text)
            return spans  # it may pass or fail: both ways go on
        acc = list(spans) if lo == 0 else []
        cur, seen, k = spans, [], 0
        while cur and k < hi:
            cur = self._walk(node, cur, text)
            k += 1
            if k > lo:
                cur = _minus(cur, seen)  # from here on a position goes where it went before
            if k >= lo:
                seen = _norm(seen + cur)
                acc += cur
            if k > 100_000:
                raise _NoReach("repeat")
        return _norm(acc)

    def _repeat_class(self, idx, lo, hi, spans, text):
        out = []
        n = text.n
        for a, b in spans:
            if lo == 0:
                out.append((a, b))
            if hi == 1:
                text.read = max(text.read, min(b, n))
                if a >= n:
                    continue
                if b - a <= 8:
                    out += [
                        (p + 1, p + 1)
                        for p in range(a, min(b, n - 1) + 1)
                        if text.has(self, idx, p)
                    ]
                else:
                    out.append((a + 1, min(b, n - 1) + 1))
                continue
            r = text.run_end(self, idx, b)
            top = min(r, b + hi)
            text.read = max(text.read, min(r if r < b + hi else b + hi - 1, n))
            if a + max(lo, 1) <= top:
                out.append((a + max(lo, 1), top))
        return _norm(out)


def _min_len(node) -> int:
    if node[0] == "cls":
        return 1
    if node[0] == "look":
        return 0
    return min(sum(_min_len(item[0]) * item[1] for item in seq) for seq in node[1])


class _ReachText:
    """A text being read by ``_Reach``: class membership per character and the run ends."""

    def __init__(self, text: str) -> None:
        self.text, self.n, self.read = text, len(text), 0
        self._runs: dict[tuple[int, int], int] = {}

    def has(self, reach: _Reach, idx: int, p: int) -> bool:
        char = self.text[p]
        member = reach._member[idx]
        found = member.get(char)
        if found is None:
            found = member[char] = reach._classes[idx].match(char) is not None
        return found

    def run_end(self, reach: _Reach, idx: int, p: int) -> int:
        """The first position from ``p`` on whose character is not of class ``idx`` (or n)."""
        key = (idx, p)
        r = self._runs.get(key)
        if r is None:
            r = p
            while r < self.n and self.has(reach, idx, r):
                r += 1
            for x in range(p, r):
                self._runs[(idx, x)] = r
            self._runs[key] = r
        return r


def _reach_of(stage) -> _Reach | None:
    """The ``_Reach`` of a split stage's regex (kept on the stage), None when not covered."""
    found = getattr(stage, "reach", 0)
    if found == 0:
        try:
            found = _Reach(stage.split[0].pattern)
        except _NoReach:
            found = None
        stage.reach = found
    return found


def _is_cut(stage, prefix: bool) -> bool:
    """Whether ``stage`` cuts every prefix (suffix) of a piece where it cuts the piece: no
    split, or one class repeated 1..hi times (every match of its regex is one character or a
    run, or for prefixes a run cut into hi-character parts from its start), any behavior."""
    split = getattr(stage, "split", None)
    if split is False:
        return True
    if not split:
        return False
    reach = _reach_of(stage)
    shape = reach.single_class() if reach is not None else None
    return shape is not None and shape[0] == 1 and (prefix or shape[1] in (1, _MANY))


def _tracked(rx, reach: _Reach, text: str, invert: bool, top: list[int]):
    """``_find_matches`` that also keeps in ``top[0]`` the highest horizon of the attempts made
    so far (every position of a gap and each match start)."""
    seen = _ReachText(text)
    prev = 0

    def attempts(upto: int) -> None:
        for q in range(prev, upto):
            h = reach.horizon(seen, q)
            if h > top[0]:
                top[0] = h

    for m in rx.finditer(text):
        start, end = m.span()
        attempts(start + 1)
        if prev != start:
            yield (prev, start, invert)
        yield (start, end, not invert)
        prev = end
    attempts(len(text))
    if prev != len(text):
        yield (prev, len(text), invert)


def _scan_spans(stage, reach: _Reach, text: str) -> Iterator[tuple[int, int, int]]:
    """(start, end, horizon) of the pieces a split stage cuts ``text`` into, lazily: a prefix
    ``text[:c]`` with ``c >= horizon`` has the same pieces before ``start`` and one from it."""
    rx, behavior, invert = stage.split
    top = [0]
    for a, b in _kept(_tracked(rx, reach, text, invert, top), behavior):
        if b > a:
            yield a, b, top[0] if a else 0


def _cut_spans(stages, text: str) -> Iterator[tuple[int, int]]:
    """The pieces ``stages`` (all cuts) make of ``text``, as spans, lazily."""
    spans: Iterator[tuple[int, int]] = iter([(0, len(text))] if text else [])
    for stage in stages:
        spans = _resplit(stage, text, spans)
    return spans


def _resplit(stage, text: str, spans: Iterator[tuple[int, int]]) -> Iterator[tuple[int, int]]:
    if stage.split is False:
        yield from spans
        return
    rx, behavior, invert = stage.split
    for s, e in spans:
        for a, b in _spans(text[s:e], rx, behavior, invert):
            if b > a:
                yield s + a, s + b


class RunBound:
    """A lower bound on the token count of any slice of ``text`` under ``vocab``, from its runs of
    one character: what lets ``split_at`` and ``split_at_end`` pass over the candidates inside a
    long run without counting them (each would cost a count of ``n`` tokens: quadratic in the
    run).

    Every encoding of a slice is a sequence of tokens spelling its bytes, vocab tokens and the
    added tokens' texts (no normalizer change, no dropped byte, no whole-piece token, no added
    token that strips the whitespace around it: the callers check). A token lying inside a run
    of a character ``c`` spells a substring of ``c``'s bytes repeated, so it is at most ``L(c)``
    bytes long, the longest such token of the vocab; at most one token crosses each end of the
    run inside the slice, covering at most ``max_token_len`` of its bytes, and an end of the run
    that is an end of the slice has none. So a run part of ``b`` bytes needs at least
    ``ceil((b - crossings * max_token_len) / L(c))`` tokens of its own, and the slice at least the
    sum over its first and last run parts (the tokens inside two runs are distinct).
    On the real vocabularies the bound is the count on runs of a letter, spaces, a digit or one
    CJK character (``test_hf.py``), so the first candidate it lets through fits.
    """

    def __init__(
        self, vocab: Vocab, text: str, memo: dict[str, int], added: Sequence[bytes] = ()
    ) -> None:
        self._vocab, self._text, self._memo, self._added = vocab, text, memo, added
        self._max = max([vocab.max_token_len, *map(len, added)])
        starts, ends = [], []
        for m in _RUNS.finditer(text):
            starts.append(m.start())
            ends.append(m.end())
        self._starts, self._ends = starts, ends

    def _longest(self, char: str) -> int:
        """``L(char)``: the longest token spelling a substring of ``char``'s bytes repeated."""
        found = self._memo.get(char)
        if found is None:
            data = char.encode("utf-8", "surrogatepass")
            turns = [data[r:] + data[:r] for r in range(len(data))]
            found = 0
            for size in range(self._vocab.max_token_len, 0, -1):
                if any(
                    self._vocab.lookup((t * (size // len(data) + 2))[:size]) >= 0 for t in turns
                ):
                    found = size
                    break
            for token in self._added:  # an added token's text is a token too
                if len(token) > found and any(
                    token == (t * (len(token) // len(data) + 2))[: len(token)] for t in turns
                ):
                    found = len(token)
            self._memo[char] = found
        return found

    def _run(self, p: int) -> int:
        """The index of the run (of two or more characters) holding position ``p``, or -1."""
        r = bisect.bisect_right(self._starts, p) - 1
        return r if r >= 0 and p < self._ends[r] else -1

    def _part(self, a: int, b: int, crossings: int) -> int:
        longest = self._longest(self._text[a])
        if not longest:
            return 0
        size = (b - a) * len(self._text[a].encode("utf-8", "surrogatepass"))
        return max(0, -(-(size - crossings * self._max) // longest))

    def lower(self, i: int, j: int) -> int:
        """At most the token count of ``text[i:j]``."""
        if j - i < 2:
            return 0
        first, last = self._run(i), self._run(j - 1)
        if first >= 0 and first == last:
            return self._part(i, j, 0)
        total = 0
        if first >= 0:
            total += self._part(i, self._ends[first], 1)
        if last >= 0:
            total += self._part(max(self._starts[last], i), j, 1)
        return total

    def _fixed(self, r: int, a: int, b: int) -> int:
        """The part of run ``r`` inside ``text[a:b]`` (one crossing), 0 for no run."""
        if r < 0:
            return 0
        return self._part(max(self._starts[r], a), min(self._ends[r], b), 1)

    def _fit(self, char: str, room: int, crossings: int) -> int:
        """The most characters of a run of ``char`` whose part is at most ``room`` tokens."""
        longest = self._longest(char)
        if not longest:
            return len(self._text)
        return (room * longest + crossings * self._max) // len(
            char.encode("utf-8", "surrogatepass")
        )

    def prev_prefix(self, j: int, n: int) -> int:
        """With ``lower(0, j) > n``: the next end (below ``j``) of a prefix whose bound may be at
        most ``n``. Inside the run ending the prefix the bound only falls as the end moves left,
        the other run's part staying, so the end jumps to where the run's part fits."""
        r = self._run(j - 1)
        if r < 0:
            return j - 1
        rs = self._starts[r]
        char = self._text[rs]
        if rs == 0:
            return max(0, min(j - 1, self._fit(char, n, 0)))
        room = n - self._fixed(self._run(0), 0, rs)
        if room < 0:
            return rs
        return max(rs, min(j - 1, rs + self._fit(char, room, 1)))

    def next_suffix(self, i: int, n: int) -> int:
        """With ``lower(i, len(text)) > n``: the next start (after ``i``) of a suffix whose bound
        may be at most ``n`` (the mirror of ``prev_prefix``)."""
        r = self._run(i)
        if r < 0:
            return i + 1
        size, re_ = len(self._text), self._ends[r]
        char = self._text[i]
        if re_ == size:
            return min(size, max(i + 1, size - self._fit(char, n, 0)))
        room = n - self._fixed(self._run(size - 1), re_, size)
        if room < 0:
            return re_
        return min(re_, max(i + 1, re_ - self._fit(char, room, 1)))

    def fits_prefix(self, enc: Encoding, n: int) -> tuple[int | None, int]:
        """(the longest prefix ``k`` with ``count <= n``, or None) and the end below which the
        answer lies when None: the prefixes the bound proves too long are passed over and the
        first few it lets through counted (in a run from the start, the first fits)."""
        j, tries = len(self._text), 0
        while j > 0 and tries < 4:
            low = self.lower(0, j)
            if low == 0:
                break
            if low > n:
                j = self.prev_prefix(j, n)
                continue
            if enc.count_till_limit(self._text[:j], n) is not None:
                return j, j
            tries, j = tries + 1, j - 1
        return (0, 0) if j == 0 else (None, j)

    def fits_suffix(self, enc: Encoding, n: int) -> tuple[int | None, int]:
        """The mirror of ``fits_prefix``: (the smallest start ``k`` with ``count(text[k:]) <= n``,
        or None) and the start from which the answer lies when None."""
        i, tries, size = 0, 0, len(self._text)
        while i < size and tries < 4:
            low = self.lower(i, size)
            if low == 0:
                break
            if low > n:
                i = self.next_suffix(i, n)
                continue
            if enc.count_till_limit(self._text[i:], n) is not None:
                return i, i
            tries, i = tries + 1, i + 1
        return (size, size) if i >= size else (None, i)


_RUNS = re.compile(r"(.)\1+", re.S)


def longest_prefix_by_horizon(
    stages: list,
    text: str,
    n: int,
    count_from: Callable[[int, str, int], int | None],
    bound: RunBound | None = None,
) -> int:
    """The largest ``k`` with ``count(text[:k]) <= n`` for a pipeline of ``stages`` then BPE, in
    one pass (README, "Open models: which path"). ``count_from(i, t, limit)`` counts ``t``
    through ``stages[i:]`` and BPE, None once past ``limit``.

    The leading stages that are cuts (``_is_cut``) cut ``text[:k]`` into the pieces of ``text``
    cut at ``k``. The next stage (the scan) is read with ``_Reach``: a piece of it starting at
    ``a`` with horizon ``h`` starts a piece of every prefix ``text[:k]`` with ``k >= h``, the
    pieces before it being the text's own. So ``count(text[:k])`` is ``F`` (the count of the
    pieces before the last such ``a``) plus the count of ``text[a:k]`` through the scan and the
    later stages. ``F`` only grows with ``k``: once it passes ``n`` no longer prefix fits, and
    the prefixes below that point are counted from the longest down, each from its last
    boundary (about a piece or two of work each), but those ``bound`` (a ``RunBound`` of
    ``text``) proves too long: inside a long run the boundary stays at the run's start.
    """
    first = 0
    while first < len(stages) and _is_cut(stages[first], True):
        first += 1
    scan = stages[first] if first < len(stages) else None
    reach = _reach_of(scan) if scan is not None and scan.split else None
    starts: list[int] = []  # per scan piece: start, horizon, count before it, end of its cut
    horizons: list[int] = []
    before: list[int] = []
    ends: list[int] = []
    total, stop = 0, len(text) + 1
    for s, e in _cut_spans(stages[:first], text):
        part = text[s:e]
        spans = _scan_spans(scan, reach, part) if reach is not None else [(0, e - s, 0)]
        for a, b, h in spans:
            if total > n:
                stop = max(s + a + 1, min(s + h, e))
                break
            starts.append(s + a)
            horizons.append(min(s + h, e))
            before.append(total)
            ends.append(e)
            # a scan piece goes on through the later stages; a whole cut piece through the scan
            total += count_from(first + 1 if reach is not None else first, part[a:b], _MANY)
        if stop <= len(text):
            break
    if stop > len(text) and total <= n:
        return len(text)
    for k in range(min(stop - 1, len(text)), 0, -1):
        j = bisect.bisect_left(starts, k) - 1
        while j >= 0 and horizons[j] > k:
            j -= 1
        if j < 0:
            return k  # no kept piece starts before k: nothing to count
        end = min(k, ends[j])
        if bound is not None and before[j] + bound.lower(starts[j], end) > n:
            continue  # more than n tokens whatever the pieces (``RunBound``)
        if count_from(first, text[starts[j] : end], n - before[j]) is not None:
            return k
    return 0


#: DeepSeek LLM's split of the whitespace that ends a piece (``shortest_suffix_by_horizon``).
_TRAILING_SPACE = r"(?<!\s)\s+$"


def shortest_suffix_by_horizon(
    stages: list,
    text: str,
    start: int,
    n: int,
    count_from: Callable[[int, str, int], int | None],
) -> int | None:
    """The smallest ``k >= start`` with ``count(text[k:]) <= n`` for a pipeline of ``stages``
    then BPE, from the count of every suffix in one pass from the end; None when a stage is
    neither a cut (for suffixes: one class, or a run of it) nor an Isolated split ``_Reach``
    reads (the caller then counts candidates).

    A cut stage cuts ``text[k:]`` where it cuts the text; for the first other stage, the count
    of ``text[p:]`` is that of its first gap (``text[p:m]``, a suffix of the text's gap before
    the match at ``m``, counted the same way one stage down), the match ``text[m:e]``, and the
    suffix from ``e``: the attempt at each position reads only the text after it, so it matches
    alike in the text and in each of its suffixes (``_Reach`` refuses lookbehind and anchors).
    Counts above ``n`` are kept as ``n + 1``. Cost: one attempt per position of the window and
    the counts of the pieces it finds (a run costs its length per position inside it).
    """
    memo: dict[tuple[int, str], int] = {}

    def whole(i: int, piece: str) -> int:
        key = (i, piece)
        found = memo.get(key)
        if found is None:
            more = count_from(i, piece, n)
            found = memo[key] = n + 1 if more is None else more
        return found

    def suffixes(i: int, piece: str, lo: int) -> list[int] | None:
        """count(piece[p:]) through stages[i:] for p = lo .. len(piece), capped at n + 1."""
        size = len(piece)
        if i == len(stages):
            return [whole(i, piece[p:]) for p in range(lo, size)] + [0]
        stage = stages[i]
        if _is_cut(stage, False):
            out = [0] * (size - lo + 1)
            after = 0
            spans = [(0, size)] if stage.split is False else list(_spans(piece, *stage.split))
            end = size
            for a, b in reversed(spans):
                if b <= a:
                    continue
                for p in range(max(b, lo), end):
                    out[p - lo] = after  # inside a removed segment
                if b <= lo:
                    end = b
                    break
                inner = suffixes(i + 1, piece[a:b], max(lo - a, 0))
                if inner is None:
                    return None
                for p in range(max(a, lo), b):
                    out[p - lo] = min(inner[p - a - max(lo - a, 0)] + after, n + 1)
                if a <= lo:
                    end = lo
                    break
                after = min(after + inner[0], n + 1)
                end = a
            for p in range(lo, end):
                out[p - lo] = after
            return out
        split = getattr(stage, "split", None)
        if split and split[1:] == ("Isolated", False) and split[0].pattern == _TRAILING_SPACE:
            return trailing(i, piece, lo, split[0])
        if not split or split[1:] != ("Isolated", False) or _reach_of(stage) is None:
            return None
        rx = split[0]
        out = [0] * (size - lo + 1)
        match_at: list[tuple[int, int] | None] = [None] * (size - lo + 1)
        following: tuple[int, int] | None = None
        for p in range(size - 1, lo - 1, -1):
            m = rx.match(piece, p)
            if m is not None:
                following = m.span()
            match_at[p - lo] = following
        p = size - 1
        while p >= lo:  # gap regions: positions whose next match lies beyond them
            nxt = match_at[p - lo]
            if nxt is not None and nxt[0] == p:
                out[p - lo] = min(whole(i + 1, piece[p : nxt[1]]) + out[nxt[1] - lo], n + 1)
                p -= 1
                continue
            gap_end = nxt[0] if nxt is not None else size
            tail = (whole(i + 1, piece[gap_end : nxt[1]]) + out[nxt[1] - lo]) if nxt else 0
            g = p
            while g > lo and match_at[g - 1 - lo] == nxt and (nxt is None or nxt[0] != g - 1):
                g -= 1
            inner = suffixes(i + 1, piece[g:gap_end], 0)
            if inner is None:
                return None
            for q in range(g, p + 1):
                out[q - lo] = min(inner[q - g] + tail, n + 1)
            p = g - 1
        return out

    def trailing(i: int, piece: str, lo: int, rx) -> list[int] | None:
        """``suffixes`` through DeepSeek LLM's ``(?<!\\s)\\s+$`` (its look-behind and anchor are
        beyond ``_Reach``): it isolates the whitespace run ``piece[t:]`` that ends the piece
        after a character that is not whitespace, so a suffix from before ``t`` is cut at ``t``,
        and one from ``t`` on is whitespace, matched whole (nothing behind the start of a piece:
        the look-behind passes)."""
        if "\n" in piece[:-1]:
            return None  # "$" also matches before a final newline
        size = len(piece)
        m = rx.search(piece)
        t = m.start() if m is not None else size
        rest = suffixes(i + 1, piece[t:], max(lo - t, 0))
        if rest is None or lo >= t:
            return rest
        head = suffixes(i + 1, piece[:t], lo)
        if head is None:
            return None
        whole_rest = rest[0]
        return [min(c + whole_rest, n + 1) for c in head[:-1]] + rest

    counts = suffixes(0, text[start:], 0)  # a suffix's count reads only the suffix
    if counts is None:
        return None
    return start + next(j for j, c in enumerate(counts) if c <= n)


# ---------------------------------------------------------------------------------- the encoding
def longest_prefix_within(enc: Encoding, window: str, n: int) -> int:
    """The largest ``k`` with ``count(window[:k]) <= n``, each candidate counted from the longest
    down (``count_till_limit``): the slower exact ``split_at`` over a window no longer prefix
    can fit in."""
    for k in range(len(window), 0, -1):
        if enc.count_till_limit(window[:k], n) is not None:
            return k
    return 0


def shortest_suffix_within(enc: Encoding, text: str, start: int, n: int) -> int:
    """The smallest ``k >= start`` with ``count(text[k:]) <= n``, from the longest candidate on:
    the mirror of ``longest_prefix_within`` for ``split_at_end``."""
    for k in range(start, len(text)):
        if enc.count_till_limit(text[k:], n) is not None:
            return k
    return len(text)


def longest_prefix_by_added(enc: HFEncoding, matcher: _Matcher, window: str, n: int) -> int | None:
    """``split_at`` of a window holding added tokens, cut at them (``HFEncoding._added_cut``).

    Leftmost-longest matching has no look-behind, so a prefix ``window[:k]`` is cut as the
    window is up to the end ``e`` of the last match that ends at or before ``k``, and from there
    as ``window[e:k]`` alone: ``count(window[:k]) = C(e) + count(window[e:k])``, where ``C(e)``
    adds 1 per match and the pipeline's count of each segment between matches. ``C`` only grows,
    so the answer lies between the end of the last match with ``C <= n`` and the end of the next
    one: up to that match's start, the segment's own ``split_at``; inside the match (a few
    characters), each end counted. None when a token read as text occurs (its match hides what
    it overlaps): the caller's slower path.
    """
    skip = enc._special_ids
    total = e = 0
    for m in matcher.rx.finditer(window):
        if matcher.by_text[m.group()].id in skip:
            return None
        s, end = m.span()
        more = (enc.count(window[e:s]) if s > e else 0) + 1
        if total + more <= n:
            total, e = total + more, end
            continue
        for k in range(end - 1, s, -1):
            if total + enc.count(window[e:k]) <= n:
                return k
        return e + enc.split_at(window[e:s], n - total)
    return e + enc.split_at(window[e:], n - total)


def shortest_suffix_by_added(
    enc: HFEncoding, matcher: _Matcher, text: str, start: int, n: int
) -> int | None:
    """``split_at_end`` over ``text[start:]`` holding added tokens, the mirror of
    ``longest_prefix_by_added``.

    The cut of a suffix ``text[k:]`` starts at the first position ``s >= k`` where a token
    starts (the longest one there, ending at ``E(s)``; ``S`` is every such position, found by
    one overlapped search), so ``count(text[k:]) = P(text[k:s]) + 1 + count(text[E(s):])``, P
    the pipeline's count of a text without added tokens. ``count(text[E(s):])`` is filled in
    for every ``s`` from the right (each from the next ``S`` after ``E(s)``; a segment counted
    from at most as many starts as a token has characters). The candidates ``k`` between two
    positions of ``S`` share ``s``: the first stretch with a ``k`` that fits gives the answer,
    by that stretch's own ``split_at_end``. None when a token read as text occurs.
    """
    window = text[start:]
    skip = enc._special_ids
    ends: dict[int, int] = {}
    for m in matcher.rx.finditer(window, overlapped=True):
        if matcher.by_text[m.group()].id in skip:
            return None
        ends[m.start()] = m.end()
    starts = list(ends)  # ascending
    rest = {len(window): 0}  # count(window[y:]) for y = E(s)
    for y in sorted(set(ends.values()), reverse=True):
        if y in rest:
            continue
        j = bisect.bisect_left(starts, y)
        if j == len(starts):
            rest[y] = enc.count(window[y:])
            continue
        s = starts[j]
        rest[y] = (enc.count(window[y:s]) if s > y else 0) + 1 + rest[ends[s]]
    lo = 0
    for s in starts:
        room = n - 1 - rest[ends[s]]
        if room >= 0:
            return start + (s if s == lo else lo + enc.split_at_end(window[lo:s], room))
        lo = s + 1
    return start + lo + enc.split_at_end(window[lo:], n)


class HFEncoding(Encoding):
    """An ``Encoding`` whose text goes through a `tokenizers` pipeline before the compiled BPE.

    Stages run in Python over the ``regex`` module (each linear in its input, lazily); every
    piece is encoded by the compiled core. Every operation is exact; those that need the
    pre-tokenizer's horizon take the compiled path on text the pipeline leaves alone and the
    slower exact path otherwise (module docstring).
    """

    def __init__(
        self,
        name: str,
        vocab: Vocab,
        *,
        normalizer,
        stages: list[_Stage],
        added: list[_Added],
        whole: dict[bytes, int],
        pattern: str | None = None,
        missing: bytes = b"",
    ) -> None:
        specials = {a.content: a.id for a in added if a.special}
        super().__init__(name, None, None, specials, vocab=vocab)
        self._normalizer = normalizer
        self._stages = stages
        self._whole = whole
        # A pre-tokenizer that is one regex split (Qwen2: NFC, then one Split): each segment
        # between added tokens goes whole to a compiled encoder with that pattern (its scanner
        # or the regex fallback) instead of through the Python stages.
        self._segment_core = (
            BacktrackEncoder(vocab, pattern) if pattern is not None and not whole else None
        )
        self._raw = _Matcher([(a.content, a) for a in added if not a.normalized])
        norm = normalizer or (lambda s: s)
        self._normed = _Matcher([(norm(a.content), a) for a in added if a.normalized])
        self._special_ids = frozenset(specials.values())
        self._added_ids = {a.content: a.id for a in added}
        self._strips = any(a.lstrip or a.rstrip for a in added)
        self._special_bytes = {a.id: a.content.encode("utf-8") for a in added}
        for data, tid in whole.items():
            self._special_bytes.setdefault(tid, data)
        # Bytes without a token (``_model``): removed from each piece before BPE, as
        # `tokenizers` drops them; texts holding none take the usual paths.
        self._missing = missing
        self._dropping = _dropped_chars(missing)
        # Falcon's one regex holds on text without a character its later stages cut inside.
        self._byte_cut = _FALCON_BYTE_CUT if pattern == _FALCON_PATTERN else None
        self.max_token_value = max([vocab.max_id - len(missing), *self._special_bytes])

    # --------------------------------------------------------------- the pipeline
    def _pieces(
        self, text: str, skip: frozenset[int], segments: bool = True
    ) -> Iterable[str | int]:
        """Pieces of text to encode (str) and added-token ids (int), in order; with
        ``segments`` and a one-regex pre-tokenizer, whole segments for the segment core."""
        norm = self._normalizer
        for seg, tid in self._raw.cut(text, skip):
            if tid is not None:
                yield tid
                continue
            if norm is not None:
                seg = norm(seg)
            for part, pid in self._normed.cut(seg, skip):
                if pid is not None:
                    yield pid
                    continue
                if not part:
                    continue
                if segments and self._segment_core is not None:
                    if self._cut_inside(part):
                        yield from self._word_runs(part)
                    else:
                        yield part
                    continue
                pieces = [part]
                for stage in self._stages:
                    pieces = stage(pieces)
                yield from pieces

    def _word_runs(self, part: str) -> Iterator[str | bytes]:
        """``part``, which the stages cut inside some character, in runs of its words
        (``_FALCON_WORD_CUT``): a run with no such character whole (for the one regex), the
        others through the stages."""
        words = _FALCON_WORD_CUT.split(part)
        for inside, run in itertools.groupby(words, key=self._cut_inside):
            chunk = "".join(run)
            if not inside:
                yield chunk
                continue
            pieces: Iterable[str | bytes] = [chunk]
            for stage in self._stages:
                pieces = stage(pieces)
            yield from pieces

    def _run(
        self,
        text: str,
        skip: frozenset[int],
        count_only: bool,
        limit: int | None = None,
        num_threads: int = 1,
    ):
        """Ids of ``text`` (or their number); with ``limit``, None as soon as the count passes it.
        ``num_threads`` serves the one compiled call (``Encoding.count``)."""
        text = _valid(text)
        dropping = self._dropping is not None and self._dropping.search(text) is not None
        staged = dropping or self._cut_inside(text)
        if self._segment_core is not None and not staged and self._untouched(text, True):
            core = self._segment_core  # the pipeline is the identity: one compiled call
            if not count_only:
                return _encode_long(core, text, num_threads)
            if limit is None:
                return _count_long(core, text, num_threads)
            return core.count_till_limit(text, limit)
        core = self._core if dropping else self._segment_core or self._core
        whole = self._whole
        out: list[int] = []
        total = 0
        for piece in self._pieces(text, skip, not dropping):
            if dropping and type(piece) is str and self._dropping.search(piece):
                piece = piece.encode("utf-8")
            if type(piece) is bytes:  # split after ByteLevel, or holding a dropped byte
                tid = whole.get(piece) if whole else None
                ids = [tid] if tid is not None else self._piece_ids(piece)
                total += len(ids)
                if limit is not None and total > limit:
                    return None
                if not count_only:
                    out += ids
                continue
            if type(piece) is int or whole:
                tid = piece if type(piece) is int else whole.get(piece.encode("utf-8"))
                if tid is not None:
                    total += 1
                    if limit is not None and total > limit:
                        return None
                    out.append(tid)
                    continue
            if count_only:
                if limit is None:
                    total += core.count(piece)
                    continue
                more = core.count_till_limit(piece, limit - total)
                if more is None:
                    return None
                total += more
            else:
                out += core.encode(piece)
        return total if count_only else out

    def _piece_ids(self, data: bytes) -> list[int]:
        """BPE of one piece's bytes, without those the vocab has no token for."""
        if self._missing:
            data = data.translate(None, self._missing)
        return self._core.encode_single_piece(data) if data else []

    def encode_ordinary(self, text: str) -> list[int]:
        """`tokenizers`' ``encode(text, add_special_tokens=False)`` with special tokens read as text."""
        return self._run(text, self._special_ids, False)

    def count(self, text: str, *, num_threads: int = 1) -> int:
        """``num_threads`` > 1 cuts a long text on threads as ``Encoding.count`` does when the
        pipeline is one compiled call (a one-regex pre-tokenizer, on text it leaves as it is)."""
        return self._run(text, self._special_ids, True, num_threads=num_threads)

    def encode(
        self, text: str, *, allowed_special=frozenset(), disallowed_special="all"
    ) -> list[int]:
        """As ``Encoding.encode``; allowed special tokens are cut out with their file's flags."""
        return self.encode_long(
            text,
            num_threads=1,
            allowed_special=allowed_special,
            disallowed_special=disallowed_special,
        )

    def encode_long(
        self,
        text: str,
        *,
        num_threads: int = 2,
        allowed_special=frozenset(),
        disallowed_special="all",
    ) -> list[int]:
        """``encode`` on up to ``num_threads`` threads where ``count`` takes them."""
        allowed = self._check_special(text, allowed_special, disallowed_special)
        skip = self._special_ids - {self.special_tokens[s] for s in allowed}
        return self._run(text, frozenset(skip), False, num_threads=num_threads)

    def encode_to_buffer(self, text: str, *, allowed_special=frozenset(), disallowed_special="all"):
        import array

        return array.array(
            "I",
            self.encode(
                text, allowed_special=allowed_special, disallowed_special=disallowed_special
            ),
        )

    def encode_batch(
        self,
        texts: Sequence[str],
        *,
        num_threads: int = 8,
        allowed_special=frozenset(),
        disallowed_special="all",
    ) -> list[list[int]]:
        return [
            self.encode(t, allowed_special=allowed_special, disallowed_special=disallowed_special)
            for t in texts
        ]

    def encode_ordinary_batch(
        self, texts: Sequence[str], *, num_threads: int = 8
    ) -> list[list[int]]:
        return [self.encode_ordinary(t) for t in texts]

    def count_batch(self, texts: Sequence[str], *, num_threads: int = 8) -> list[int]:
        return [self.count(t) for t in texts]

    def encode_single_token(self, text_or_bytes: str | bytes) -> int:
        if isinstance(text_or_bytes, str) and text_or_bytes in self._added_ids:
            return self._added_ids[text_or_bytes]
        data = text_or_bytes.encode("utf-8") if isinstance(text_or_bytes, str) else text_or_bytes
        if data in self._whole:
            return self._whole[data]
        return super().encode_single_token(data)

    # --------------------------------------------------------------- exact operations
    # Two paths (module docstring, "Exact operations"): a text the pipeline leaves as it is (no
    # added token in it, no character the normalizer could change) under a one-regex
    # pre-tokenizer goes to the compiled operations of the plain encoding with that pattern;
    # anything else is answered from the definitions, by counting candidate slices.
    def count_till_limit(self, text: str, limit: int) -> int | None:
        """``count(text)`` if at most ``limit``, else None.

        The pre-tokenizer stages and BPE stop soon after the count passes ``limit``; the
        normalizer and the added-token search still read each segment whole.
        """
        if limit < 0:
            return None
        return self._run(text, self._special_ids, True, limit)

    def _plain(self) -> Encoding | None:
        """The plain encoding with this one's pattern and vocab (no normalizer, no added tokens),
        for the texts on which the pipeline is that encoding; None when it has no one pattern."""
        if self._segment_core is None or (
            self._normalizer is not None and self._normalizer.forms is None
        ):
            return None
        plain = self.__dict__.get("_plain_encoding")
        if plain is None:
            pattern = self._segment_core.pattern
            plain = self.__dict__["_plain_encoding"] = Encoding(
                self.name,
                None,
                {_FALCON_PATTERN: _FALCON_REGEX, _STARCODER_PATTERN: _STARCODER_REGEX}.get(
                    pattern, pattern
                ),
                {},
                vocab=self._vocab,
            )
        return plain

    def _no_added(self, text: str) -> bool:
        """Whether no added token's text (as matched, raw or normalized) occurs in ``text``."""
        return not self._raw.search(text) and not self._normed.search(text)

    def _cut_inside(self, text: str) -> bool:
        """Whether the stages cut ``text`` inside a character, where the one regex cannot."""
        return (
            self._byte_cut is not None
            and not text.isascii()
            and self._byte_cut.search(text.encode("utf-8", "surrogatepass")) is not None
        )

    def _untouched(self, text: str, kept: bool = False) -> bool:
        """Whether the pipeline before the one-regex split is the identity on ``text``: no added
        token's text in it and a normalizer of Unicode forms (or none) under which it is already
        normalized (``unicodedata.is_normalized``, a C-speed quick check). ``kept``: the caller
        has found no dropped byte's character and nothing the stages cut inside already."""
        if not kept and (
            (self._dropping is not None and self._dropping.search(text)) or self._cut_inside(text)
        ):
            return False
        norm = self._normalizer
        if norm is not None and (
            norm.forms is None
            or not (text.isascii() or all(unicodedata.is_normalized(f, text) for f in norm.forms))
        ):
            return False
        return self._no_added(text)

    def _none_cut(self, text: str) -> bool:
        """Whether ``count`` cuts no added token out of ``text`` or any slice of it: no
        non-special added token's text occurs (special tokens' texts are read as text by
        ``count``, and so by split_at, split_at_end, interval counts and the counters)."""
        cut = self.__dict__.get("_cut_matchers")
        if cut is None:
            cut = self.__dict__["_cut_matchers"] = tuple(
                _Matcher([(t, a) for t, a in m.by_text.items() if not a.special])
                for m in (self._raw, self._normed)
            )
        return not cut[0].search(text) and not cut[1].search(text)

    def _left_alone(self, text: str) -> bool:
        """Whether the pipeline runs every slice of ``text`` as the plain encoding would (as
        ``count`` runs it): no added token is cut out of it (``_none_cut``) and the normalizer
        changes none of its slices."""
        if not self._none_cut(text) or (self._dropping is not None and self._dropping.search(text)):
            return False
        if self._cut_inside(text):
            return False
        norm = self._normalizer
        return norm is None or text.isascii() or _not_inert(norm.forms).search(text) is None

    def _added_cut(self, window: str) -> _Matcher | None:
        """The matcher whose added tokens ``count`` cuts out of ``window`` when ``split_at`` /
        ``split_at_end`` may cut it at them (``longest_prefix_by_added``), else None: no token
        strips the whitespace around it or needs a whole word (both read the text around the
        match), and the other level's non-special tokens occur nowhere in the window (special
        tokens' texts are read as text); the normalized ones are matched only where the
        normalizer leaves every slice as it is, so that their offsets are the text's."""
        if self._strips or any(
            a.single_word for m in (self._raw, self._normed) for a in m.by_text.values()
        ):
            return None
        self._none_cut("")  # builds the matchers of the non-special tokens
        cut_raw, cut_normed = self.__dict__["_cut_matchers"]
        raw_found = cut_raw.search(window)
        if raw_found and cut_normed.rx is None:
            return self._raw
        norm = self._normalizer
        if norm is not None and (
            norm.forms is None
            or not (window.isascii() or _not_inert(norm.forms).search(window) is None)
        ):
            return None
        normed_found = cut_normed.search(window)
        if raw_found != normed_found:
            return self._raw if raw_found else self._normed
        return None

    def _as_stages(self, text: str) -> bool:
        """Whether ``text`` and all its slices are counted by the stages and BPE alone: no added
        token cut out of it (``_none_cut``), no character the pipeline drops (a byte the vocab lacks) and a
        normalizer (if any) that changes none of its slices."""
        if self._dropping is not None and self._dropping.search(text) is not None:
            return False
        norm = self._normalizer
        if norm is None:
            return self._none_cut(text)
        return norm.forms is not None and self._left_alone(text)

    def _count_from(self, first: int, text: str, limit: int) -> int | None:
        """The count of ``text`` through the stages from ``first`` on and BPE, None once it
        passes ``limit`` (a piece that is a whole vocab token with ``ignore_merges`` counts 1)."""
        pieces: Iterable[str] = [text]
        for stage in self._stages[first:]:
            pieces = stage(pieces)
        core, whole = self._core, self._whole
        total = 0
        for piece in pieces:
            if type(piece) is bytes:  # after ByteLevel (Falcon's last two stages follow it)
                tid = whole.get(piece) if whole else None
                total += 1 if tid is not None else len(self._piece_ids(piece))
                if total > limit:
                    return None
                continue
            if whole and piece.encode("utf-8") in whole:
                total += 1
                if total > limit:
                    return None
                continue
            more = core.count_till_limit(piece, limit - total)
            if more is None:
                return None
            total += more
        return total

    def _token_span(self) -> int | None:
        """(4x) the most input weight one token can stand for (``_weight4``), or None when a
        token can stand for any amount of text (a normalizer that deletes, a ``Removed`` split,
        an added token that strips the whitespace around it)."""
        if "_span4" in self.__dict__:
            return self.__dict__["_span4"]
        norm = self._normalizer
        added_texts = [*self._raw.by_text, *self._normed.by_text]  # as matched: normalized
        span: int | None = 4 * max(
            [
                self._vocab.max_token_len,
                *map(len, self._whole),
                *(len(t.encode("utf-8")) for t in added_texts),
            ]
        )
        if (
            (norm is not None and norm.shrink == "any")
            or any(getattr(stage, "removes", True) for stage in self._stages)
            or self._strips
        ):
            span = None
        self.__dict__["_span4"] = span
        return span

    def _weight4(self, char: str) -> int:
        """4x a lower bound on the bytes ``char`` leaves after the normalizer: its UTF-8 bytes
        without one; with Unicode forms, one byte for ASCII and a quarter of its bytes for any
        other character (a composition keeps at least that, NFKC's "𝐀" -> "A" exactly that);
        none for a character holding a byte the vocab has no token for (dropped)."""
        if self._dropping is not None and self._dropping.match(char):
            return 0
        if char < "\x80":
            return 4
        size = len(char.encode("utf-8"))
        norm = self._normalizer
        return size if norm is not None and norm.shrink == "nf" else 4 * size

    def _weighs_4(self, text: str) -> bool:
        """Whether every character of ``text`` weighs 4 (``_weight4``): ASCII, none dropped."""
        return text.isascii() and (self._dropping is None or self._dropping.search(text) is None)

    def split_at(self, text: str, n: int) -> int:
        """The largest character offset ``k`` with ``count(text[:k]) <= n``.

        Every token stands for at most ``_token_span`` of input, so no prefix heavier than
        ``n`` tokens' worth can fit: only the prefixes up to there are candidates. On a text the
        pipeline leaves alone, the compiled ``split_at`` of the plain encoding answers; else each
        candidate is counted (``count_till_limit``): slower, and as exact.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        text = _valid(text)
        span = self._token_span()
        stop = len(text)
        if span is not None and self._weighs_4(text[: n * span // 4 + 1]):
            stop = min(stop, n * span // 4)  # 4 per ASCII character: the loop below, at once
        elif span is not None:
            weight, cap = 0, n * span
            for k, char in enumerate(text):
                weight += self._weight4(char)
                if weight > cap:
                    stop = k
                    break
        window = text[:stop]
        bound = self._run_bound(window)
        if bound is not None:
            found, stop = bound.fits_prefix(self, n)
            if found is not None:
                return found
            window = window[:stop]  # no longer prefix fits
        plain = self._plain()
        if plain is not None and plain._core.kind != _PAT_REGEX and self._left_alone(window):
            return plain.split_at(window, n)
        if self._as_stages(window):
            return longest_prefix_by_horizon(self._stages, window, n, self._count_from, bound)
        matcher = self._added_cut(window)
        if matcher is not None:
            found = longest_prefix_by_added(self, matcher, window, n)
            if found is not None:
                return found
        return longest_prefix_within(self, window, n)

    def split_at_end(self, text: str, n: int) -> int:
        """The smallest character offset ``k`` with ``count(text[k:]) <= n`` (keep the tail).

        The mirror of ``split_at``: candidates are the suffixes up to ``n`` tokens' worth of input.
        """
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        text = _valid(text)
        span = self._token_span()
        start = 0
        if span is not None and self._weighs_4(text[max(0, len(text) - n * span // 4 - 1) :]):
            start = max(0, len(text) - n * span // 4)  # 4 per ASCII character, as below
        elif span is not None:
            weight, cap = 0, n * span
            for k in range(len(text) - 1, -1, -1):
                weight += self._weight4(text[k])
                if weight > cap:
                    start = k + 1
                    break
        window = text[start:]
        bound = self._run_bound(window)
        if bound is not None:
            found, skip = bound.fits_suffix(self, n)
            if found is not None:
                return start + found
            start += skip  # no suffix starting before fits
            window = text[start:]
        plain = self._plain()
        if plain is not None and plain._core.kind != _PAT_REGEX and self._left_alone(window):
            return start + plain.split_at_end(window, n)
        if self._as_stages(window):
            k = shortest_suffix_by_horizon(self._stages, text, start, n, self._count_from)
            if k is not None:
                return k
        matcher = self._added_cut(window)
        if matcher is not None:
            k = shortest_suffix_by_added(self, matcher, text, start, n)
            if k is not None:
                return k
        return shortest_suffix_within(self, text, start, n)

    def _run_bound(self, window: str) -> RunBound | None:
        """The ``RunBound`` of a text whose encodings spell its own bytes in vocab and added
        tokens: None when the normalizer may change a slice of it, a byte of it is dropped, an
        added token strips whitespace, or a piece may be one whole token the vocab does not
        hold (``ignore_merges``)."""
        if self._whole or self._strips:
            return None
        if self._dropping is not None and self._dropping.search(window) is not None:
            return None
        norm = self._normalizer
        if norm is not None and (
            norm.forms is None
            or not (window.isascii() or _not_inert(norm.forms).search(window) is None)
        ):
            return None
        added = self.__dict__.get("_added_bytes")
        if added is None:
            texts = [*self._raw.by_text, *self._normed.by_text, *self._added_ids]
            added = self.__dict__["_added_bytes"] = sorted({t.encode("utf-8") for t in texts})
        memo = self.__dict__.setdefault("_run_longest", {})
        return RunBound(self._vocab, window, memo, added)

    def interval_counter(self, text: str, *, piece_tables: bool = True):
        """Counter of ``count(text[i:j])``: the compiled ``IntervalCounter`` of the plain encoding
        when the pipeline leaves ``text`` alone, else one that counts each queried slice."""
        text = _valid(text)
        plain = self._plain()
        if plain is not None and self._left_alone(text):
            counter = plain.interval_counter(text, piece_tables=piece_tables)
            return _OwnedCounter(counter, self, "interval", (text, piece_tables))
        return _SliceCounter(self, text, piece_tables)

    def _plain_appender(self, plain: Encoding):
        """The plain encoding's appending counter: compiled for a scanner pattern, else
        ``_RegexAppender`` when ``_Reach`` reads the pattern, else None."""
        if plain._core.kind != _PAT_REGEX:
            return plain.appendable_counter()
        reach = self.__dict__.get("_plain_reach", 0)
        if reach == 0:
            try:
                reach = _Reach(plain.pattern)
            except _NoReach:
                reach = None
            self.__dict__["_plain_reach"] = reach
        return None if reach is None else _RegexAppender(plain, reach)

    def _plain_prepender(self, plain: Encoding):
        """The plain encoding's prepending counter: compiled for a scanner pattern, else
        ``_RegexPrepender`` when ``_Reach`` reads the pattern, else None."""
        if plain._core.kind != _PAT_REGEX:
            return plain.prependable_counter()
        self._plain_appender(plain)  # finds the pattern's _Reach
        reach = self.__dict__["_plain_reach"]
        return None if reach is None else _RegexPrepender(plain, reach)

    def _streaming(self, prepend: bool):
        plain = self._plain()
        if plain is None:
            return _PrependCounter(self) if prepend else _RecountingCounter(self)
        if prepend:
            if self._plain_prepender(plain) is None:
                return _PrependCounter(self)
            matcher = self._cut_matcher()
            if matcher is not None:
                return _CutPrepender(
                    self, matcher, lambda: self._plain_prepender(plain), self._clean_chars
                )
            fast = self._plain_prepender(plain)
        else:
            if self._plain_appender(plain) is None:
                return _RecountingCounter(self)
            matcher = self._cut_matcher()
            if matcher is not None:
                return _CutAppender(
                    self, matcher, lambda: self._plain_appender(plain), self._clean_chars
                )
            fast = self._plain_appender(plain)
        texts = [*self._raw.by_text, *self._normed.by_text]
        context = max(map(len, texts), default=1) - 1
        return _GuardedCounter(self, fast, self._left_alone, context, prepend)

    def _cut_matcher(self) -> _Matcher | None:
        """The matcher ``_CutAppender`` cuts a stream with: the one of raw and normalized added
        tokens that holds a non-special token when the other holds none, and no token strips
        whitespace or needs a whole word (both read the text around a match)."""
        if self._strips or any(
            a.single_word for m in (self._raw, self._normed) for a in m.by_text.values()
        ):
            return None
        # A level whose tokens are all special cuts nothing out for ``count`` (their texts are
        # read as text, and hide only overlapping tokens of their own level)
        kept = [
            m for m in (self._raw, self._normed) if any(not a.special for a in m.by_text.values())
        ]
        return kept[0] if len(kept) == 1 else None

    def _clean_chars(self, text: str) -> bool:
        """Whether the pipeline before the added-token cut leaves every character of ``text``
        as it is: nothing the normalizer could change, no dropped byte, nothing the stages cut
        inside (each a property of single characters)."""
        if self._dropping is not None and self._dropping.search(text):
            return False
        if self._cut_inside(text):
            return False
        norm = self._normalizer
        return (
            norm is None
            or text.isascii()
            or (norm.forms is not None and _not_inert(norm.forms).search(text) is None)
        )

    def appendable_counter(self):
        """A counter whose ``push(s)`` appends ``s`` and returns the count of all text so far:
        the plain encoding's compiled counter while the pipeline leaves the text alone (each
        push checks its new characters, ``_GuardedCounter``), or, with added tokens in the
        pipeline, the text cut at them as it grows (``_CutAppender``); the pipeline's count of
        the text per push once the text is not left alone (quadratic from there: the counter
        stays in that mode, ``recounting``). Pushes are taken as the compiled counter takes
        them (``PushedText``): bytes may stop inside a character, a str may not follow them."""
        return self._streaming(False)

    def prependable_counter(self):
        """A counter whose ``push(s)`` puts ``s`` in front and returns the count of all text so
        far: compiled while the pipeline leaves the text alone, then recounting per push."""
        return self._streaming(True)

    def _refuse(self, op: str):
        raise NotImplementedError(
            f"{op} is not available for {self.name!r}: its tokenizer.json needs the general pipeline "
            "(normalizer, chained pre-tokenizers or added tokens), which a rank file cannot hold"
        )

    def save_tiktoken(self, path) -> str:
        self._refuse("save_tiktoken")

    def save_hf(self, path) -> str:
        self._refuse("save_hf")


class _OwnedCounter:
    """A compiled counter that pickles with its pipeline encoding (the plain one is private)."""

    __slots__ = ("_counter", "_enc", "_kind", "_state")

    def __init__(self, counter, enc: HFEncoding, kind: str, state: tuple) -> None:
        self._counter, self._enc, self._kind, self._state = counter, enc, kind, state

    def __getattr__(self, name: str):
        return getattr(self._counter, name)

    def __len__(self) -> int:
        return len(self._counter)

    @property
    def compiled(self):
        """The compiled counter itself (the chunker calls it from C)."""
        return self._counter

    def __reduce__(self):
        return (_rebuild_counter, (self._enc, self._kind, self._state))


class _SliceCounter:
    """``count(text[i:j])`` for a pipeline encoding, by counting the slice (each answer kept)."""

    def __init__(self, enc: HFEncoding, text: str, piece_tables: bool = True) -> None:
        self._enc = enc
        self.text = text
        self._piece_tables = piece_tables
        self._memo: dict[tuple[int, int], int] = {}
        self._total: int | None = None

    def __len__(self) -> int:
        return len(self.text)

    @property
    def total(self) -> int:
        if self._total is None:
            self._total = self.count(0, len(self.text))
        return self._total

    def count(self, start: int, end: int) -> int:
        if not 0 <= start <= end <= len(self.text):
            raise IndexError(f"interval [{start}, {end}) is not within [0, {len(self.text)}]")
        key = (start, end)
        found = self._memo.get(key)
        if found is None:
            if len(self._memo) >= 4096:
                self._memo.clear()
            found = self._memo[key] = self._enc.count(self.text[start:end])
        return found

    def count_many(self, ranges: Iterable[tuple[int, int]]) -> list[int]:
        return [self.count(a, b) for a, b in ranges]

    def memory_bytes(self) -> int:
        return len(self.text.encode("utf-8")) + 100 * len(self._memo)

    def __reduce__(self):
        return (_rebuild_counter, (self._enc, "interval", (self.text, self._piece_tables)))


class _GuardedCounter:
    """A streaming counter that runs the compiled one while the text stays ``clean`` and
    recounts after: for encodings that equal a compiled encoding on clean text (Llama 3's on
    text spelling none of its whole-piece tokens, a pipeline on text it leaves alone).

    Each push checks only the new characters with ``context`` characters of the old text beside
    them (what a token's text or a rule may straddle), so a stream that stays clean costs what
    the compiled counter costs: 1 MB pushed a character at a time stays linear. The first push
    that is not clean hands the whole text to the recounting counter, which counts the text
    per push from then on (exact; quadratic in the stream's length)."""

    def __init__(self, enc: Encoding, fast, clean: Callable[[str], bool], context: int,
                 prepend: bool) -> None:  # fmt: skip
        self._enc = enc
        self._fast = fast
        self._clean = clean
        self._context = context
        self._prepend = prepend
        self._slow = None
        self._edge = ""  # the first (prepending) or last ``context`` characters of the text
        self._input = None if prepend else PushedText()  # what the compiled counter took, as text

    def push(self, data: str | bytes) -> int:
        if self._slow is not None:
            return self._slow.push(data)
        count = self._fast.push(data)  # refuses what the compiled counter refuses
        new = complete_text(data) if self._prepend else self._input.text(data)
        window = new + self._edge if self._prepend else self._edge + new
        if self._clean(window):
            if self._context:
                self._edge = window[: self._context] if self._prepend else window[-self._context :]
            return count
        text = self._fast.bytes + (b"" if self._prepend else self._fast.pending_bytes)
        self._slow = _PrependCounter(self._enc) if self._prepend else _RecountingCounter(self._enc)
        self._fast = None
        return self._slow.push(text)

    def extend(self, pieces: Iterable[str | bytes]) -> int:
        count = self.count
        for piece in pieces:
            count = self.push(piece)
        return count

    @property
    def count(self) -> int:
        return (self._slow or self._fast).count

    @property
    def bytes(self) -> bytes:
        return (self._slow or self._fast).bytes

    @property
    def text(self) -> str:
        return (self._slow or self._fast).text

    @property
    def pending_bytes(self) -> bytes:
        return b"" if self._prepend else (self._slow or self._fast).pending_bytes

    @property
    def recounting(self) -> bool:
        """Whether the text has left the compiled counter (each push recounts it)."""
        return self._slow is not None

    def __reduce__(self):
        kind = "prependable" if self._prepend else "appendable"
        return (_rebuild_counter, (self._enc, kind, (self.bytes + self.pending_bytes,)))


def _fixed_size(node) -> int:
    """A bound on what the bounded parts of a `_Reach` syntax tree can read: every class and
    lookahead, each repeat counted at its upper bound (an unbounded one at its lower bound + 1),
    every alternative added. On a run of one character longer than this, the pattern's match at
    the run's start is the same function of the run's length from one length to the next."""
    if node[0] == "cls":
        return 1
    if node[0] == "look":
        return _fixed_size(node[1])
    return sum(
        (hi if hi != _MANY else lo + 1) * _fixed_size(item)
        for seq in node[1]
        for item, lo, hi in seq
    )


class _Stream:
    """What the pipelines' streaming counters below share: the pushed text, kept as parts, and
    the pushes taken as the compiled counters take them (appending: ``PushedText``, a character
    may be cut across pushes but a str may not follow its first bytes; prepending: each push a
    str or complete UTF-8; a lone surrogate is U+FFFD). ``_slow``, once set, is the recounting
    counter that holds the text from then on."""

    _prepend = False
    _enc: Encoding | None = None
    _slow = None

    def _start(self) -> None:
        self._parts: list[str] = []  # prepending: the last pushed first in the text
        self._input = None if self._prepend else PushedText()
        self.count = 0

    def _decode(self, data: str | bytes) -> str:
        return complete_text(data) if self._prepend else self._input.text(data)

    def extend(self, pieces: Iterable[str | bytes]) -> int:
        for piece in pieces:
            self.push(piece)
        return self.count

    @property
    def text(self) -> str:
        if self._slow is not None:
            return self._slow.text
        if len(self._parts) > 1:
            self._parts = ["".join(reversed(self._parts) if self._prepend else self._parts)]
        return self._parts[0] if self._parts else ""

    @property
    def bytes(self) -> bytes:
        return self.text.encode("utf-8")

    @property
    def pending_bytes(self) -> bytes:
        if self._prepend:
            return b""
        return self._slow.pending_bytes if self._slow is not None else self._input.pending

    @property
    def recounting(self) -> bool:
        """Whether the text has left the fast path (each push recounts it)."""
        return self._slow is not None

    def __reduce__(self):
        if self._enc is None:
            raise TypeError("pickled through the encoding's counter")
        kind = "prependable" if self._prepend else "appendable"
        return (_rebuild_counter, (self._enc, kind, (self.bytes + self.pending_bytes,)))


class _RegexAppender(_Stream):
    """Appending counter of a plain encoding whose pattern has no scanner (run by `regex`):
    the pieces whose match attempt read less than the text (``_Reach.horizon``) are final and
    counted once; the others are cut again at each push. A last piece made of a short head and
    a long run of one character, which the pattern matches whole at two run lengths past
    everything its bounded parts can read (``_fixed_size``), takes more of that character
    without a re-cut: its count comes from a compiled counter of the piece alone. So 1 MB of
    one letter or of spaces pushed a character at a time stays linear; a long piece of mixed
    characters (a 1 MB word) is cut again per push."""

    def __init__(self, plain: Encoding, reach: _Reach) -> None:
        self._start()
        self._rx = regex.compile(plain.pattern)
        self._reach = reach
        self._bound = _fixed_size(reach.root) + 2
        self._piece = Encoding(plain.name, None, None, {}, vocab=plain._vocab)
        self._committed = 0  # the count of the final pieces, text[:f]
        self._tail = ""  # text[f:] (outside a run)
        self._run: tuple | None = None  # (head, char, run length, piece counter)
        self._runs_ok: dict[tuple[str, str], bool] = {}

    def push(self, data: str | bytes) -> int:
        new = self._decode(data)
        if not new:
            return self.count
        self._parts.append(new)
        if self._run is not None:
            head, char, m, counter = self._run
            k = len(new) - len(new.lstrip(char))
            if k:
                counter.push(new[:k])
                self._run = (head, char, m + k, counter)
                self.count = self._committed + counter.count
                new = new[k:]
                if not new:
                    return self.count
            self._tail = head + char * (m + k)
            self._run = None
        self._tail += new
        self._cut()
        return self.count

    def _cut(self) -> None:
        tail = self._tail
        n = len(tail)
        seen = _ReachText(tail)
        pieces = [m.span() for m in self._rx.finditer(tail)]
        if not pieces or pieces[0][0] != 0 or any(
            b != a2 for (_, b), (a2, _) in zip(pieces, pieces[1:])
        ) or pieces[-1][1] != n:  # fmt: skip
            # text the pattern does not match (no tokenizer pattern leaves any): no piece is
            # taken as final
            self.count = self._committed + self._piece_count(tail, pieces)
            return
        done = 0
        for a, b in pieces:
            if self._reach.horizon(seen, a) > n:  # the attempt read the end: not final
                break
            self._committed += self._piece.count(tail[a:b])
            done = b
        if done:
            tail = self._tail = tail[done:]
            pieces = [(a - done, b - done) for a, b in pieces if a >= done]
        self.count = self._committed + sum(self._piece.count(tail[a:b]) for a, b in pieces)
        if len(pieces) == 1 and len(tail) > self._bound + 16:
            char = tail[-1]
            m = len(tail) - len(tail.rstrip(char))
            head = tail[: len(tail) - m]
            if len(head) <= 8 and m > self._bound + 10 and self._run_stays_whole(head, char):
                counter = self._piece.appendable_counter()
                counter.push(tail)
                self._run = (head, char, m, counter)
                self._tail = ""

    def _run_stays_whole(self, head: str, char: str) -> bool:
        key = (head, char)
        found = self._runs_ok.get(key)
        if found is None:
            k = self._bound + len(head)
            found = all(
                (m := self._rx.match(head + char * j)) is not None and m.end() == len(head) + j
                for j in (k, k + 1)
            )
            self._runs_ok[key] = found
        return found

    def _piece_count(self, tail: str, pieces) -> int:
        return sum(self._piece.count(tail[a:b]) for a, b in pieces)


class _RegexPrepender(_Stream):
    """Prepending counter of a plain encoding whose pattern has no scanner (run by `regex`), the
    mirror of ``_RegexAppender``. Pushing in front never changes a suffix, and a suffix is cut
    from its start alone, so the count from every position once cut from stays true: a new
    front is cut, in a window of the text's first characters, up to the first piece end whose
    count is known. A first piece made of a long run of one character and a short tail, which
    the pattern keeps whole at two run lengths past its bounded parts (with what its attempt
    reads after it), takes more of that character in front without a re-cut: its count comes
    from a compiled counter of the piece alone. A long piece of mixed characters in front (a 1 MB
    word) is cut again per push."""

    _WINDOW = 2048
    _prepend = True

    def __init__(self, plain: Encoding, reach: _Reach) -> None:
        from array import array

        self._start()
        self._plain = plain
        self._rx = regex.compile(plain.pattern)
        self._reach = reach
        self._bound = _fixed_size(reach.root) + 2
        self._piece = Encoding(plain.name, None, None, {}, vocab=plain._vocab)
        self._size = 0
        self._suffix = array("q", [0])  # _suffix[d]: count of the last d characters, -1 unknown
        self._front = ""  # the text's first characters (at most 2 * _WINDOW, or more at need)
        self._run: tuple | None = None  # (char, d of the piece's end, piece counter)
        self._runs_ok: dict[tuple[str, str], bool] = {}

    def push(self, data: str | bytes) -> int:
        new = self._decode(data)
        if not new:
            return self.count
        self._parts.append(new)
        for i in range(len(new) - 1, -1, -1):
            char = new[i]
            self._size += 1
            self._front = char + self._front
            if len(self._front) > 2 * self._WINDOW:
                self._front = self._front[: self._WINDOW]
            run = self._run
            if run is not None and char == run[0]:
                run[2].push(char)
                self._suffix.append(run[2].count + self._suffix[run[1]])
                continue
            self._run = None
            self._suffix.append(-1)
            self._cut(i)
        self.count = self._suffix[-1]
        return self.count

    def _cut(self, pending: int) -> None:
        """Cut the text from the new front up to a piece end whose count is known (``pending``:
        characters of the last part not taken yet, in front of the text so far)."""
        suffix, size = self._suffix, self._size
        while True:
            front = self._front
            whole = len(front) == size
            seen = _ReachText(front)
            pieces: list[tuple[int, int]] = []
            done = False
            for m in self._rx.finditer(front):
                a, b = m.span()
                if a != (pieces[-1][1] if pieces else 0):
                    break  # text the pattern does not match
                if not whole and self._reach.horizon(seen, a) > len(front):
                    break  # the attempt read the window's end: widen it
                pieces.append((a, b))
                if suffix[size - b] >= 0:
                    done = True
                    break
            if done or (whole and pieces and pieces[-1][1] == size):
                break
            if whole:  # gaps the pattern does not match: the plain count, nothing recorded
                suffix[size] = self._plain.count(front)
                return
            self._front = self.text[pending:]  # every character from the front
        total = suffix[size - pieces[-1][1]]
        for a, b in reversed(pieces):
            total += self._piece.count(front[a:b])
            suffix[size - a] = total
        if len(self._front) > 2 * self._WINDOW:
            self._front = self._front[: max(self._WINDOW, 2 * pieces[0][1])]
        self._maybe_run(front, pieces[0][1])

    def _maybe_run(self, front: str, b: int) -> None:
        """Take the first piece front[:b] as a run when it is one (see the class docstring)."""
        piece = front[:b]
        char = piece[0]
        m = len(piece) - len(piece.lstrip(char))
        tail = piece[m:]
        if len(tail) > 8 or m <= self._bound + 16:
            return
        h = self._reach.horizon(_ReachText(front), 0)
        if h > len(front) and len(front) < self._size:
            return  # the attempt read past the window
        after = front[b:h]
        k = self._bound + len(tail) + len(after) + 2
        if m < k:
            return
        key = (char, tail + "\0" + after)
        found = self._runs_ok.get(key)
        if found is None:
            found = all(
                (mt := self._rx.match(char * j + tail + after)) is not None
                and mt.end() == j + len(tail)
                for j in (k, k + 1)
            )
            self._runs_ok[key] = found
        if found:
            counter = self._piece.prependable_counter()
            counter.push(piece)
            self._run = (char, self._size - b, counter)


class _CutAppender(_Stream):
    """Appending counter of a pipeline that cuts added tokens out of its text (GPT-NeoX's and
    MPT's runs of spaces), linear in the stream.

    Leftmost-longest matching reads nothing before a match, and a match at ``s`` (and that no
    match starts before it) is final once the text reaches ``s + L`` (L = the longest added
    token). So the count is ``C`` (the final part, up to ``e``: each segment between matches as
    the pipeline counts it alone, plus 1 per counted match) plus the rest from ``e``: the plain
    encoding's compiled counter holds ``text[e:]``, and while a match is not final yet, the
    rest is that counter's count where the match starts, 1, and the few characters after the
    match counted alone. Each push searches only the last L characters and its own, so 1 MB of
    spaces pushed a character at a time stays linear. Special tokens' texts are matched (they
    hide what they overlap, as in `tokenizers`) and stay in the segment as text. Text the
    normalizer could change or with a dropped byte moves the counter to recounting."""

    def __init__(self, enc: HFEncoding, matcher: _Matcher, segment, clean) -> None:
        self._start()
        self._enc = enc
        self._rx = matcher.rx
        self._by_text = matcher.by_text
        self._skip = enc._special_ids
        self._segment = segment  # a new appending counter of the plain encoding
        self._clean = clean
        self._longest = max(map(len, matcher.by_text))
        self._size = 0  # characters so far
        self._committed = 0  # C: the count of text[:e]
        self._e = 0  # end of the last counted match that is final (the segment's start)
        self._q = 0  # where the search resumes: after the last final match
        self._seg = segment()  # text[e:]
        self._seg_counts: dict[int, int] = {}  # position p -> count(text[e:p]), for recent p
        self._win = ""  # text[ws:]
        self._ws = 0

    def push(self, data: str | bytes) -> int:
        if self._slow is not None:
            self.count = self._slow.push(data)
            return self.count
        new = self._decode(data)
        if new and not self._clean(new):
            data = (self.text + new).encode("utf-8") + self._input.pending
            self._slow = _RecountingCounter(self._enc)
            self.count = self._slow.push(data)
            return self.count
        step = max(self._longest, 64)
        for i in range(0, len(new), step):
            self._take(new[i : i + step])
        return self.count

    def _take(self, new: str) -> None:
        old = p = self._size
        self._parts.append(new)
        self._size += len(new)
        for char in new:
            p += 1
            self._seg_counts[p] = self._seg.push(char)
        self._win += new
        self._scan(old)

    def _scan(self, old: int) -> None:
        """Find the matches the new text (after ``old``) may have made or moved: none starts
        before ``old - L + 1`` that was not there already."""
        size, longest, ws = self._size, self._longest, self._ws
        start = max(self._q, old - longest + 1)
        pending = None
        for m in self._rx.finditer(self._win, start - ws):
            s, t = m.start() + ws, m.end() + ws
            skipped = self._by_text[m.group()].id in self._skip
            if s + longest > size:  # not final: more text may move it
                if not skipped:
                    pending = (s, t)
                    break
                continue
            if skipped:
                self._q = t
                continue
            self._commit(s, t)
        e = self._e
        if pending is None:
            self.count = self._committed + self._seg.count
        else:
            s, t = pending
            before = self._seg_counts[s] if s > e else 0
            self.count = self._committed + before + 1 + self._enc.count(self._win[t - ws :])
        # the next search starts at or after size - L + 1 (and after q): nothing before that
        # is read again, matched or not (trimmed in steps, so each character is copied O(1) times)
        keep = max(size - longest - 64, 0)
        if keep - self._ws > longest + 64:
            self._win = self._win[keep - self._ws :]
            self._ws = keep
            for p in [p for p in self._seg_counts if p < keep]:
                del self._seg_counts[p]

    def _commit(self, s: int, t: int) -> None:
        """The counted match [s, t) is final: the segment before it and it join ``C``."""
        ws = self._ws
        before = self._seg_counts[s] if s > self._e else 0
        self._committed += before + 1
        self._e = self._q = t
        self._seg = self._segment()
        self._seg_counts = {}
        p = t
        for char in self._win[t - ws :]:
            p += 1
            self._seg_counts[p] = self._seg.push(char)


class _CutPrepender(_Stream):
    """Prepending counter of a pipeline that cuts added tokens out of its text (GPT-NeoX's and
    MPT's runs of spaces), linear in the stream: the mirror of ``_CutAppender``.

    Pushing in front never changes a suffix, and the cut of a suffix from ``x`` starts at the
    first position ``s >= x`` where a token starts, so ``T(x) = count(text[x:])`` is
    ``P(text[x:s]) + T(s)``, with ``T(s) = 1 + T(s + len)`` at a match. Each new front character
    is one match attempt over the first L characters (L = the longest token); ``T`` is kept for
    every position, and the segment before the first match lives in the plain encoding's
    compiled prepending counter. A special token's text (it hides what it overlaps) or text the
    normalizer could change moves the counter to recounting."""

    _prepend = True

    def __init__(self, enc: HFEncoding, matcher: _Matcher, segment, clean) -> None:
        from array import array

        self._start()
        self._enc = enc
        self._rx = matcher.rx
        self._by_text = matcher.by_text
        self._skip = enc._special_ids
        self._segment = segment  # a new prepending counter of the plain encoding
        self._clean = clean
        self._longest = max(map(len, matcher.by_text))
        self._suffix = array("q", [0])  # _suffix[d]: the count of the last d characters
        self._seg = segment()  # text[x:s]: from the front to the first match (or the end)
        self._seg_end = 0  # d of s
        self._front = ""  # the first L characters

    def push(self, data: str | bytes) -> int:
        if self._slow is not None:
            self.count = self._slow.push(data)
            return self.count
        new = self._decode(data)
        if not new:
            return self.count
        if not self._clean(new):
            return self._recount(new)
        suffix, longest = self._suffix, self._longest
        for i in range(len(new) - 1, -1, -1):
            front = (new[i] + self._front)[:longest]
            m = self._rx.match(front)
            d = len(suffix)  # the new front's distance from the end
            if m is not None:
                if self._by_text[m.group()].id in self._skip:
                    del suffix[d - (len(new) - 1 - i) :]  # the chars of ``new`` taken so far
                    return self._recount(new)
                suffix.append(1 + suffix[d - m.end()])
                self._seg = self._segment()
                self._seg_end = d
            else:
                suffix.append(self._seg.push(new[i]) + suffix[self._seg_end])
            self._front = front
        self._parts.append(new)
        self.count = suffix[-1]
        return self.count

    def _recount(self, new: str) -> int:
        text = new + self.text
        self._slow = _PrependCounter(self._enc)
        self.count = self._slow.push(text)
        return self.count


class _PrependCounter:
    """Prepending counter of a pipeline encoding: recounts the whole text per push (pushed bytes
    are complete UTF-8, as for the compiled ``PrependableCounter``)."""

    def __init__(self, enc: HFEncoding) -> None:
        self._enc = enc
        self.text = ""
        self.count = 0

    def push(self, data: str | bytes) -> int:
        self.text = complete_text(data) + self.text
        self.count = self._enc.count(self.text)
        return self.count

    @property
    def bytes(self) -> bytes:
        return self.text.encode("utf-8")

    def __reduce__(self):
        return (_rebuild_counter, (self._enc, "prependable", (self.bytes,)))


def load_hf(path: str | os.PathLike, *, name: str | None = None) -> Encoding:
    """An encoding from a Hugging Face ``tokenizer.json`` with a byte-level BPE model.

    ``encode_ordinary(text)`` equals `tokenizers`' ``encode(text, add_special_tokens=False)`` with
    ``encode_special_tokens=True``; ``encode(text, allowed_special="all")`` equals it without.
    A component that cannot be reproduced exactly raises VocabError naming it.
    """
    if name is None:
        name = os.path.basename(os.path.dirname(os.path.abspath(path))) or "hf"
    return _from_bytes(read_file(path), name, str(path))


def _from_bytes(data: bytes, name: str, source: str) -> Encoding:
    """``load_hf`` of a file's bytes; the encoding pickles as these bytes (by value), so its
    normalizer, stages, added tokens and rank -> id map all come back in the other process."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        line = getattr(e, "lineno", None)
        raise VocabError(f"{source}{':' + str(line) if line else ''}: not valid JSON: {e}") from e
    except RecursionError as e:
        raise VocabError(f"{source}: malformed tokenizer.json: JSON nested too deep") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise VocabError(f"{source}: no 'model' object")
    try:
        enc = _build(doc, name, source)
    except (TypeError, AttributeError, KeyError, IndexError) as e:
        raise VocabError(f"{source}: malformed tokenizer.json: {type(e).__name__}: {e}") from e
    enc.vocab_sha256 = hashlib.sha256(data).hexdigest()
    enc._reduce_as = (_from_bytes, (data, name, source))
    return enc


def _build(doc: dict, name: str, source: str) -> Encoding:
    ranked = _rank_file_encoding(doc, name, source)
    if ranked is not None:
        return ranked
    vocab, whole, ignore_merges, missing = _model(doc, source)
    added_list = doc.get("added_tokens") or []
    if not isinstance(added_list, list):
        raise VocabError(f"{source}: added_tokens is not a list")
    added = [_Added(a, source) for a in added_list]
    for a in added:
        if vocab.index_of(a.id) >= 0:
            raise VocabError(f"{source}: added token {a.content!r} reuses id {a.id} of a BPE token")
    normalizer = _normalizer(doc.get("normalizer"), source)
    pre = doc.get("pre_tokenizer")
    stages = _pre_tokenizer(pre, source)
    if not ignore_merges:
        whole = {}
    pattern = _single_pattern(pre)
    simple = (
        pattern is not None
        and pattern
        not in (
            _STARCODER_PATTERN,
            _DEEPSEEK_CODER_PATTERN,
            _DEEPSEEK_CODER_DIGITS_PATTERN,
            _DEEPSEEK_LLM_PATTERN,
        )  # one-pass split_at
        and pattern != _FALCON_PATTERN  # cuts inside characters the regex cannot
        and normalizer is None
        and not whole
        and not _possible(missing)
        and all(a.special and not (a.lstrip or a.rstrip or a.single_word) for a in added)
    )
    if simple:
        try:
            return Encoding(name, None, pattern, {a.content: a.id for a in added}, vocab=vocab)
        except ValueError as e:
            raise VocabError(f"{source}: {e}") from e
    return HFEncoding(
        name,
        vocab,
        normalizer=normalizer,
        stages=stages,
        added=added,
        whole=whole,
        pattern=pattern,
        missing=missing,
    )


def _rank_file_encoding(doc: dict, name: str, source: str) -> Encoding | None:
    """A rank file's conversion (``_rank_file``) with one regex, no normalizer and only special
    added tokens without flags: the whole-piece encoding of Meta's file (compiled count and
    encode, every exact operation), the file's ids kept. None for any other file."""
    pattern = _single_pattern(doc.get("pre_tokenizer"))
    added_list = doc.get("added_tokens") or []
    if (
        pattern is None
        or doc.get("normalizer") is not None
        or not isinstance(added_list, list)
        or doc["model"].get("ignore_merges") is not True
    ):
        return None
    added = [_Added(a, source) for a in added_list]
    if not all(a.special and not (a.lstrip or a.rstrip or a.single_word) for a in added):
        return None
    ranked = _rank_file(doc, source)
    if ranked is None:
        return None
    vocab, whole = ranked
    for a in added:
        if vocab.index_of(a.id) >= 0:
            raise VocabError(f"{source}: added token {a.content!r} reuses id {a.id} of a BPE token")
    try:
        return _whole_piece_encoding(name, vocab, pattern, {a.content: a.id for a in added}, whole)
    except ValueError as e:
        raise VocabError(f"{source}: {e}") from e


# ---------------------------------------------------------------------------------- rank files
# Llama 3's ranks (Meta's tokenizer.model through bpecore.llama, its tokenizer.json through
# ``_rank_file``, its GGUF through bpecore.gguf): reordered into merge order, whole-piece tokens.
def _bpe_last_merge(data: bytes, ranks: dict[bytes, float]) -> tuple[bytes, bytes] | None:
    """The last merge of tiktoken's BPE of ``data`` alone by ``ranks``; None if it is not one token."""
    parts = [data[i : i + 1] for i in range(len(data))]
    last = None
    while len(parts) > 1:
        best = None
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and (best is None or r < best[0]):
                best = (r, i)
        if best is None:
            return None
        i = best[1]
        last = (parts[i], parts[i + 1])
        parts[i : i + 2] = [parts[i] + parts[i + 1]]
    return last


def _reranked(ranks: dict[bytes, int], source: str) -> tuple[Vocab, dict[bytes, int]]:
    """(Vocab, whole-piece tokens) of a rank file whose ranks do not follow merge order.

    Llama 3's file appends 28,000 tokens to cl100k's, 81 of them ranked before a token they
    are merged from (``b".:.:"`` at 100,421 from ``b".:."``) and 588 that BPE never forms from
    their bytes, which tiktoken yields only when a whole piece is that token. The core needs
    every token after its parts: each moves to just after its later part (ties keep the file's
    order, repeated until BPE in the new order agrees) with the file's ids kept through the id
    map; unformable tokens go to a whole-piece table, as tiktoken's lookup does. Exactness is
    checked against tiktoken on the file in tests/bpecore/test_llama.py.
    """
    key: dict[bytes, float] = {t: float(r) for t, r in ranks.items()}
    check = [t for t in ranks if len(t) > 1]  # first pass: every token
    for _ in range(16):
        moved: list[bytes] = []
        order = sorted(ranks, key=key.__getitem__)
        current: dict[bytes, float] = {t: float(i) for i, t in enumerate(order)}
        for token in check:
            last = _bpe_last_merge(token, current)
            if last is None:
                continue
            later = max(key[last[0]], key[last[1]])
            if later >= key[token]:
                key[token] = later + 0.5 + ranks[token] / (4.0 * len(ranks))
                moved.append(token)
        if not moved:
            break
        # A token's BPE reads only the ranks of its substrings: recheck those holding a moved one.
        holds = re.compile(b"|".join(map(re.escape, moved)))
        check = [t for t in ranks if len(t) > 1 and holds.search(t)]
    else:
        raise VocabError(f"{source}: no merge order reproduces the file's BPE")
    order = sorted(ranks, key=key.__getitem__)
    try:
        vocab = Vocab({t: i for i, t in enumerate(order)})
        vocab._assign_ids([ranks[t] for t in order])
    except ValueError as e:
        raise VocabError(f"{source}: {e}") from e
    whole = {t: ranks[t] for i, t in enumerate(order) if not vocab.is_reachable(i)}
    return vocab, whole


class WholePieceEncoding(Encoding):
    """An ``Encoding`` whose vocab has tokens BPE never forms, found as whole pieces in the core
    (``Vocab.enable_whole_pieces``, as tiktoken looks a piece up before BPE): count, encode,
    count_till_limit and the batch calls are compiled and exact.

    The horizon tables count a piece's prefixes and suffixes by BPE alone, so they are exact only
    where no piece can spell a whole-piece token: on a text in which none of those tokens occurs
    (one search), ``split_at``, ``split_at_end`` and ``interval_counter`` run compiled; otherwise
    ``split_at`` / ``split_at_end`` take the pipeline encodings' one pass over the pattern's
    pieces (``hf.longest_prefix_by_horizon``) and interval counts count each queried slice,
    slower and as exact. The streaming counters are the compiled ones until the text spells such
    a token, then recount the text per push (``_GuardedCounter``).
    """

    _whole_rx: re.Pattern[bytes] | None = None

    def _spells_whole(self, text: str) -> bool:
        """Whether a whole-piece-only token occurs anywhere in ``text`` (so some piece of ``text``
        or of one of its slices may be that token)."""
        return (
            self._whole_rx is not None and self._whole_rx.search(text.encode("utf-8")) is not None
        )

    def _byte_window(self, chars, n: int) -> int:
        """How many of ``chars`` fit in ``n`` tokens' worth of bytes (a token covers at most
        ``max_token_len`` of them), so no longer prefix can count ``n`` or fewer."""
        cap, used = n * self._vocab.max_token_len, 0
        for k, char in enumerate(chars):
            used += len(char.encode("utf-8"))
            if used > cap:
                return k
        return len(chars)

    def split_at(self, text: str, n: int) -> int:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        text = _valid(text)
        window = text[: self._byte_window(text, n)]
        if not self._spells_whole(window):
            return super().split_at(window, n)
        return longest_prefix_by_horizon([self._stage()], window, n, self._count_from)

    def _stage(self):
        """The pattern as a pipeline stage (one Isolated split), for the horizon ``split_at``."""
        stage = self.__dict__.get("_split_stage")
        if stage is None:
            stage = self.__dict__["_split_stage"] = _split_stage(
                regex.compile(self.pattern), "Isolated", False
            )
        return stage

    def _count_from(self, first: int, text: str, limit: int) -> int | None:
        """``text`` counted through the pattern (``first`` 0) or as one piece (1), None once
        past ``limit``: a whole-piece token is looked up before BPE in both."""
        if first == 0:
            return self.count_till_limit(text, limit)
        core = self.__dict__.get("_piece_core")
        if core is None:
            core = self.__dict__["_piece_core"] = BacktrackEncoder(self._vocab, None)
        return core.count_till_limit(text, limit)

    def split_at_end(self, text: str, n: int) -> int:
        if n < 0:
            raise ValueError(f"n must be >= 0, got {n}")
        text = _valid(text)
        start = len(text) - self._byte_window(text[::-1], n)
        window = text[start:]
        if not self._spells_whole(window):
            return start + super().split_at_end(window, n)
        k = shortest_suffix_by_horizon([self._stage()], text, start, n, self._count_from)
        return shortest_suffix_within(self, text, start, n) if k is None else k

    def interval_counter(self, text: str, *, piece_tables: bool = True):
        text = _valid(text)
        if not self._spells_whole(text):
            return super().interval_counter(text, piece_tables=piece_tables)
        return _SliceCounter(self, text, piece_tables)

    def _streaming(self, prepend: bool) -> _GuardedCounter:
        fast = super().prependable_counter() if prepend else super().appendable_counter()
        longest = self.__dict__.get("_whole_longest")
        if longest is None:  # bytes of the longest whole-piece token: at most that many chars
            longest = self.__dict__["_whole_longest"] = max(
                (len(t) for t in self._vocab_whole_tokens()), default=1
            )
        return _GuardedCounter(
            self, fast, lambda text: not self._spells_whole(text), longest - 1, prepend
        )

    def _vocab_whole_tokens(self) -> list[bytes]:
        return self.__dict__.get("_whole_tokens", [])

    def appendable_counter(self):
        """The compiled appending counter while the text spells no whole-piece-only token
        (``_GuardedCounter``: each push checks its new characters), then a recount per push."""
        return self._streaming(False)

    def prependable_counter(self):
        """The compiled prepending counter while the text spells no whole-piece-only token, then
        a recount per push."""
        return self._streaming(True)

    def _refuse(self, op: str):
        raise NotImplementedError(
            f"{op} is not available for {self.name!r}: its vocab has tokens BPE never forms "
            "(a piece that spells one is that token), which a rank file cannot say"
        )

    def save_tiktoken(self, path) -> str:
        self._refuse("save_tiktoken")

    def save_hf(self, path) -> str:
        self._refuse("save_hf")


def _whole_piece_encoding(
    name: str, vocab: Vocab, pattern: str, specials: dict[str, int], whole: dict[bytes, int]
) -> Encoding:
    """The encoding of a reranked file: its unreachable tokens entered as whole pieces."""
    vocab.enable_whole_pieces()
    enc = WholePieceEncoding(name, None, pattern, specials, vocab=vocab)
    if whole:
        enc._whole_rx = re.compile(_trie_pattern(whole).encode("ascii"))
        enc.__dict__["_whole_tokens"] = list(whole)
    return enc

"""The hand-written pre-tokenizer scanners cut text exactly where the `regex` module does.

Oracle: ``regex.findall(PATTERN, text)``. Checked on every shared corpus (whole files), on every
code point in a few contexts, on generated text, and the character tables on every code point.
"""

from __future__ import annotations

import ctypes
import doctest
import gzip
import mmap
import os
import random
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest
import regex
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bpecore import pretokenize
from bpecore.pretokenize import (
    CL100K_PATTERN,
    DEEPSEEK3_PATTERN,
    LLAMA3_PATTERN,
    O200K_PATTERN,
    QWEN2_PATTERN,
    R50K_PATTERN,
    TEKKEN_PATTERN,
    _piece_ends_one_by_one,
    pattern_kind,
    piece_ends,
    split,
)

PATTERNS = {
    "cl100k": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
    "r50k": R50K_PATTERN,
    "llama3": LLAMA3_PATTERN,
    "qwen2": QWEN2_PATTERN,
    "tekken": TEKKEN_PATTERN,
    "deepseek3": DEEPSEEK3_PATTERN,
}
PATTERN_PARAMS = [pytest.param(p, id=name) for name, p in PATTERNS.items()]

CORPORA_DIR = Path(__file__).resolve().parents[3] / "shared" / "corpora"
CORPORA = sorted(p.name.split(".")[0] for p in CORPORA_DIR.glob("*.txt.gz"))

#: Every code point that can appear in valid UTF-8 (no surrogates).
CODE_POINTS = [chr(c) for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]

#: Flag bits of pretokenize._flags_table(), low to high.
PROPERTIES = [r"\p{Lu}", r"\p{Ll}", r"\p{Lt}", r"\p{Lm}", r"\p{Lo}", r"\p{M}", r"\p{N}", r"\s"]

#: Characters that decide where the patterns cut: every letter category, marks, digits of other
#: scripts and other N, apostrophes and contraction letters (U+017F folds to 's'), every \s
#: character plus the isspace()-only \x1c-\x1f, punctuation, '/', emoji.
ALPHABET = sorted(
    set(
        "abcdefstlmvrAZSTLMVRDE"
        "\u01c5\u01c8\u02b0\u02b1\u3005\u05d0\u4e2d\u0627\u00aa"  # Lt, Lm, Lo
        "\u0301\u0300\u0903\u20dd"  # Mn, Mc, Me
        "0123456789\u0661\uff11\u00b2\u2160\u00bd"  # Nd, No, Nl
        "'\u2019\u017f\u212a\u0130\u0131"
        "\t\n\r\x0b\x0c\x1c\x1d\x1e\x1f \x85\xa0\u1680\u2000\u200a\u2028\u2029\u202f\u205f\u3000"
        '.,;:!?"()-_/\\@#$%&*+=<>[]{}|~^`\u00a7\u2014'
        "\U0001f600\U0001f44d\u200d\ufe0f"
    )
)
#: Multi-character runs that exercise the contractions and the o200k backtracking.
CHUNKS = [
    "'s",
    "'S",
    "'t",
    "'T",
    "'ll",
    "'LL",
    "'lL",
    "'ve",
    "'VE",
    "'re",
    "'Re",
    "'d",
    "'D",
    "'m",
    "'M",
    "'\u017f",
    "\u2019s",
    "\u0301A",
    "A\u0301",
    "\u02b0A",
    "A\u02b0",
    "\u01c5a",
    "Ab",
    "aB",
    " \n",
    "\r\n",
    "\n\n",
    "  ",
    "123",
    "1234",
    " //",
    "\u00a0a",
    " 'll",
    "?\n/",
]

decisive_text = st.lists(
    st.one_of(st.sampled_from(ALPHABET), st.sampled_from(CHUNKS)), max_size=60
).map("".join)
#: Runs of one character (the scanners test ASCII runs 8 bytes at a time and remember positions
#: inside runs); tiktoken's "catastrophically repetitive" inputs are the extreme of this.
run_text = st.lists(st.tuples(st.sampled_from(ALPHABET), st.integers(1, 20)), max_size=12).map(
    lambda runs: "".join(ch * k for ch, k in runs)
)


@cache
def read_corpus(name: str) -> str:
    return gzip.decompress((CORPORA_DIR / f"{name}.1mb.txt.gz").read_bytes()).decode("utf-8")


def assert_same_pieces(pattern: str, text: str) -> None:
    expected = regex.findall(pattern, text)
    got = split(pattern, text)
    if got != expected:
        k = next(i for i, (a, b) in enumerate(zip(got + [None], expected + [None])) if a != b)
        raise AssertionError(
            f"piece {k} differs: scanner {got[k - 2 : k + 3]!r} regex {expected[k - 2 : k + 3]!r}"
        )


# --- pattern_kind -----------------------------------------------------------------------------


def test_pattern_kind():
    assert pattern_kind(CL100K_PATTERN) == pretokenize_kind("cl100k")
    assert len({pattern_kind(p) for p in PATTERNS.values()}) == 7
    assert pattern_kind(None) == 0
    assert pattern_kind(r"\w+|\s") == 1
    assert pattern_kind(CL100K_PATTERN + " ") == 1
    assert pattern_kind(R50K_PATTERN.encode()) == 1


def pretokenize_kind(name: str) -> int:
    kinds = {"cl100k": 2, "o200k": 3, "r50k": 4, "llama3": 5, "qwen2": 6, "tekken": 7}
    return {**kinds, "deepseek3": 8}[name]


@pytest.mark.parametrize("name", PATTERNS)
def test_pattern_kind_values(name):
    """The PatternKind values of pretokenize.pxd."""
    assert pattern_kind(PATTERNS[name]) == pretokenize_kind(name)


def test_patterns_are_tiktokens(monkeypatch):
    """The constants are the strings tiktoken's own encodings use (constructors run without files)."""
    pytest.importorskip("tiktoken")
    openai_public = pytest.importorskip("tiktoken_ext.openai_public")
    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", lambda *a, **k: {})
    monkeypatch.setattr(openai_public, "data_gym_to_mergeable_bpe_ranks", lambda *a, **k: {})
    assert openai_public.cl100k_base()["pat_str"] == CL100K_PATTERN
    assert openai_public.o200k_base()["pat_str"] == O200K_PATTERN
    assert openai_public.r50k_base()["pat_str"] == R50K_PATTERN
    assert openai_public.gpt2()["pat_str"] == R50K_PATTERN


def test_open_model_patterns_are_their_files():
    """LLAMA3_PATTERN is Meta's string, TEKKEN_PATTERN the shipped Tekken file's; QWEN2_PATTERN
    differs from Llama 3's only in its single digits."""
    import bpecore
    from bpecore.llama import LLAMA3_PATTERN as META_LLAMA3

    assert META_LLAMA3 == LLAMA3_PATTERN
    assert bpecore.get_encoding("tekken").pattern == TEKKEN_PATTERN
    assert bpecore.get_encoding("tekken")._core.kind == pattern_kind(TEKKEN_PATTERN) == 7
    assert QWEN2_PATTERN == LLAMA3_PATTERN.replace(r"\p{N}{1,3}", r"\p{N}")


# --- character tables ------------------------------------------------------------------------


def test_flags_table_every_code_point():
    """Each flag of each code point equals what `regex` matches (surrogates: no flags)."""
    text = "".join(CODE_POINTS)
    expected = bytearray(0x110000)
    for bit, prop in enumerate(PROPERTIES):
        for m in regex.finditer(prop + "+", text):
            for ch in m.group():
                expected[ord(ch)] |= 1 << bit
    table, ascii_table = pretokenize._flags_table()
    if table != expected:
        bad = [c for c in range(0x110000) if table[c] != expected[c]]
        raise AssertionError(
            f"{len(bad)} code points differ, first U+{bad[0]:04X}: "
            f"{table[bad[0]]:08b} != regex {expected[bad[0]]:08b}"
        )
    assert ascii_table == table[:128]


def test_ascii_classes_are_byte_ranges():
    """The 8-bytes-at-a-time ASCII tests assume: letters A-Z (Lu) a-z (Ll), digits 0-9, no marks."""
    _, ascii_table = pretokenize._flags_table()
    assert [c for c in range(128) if ascii_table[c] & 0x01] == list(range(0x41, 0x5B))
    assert [c for c in range(128) if ascii_table[c] & 0x02] == list(range(0x61, 0x7B))
    assert [c for c in range(128) if ascii_table[c] & 0x3C] == []
    assert [c for c in range(128) if ascii_table[c] & 0x40] == list(range(0x30, 0x3A))


def test_letter_is_union_of_cases():
    r"""\p{L} is Lu|Ll|Lt|Lm|Lo, which the scanners assume."""
    table, _ = pretokenize._flags_table()
    letters = set(
        ord(ch) for m in regex.finditer(r"\p{L}+", "".join(CODE_POINTS)) for ch in m.group()
    )
    assert {c for c in range(0x110000) if table[c] & 0x1F} == letters


@pytest.mark.parametrize("letter", "sdmtlver'")
def test_case_insensitive_contraction_letters(letter):
    """(?i:x) in `regex` matches only x, its ASCII other case, and U+017F for 's': what the scanner hardcodes."""
    found = {
        m.group() for m in regex.finditer(f"(?i:{regex.escape(letter)})", "".join(CODE_POINTS))
    }
    expected = {letter, letter.upper()} | ({"\u017f"} if letter == "s" else set())
    assert found == expected


# --- whole texts -----------------------------------------------------------------------------


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
def test_corpus_matches_regex(pattern, corpus):
    assert_same_pieces(pattern, read_corpus(corpus))


@pytest.mark.parametrize(
    "context",
    [
        pytest.param(lambda c: f"'{c}a ", id="apostrophe-c-a"),
        pytest.param(lambda c: f"a{c}A\n", id="lower-c-upper"),
    ],
)
@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
def test_every_code_point_in_context(pattern, context):
    """Every code point, each in the same small context, in one text."""
    assert_same_pieces(pattern, "".join(map(context, CODE_POINTS)))


HARD_CASES = [
    "",
    " ",
    "\n",
    "a",
    "'",
    "''",
    "'s",
    "'S",
    "'\u017f",
    "'ll",
    "'lL",
    "'l",
    "'x",
    "'sa",
    "x's",
    "\u0301AB.",
    "\u0301ab",
    "A\u0301B.",
    "AB\u02b0C",
    "\u02b0\u02b0",
    "\u01c5a",
    "ABc",
    "AbC",
    "a\u0301b",
    " \u0301",
    " \u0301A",
    "x\u0301\u0301",
    "\u00a0Hello",
    "\tword",
    "\u2028x",
    "\u3000\u3000a",
    "a  b",
    "a \n b",
    "a\n\n",
    "a  ",
    "a \n",
    "x\r\n\r\n  y",
    "  \n  ",
    "\x1c\x1d a",
    "\x85a",
    "\x85\x85a",
    "\u0301" + "A" * 20 + ".",
    "'" + "A" * 9 + "\u02b0" + "A" * 9,
    "a" * 17 + "\u00e9" + "b" * 9,
    " " * 17 + "x",
    " 12345",
    "\u0661\u0662\u0663\u0664",
    "\u00b2\u2160x",
    " ?!\n\n/x",
    "?/\n",
    " /\r\n",
    "a'LL've",
    "don't",
    "I'm fine,  thanks!\n",
    "\U0001f600\U0001f600 \U0001f44d",
    "x \U0001f600",
    "\u00e9t\u00e9's",
    # the ASCII-word fast paths (cl100k_ascii_word, o200k_ascii_word) and their edges
    "Ab",
    "A",
    " A",
    " a",
    "ab",
    " Ab",
    " AB",
    "ABc",
    " ABc",
    "xYz",
    "Ab'",
    "ab'S",
    "Ab's",
    " The's",
    "'sup",
    " 'sup",
    "'Sup",
    "''a",
    "-Ab",
    "_ab",
    "1ab",
    " 1a",
    "\nAb",
    "\rab",
    "\r\nab",
    "\tAbc's",
    "a\u00e9",
    " T\u00e9",
    " a\u0301",
    "Ab\u02b0c",
    " A\u01c5a",
    "\u00a0ab",
    ".a.",
    " a'",
    "x'",
]


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
@pytest.mark.parametrize("text", HARD_CASES)
def test_hard_case(pattern, text):
    assert split(pattern, text) == regex.findall(pattern, text)


#: One character of each class the ASCII fast paths tell apart (letters of both cases, digits,
#: space, tab, \r, \n, punctuation, '/', apostrophe, \x1c: not \s for `regex`) and the
#: multi-byte characters that send them to the full scanner (letter, NBSP, mark, other digit).
SHORT_ALPHABET = "aZ1 \t\r\n./'\x1c\u00e9\u00a0\u0301\u0661"


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
def test_every_short_text(pattern):
    """Every text of up to 4 characters over SHORT_ALPHABET, each cut on its own: each fast path
    meets every next character and the end of the text at every distance."""
    texts = [""]
    for _ in range(4):
        texts = [t + c for t in texts for c in SHORT_ALPHABET]
        for text in texts:
            assert split(pattern, text) == regex.findall(pattern, text), repr(text)


def test_end_of_text_is_n():
    r"""\s++$ and \s+(?!\S) see the end of the piece_ends input, nothing beyond it."""
    assert split(CL100K_PATTERN, "a  ") == ["a", "  "]
    assert split(CL100K_PATTERN, "a  \n") == ["a", "  \n"]
    assert split(CL100K_PATTERN, "a  b") == ["a", " ", " b"]
    assert split(O200K_PATTERN, "a  \n  ") == ["a", "  \n", "  "]


# --- Python entry points ---------------------------------------------------------------------


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
def test_piece_ends_agree_with_split(pattern):
    text = "Größe: 12 345 \u00e9t\u00e9's \U0001f600!\n\n"
    ends = piece_ends(pattern, text.encode())
    lengths = [len(p.encode()) for p in split(pattern, text)]
    assert ends == [sum(lengths[: i + 1]) for i in range(len(lengths))]
    assert piece_ends(pattern_kind(pattern), text.encode()) == ends


def test_piece_ends_other_inputs():
    assert piece_ends(None, b"a b") == [3]
    assert piece_ends(CL100K_PATTERN, b"") == []
    assert piece_ends(r"\w+|\W", "é b".encode()) == [2, 3, 4]
    assert split(None, "a b") == ["a b"]
    assert split(r"\w+|\W", "é b") == ["é", " ", "b"]
    assert split(r"(\w)\w*|\W", "ab c") == ["ab", " ", "c"]
    with pytest.raises(UnicodeDecodeError):
        piece_ends(CL100K_PATTERN, b"\xf0\x9f")
    with pytest.raises(ValueError):
        piece_ends(1, b"x")
    with pytest.raises(UnicodeEncodeError):
        split(CL100K_PATTERN, "\ud800")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="mprotect through ctypes")
def test_no_read_past_the_end():
    """Texts that end right before an unreadable page: the scanners (8-byte loads included) stay inside."""
    libc = ctypes.CDLL(None, use_errno=True)
    page = mmap.PAGESIZE
    buf = mmap.mmap(-1, 2 * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(buf))
    assert libc.mprotect(ctypes.c_void_p(base + page), ctypes.c_size_t(page), 0) == 0
    rnd = random.Random(0)
    for _ in range(2000):
        data = "".join(rnd.choice(ALPHABET + CHUNKS) for _ in range(rnd.randint(1, 12))).encode()
        buf[page - len(data) : page] = data
        with memoryview(buf)[page - len(data) : page] as view:
            for pattern in PATTERNS.values():
                assert piece_ends(pattern, view)[-1] == len(data)


def test_doctests():
    result = doctest.testmod(pretokenize)
    assert result.attempted > 0 and result.failed == 0


@pytest.mark.parametrize("corpus", CORPORA)
@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
def test_batched_ends_equal_single(pattern, corpus):
    """next_piece_ends (batches, what encoding uses) cuts exactly as next_piece_end one by one."""
    data = read_corpus(corpus).encode()
    assert piece_ends(pattern, data) == _piece_ends_one_by_one(pattern_kind(pattern), data)


# --- generated text --------------------------------------------------------------------------


def _many() -> settings:
    """Ten times the active profile's examples: one example costs microseconds."""
    return settings(max_examples=settings().max_examples * 10, deadline=None)


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
@_many()
@given(text=st.text())
def test_hyp_any_text_matches_regex(pattern, text):
    assert split(pattern, text) == regex.findall(pattern, text)


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
@_many()
@given(text=decisive_text)
@example(text="\u0301\u01c5\u02b0A'S")
def test_hyp_decisive_text_matches_regex(pattern, text):
    assert split(pattern, text) == regex.findall(pattern, text)


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
@_many()
@given(text=run_text)
def test_hyp_runs_match_regex(pattern, text):
    assert split(pattern, text) == regex.findall(pattern, text)


@pytest.mark.parametrize("pattern", PATTERN_PARAMS)
@_many()
@given(text=decisive_text)
def test_hyp_pieces_tile_text(pattern, text):
    pieces = split(pattern, text)
    assert "".join(pieces) == text and all(pieces)
    data = text.encode()
    assert piece_ends(pattern, data) == _piece_ends_one_by_one(pattern_kind(pattern), data)


# --- DeepSeek V3 -------------------------------------------------------------------------------

#: The characters DEEPSEEK3_PATTERN tells apart: ASCII and other letters, marks (one inside the
#: CJK set: U+3099), digits of every kind, the CJK set's letters, punctuation and symbols and
#: unassigned code points (U+3040, U+3097) and its edges (U+9FA5 in, U+9FA6 and U+4DFF out),
#: Lm/Lo/N just outside it (U+3005, U+3007), \p{P} and \p{S} of every kind, every \s kind, and
#: characters of no class (controls, \x1c, Cf, private use, unassigned).
DEEPSEEK_ALPHABET = sorted(
    set(
        "aAzZ\u00e9\u01c5\u02b0\u05d0\u0627\uac00"
        "\u0301\u0903\u20dd\u3099\u309a"
        "0123456789\u0661\uff11\u00b2\u2160\u00bd\u3007"
        "\u4e00\u4e2d\u9fa5\u9fa6\u4dff\u3041\u3042\u30a2\u30fc\u30ff\u3005\u3040\u3097\u3098"
        "\u309b\u30a0\u30fb\u3001\u300c"
        ".,;:!?\"()-_/\\@#$%&*+=<>[]{}|~^`'\u00a7\u2014\u20ac\u00a9\u00ac\u00b4\u2019"
        "\t\n\r\x0b\x0c \x85\xa0\u1680\u2028\u3000"
        "\x00\x1c\x7f\u200d\u00ad\ue000\U000e0080\U0001f600"
    )
)
DEEPSEEK_CHUNKS = [
    "1234567",
    " 12",
    "  3",
    "\n4",
    " \u4e00",
    "  \u3042\u3044",
    "\r\n\r\n",
    "\n\r\n ",
    " \n \n",
    ".a",
    "-Ab",
    "(\u00e9",
    ". ",
    " .",
    " .\n",
    "!?\r\n",
    "a\u0301b",
    "\u3040\u3042",
    "\x00a",
    "\x00\x00",
    "\u200d\u4e00",
    "\u3099\u3042",
    "\u30fb\u30fb",
    "\u3001x",
]
deepseek_text = st.lists(
    st.one_of(st.sampled_from(DEEPSEEK_ALPHABET), st.sampled_from(DEEPSEEK_CHUNKS)), max_size=60
).map("".join)
deepseek_runs = st.lists(
    st.tuples(st.sampled_from(DEEPSEEK_ALPHABET + DEEPSEEK_CHUNKS), st.integers(1, 12)), max_size=10
).map(lambda runs: "".join(ch * k for ch, k in runs))

DEEPSEEK_HARD = [
    "Hello, world!\n",
    "  1 22 333 4444",
    "\u4e2d\u6587 text \u65e5\u672c\u8a9e\u3002",
    "x\u3000\u3000\u4e00",
    ".Hello .Hello ..Hello",
    "(\u00e9t\u00e9)",
    " \u00a9\u00a9\n\n",
    "\x00\x00\x00a",
    "\x00\u4e00",
    "\u3040\u3040\u3042",
    "\u3040\u3040a",
    "\u3099\u3099",
    "\u30a0\u30fb\u309b\u3042",
    "\u3005\u3005\u4e00",
    "a \n\n  1",
    "\n  \u4e00",
    "\t\u4e00",
    "\u200d\u200d\u200d",
    "\ue000\u0301",
    " \u0301\u0301",
    "\r\n\r\n  \r\n\t",
]


@pytest.mark.parametrize("text", DEEPSEEK_HARD)
def test_deepseek_hard_case(text):
    assert_same_pieces(DEEPSEEK3_PATTERN, text)


@pytest.mark.parametrize(
    "context",
    [
        pytest.param(lambda c: f"{c}{c}a{c}1", id="c-c-a-c-digit"),
        pytest.param(lambda c: f" {c}\u4e00{c} ", id="space-c-cjk-c", marks=pytest.mark.slow),
        pytest.param(lambda c: f"\u3040{c}.{c}\n", id="kana-gap-c-dot-c", marks=pytest.mark.slow),
    ],
)
def test_deepseek_every_code_point_in_context(context):
    assert_same_pieces(DEEPSEEK3_PATTERN, "".join(map(context, CODE_POINTS)))


def test_deepseek_every_short_text():
    """Every text of up to 3 characters over one character of each class the scanner tells apart."""
    alphabet = "a.\u3042\u30fb\u3040\x00 \n1\u0301\u3099"
    texts = [""]
    for _ in range(3):
        texts = [t + c for t in texts for c in alphabet]
        for text in texts:
            assert split(DEEPSEEK3_PATTERN, text) == regex.findall(DEEPSEEK3_PATTERN, text)


def test_deepseek_second_flag_byte_every_code_point():
    """\\p{P}, \\p{S} and the CJK set of every code point equal what `regex` matches."""
    text = "".join(CODE_POINTS)
    expected = bytearray(0x110000)
    properties = [r"\p{P}", r"\p{S}", f"[{pretokenize.DEEPSEEK3_CJK}]"]
    for bit, prop in enumerate(properties):
        for m in regex.finditer(prop + "+", text):
            for ch in m.group():
                expected[ord(ch)] |= 1 << bit
    table, ascii_table = pretokenize._flags2_table()
    assert table == bytes(expected)
    assert ascii_table == table[:128]


@pytest.mark.parametrize("fill", ["a", " ", "1", "\u4e00", "\n", ".", "\x00", "\u3040"])
def test_deepseek_linear_on_runs(fill):
    """1 MB of one character is cut in time linear in its length (thread CPU time of 1 MB within
    8x that of 256 KB: 4x is linear, 16x quadratic), into the pieces `regex` cuts."""
    import time

    def cut_time(size: int) -> float:
        data = (fill * (size // len(fill.encode()))).encode()
        best = float("inf")
        for _ in range(3):
            t = time.thread_time()
            pretokenize._count_pieces(pattern_kind(DEEPSEEK3_PATTERN), data)
            best = min(best, time.thread_time() - t)
        return best

    small, large = cut_time(1 << 18), cut_time(1 << 20)
    assert large < max(8 * small, 0.02), (small, large)
    text = fill * ((1 << 20) // len(fill.encode()))
    assert split(DEEPSEEK3_PATTERN, text) == regex.findall(DEEPSEEK3_PATTERN, text)


@_many()
@given(text=deepseek_text)
@example(text="\u3040\u3040\u3042")
def test_hyp_deepseek_text_matches_regex(text):
    assert split(DEEPSEEK3_PATTERN, text) == regex.findall(DEEPSEEK3_PATTERN, text)


@_many()
@given(text=deepseek_runs)
def test_hyp_deepseek_runs_match_regex(text):
    data = text.encode()
    assert split(DEEPSEEK3_PATTERN, text) == regex.findall(DEEPSEEK3_PATTERN, text)
    assert piece_ends(DEEPSEEK3_PATTERN, data) == _piece_ends_one_by_one(8, data)


# --- the block scanner (cl100k, o200k) ---------------------------------------------------------
#
# pretokenize.ascii_block cuts up to 64 ASCII bytes at once from their classes as bitmasks, and
# gives only the ends more bytes cannot change; next_piece_ends uses it wherever 8 ASCII bytes
# follow (test_batched_ends_equal_single holds it to the scanners one piece at a time). Here it
# is asked from every piece start, so every window position and every window end is met.

BLOCK_KINDS = [pytest.param("cl100k", id="cl100k"), pytest.param("o200k", id="o200k")]

#: ASCII that decides the two patterns' cuts, contractions in both cases, runs longer than the
#: 64-byte window, and a few characters over 0x7F (the window stops before them).
BLOCK_CHUNKS = [
    *"aAzZ09 \t\n\r\x0b\x0c\x1c\x00'/.,-_(){}:;\"!?",
    *["'s", "'T", "'re", "'LL", "'ve", "'d", "'m", "'x", "''", "  ", "\n\n", " /", "\r\n"],
    *["camelCase", "HTTPServer", "don't", "I'M", "12345", "./\n/", "\t\t."],
    *["a" * 70, " " * 70, "1" * 70, "\n" * 70, "." * 70],
    *["\u00e9", "\u017f", "'\u017f", "\u00a0", "\U0001f600"],
]
block_text = st.lists(st.sampled_from(BLOCK_CHUNKS), max_size=80).map("".join)


def assert_block_ends(name: str, text: str) -> None:
    pattern = PATTERNS[name]
    data = text.encode()
    ends, pos = [], 0
    for piece in regex.findall(pattern, text):
        pos += len(piece.encode())
        ends.append(pos)
    for i, start in enumerate([0, *ends[:-1]]):
        got = pretokenize._block_ends(pattern_kind(pattern), data, start)
        assert got == ends[i : i + len(got)], (
            start,
            data[start : start + 80],
            got,
            ends[i : i + 12],
        )


@pytest.mark.parametrize("corpus", ["english", "code", "multilingual", "adv_whitespace"])
@pytest.mark.parametrize("name", BLOCK_KINDS)
def test_block_scanner_from_every_piece_start(name, corpus):
    assert_block_ends(name, read_corpus(corpus)[:20_000])
    assert_block_ends(name, read_corpus(corpus)[-3_000:])  # the text's end inside the window


@pytest.mark.parametrize("name", BLOCK_KINDS)
@_many()
@given(text=block_text)
@example(text="x.\n\n  ")  # cl100k: the final whitespace run is one piece (`\s++$`)
@example(text="a./\n//.b")  # o200k: '/' after the newlines is the punctuation's too
@example(text="x(\r/\n\nb{\n/\n")  # o200k: newlines after a '/' that the punctuation took
@example(text="it's's'sok'd")  # o200k: a contraction's letter ends no word; cl100k: each one
def test_hyp_block_scanner_matches_regex(name, text):
    assert_block_ends(name, text)


def test_block_scanner_gives_up_where_it_must():
    kind = pattern_kind(O200K_PATTERN)
    assert pretokenize._block_ends(kind, ("a" * 100).encode(), 0) == []  # one run over the window
    assert pretokenize._block_ends(kind, "ab\u00e9".encode(), 0) == []  # the letter may go on
    assert pretokenize._block_ends(kind, b"ab cd", 0) == [2, 5]  # the text's end
    assert pretokenize._block_ends(kind, ("ab " * 30).encode(), 0)[-1] < 64


def _classes_by_definition(data: bytes) -> dict:
    classes = {
        "lower": lambda c: 0x61 <= c <= 0x7A,
        "upper": lambda c: 0x41 <= c <= 0x5A,
        "digit": lambda c: 0x30 <= c <= 0x39,
        "space": lambda c: c == 0x20,
        "other_ws": lambda c: c in (0x09, 0x0B, 0x0C),
        "newline": lambda c: c in (0x0A, 0x0D),
        "slash": lambda c: c == 0x2F,
        "quote": lambda c: c == 0x27,
        "wide": lambda c: c >= 0x80,
    }
    return {k: sum(1 << i for i, c in enumerate(data[:64]) if f(c)) for k, f in classes.items()}


def test_classify64_every_byte_at_every_position():
    """The SSE2 classification (bpe_classify64) and its scalar twin against the definition: each
    byte value at each of the 64 positions, in a background of random bytes, and random blocks."""
    rnd = random.Random(5)
    blocks = [bytes(rnd.randrange(256) for _ in range(64)) for _ in range(300)]
    for b in range(256):
        for i in range(64):
            base = blocks[(b + i) % len(blocks)]
            blocks.append(base[:i] + bytes([b]) + base[i + 1 :])
    levels = [0, 1, 2] if pretokenize._simd_level() == 2 else [0, 1]
    for data in blocks:
        expected = _classes_by_definition(data)
        for level in levels:
            assert pretokenize._classify64(data, level) == expected, level


@pytest.mark.parametrize("level", ["scalar", "sse2"])
def test_block_scanner_at_each_simd_level(level, tmp_path):
    """BPECORE_SIMD picks a lower classification level than the CPU's: the cuts are the same."""
    try:
        pretokenize._classify64(bytes(64), {"scalar": 0, "sse2": 1}[level])
    except ValueError:
        pytest.skip(f"no {level} classification in this build")
    code = (
        "import sys; from bpecore import pretokenize as p; "
        "data = open(sys.argv[1], 'rb').read(); "
        "print(p._simd_level(), p.piece_ends(p.O200K_PATTERN, data) == p._piece_ends_one_by_one("
        "p.pattern_kind(p.O200K_PATTERN), data), p.piece_ends(p.CL100K_PATTERN, data) == "
        "p._piece_ends_one_by_one(p.pattern_kind(p.CL100K_PATTERN), data))"
    )
    path = tmp_path / "text.txt"
    path.write_bytes((read_corpus("code")[:100_000] + read_corpus("english")[:100_000]).encode())
    env = {**os.environ, "BPECORE_SIMD": level}
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [{"scalar": "0", "sse2": "1"}[level], "True", "True"]

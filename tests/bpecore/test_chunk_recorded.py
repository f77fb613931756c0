"""``chunk`` gives the recorded chunks: a digest of every ``(start, end, tokens)`` list, per corpus,
mode and budget, recorded from the chunker before its per-chunk loop was made faster, and again
when its rules changed (plain-text titles stay with their body; ``balance=True`` carries the
tail of a line's last piece).

A change of the cut rules changes these on purpose: re-record with
``python tests/bpecore/test_chunk_recorded.py`` (it prints the table) and say so in the commit.
"""

from __future__ import annotations

import gzip
import hashlib
import random
import sys
from pathlib import Path

import pytest
import regex

import bpecore
from bpecore import chunker
from bpecore.chunker import _DEFINITIONS, _definition_matches, chunk

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
PROSE = ROOT / "benches" / "data" / "chunk_eval" / "corpora"
BUDGETS = (128, 256, 512, 1024)
MODES = {
    "default": {},
    "balance": {"balance": True},
    "markdown": {"markdown": True},
    "overlap": {"overlap": 32},
    "untrimmed": {"trim": False},
    "text": {"language": "text"},
    "python": {"language": "python"},
}
# corpus -> the modes recorded on it
SETS = {
    "prose": ("default", "balance", "markdown", "overlap", "untrimmed"),
    "code": ("default", "balance", "text", "python", "overlap"),
    "multilingual": ("default", "overlap", "untrimmed"),
}
RECORDED = {
    "prose/default/128": "4308d49badc3038f",
    "prose/default/256": "17618ac0e1eb0232",
    "prose/default/512": "1450bde1fedcc4a7",
    "prose/default/1024": "ae619e193782e714",
    "prose/balance/128": "9275a922392e9f53",
    "prose/balance/256": "f052aa17b96b5c68",
    "prose/balance/512": "8c79a86f39a10e45",
    "prose/balance/1024": "349add820a059966",
    "prose/markdown/128": "2df248e2a2288c7f",
    "prose/markdown/256": "35ba4718cacd7d36",
    "prose/markdown/512": "0574b03765618037",
    "prose/markdown/1024": "de2e4430703b5099",
    "prose/overlap/128": "81c9d72627369c24",
    "prose/overlap/256": "6941b798227b38b7",
    "prose/overlap/512": "3fb4a34d6af84c8b",
    "prose/overlap/1024": "f60c5a3b4d838c06",
    "prose/untrimmed/128": "370403b4d93bcc0d",
    "prose/untrimmed/256": "2015851ea057ef07",
    "prose/untrimmed/512": "29d65ff91225cebb",
    "prose/untrimmed/1024": "0ff4d1566c05f38b",
    "code/default/128": "57aee342a6599867",
    "code/default/256": "5a11fe3660e9b826",
    "code/default/512": "e7b550ce83372ef0",
    "code/default/1024": "6becee776cea81d0",
    "code/balance/128": "57aee342a6599867",
    "code/balance/256": "5a11fe3660e9b826",
    "code/balance/512": "e7b550ce83372ef0",
    "code/balance/1024": "6becee776cea81d0",
    "code/text/128": "8cf732a5c32adc50",
    "code/text/256": "c381a9794ad9457f",
    "code/text/512": "c1cfad0023134d48",
    "code/text/1024": "93c5cb38b8c4d636",
    "code/python/128": "57aee342a6599867",
    "code/python/256": "5a11fe3660e9b826",
    "code/python/512": "e7b550ce83372ef0",
    "code/python/1024": "6becee776cea81d0",
    "code/overlap/128": "1a7339a71b1a23a8",
    "code/overlap/256": "6f2eab835460091c",
    "code/overlap/512": "5ffd8825a0fac5ac",
    "code/overlap/1024": "377ff6d4818f669a",
    "multilingual/default/128": "51ddc71f66371bc2",
    "multilingual/default/256": "93c36fe9c52d1bb4",
    "multilingual/default/512": "793849e84213740d",
    "multilingual/default/1024": "4c3ef5a33fb0977e",
    "multilingual/overlap/128": "40df97d1e532ddd7",
    "multilingual/overlap/256": "c4b0fce68190c276",
    "multilingual/overlap/512": "327469d00651e0b9",
    "multilingual/overlap/1024": "3595c12d7c2f8f34",
    "multilingual/untrimmed/128": "8680d21c331e6c8f",
    "multilingual/untrimmed/256": "4e142cd6c5b0056f",
    "multilingual/untrimmed/512": "9f799a54bcfbf459",
    "multilingual/untrimmed/1024": "26b66b9e5570fa4f",
}


def _texts(name: str) -> list[str]:
    if name == "prose":
        return [gzip.decompress(p.read_bytes()).decode() for p in sorted(PROSE.glob("*.md.gz"))]
    path = SHARED / "corpora" / f"{name}.1mb.txt.gz"
    if not path.exists():
        pytest.skip(f"{path} not found")
    return [gzip.decompress(path.read_bytes()).decode()[: 300_000 if name == "code" else 100_000]]


def _digest(name: str, mode: str, budget: int) -> str:
    enc = bpecore.get_encoding("cl100k_base")
    h = hashlib.sha256()
    for text in _texts(name):
        for c in chunk(text, enc, budget, **MODES[mode]):
            assert c.tokens <= budget
            h.update(f"{c.start},{c.end},{c.tokens};".encode())
        h.update(b"|")
    return h.hexdigest()[:16]


CASES = [(name, mode, b) for name, modes in SETS.items() for mode in modes for b in BUDGETS]


@pytest.mark.parametrize(("name", "mode", "budget"), CASES)
def test_recorded_chunks(name: str, mode: str, budget: int) -> None:
    assert _digest(name, mode, budget) == RECORDED[f"{name}/{mode}/{budget}"]


_MIXED = (
    "export default async function f() {\n  const x = (a) => 1;\n}\n\tclass A {}\n"
    "let y = async function() {}\ntype T<A> = B;\nfunc (r *R) M() {}\n"
    "pub(crate) unsafe fn g() {}\nmacro_rules! m {}\n  export const h = x => x\n"
    "async  def   é(): pass\ndefine x\nclass1 = 2\n    def _f(self):\nimpl<T> X for T {}\n"
)


@pytest.mark.parametrize("language", sorted(_DEFINITIONS))
def test_definition_matches(language: str) -> None:
    texts = [_MIXED, _MIXED.replace("\n", "\r\n")]
    for name in ("code", "english"):
        texts.extend(_texts(name))
    for text in texts:
        want = [m.span() for m in _DEFINITIONS[language].finditer(text)]
        assert [m.span() for m in _definition_matches(language, text)] == want


@pytest.mark.parametrize("language", sorted(_DEFINITIONS))
def test_definition_line_starts(language: str) -> None:
    """The newline walk finds the line starts that the ``re`` scan it stands for finds."""
    texts = [_MIXED, _MIXED.replace("\n", "\r\n"), "\n\t def\n\nclass", "def\n", "\n"]
    for name in ("code", "english"):
        texts.extend(_texts(name))
    rng = random.Random(language)
    for _ in range(300):
        texts.append(
            "".join(
                rng.choice(["\n", " ", "\t", "def", "class", "fn", "x", "async "])
                for _ in range(rng.randrange(30))
            )
        )
    for text in texts:
        want = [m.start() + 1 for m in chunker._DEFINITION_LINES[language].finditer(text)]
        assert chunker._definition_line_starts(text, language) == want, (language, text[:80])


def test_sentence_spans() -> None:
    ascii_ = [chr(c) for c in range(128)]
    assert {c for c in ascii_ if regex.match(r"\p{SB=Close}", c)} == set(chunker._ASCII_CLOSE)
    rng = random.Random(22)
    enc = bpecore.get_encoding("cl100k_base")
    for alphabet in (
        "ab .!?\"')]}([{ \n\t\x1c",
        'a.!? )"',
        "ab .!?) \u3002\u00e9",
        # closers, terminators and whitespace outside ASCII; CJK terminators need no whitespace
        "a .!\u201d\u2019\u00bb)\u3002\uff01\uff1f\ufe52\u061f\u0589\u0964\u3000\u00a0\u2028\u00e9",
        "a.\u3002\uff61\u300d\u201d ",
    ):
        for _ in range(4000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))
            ch = chunker._Chunker(enc, text, 8, 0, True, False, "text")
            s = rng.randrange(len(text))
            endpos = rng.randrange(s, len(text) + 1)
            want = [m.span() for m in chunker._SENTENCE_RE.finditer(text, s, endpos)]
            assert list(ch._sentence_spans(s, endpos)) == want, (text, s, endpos)


def test_sentence_walk_character_classes() -> None:
    """The walk's character classes, one character at a time, against the regex: each character
    of the Basic Multilingual Plane as a terminator ("a" c " b"), as a closer after one ("a." c
    " b"), and without whitespace after it ("a" c "b": the CJK terminators); whitespace as
    str.isspace sees it; the memoized class checks equal to the regexes."""
    stops = regex.compile(r"[\p{SB=STerm}\p{SB=ATerm}]")
    space = regex.compile(chunker._S)
    for c in map(chr, range(1, 0x10000)):
        if "\ud800" <= c <= "\udfff":
            continue
        for text in ("a" + c + " b", "a." + c + " b", "a" + c + "b"):
            walk, spans = chunker._Sentences(text, 0, len(text), text.isascii()), []
            start = walk.next()
            while start >= 0:
                spans.append((start, walk.end))
                start = walk.next()
            want = [m.span() for m in chunker._SENTENCE_RE.finditer(text)]
            assert spans == want, (hex(ord(c)), text)
        if c >= "\x80" and c < "\u3000":
            assert chunker._other_terminator(c) == (stops.match(c) is not None), hex(ord(c))
            assert chunker._other_closer(c) == (chunker._CLOSE_CHAR.match(c) is not None)
    for c in map(chr, range(0x110000)):
        assert c.isspace() == (space.match(c) is not None), hex(ord(c))


def test_markdown_matches() -> None:
    rng = random.Random(22)
    pieces = ["#", "##", " ", "\n", "=", "-", "```", "~~~", "a", "\t", "x y", "\r", "#######"]
    texts = ["".join(rng.choice(pieces) for _ in range(rng.randrange(30))) for _ in range(5000)]
    texts += _texts("prose") + _texts("code")
    for text in texts:
        want = [m.span() for m in chunker._MARKDOWN_RE.finditer(text)]
        assert [m.span() for m in chunker._markdown_matches(text)] == want, text


if __name__ == "__main__":
    sys.stdout.write("RECORDED = {\n")
    for name, mode, b in CASES:
        sys.stdout.write(f'    "{name}/{mode}/{b}": "{_digest(name, mode, b)}",\n')
    sys.stdout.write("}\n")

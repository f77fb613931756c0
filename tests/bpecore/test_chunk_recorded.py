"""``chunk`` gives the recorded chunks: a digest of every ``(start, end, tokens)`` list, per corpus,
mode and budget, as recorded from the chunker before its per-chunk loop was made faster.

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
    "prose/default/128": "6142989bf0f8eeb2",
    "prose/default/256": "ded73eb0fee4e4a3",
    "prose/default/512": "1c9bbf14a3ff01f8",
    "prose/default/1024": "2a5401987faac206",
    "prose/balance/128": "bc7ef3f8fbbac5e4",
    "prose/balance/256": "6c33a3bfd24ca501",
    "prose/balance/512": "ce9d0a55a536438c",
    "prose/balance/1024": "391e3687d7aa4f7a",
    "prose/markdown/128": "483c2910ee5d89d7",
    "prose/markdown/256": "fe295e0df8d5cb76",
    "prose/markdown/512": "847f6e0ffcb72be5",
    "prose/markdown/1024": "0fb0853946e32829",
    "prose/overlap/128": "1deb447f44fdb5d5",
    "prose/overlap/256": "b664550480ed5026",
    "prose/overlap/512": "1bc8b911ed79f74a",
    "prose/overlap/1024": "8ec2017f52a3201e",
    "prose/untrimmed/128": "2f623970ff952d86",
    "prose/untrimmed/256": "4dabcd4d6ed97363",
    "prose/untrimmed/512": "5e44ad44648192dd",
    "prose/untrimmed/1024": "f040b8e7935b2903",
    "code/default/128": "57aee342a6599867",
    "code/default/256": "5a11fe3660e9b826",
    "code/default/512": "e7b550ce83372ef0",
    "code/default/1024": "6becee776cea81d0",
    "code/balance/128": "57aee342a6599867",
    "code/balance/256": "5a11fe3660e9b826",
    "code/balance/512": "e7b550ce83372ef0",
    "code/balance/1024": "6becee776cea81d0",
    "code/text/128": "df4e8427561ed547",
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
    "multilingual/default/128": "6e5e65adf9f60901",
    "multilingual/default/256": "5a50879244241a6b",
    "multilingual/default/512": "793849e84213740d",
    "multilingual/default/1024": "57d0bccf5a63dbc0",
    "multilingual/overlap/128": "d232e0fbacc9986d",
    "multilingual/overlap/256": "6608ddf71cab2db1",
    "multilingual/overlap/512": "0b3360f558ab0c9b",
    "multilingual/overlap/1024": "0857b6b29effe9b1",
    "multilingual/untrimmed/128": "974c9195f78cadb1",
    "multilingual/untrimmed/256": "a6bb9e94a74f9075",
    "multilingual/untrimmed/512": "9f799a54bcfbf459",
    "multilingual/untrimmed/1024": "f187bd1bbfc3c9f2",
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


def test_sentence_spans() -> None:
    ascii_ = [chr(c) for c in range(128)]
    assert {c for c in ascii_ if regex.match(r"\p{SB=Close}", c)} == set(chunker._ASCII_CLOSE)
    terminators = {c for c in ascii_ if regex.match(r"[\p{SB=STerm}\p{SB=ATerm}]", c)}
    assert terminators == set(chunker._ASCII_TERMINATORS)
    rng = random.Random(22)
    enc = bpecore.get_encoding("cl100k_base")
    for alphabet in ("ab .!?\"')]}([{ \n\t\x1c", 'a.!? )"', "ab .!?) \u3002\u00e9"):
        for _ in range(2000):
            text = "".join(rng.choice(alphabet) for _ in range(rng.randrange(1, 40)))
            ch = chunker._Chunker(enc, text, 8, 0, True, False, "text")
            s = rng.randrange(len(text))
            endpos = rng.randrange(s, len(text) + 1)
            want = [m.span() for m in chunker._SENTENCE_RE.finditer(text, s, endpos)]
            assert list(ch._sentence_spans(s, endpos)) == want, (text, s, endpos)


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

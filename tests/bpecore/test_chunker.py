"""chunk(): the exact-limit guarantee, tiling, overlap bound and boundary preference."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.chunker import Chunk, _Chunker, chunk, chunk_batch

from ..conftest import ADVERSARIAL_CHARS, CORPORA

LIMITS = [1, 4, 16, 128, 512, 2048, 8192]


def check_chunks(
    enc, text: str, chunks: list[Chunk], max_tokens: int, *, trim: bool = True, overlap: int = 0
):
    """Assert the contract of DESIGN.md "Chunking" on one result."""
    for c in chunks:
        assert text[c.start : c.end] == c.text
        assert c.text, "empty chunk"
        assert c.tokens == enc.count(c.text) <= max_tokens, (c, enc.count(c.text))
        if trim:
            assert c.text == c.text.strip(), c
    for a, b in zip(chunks, chunks[1:]):
        assert a.start < b.start and a.end < b.end
    if overlap == 0:
        edges = [0] + [x for c in chunks for x in (c.start, c.end)] + [len(text)]
        gaps = [text[edges[i] : edges[i + 1]] for i in range(0, len(edges), 2)]
        if trim:
            assert all(g.strip() == "" for g in gaps), "non-whitespace text between chunks"
        else:
            assert all(g == "" for g in gaps), "chunks do not tile the text"
    else:
        for a, b in zip(chunks, chunks[1:]):
            if b.start < a.end:
                assert enc.count(text[b.start : a.end]) <= overlap
            else:
                assert text[a.end : b.start].strip() == ""
        if chunks:
            assert text[: chunks[0].start].strip() == "" and text[chunks[-1].end :].strip() == ""
        else:
            assert text.strip() == ""


def chunk_or_unfittable(enc, text: str, max_tokens: int, **kw) -> list[Chunk] | None:
    """chunk(), allowing ValueError only when one character needs more than max_tokens tokens."""
    try:
        return chunk(text, enc, max_tokens, **kw)
    except ValueError:
        assert max_tokens < 4 and max(enc.count(ch) for ch in text) > max_tokens
        return None


@pytest.fixture(scope="module")
def cl100k():
    return bpecore.get_encoding("cl100k_base")


# ------------------------------------------------------------------------------ the Chunk type
def test_chunk_is_frozen_dataclass_with_slots():
    c = Chunk(0, 2, "hi", 1)
    assert dataclasses.is_dataclass(c) and not hasattr(c, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.start = 1  # type: ignore[misc]


def test_empty_and_blank(cl100k):
    assert chunk("", cl100k, 10) == []
    assert chunk(" \n\t ", cl100k, 10) == []
    blank = chunk(" \n\t ", cl100k, 10, trim=False)
    assert [(c.start, c.end) for c in blank] == [(0, 4)]


@pytest.mark.parametrize(
    "kw", [dict(max_tokens=0), dict(max_tokens=5, overlap=5), dict(max_tokens=5, overlap=-1)]
)
def test_bad_arguments(cl100k, kw):
    with pytest.raises(ValueError):
        chunk("some text", cl100k, **kw)


def test_encoding_by_name(encoding_name):
    enc = bpecore.get_encoding(encoding_name)
    text = "Hello world. " * 50
    assert chunk(text, encoding_name, 16) == chunk(text, enc, 16)


def test_unfittable_character_raises(cl100k):
    ch = "\U0001f9ec"  # several tokens on its own
    assert cl100k.count(ch) > 1
    with pytest.raises(ValueError, match="cannot hold"):
        chunk("ab " + ch, cl100k, 1)


# ------------------------------------------------------------------------------ corpora
@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("max_tokens", [16, 512, 8192])
def test_corpus_slices(corpus, encoding_name, name, max_tokens):
    enc = bpecore.get_encoding(encoding_name)
    text = corpus(name)[200_000:260_000]
    for trim in (True, False):
        chunks = chunk(text, enc, max_tokens, trim=trim)
        check_chunks(enc, text, chunks, max_tokens, trim=trim)


@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("max_tokens", [16, 128, 512])
def test_corpus_slices_balanced(corpus, cl100k, name, max_tokens):
    text = corpus(name)[200_000:260_000]
    for trim in (True, False):
        balanced = chunk(text, cl100k, max_tokens, trim=trim, balance=True)
        check_chunks(cl100k, text, balanced, max_tokens, trim=trim)


@pytest.mark.parametrize("name", CORPORA)
def test_corpus_slices_tiny_limits(corpus, cl100k, name):
    text = corpus(name)[:6_000]
    for max_tokens in (1, 2, 3, 4, 7):
        chunks = chunk_or_unfittable(cl100k, text, max_tokens)
        if chunks is not None:
            check_chunks(cl100k, text, chunks, max_tokens)


@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("max_tokens,overlap", [(64, 16), (512, 100)])
def test_corpus_overlap(corpus, cl100k, name, max_tokens, overlap):
    text = corpus(name)[300_000:340_000]
    chunks = chunk(text, cl100k, max_tokens, overlap=overlap)
    check_chunks(cl100k, text, chunks, max_tokens, overlap=overlap)


@pytest.mark.slow
@pytest.mark.parametrize("name", CORPORA)
@pytest.mark.parametrize("max_tokens", [1, 128, 512, 8192])
def test_whole_corpora(corpus, encoding_name, name, max_tokens):
    enc = bpecore.get_encoding(encoding_name)
    text = corpus(name)
    chunks = chunk_or_unfittable(enc, text, max_tokens)
    if chunks is not None:
        check_chunks(enc, text, chunks, max_tokens)
    chunks = chunk(text, enc, max(max_tokens, 8), overlap=max(max_tokens, 8) // 4)
    check_chunks(enc, text, chunks, max(max_tokens, 8), overlap=max(max_tokens, 8) // 4)


# ------------------------------------------------------------------------------ hard inputs
@pytest.mark.parametrize("max_tokens", [4, 100, 8192])
def test_one_long_word(cl100k, max_tokens):
    rng = random.Random(1)
    text = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(100_000))
    check_chunks(cl100k, text, chunk(text, cl100k, max_tokens), max_tokens)


@pytest.mark.slow
def test_one_megabyte_word(cl100k):
    text = "x" * 300_000 + "".join(random.Random(2).choice("qwertyuiop") for _ in range(700_000))
    for max_tokens in (8, 512, 8192):
        check_chunks(cl100k, text, chunk(text, cl100k, max_tokens), max_tokens)


def test_minified_json_cuts_at_punctuation(cl100k):
    rng = random.Random(3)
    data = [
        {
            "id": i,
            "name": f"item{i}",
            "tags": [rng.choice("abc") for _ in range(3)],
            "v": rng.random(),
        }
        for i in range(800)
    ]
    text = json.dumps(data, separators=(",", ":"))
    chunks = chunk(text, cl100k, 64)
    check_chunks(cl100k, text, chunks, 64)
    ends = [text[c.end - 1] for c in chunks[:-1]]
    assert sum(e in ",:]}" for e in ends) >= 0.9 * len(ends)


@pytest.mark.parametrize("max_tokens", [1, 5, 64])
def test_cjk_without_spaces(cl100k, max_tokens):
    text = "日本語の文章にはスペースがありません。" * 40 + "中文句子也没有空格" * 40
    chunks = chunk_or_unfittable(cl100k, text, max_tokens)
    if chunks is not None:
        check_chunks(cl100k, text, chunks, max_tokens)


def test_cjk_sentence_ends(cl100k):
    sentence = "今日はとても良い天気ですね。"
    n = cl100k.count(sentence)
    text = sentence * 30
    chunks = chunk(text, cl100k, 3 * n + 2)
    check_chunks(cl100k, text, chunks, 3 * n + 2)
    assert all(c.text.endswith("。") for c in chunks)


def test_emoji_and_combining_marks_stay_whole(cl100k):
    family = "\U0001f468\u200d\U0001f469\u200d\U0001f467"
    text = ("e\u0301" * 7 + family + "\U0001f1eb\U0001f1f7") * 60
    assert cl100k.count(family) == 13
    for max_tokens in (14, 40):
        chunks = chunk(text, cl100k, max_tokens)
        check_chunks(cl100k, text, chunks, max_tokens)
        for c in chunks[:-1]:
            assert (
                text[c.end] != "\u0301" and text[c.end - 1] != "\u200d" and text[c.end] != "\u200d"
            )


def test_repeated_char_chunks_are_maximal(cl100k):
    text = "a" * 20_000
    chunks = chunk(text, cl100k, 50)
    check_chunks(cl100k, text, chunks, 50)
    for c in chunks[:-1]:
        assert cl100k.count(text[c.start : c.end + 1]) > 50


# ------------------------------------------------------------------------------ boundary preference
def paragraphs(rng: random.Random, n: int) -> list[str]:
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()

    def sentence():
        return " ".join(rng.choice(words) for _ in range(rng.randint(4, 12))).capitalize() + "."

    return [" ".join(sentence() for _ in range(rng.randint(1, 4))) for _ in range(n)]


def test_paragraphs_that_fit_end_chunks(cl100k):
    paras = paragraphs(random.Random(4), 60)
    text = "\n\n".join(paras)
    max_tokens = 3 * max(cl100k.count(p) for p in paras)
    chunks = chunk(text, cl100k, max_tokens)
    check_chunks(cl100k, text, chunks, max_tokens)
    for c, nxt in zip(chunks, chunks[1:]):
        assert text[c.end : nxt.start] == "\n\n"
        # Maximal: the next paragraph would not have fitted.
        nxt_para_end = text.find("\n\n", nxt.start)
        nxt_para_end = len(text) if nxt_para_end < 0 else nxt_para_end
        assert cl100k.count(text[c.start : nxt_para_end]) > max_tokens


def test_sentences_before_words(cl100k):
    text = " ".join(paragraphs(random.Random(5), 40))
    chunks = chunk(text, cl100k, 40)
    check_chunks(cl100k, text, chunks, 40)
    assert all(c.text.endswith(".") for c in chunks)


def test_lines_before_sentences(cl100k):
    text = "\n".join(f"line {i} has. Two sentences here" for i in range(300))
    chunks = chunk(text, cl100k, 30)
    check_chunks(cl100k, text, chunks, 30)
    assert all(c.end == len(text) or text[c.end] == "\n" for c in chunks)


def test_escaped_newlines_before_sentences(cl100k):
    """In JSON or a repr the line breaks are escaped: an escaped blank line ends a chunk before
    an escaped newline does, and both before a sentence end; an escaped backslash is no break."""
    paras = paragraphs(random.Random(9), 30)
    text = json.dumps("\n\n".join(paras))
    max_tokens = 2 * max(cl100k.count(p) for p in paras)
    chunks = chunk(text, cl100k, max_tokens)
    check_chunks(cl100k, text, chunks, max_tokens)
    assert all(c.text.endswith("\\n\\n") for c in chunks[:-1])
    text = "One. Two.\\nThree four. Five six seven.\\n\\nEight nine. Ten.\\\\nEleven twelve."
    assert [c.text for c in chunk(text, cl100k, 20)] == [
        "One. Two.\\nThree four. Five six seven.\\n\\n",
        "Eight nine. Ten.\\\\nEleven twelve.",
    ]
    assert [c.text for c in chunk(text, cl100k, 10)] == [
        "One. Two.\\n",
        "Three four. Five six seven.\\n\\n",
        "Eight nine.",
        "Ten.\\\\nEleven twelve.",
    ]


def test_balance_shares_a_line_evenly(cl100k):
    """Greedy filling leaves a short last piece of a long line; balance=True shares it."""
    text = " ".join(f"Sentence number {w} is here." for w in "one two three four five".split())
    assert cl100k.count("Sentence number one is here.") == 6
    greedy = [c.text.count(".") for c in chunk(text, cl100k, 24)]
    balanced = [c.text.count(".") for c in chunk(text, cl100k, 24, balance=True)]
    assert greedy == [4, 1] and balanced == [3, 2]
    # Lines and paragraphs are not moved: a line that fits ends its chunk as before.
    text = f"{text}\n\n{text}"
    assert chunk(text, cl100k, 32, balance=True) == chunk(text, cl100k, 32)


def test_balance_keeps_what_follows_the_line_with_its_last_piece(cl100k):
    """The greedy's last piece of a line shares its chunk with the paragraph after it; an even
    share of the line alone would push that paragraph into a chunk of its own. Balancing counts
    the line and that paragraph together, so the number of chunks stays."""
    line = " ".join(f"Sentence number {w} is here." for w in "one two three four five".split())
    after = "The short paragraph after the long line ends here, right now."
    assert (cl100k.count(line), cl100k.count(after)) == (30, 13)
    text = f"{line}\n\n{after}"
    greedy = chunk(text, cl100k, 24)
    assert [c.text.count(".") for c in greedy] == [4, 2]
    assert chunk(text, cl100k, 24, balance=True) == greedy  # not [3], [2], [1]: one chunk more
    # With a short paragraph after it the line is still shared evenly.
    text = f"{line}\n\nEnd."
    assert [c.text.count(".") for c in chunk(text, cl100k, 24, balance=True)] == [3, 3]


_BODY = (
    "The parasite invades red blood cells. It grows there for two days. Then it bursts out again."
)


@pytest.mark.parametrize(
    "heading",
    ["\n\nResults\n\n", "\n = = Gameplay = = \n", "\n\nResults\nExpression of the genes\n"],
)
def test_plain_text_title_stays_with_its_body(cl100k, heading):
    """A short line that ends no sentence, above body text, is a title: the chunk ends before
    it, not between it and the text it heads (a blank line, a line, or a chain of titles)."""
    text = f"Malaria is a disease of the blood.{heading}{_BODY}"
    chunks = chunk(text, cl100k, 24)
    check_chunks(cl100k, text, chunks, 24)
    assert chunks[0].text == "Malaria is a disease of the blood."
    assert chunks[1].text.startswith(heading.strip()) and "parasite" in chunks[1].text


@pytest.mark.parametrize(
    "part",
    [
        "year | 2017 | 2016\ntotal | 12 | 14",  # a table's last row is no title
        "results",  # text written in lower case tells no titles
        "The end.",  # a sentence
        "Intro\nMore intro\nNotes",  # a list of short lines: none heads the body
    ],
)
def test_lines_that_are_not_titles(cl100k, part):
    text = f"Malaria is a disease of the blood.\n\n{part}\n\n{_BODY}"
    chunks = chunk(text, cl100k, 30)
    check_chunks(cl100k, text, chunks, 30)
    assert chunks[0].text == f"Malaria is a disease of the blood.\n\n{part}"


def reference_title_ends(state, j: int, b: int, depth: int = 0) -> bool:
    """``_title_ends`` with the line starts found by unbounded searches."""
    from bpecore.chunker import _TITLE_CHARS, _WS_LOOKAHEAD, _ends_clause, _title

    text = state.text
    if b >= state.n:
        return False
    j = state._ws_start(max(0, j - _WS_LOOKAHEAD), j)
    a = text.rfind("\n", 0, j) + 1
    if j - a > 2 * _TITLE_CHARS or not _title(text[a:j].strip()):
        return False
    if depth == 0 and not reference_opens(state, a, 1):
        return False
    nl = text.find("\n", b, b + 4 * _TITLE_CHARS)
    body = text[b : b + 4 * _TITLE_CHARS if nl < 0 else nl].rstrip()
    if len(body) > _TITLE_CHARS or _ends_clause(body):
        return True
    if depth >= 2 or nl < 0 or not body:
        return False
    nxt = state._skip_ws(nl)
    return "\n" not in text[nl + 1 : nxt] and reference_title_ends(state, nl, nxt, depth + 1)


def reference_opens(state, a: int, titles: int) -> bool:
    from bpecore.chunker import _TITLE_CHARS, _ends_clause

    text = state.text
    if a == 0:
        return True
    p = text.rfind("\n", 0, a - 1) + 1
    if a - p > 2 * _TITLE_CHARS:
        return True
    prev = text[p : a - 1].strip()
    if not prev or len(prev) > _TITLE_CHARS or _ends_clause(prev):
        return True
    return titles > 0 and reference_opens(state, p, titles - 1)


def test_title_ends_equal_their_definition(corpus, cl100k):
    """The title checks look for a line's start no further back than a title's length."""
    rng = random.Random(41)
    lines = ["Results", "A Title Line", "x" * 150, "Body text that ends.", ""]
    lines += [" " * 100 + "Spaced Title", "Title" + " " * 150, " " * 158 + "T", " " * 170 + "T"]
    texts = [corpus(name)[:100_000] for name in ("english", "multilingual")] + [
        "\n".join(rng.choice(lines) for _ in range(60)) for _ in range(30)
    ]
    for text in texts:
        state = _Chunker(cl100k, text, 8, 0, True, False, "text")
        for j in [i for i, c in enumerate(text) if c == "\n"][:3000]:
            b = state._skip_ws(j + 1)
            assert state._title_ends(j, b) == reference_title_ends(state, j, b), j
            assert state._opens(j + 1, 1) == reference_opens(state, j + 1, 1), j


def test_code_lines_are_not_titles(cl100k):
    """In code (a language given or detected) a short line is no title."""
    text = f"Malaria is a disease of the blood.\n = = Gameplay = = \n{_BODY}"
    assert chunk(text, cl100k, 24, language="text")[0].text == "Malaria is a disease of the blood."
    assert chunk(text, cl100k, 24, language="python")[0].text.endswith("= = Gameplay = =")


def test_abbreviations_are_not_sentence_ends(cl100k):
    text = "Dr. Smith met Mr. Jones, e.g. at noon. They spoke. " * 10
    chunks = chunk(text, cl100k, 12)
    check_chunks(cl100k, text, chunks, 12)
    assert not any(c.text.endswith(("Dr.", "Mr.", "e.g.")) for c in chunks)


def test_lower_case_sentences_before_words(cl100k):
    """Text written in lower case still ends chunks at sentence ends, not inside sentences."""
    text = " ".join(p.lower() for p in paragraphs(random.Random(8), 40))
    chunks = chunk(text, cl100k, 40)
    check_chunks(cl100k, text, chunks, 40)
    assert all(c.text.endswith(".") for c in chunks)


def test_upper_case_sentence_ends_before_lower_case_ones(cl100k):
    text = "First one here. Second one. third part goes on and on here."
    assert [c.text for c in chunk(text, cl100k, 12)] == [
        "First one here.",
        "Second one. third part goes on and on here.",
    ]


def test_list_numbers_are_not_sentence_ends(cl100k):
    from bpecore.chunker import _LOWER_SENTENCE, _SENTENCE, _Chunker

    # A line break, or an escaped one in JSON or a repr (no whitespace: "wait." ends no sentence).
    for newline, want in (
        ("\n", ["3.", "it.", "wait.", "it.", "1."]),
        ("\\n", ["3.", "it.", "it.", "1."]),
    ):
        text = f"Plan: 1. Open it. Then wait.{newline}2. Close it. Done 3. And{newline} 12. Go."
        state = _Chunker(cl100k, text, 8, 0, True, False)
        for level in (_SENTENCE, _LOWER_SENTENCE):
            ends = [text[:b].rstrip() for b in state._candidates(level, 0, len(text))]
            assert [e.rsplit(" ", 1)[-1] for e in ends] == want, (newline, level)


def test_markdown_sections(cl100k):
    rng = random.Random(6)
    sections = []
    for i in range(20):
        body = "\n\n".join(paragraphs(rng, 3))
        sections.append(f"## Section {i}\n\n{body}\n")
    text = "# Title\n\nIntro.\n\n" + "\n".join(sections) + "\n```\n# not a heading\n```\n"
    biggest = max(cl100k.count(s) for s in sections)
    chunks = chunk(text, cl100k, biggest + 10, markdown=True)
    check_chunks(cl100k, text, chunks, biggest + 10)
    starts = [c.text.split("\n", 1)[0] for c in chunks[1:]]
    assert all(s.startswith("## Section") for s in starts), starts
    plain = chunk(text, cl100k, biggest + 10)
    check_chunks(cl100k, text, plain, biggest + 10)


def test_overlap_starts_at_words(cl100k):
    text = " ".join(paragraphs(random.Random(7), 50))
    chunks = chunk(text, cl100k, 60, overlap=15)
    check_chunks(cl100k, text, chunks, 60, overlap=15)
    assert len(chunks) > 5
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end, "no overlap although words fit"
        assert text[b.start - 1] == " "


def test_chunk_batch_matches_chunk(cl100k, corpus):
    texts = [corpus(n)[:20_000] for n in ("english", "code", "multilingual")] + ["", "short text"]
    assert chunk_batch(texts, cl100k, 100, num_threads=3) == [chunk(t, cl100k, 100) for t in texts]


# ------------------------------------------------------------------------------ hypothesis
def runs(chars: list[str]) -> st.SearchStrategy[str]:
    return st.lists(st.tuples(st.sampled_from(chars), st.integers(1, 300)), max_size=8).map(
        lambda parts: "".join(c * k for c, k in parts)
    )


EMOJI = [
    "\U0001f600",
    "\U0001f468\u200d\U0001f469\u200d\U0001f467",
    "\U0001f1eb\U0001f1f7",
    "\u2764\ufe0f",
    "\U0001f44d\U0001f3fd",
]
TEXTS = st.one_of(
    st.text(max_size=400),
    runs(ADVERSARIAL_CHARS),
    st.text(alphabet=st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF), max_size=300),
    st.lists(st.sampled_from(EMOJI + [" ", "a", "\n"]), max_size=150).map("".join),
    st.lists(
        st.sampled_from(["word", " ", ". ", "\n", "\n\n", "。", "# h\n", "e\u0301", '{"k":1},']),
        max_size=200,
    ).map("".join),
)


@given(text=TEXTS, max_tokens=st.sampled_from(LIMITS), trim=st.booleans(), balance=st.booleans())
def test_hyp_chunk_contract(cl100k, text, max_tokens, trim, balance):
    chunks = chunk_or_unfittable(cl100k, text, max_tokens, trim=trim, balance=balance)
    if chunks is not None:
        check_chunks(cl100k, text, chunks, max_tokens, trim=trim)


@given(text=TEXTS, max_tokens=st.sampled_from([4, 16, 128]), data=st.data())
def test_hyp_overlap_bound(cl100k, text, max_tokens, data):
    overlap = data.draw(st.integers(0, max_tokens - 1))
    chunks = chunk(text, cl100k, max_tokens, overlap=overlap)
    check_chunks(cl100k, text, chunks, max_tokens, overlap=overlap)


@given(text=TEXTS, max_tokens=st.sampled_from([4, 64]))
def test_hyp_o200k(text, max_tokens):
    enc = bpecore.get_encoding("o200k_base")
    check_chunks(enc, text, chunk(text, enc, max_tokens, markdown=True), max_tokens)


# ------------------------------------------------------------------------------ internals
@pytest.mark.parametrize("name", CORPORA)
def test_farthest_end_and_nearest_start_agree_with_split_at(corpus, encoding_name, name):
    """The chunker's interval-counter searches find what split_at / split_at_end define."""
    from bpecore.chunker import _Chunker

    enc = bpecore.get_encoding(encoding_name)
    text = corpus(name)[:40_000]
    state = _Chunker(enc, text, 100, 0, True, False)
    rng = random.Random(name)
    for _ in range(30):
        s = rng.randrange(len(text))
        n = rng.choice([1, 3, 10, 100])
        state.chars_per_token = rng.choice([1.0, 4.0, 20.0])
        window = text[s : s + 100 * n + 300]  # long enough to hold the answer with room to spare
        assert state._farthest_end(s, n) == s + enc.split_at(window, n)
        e = rng.randrange(s, s + len(window) + 1)
        assert state._nearest_start(e, s, n) == s + enc.split_at_end(text[s:e], n)


def test_markdown_heading_stays_with_its_text(cl100k):
    text = (
        "# A\n\nintro text here.\n\n## B\n\n"
        + "word " * 200
        + "\n\n## C\n\nshort.\n\nSetext\n======\n\nbody "
        + "x " * 300
    )
    chunks = chunk(text, cl100k, 150, markdown=True)
    check_chunks(cl100k, text, chunks, 150)
    assert [c.text for c in chunks[:1]] == ["# A\n\nintro text here."]
    assert not any(c.text in ("## B", "Setext") or c.text.startswith("=") for c in chunks)


# ------------------------------------------------------------------------------ fast paths
# The chunker finds paragraph and line boundaries with str.rfind and looks ahead past the crossing
# only where that can change the result; these tests hold the fast paths to the plain definitions.
_REV = regex.REVERSE | regex.VERSION1
_PARAGRAPH_RE = regex.compile(r"\n[[\s\x1c-\x1f]--\n]*\n", _REV)
_LINE_RE = regex.compile(r"\n", _REV)
NEWLINE_TEXTS = st.lists(
    st.sampled_from(["\n", "\n", " ", "\t", "\r", "\x1c", "\u3000", "a", "b c"]), max_size=60
).map("".join)


def reference_candidates(state, level: int, s: int, e: int):
    """A level's boundaries in ``(s, e]``, right to left, as their definitions read: the reverse
    regex matches for paragraphs and lines (a cut kept out of a grapheme cluster and from under
    a heading or title), ``_candidates`` for the others."""
    from bpecore.chunker import _LINE, _PARAGRAPH

    if level not in (_PARAGRAPH, _LINE):
        yield from state._candidates(level, s, e)
        return
    for m in (_PARAGRAPH_RE if level == _PARAGRAPH else _LINE_RE).finditer(state.text, s, e):
        b = state._skip_ws(m.end(), e)
        if state._cuts_cluster(b) or b in state.heading_ends:
            continue
        if state.titles and state._title_ends(m.start(), b):
            continue
        yield b


def reference_best_end(state, s: int, min_end: int):
    """``_best_end`` as its definition reads: the exact farthest end, then every level from the
    top, the first candidate whose chunk fits (``_first_fit`` over ``reference_candidates``,
    where the chunker walks the newlines and ASCII sentence ends in place)."""
    from bpecore.chunker import _CHAR, _MAX_FAILED_PER_LEVEL, _PARAGRAPH, _SECTION

    e_max = state._farthest_end(s, state.max_tokens)
    if e_max == state.n:
        end = state._rstrip(s, state.n)
        if end > min_end and state.counter.count(s, end) <= state.max_tokens:
            return state.n, end, state.counter.count(s, end)
    e = state._skip_ws(e_max) if state.trim else e_max
    for level in range(_SECTION + 5 if state.sections else _PARAGRAPH, _CHAR - 1, -1):
        cap = None if level == _CHAR else _MAX_FAILED_PER_LEVEL
        best = state._first_fit(s, min_end, reference_candidates(state, level, s, e), cap)
        if best[0] >= 0:
            return best
    return (-1, -1, -1)  # (the chunker's _NO_END)


def newline_walk(text: str, s: int, e: int, paragraph: bool) -> list[tuple[int, int]]:
    from bpecore.chunker import _Newlines

    walk, out = _Newlines(text, s, e, paragraph), []
    i = walk.next()
    while i >= 0:
        out.append((walk.j, i))
        i = walk.next()
    assert walk.next() == -1  # (and stays done)
    return out


def check_newline_candidates(text: str) -> None:
    for s in range(len(text) + 1):
        for e in range(s, len(text) + 1):
            want = [(m.start(), m.end() - 1) for m in _PARAGRAPH_RE.finditer(text, s, e)]
            assert newline_walk(text, s, e, True) == want, (text, s, e)
            want = [(m.start(), m.start()) for m in _LINE_RE.finditer(text, s, e)]
            assert newline_walk(text, s, e, False) == want, (text, s, e)


@given(text=NEWLINE_TEXTS)
def test_hyp_newline_candidates_are_the_reverse_regex_matches(text):
    check_newline_candidates(text[:24])


def test_newline_candidates_on_corpora(corpus):
    rng = random.Random(7)
    for name in CORPORA:
        text = corpus(name)
        for _ in range(20):
            s = rng.randrange(len(text) - 30)
            check_newline_candidates(text[s : s + 30])


def test_no_cut_fast_path_bounds():
    """No code point below the fast path's bounds is one that a cut must not go before or after."""
    from bpecore.chunker import (
        _FIRST_NO_CUT_AFTER,
        _FIRST_NO_CUT_BEFORE,
        _NO_CUT_AFTER,
        _NO_CUT_BEFORE,
    )

    assert not any(_NO_CUT_BEFORE.match(chr(c)) for c in range(ord(_FIRST_NO_CUT_BEFORE)))
    assert not any(_NO_CUT_AFTER.match(chr(c)) for c in range(ord(_FIRST_NO_CUT_AFTER)))


# Characters where the walks of the chunker's helpers and the regexes they stand for could part:
# every kind of whitespace, closers and terminators (ASCII and not), letters of every case,
# word characters that are not ASCII, and "|", "\t" (table rows are no titles).
_WALK_CHARS = (
    " \t\n\r\x0b\x0c\x1c\x1f\x85\xa0\u2028\u3000"
    "aZz_09.!?,;:'\"()[]{}|"
    "\u00e9\u00c9\u00aa\u02b0\u01c5\u65e5\u0394\u03b4\u0660"
    "\u3002\uff01\u00bb\u201d\u300d\u2019\u061f\u0964"
)


def _old_sentence_ends(state, start, end, b, lower):
    """``_Chunker._sentence_ends`` as the regexes say it (before its walks)."""
    from bpecore.chunker import _ABBREVIATIONS, _LIST_NUMBER, _LOWER, _WORD_BEFORE_DOT

    text = state.text
    if not lower and b < len(text) and _LOWER.match(text, b):
        return False
    if end - start == 1 and text[start] == ".":
        w = _WORD_BEFORE_DOT.search(text, max(0, start - 24), start + 1)
        if w is not None:
            word = w.group(1)
            if (len(word) == 1 and word.isalpha()) or word.lower() in _ABBREVIATIONS:
                return False
            if word[-1].isdigit() and _LIST_NUMBER.search(text, max(0, start - 8), start + 1):
                return False
    return True


@given(st.text(alphabet=_WALK_CHARS, max_size=40), st.data())
def test_walks_equal_their_regexes(cl100k, text, data):
    """The character walks that stand for regex calls (whitespace runs, the next word's end, the
    word before a dot, title lines) give what the regexes give."""
    from bpecore.chunker import (
        _NEXT_WORD_END,
        _NOT_TITLE_END,
        _TITLE_CHARS,
        _TITLE_START,
        _WS_HEAD,
        _WS_TAIL,
        _Chunker,
        _ends_clause,
        _title,
    )

    line = text.replace("\n", "")
    assert _ends_clause(line) == (_NOT_TITLE_END.search(line) is not None), line
    want = (
        0 < len(line) <= _TITLE_CHARS
        and _TITLE_START.match(line) is not None
        and _NOT_TITLE_END.search(line) is None
    )
    assert _title(line) == want, line
    if not text:
        return
    state = _Chunker(cl100k, text, 8, 0, True, False, "text")
    n = len(text)
    i = data.draw(st.integers(0, n))
    stop = data.draw(st.integers(i, n))
    m = _WS_HEAD.match(text, i, stop)
    assert state._skip_ws(i, stop) == (m.end() if m else i)
    m = _WS_TAIL.match(text, i, stop)
    assert state._ws_start(i, stop) == state._rstrip(i, stop) == (m.start() if m else stop)
    m = _NEXT_WORD_END.match(text, i, stop)
    assert state._next_word_end(i, stop) == (m.end() if m else -1)
    for start in range(n):
        if text[start] == ".":
            for b in (start + 1, min(n, start + 2)):
                for lower in (False, True):
                    got = state._sentence_ends(start, start + 1, b, lower)
                    assert got == _old_sentence_ends(state, start, start + 1, b, lower), (
                        text,
                        start,
                    )


def test_walks_on_corpora(corpus, cl100k):
    """The same on corpus lines and sentence ends (titles of real text, words before a dot)."""
    from bpecore.chunker import _NOT_TITLE_END, _TITLE_START, _Chunker, _ends_clause, _title

    for name in ("english", "multilingual", "code"):
        text = corpus(name)[:200_000]
        for line in text.split("\n"):
            line = line.strip()
            assert _ends_clause(line) == (_NOT_TITLE_END.search(line) is not None), line
            want = (
                0 < len(line) <= 80
                and _TITLE_START.match(line) is not None
                and _NOT_TITLE_END.search(line) is None
            )
            assert _title(line) == want, line
        state = _Chunker(cl100k, text, 8, 0, True, False, "text")
        for start in [i for i, c in enumerate(text) if c == "."][:5000]:
            b = state._skip_ws(start + 1)
            assert state._sentence_ends(start, start + 1, b, False) == _old_sentence_ends(
                state, start, start + 1, b, False
            )


@given(
    text=TEXTS | NEWLINE_TEXTS.map(lambda t: t * 8),
    max_tokens=st.sampled_from([1, 2, 4, 8, 16]),
    trim=st.booleans(),
    markdown=st.booleans(),
)
def test_hyp_best_end_equals_its_definition(cl100k, text, max_tokens, trim, markdown):
    from bpecore.chunker import _Chunker

    state = _Chunker(cl100k, text, max_tokens, 0, trim, markdown)
    for s in range(0, len(text), max(1, len(text) // 40)):
        for min_end in (s, s + 1):
            assert state._best_end(s, min_end) == reference_best_end(state, s, min_end), (
                s,
                min_end,
            )


SENTENCE_TEXTS = st.lists(
    st.sampled_from(
        [
            "word",
            "Word",
            " ",
            "  ",
            ". ",
            "! ",
            "?",
            ".",
            '." ',
            ") ",
            "\n",
            "\n\n",
            "Dr. ",
            "e.g. ",
            "\n2. ",
            "A. ",
            "\r\n",
            "\t",
            "Title\n",
            "x" * 30,
            "\u00e9t\u00e9. ",
        ]
    ),
    max_size=80,
).map("".join)


def check_levels(state, s: int, e: int) -> None:
    """Each level alone, from ``s`` to ``e``: the chunker's walks against the definitions."""
    from bpecore.chunker import _MAX_FAILED_PER_LEVEL, _PARAGRAPH, _WORD

    for level in range(_PARAGRAPH, _WORD - 1, -1):
        for min_end in (s, (s + e) // 2):
            want = state._first_fit(
                s, min_end, reference_candidates(state, level, s, e), _MAX_FAILED_PER_LEVEL
            )
            assert state._levels(s, min_end, e, level, level) == want, (level, s, min_end, e)


@given(text=SENTENCE_TEXTS, max_tokens=st.sampled_from([2, 8, 32]), trim=st.booleans())
def test_hyp_levels_equal_their_definitions(cl100k, text, max_tokens, trim):
    from bpecore.chunker import _Chunker

    state = _Chunker(cl100k, text, max_tokens, 0, trim, False, "text")
    step = max(1, len(text) // 12)
    for s in range(0, len(text), step):
        for e in range(s + 1, len(text) + 1, step):
            check_levels(state, s, e)


def test_levels_equal_their_definitions_on_corpora(corpus, cl100k):
    rng = random.Random(29)
    for name in CORPORA:
        text = corpus(name)[:300_000]
        for max_tokens in (16, 128):
            state = _Chunker(cl100k, text, max_tokens, 0, True, False)
            for _ in range(150):
                s = rng.randrange(len(text) - 4000)
                check_levels(state, s, s + rng.randrange(1, 4000))


@pytest.mark.parametrize("max_tokens", [16, 128, 512])
def test_best_end_equals_its_definition_on_corpora(corpus, cl100k, max_tokens):
    from bpecore.chunker import _Chunker

    for name in CORPORA:
        text = corpus(name)[100_000:140_000]
        for trim in (True, False):
            state = _Chunker(cl100k, text, max_tokens, 0, trim, False)
            for c in chunk(text, cl100k, max_tokens, trim=trim)[:60]:
                assert state._best_end(c.start, c.start) == reference_best_end(
                    state, c.start, c.start
                )


# ---------------------------------------------------------------------------- language=
# One definition per language: a comment or decorator above it, blank lines inside its body and
# none between definitions (so a chunker without the hint ends chunks inside definitions).
DEFINITIONS = {
    "python": (
        "@register\n{indent}def step_{i}(x):\n{indent}    total = x + {i}\n\n"
        "{indent}    total *= 2\n\n{indent}    return total\n"
    ),
    "javascript": (
        "// step {i}\n{indent}export function step{i}(x) {{\n{indent}  let t = x + {i};\n\n"
        "{indent}  t *= 2;\n\n{indent}  return t;\n{indent}}}\n"
    ),
    "typescript": (
        "/** step {i} */\n{indent}export const step{i} = (x: number): number => {{\n"
        "{indent}  let t = x + {i};\n\n{indent}  return t * 2;\n{indent}}};\n"
    ),
    "go": "// Step{i} doubles.\nfunc Step{i}(x int) int {{\n\tt := x + {i}\n\n\treturn t * 2\n}}\n",
    "rust": (
        "/// Step {i}.\n{indent}#[inline]\n{indent}pub fn step_{i}(x: u32) -> u32 {{\n"
        "{indent}    let t = x + {i};\n\n{indent}    t * 2\n{indent}}}\n"
    ),
}
STARTS = ("@", "def ", "class ", "//", "/**", "///", "export ", "func ", "pub fn", "#[", "impl")


@pytest.mark.parametrize("language", sorted(DEFINITIONS))
def test_language_cuts_at_definitions(cl100k, language):
    text = "".join(DEFINITIONS[language].format(i=i, indent="") for i in range(60))
    biggest = max(cl100k.count(DEFINITIONS[language].format(i=i, indent="")) for i in range(60))
    for max_tokens in (biggest, 2 * biggest + 5, 5 * biggest):
        chunks = chunk(text, cl100k, max_tokens, language=language)
        check_chunks(cl100k, text, chunks, max_tokens)
        assert all(c.text.startswith(STARTS) for c in chunks), [c.text[:20] for c in chunks]
        plain = chunk(text, cl100k, max_tokens, language="text")
        check_chunks(cl100k, text, plain, max_tokens)
        # As plain text, chunks start inside definitions.
        assert not all(c.text.startswith(STARTS) for c in plain)
        # Without a hint the language is detected (JavaScript read as TypeScript).
        assert chunk(text, cl100k, max_tokens) == chunk(
            text, cl100k, max_tokens, language=language.replace("javascript", "typescript")
        )


def test_detect_language(corpus):
    from bpecore.chunker import _detect_language

    for language in DEFINITIONS:
        text = "".join(DEFINITIONS[language].format(i=i, indent="") for i in range(60))
        assert _detect_language(text) == language.replace("javascript", "typescript")
    code = corpus("code")
    assert _detect_language(code) == "python"
    for name in ("english", "multilingual"):
        text = corpus(name)
        assert not any(_detect_language(text[i:]) for i in range(0, len(text), 50_000)), name
    # A few definitions in a long text are not enough, nor is prose that says "class" and "type".
    assert _detect_language("Some text.\n" * 200 + code[:3000]) is None
    assert _detect_language("\nclass A is here.\ntype B too.\nfunction C as well.\n" * 9) is None


def test_python_top_level_definitions_before_methods(cl100k):
    method = DEFINITIONS["python"].replace("@register\n", "").format
    classes = [
        f"class Box{i}:\n" + "".join(method(i=j, indent="    ") for j in range(3))
        for i in range(10)
    ]
    text = "\n\n".join(classes)
    size = max(cl100k.count(c) for c in classes)
    chunks = chunk(text, cl100k, size, language="python")
    check_chunks(cl100k, text, chunks, size)
    assert all(c.text.startswith("class Box") for c in chunks)
    # Below a class's size, methods are the boundaries, and a decorator stays with its def.
    chunks = chunk(
        text.replace("    def", "    @cached\n    def"), cl100k, size // 2, language="python"
    )
    assert all(c.text.startswith(("class Box", "@cached")) for c in chunks), [
        c.text[:12] for c in chunks
    ]


def reference_code_sections(state, language: str) -> list[tuple[int, int]]:
    """``_Chunker._code_sections`` as its docstring reads: every definition match, walked up over
    its attached lines; its indentation's width from the match's group, tabs expanded to 4."""
    from bpecore.chunker import _ATTACHED, _DEFINITIONS, _SECTION

    text, found = state.text, []
    for m in _DEFINITIONS[language].finditer(text):
        start = m.start()
        while start > 0:
            prev = text.rfind("\n", 0, start - 1) + 1
            if not _ATTACHED[language].match(text, prev, start - 1):
                break
            start = prev
        found.append((start, len(m.group("indent").expandtabs(4))))
    step = min([w for _, w in found if w], default=4)
    out: list[tuple[int, int]] = []
    for start, width in found:
        if not out or out[-1][0] != start:
            out.append((start, _SECTION + 5 - min(5, width // step)))
    return out


@pytest.mark.parametrize("language", ["python", "javascript", "go", "rust"])
def test_code_sections_equal_their_definition(corpus, cl100k, language):
    rng = random.Random(language)
    lines = [
        "def f(x):",
        "class A:",
        "async def g():",
        "function h() {",
        "export class B {",
        "const k = (a) => a;",
        "func F() {",
        "pub fn f() {",
        "impl T for U {",
        "# comment",
        "// comment",
        "@decorator",
        "#[derive(Debug)]",
        "    return 1",
        "}",
        "",
        "x = 1",
    ]
    indents = ["", "", "    ", "\t", "  \t", "        ", "\t\t", " "]
    texts = [corpus("code")[:100_000]] + [
        "\n".join(rng.choice(indents) + rng.choice(lines) for _ in range(200)) for _ in range(20)
    ]
    for text in texts:
        state = _Chunker(cl100k, text, 8, 0, True, False, language)
        assert state.sections == reference_code_sections(state, language)


def test_language_keeps_definitions_whole_on_the_code_corpus(corpus, cl100k):
    """On real code (CPython modules) every definition that fits (from its first line, decorators
    and comments included, to the next definition) is inside one chunk; as plain text, 88%."""
    from bisect import bisect_right

    from bpecore.chunker import _Chunker

    text = corpus("code")[:200_000]
    starts = [p for p, _ in _Chunker(cl100k, text, 8, 0, True, False, "python").sections]
    spans = []
    for a, b in zip(starts, starts[1:] + [len(text)]):
        piece = text[a:b]
        spans.append((a + len(piece) - len(piece.lstrip()), a + len(piece.rstrip())))
    for max_tokens in (128, 512):
        fits = [(a, b) for a, b in spans if cl100k.count(text[a:b]) <= max_tokens]
        whole = {}
        for language in ("text", "python", None):
            chunks = chunk(text, cl100k, max_tokens, language=language)
            check_chunks(cl100k, text, chunks, max_tokens)
            firsts = [c.start for c in chunks]
            whole[language] = sum(
                chunks[i].start <= a and b <= chunks[i].end
                for a, b in fits
                if (i := bisect_right(firsts, a) - 1) >= 0
            )
        assert whole["python"] == whole[None] == len(fits) > whole["text"], (max_tokens, whole)


def test_attached_marks_are_the_patterns_first_characters():
    """A line attached above a definition starts (after spaces and tabs) with one of the marks
    the walk checks before the regex: every pattern that matches a line of indentation, a
    character and two more characters starts it with a mark, and every mark starts a match."""
    from bpecore.chunker import _ATTACHED, _ATTACHED_MARKS

    assert set(_ATTACHED) == set(_ATTACHED_MARKS)
    chars = [chr(c) for c in range(33, 127)] + ["\u00e9", "\u3000"]  # (spaces and tabs indent)
    for language, pattern in _ATTACHED.items():
        marks = _ATTACHED_MARKS[language]
        for indent in ("", "  ", "\t"):
            for c in chars:
                for rest in ("[x", "/ ", "* ", "![", "xx"):
                    line = indent + c + rest
                    if pattern.match(line):
                        assert c in marks, (language, line)
            for c in marks:
                assert any(pattern.match(indent + c + rest) for rest in ("[x", "/ ", "* ", "![")), c


def test_bad_language(cl100k):
    with pytest.raises(ValueError, match="language"):
        chunk("x", cl100k, 8, language="cobol")
    with pytest.raises(ValueError, match="choose one"):
        chunk("x", cl100k, 8, markdown=True, language="python")
    text = "# A\n\ntext\n\n## B\n\nmore text"
    assert chunk(text, cl100k, 4, language="markdown") == chunk(text, cl100k, 4, markdown=True)


CODE_TEXTS = st.lists(
    st.sampled_from(
        [
            "def f(x):\n",
            "    return x\n",
            "@dec\n",
            "# c\n",
            "class A:\n",
            "\n",
            "    def m(s):\n",
            "fn main() {\n",
            "}\n",
            "function g() {\n",
            "// c\n",
            "func F() {\n",
            "\t",
            " ",
            "x = 1",
        ]
    ),
    max_size=120,
).map("".join)


@given(
    text=CODE_TEXTS | TEXTS,
    max_tokens=st.sampled_from(LIMITS),
    trim=st.booleans(),
    language=st.sampled_from([None, "text", *sorted(DEFINITIONS)]),
    overlap=st.sampled_from([0, 0, 1, 3]),
    balance=st.booleans(),
)
def test_hyp_language_contract(cl100k, text, max_tokens, trim, language, overlap, balance):
    overlap = min(overlap, max_tokens - 1)
    chunks = chunk_or_unfittable(
        cl100k, text, max_tokens, overlap=overlap, trim=trim, language=language, balance=balance
    )
    if chunks is not None:
        check_chunks(cl100k, text, chunks, max_tokens, trim=trim, overlap=overlap)


# ------------------------------------------------------------------------------ compiled searches
# _crossing, _look_ahead and _nearest_start hand their query loops to IntervalCounter.crossing,
# last_end_within and crossing_before (test_interval.py checks those against the loops they
# replace); here the chunker's use of them against the definitions, with the steps it asks.
@pytest.mark.parametrize("name", ["english", "code", "multilingual", "adv_whitespace"])
@pytest.mark.parametrize("encoding_name", ["cl100k_base", "o200k_base"])
def test_chunker_searches_meet_their_definitions(corpus, encoding_name, name):
    from bpecore.chunker import _Chunker

    enc = bpecore.get_encoding(encoding_name)
    text = corpus(name)[:30_000]
    state = _Chunker(enc, text, 100, 0, True, False)
    rng = random.Random(name + encoding_name)

    def count(i, j):
        return enc.count(text[i:j])

    for _ in range(25):
        s = rng.randrange(len(text))
        tokens = rng.choice([1, 4, 30, 200])
        state.chars_per_token = rng.choice([1.0, 4.0, 20.0])
        lo, stop = state._crossing(s, tokens)
        if lo == len(text):
            assert count(s, lo) <= tokens and stop == lo
            continue
        assert count(s, lo) <= tokens < count(s, lo + 1)
        assert lo < stop <= len(text)
        ends = [e for e in range(lo + 2, stop + 1) if count(s, e) <= tokens]
        assert state._look_ahead(s, tokens, lo, lo + 2, stop) == max(ends, default=lo)
        e = min(len(text), s + rng.randrange(1, 3000))
        assert state._nearest_start(e, s, tokens) == s + enc.split_at_end(text[s:e], tokens)


@pytest.mark.parametrize("name", ["english", "multilingual"])
def test_count_only_counters_search_like_the_interval_counter(corpus, cl100k, name):
    """Counters with only ``count`` (pipeline encodings) get the same searches from Python; the
    compiled ``crossing`` and ``crossing_before`` start from the pass's running counts, so where
    counts are not monotonic (" distribution" after 64 tokens: 64, 65, 64 ... over its prefixes)
    they may meet another crossing: both must be crossings."""
    from bpecore.chunker import _CountSearches

    text = corpus(name)[:20_000]
    ic = cl100k.interval_counter(text, piece_tables=False)
    slow = _CountSearches(ic)
    rng = random.Random(name)
    for _ in range(40):
        s = rng.randrange(len(text))
        tokens = rng.choice([0, 1, 7, 64, 300])
        step = rng.randrange(1, 2000)
        for lo in (slow.crossing(s, tokens, step), ic.crossing(s, tokens, step)):
            assert ic.count(s, lo) <= tokens
            assert lo == len(text) or tokens < ic.count(s, lo + 1)
        e = min(len(text), s + rng.randrange(0, 3000))
        for near in (
            slow.crossing_before(e, s, tokens, step),
            ic.crossing_before(e, s, tokens, step),
        ):
            assert s <= near <= e and ic.count(near, e) <= tokens
            assert near == s or tokens < ic.count(near - 1, e)
        first, stop = s + rng.randrange(0, 30), s + rng.randrange(0, 60)
        assert slow.last_end_within(s, tokens, first, stop) == ic.last_end_within(
            s, tokens, first, stop
        )

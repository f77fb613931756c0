"""The streaming counters of pipeline encodings against their definition: after every push, the
count is ``enc.count(text so far)``.

``HFEncoding.appendable_counter()`` / ``prependable_counter()`` run the plain encoding's compiled
counter while the pipeline leaves the text alone (``_GuardedCounter``), cut the stream at
non-special added tokens (``_CutAppender``, ``_CutPrepender``), or serve a pattern without a
scanner (``_RegexAppender``, ``_RegexPrepender``), and recount per push from the first push after
which the text is not left alone. The pushes here are chosen to cross those edges: an added
token's text split over two pushes, a combining mark (or a Hangul vowel) arriving after its base,
text NFC rewrites, bytes cut inside a character, lone surrogates, and a str push after bytes
that stop inside a character (refused, as the compiled counter refuses it).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore
from bpecore.gguf import load_gguf
from tests.conftest import read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="the synthetic files are trained with it")
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>"]
VOCABS = Path(__file__).resolve().parents[2] / "build" / "gguf-vocabs"


def _trained(pre) -> tokenizers.Tokenizer:
    """A byte-level BPE of 600 tokens with NFC and ``pre``, trained on slices of the corpora."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    texts = [read_corpus(name)[:30_000] for name in ("english", "multilingual", "code")]
    tok.train_from_iterator(texts, trainer)
    return tok


#: kind -> (pre-tokenizer, non-special added tokens as (text, normalized)), and the counters
#: each kind gets (appending, prepending) while its text is left alone.
_KINDS = {
    # Qwen2's layout with special tokens only: the compiled counters behind a guard
    "qwen-specials": ("qwen", [], ("_GuardedCounter", "_GuardedCounter")),
    # a chat template's markers as non-special raw tokens: the stream is cut at them
    "qwen-added": (
        "qwen",
        [("<tool_call>", False), ("</tool_call>", False), ("<tool", False)],
        ("_CutAppender", "_CutPrepender"),
    ),
    # non-special tokens at both levels (raw and normalized): guarded, recount at their texts
    "qwen-both": (
        "qwen",
        [("<tool_call>", False), ("café", True), ("e\u0301x", True)],
        ("_GuardedCounter", "_GuardedCounter"),
    ),
    # GPT-NeoX's layout: GPT-2's ByteLevel, its runs of 2 to 24 spaces as added tokens
    "neox": (
        "neox",
        [(" " * n, False) for n in range(24, 1, -1)],
        ("_CutAppender", "_CutPrepender"),
    ),
}


@pytest.fixture(scope="module")
def pipelines(tmp_path_factory) -> dict[str, bpecore.Encoding]:
    directory = tmp_path_factory.mktemp("hf-counters")
    base = {
        "qwen": _trained(
            pre_tokenizers.Sequence(
                [
                    pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                    pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
                ]
            )
        ),
        "neox": _trained(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)),
    }
    out = {}
    for kind, (pre, added, _) in _KINDS.items():
        tok = tokenizers.Tokenizer.from_str(base[pre].to_str())
        tok.add_special_tokens([AddedToken(t, normalized=False) for t in SPECIALS])
        tok.add_tokens([AddedToken(t, normalized=n) for t, n in added])
        path = directory / f"{kind}.json"
        path.write_text(tok.to_str(), encoding="utf-8")
        out[kind] = bpecore.load_hf(path)
    return out


_PARTS = st.sampled_from(
    ["a", "hello", " world", " ", "  ", " " * 30, "\n", "\t", "12", ".", "'s", "日本", "é",
     "e", "\u0301", "\u0308", "x", "Å", "\u212b", "가", "\u11a8", "\u1100", "\u1161", "ﬁ",
     "<tool", "_call>", "<tool_call>", "</tool_", "call>", "<|im_", "start|>", "<|endoftext|>",
     "caf", "cafe", "\ud800", "a" * 40]
)  # fmt: skip


def _push_appending(counter, part: str, cut: int | None) -> None:
    """Push ``part`` as str (cut None) or as its UTF-8 in two pushes cut at byte ``cut``."""
    if cut is None:
        counter.push(part)
        return
    data = _clean(part).encode("utf-8")
    cut = min(cut, len(data))
    counter.push(data[:cut])
    counter.push(data[cut:])


def _clean(text: str) -> str:
    """``text`` as the counters take it: a lone surrogate is U+FFFD."""
    return text.replace("\ud800", "\ufffd")


def _check_appending(enc, parts: list[str], cuts: list[int | None], snap: int | None) -> None:
    count = enc.count
    counter = enc.appendable_counter()
    text = ""
    twin = None
    for i, (part, cut) in enumerate(zip(parts, cuts)):
        text += _clean(part)
        _push_appending(counter, part, cut)
        assert counter.count == count(text), (parts[: i + 1], cuts[: i + 1])
        assert counter.bytes + counter.pending_bytes == text.encode("utf-8")
        if twin is not None:
            _push_appending(twin, part, cut)
            assert twin.count == counter.count, (parts[: i + 1], cuts[: i + 1])
        if i == snap:  # pickled mid-stream, in whichever mode the counter is in
            twin = pickle.loads(pickle.dumps(counter))
            assert twin.count == counter.count
            assert getattr(twin, "recounting", False) == getattr(counter, "recounting", False)
    assert counter.push("!") == count(text + "!")


def _check_prepending(enc, parts: list[str], as_bytes: list[bool], snap: int | None) -> None:
    count = enc.count
    counter = enc.prependable_counter()
    text = ""
    twin = None
    for i, (part, raw) in enumerate(zip(reversed(parts), as_bytes)):
        data = _clean(part).encode("utf-8") if raw else part
        text = _clean(part) + text
        assert counter.push(data) == count(text), (parts, i)
        assert counter.count == count(text)
        assert counter.bytes == text.encode("utf-8")
        if twin is not None:
            assert twin.push(data) == counter.count, (parts, i)
        if i == snap:
            twin = pickle.loads(pickle.dumps(counter))
            assert twin.count == counter.count
            assert getattr(twin, "recounting", False) == getattr(counter, "recounting", False)
    assert counter.push("¿") == count("¿" + text)


@pytest.mark.parametrize("kind", sorted(_KINDS))
def test_counter_paths(pipelines, kind):
    """Each synthetic layout takes the path it is here for, and moves to recounting at the first
    push after which the text is not left alone, not before."""
    enc = pipelines[kind]
    appending, prepending = enc.appendable_counter(), enc.prependable_counter()
    assert (type(appending).__name__, type(prepending).__name__) == _KINDS[kind][2]
    for counter in (appending, prepending):
        counter.push("plain words and 12 digits, 日本語 ﬁ")
        assert not counter.recounting
        counter.push("e")
        counter.push("\u0301")  # a combining mark: NFC may compose it, so not left alone
        assert counter.recounting
        assert counter.count == enc.count(counter.text)


@pytest.mark.parametrize("kind", sorted(_KINDS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_hyp_appending_equals_count(pipelines, kind, data):
    """After every push (str, or bytes cut inside a character) the appending counter's count is
    ``count`` of the text so far, through the move to recounting; pickled mid-stream, the copy
    goes on as the original."""
    parts = data.draw(st.lists(_PARTS, min_size=1, max_size=14), label="parts")
    cuts = data.draw(
        st.lists(st.none() | st.integers(0, 4), min_size=len(parts), max_size=len(parts)),
        label="cuts",
    )
    snap = data.draw(st.integers(0, len(parts)), label="snap")
    _check_appending(pipelines[kind], parts, cuts, snap)


@pytest.mark.parametrize("kind", sorted(_KINDS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_hyp_prepending_equals_count(pipelines, kind, data):
    """After every push in front (str or complete UTF-8) the prepending counter's count is
    ``count`` of the text so far; pickled mid-stream, the copy goes on as the original."""
    parts = data.draw(st.lists(_PARTS, min_size=1, max_size=14), label="parts")
    as_bytes = data.draw(
        st.lists(st.booleans(), min_size=len(parts), max_size=len(parts)), label="as_bytes"
    )
    snap = data.draw(st.integers(0, len(parts)), label="snap")
    _check_prepending(pipelines[kind], parts, as_bytes, snap)


@pytest.mark.parametrize("kind", sorted(_KINDS))
@pytest.mark.parametrize("recounting", [False, True], ids=["compiled", "recounting"])
def test_utf8_contract(pipelines, kind, recounting):
    """The pushes the compiled counters refuse are refused in both modes, and leave the counter
    as it was: invalid UTF-8, a str after bytes that stop inside a character (appending), bytes
    that are not complete UTF-8 (prepending). A lone surrogate counts as U+FFFD."""
    enc = pipelines[kind]
    counter = enc.appendable_counter()
    counter.push("e\u0301" if recounting else "e")
    assert counter.recounting == recounting
    counter.push(b"ab\xe6\x97")
    assert counter.pending_bytes == b"\xe6\x97"
    text, count = counter.text, counter.count
    # offsets count from the held bytes, as the compiled counter's do: \xe6 is byte 0
    with pytest.raises(ValueError, match=r"invalid UTF-8 in pushed bytes: .* at byte 0$"):
        counter.push(b"\xff")
    with pytest.raises(ValueError, match="a str push follows bytes that stop inside"):
        counter.push("z")
    with pytest.raises(TypeError, match="push takes str or bytes, not int"):
        counter.push(5)
    assert (counter.text, counter.count, counter.pending_bytes) == (text, count, b"\xe6\x97")
    assert counter.push(b"\xa5") == enc.count(text + "日")
    assert counter.push("\ud800x") == enc.count(text + "日\ufffdx")
    assert counter.bytes.endswith("日\ufffdx".encode())
    assert pickle.loads(pickle.dumps(counter)).count == counter.count

    front = enc.prependable_counter()
    front.push("e\u0301" if recounting else "e")
    assert front.recounting == recounting
    text, count = front.text, front.count
    for bad, at in ((b"\xe6\x97", 0), (b"\xa5", 0), (b"ab\xff", 2)):
        with pytest.raises(
            ValueError, match=f"pushed bytes are not complete UTF-8: .* at byte {at}$"
        ):
            front.push(bad)
    with pytest.raises(TypeError, match="push takes str or bytes, not int"):
        front.push(5)
    assert (front.text, front.count) == (text, count)
    assert front.push("\ud800x") == enc.count("\ufffdx" + text)
    assert front.bytes.startswith("\ufffdx".encode())
    assert pickle.loads(pickle.dumps(front)).count == front.count


#: llama.cpp's families (``scripts/gguf_vocabs.sh``): file name, pre-tokenizer name when the file
#: has none; the ones that take seconds to load run in the slow suite.
_GGUF = {
    "command-r": None, "deepseek-coder": None, "deepseek-llm": None, "falcon": None,
    "gpt-2": None, "gpt-neox": "mpt", "llama-bpe": None, "mpt": None, "qwen2": None,
    "qwen35": None, "refact": None, "starcoder": None,
}  # fmt: skip
_GGUF_LARGE = {"command-r", "llama-bpe", "qwen35"}


@pytest.fixture(
    scope="module",
    params=[pytest.param(f, marks=pytest.mark.slow) if f in _GGUF_LARGE else f for f in _GGUF],
)
def gguf(request):
    if not VOCABS.is_dir():
        pytest.skip(f"{VOCABS} is missing: scripts/gguf_vocabs.sh fetches llama.cpp's vocabularies")
    family = request.param
    return family, load_gguf(VOCABS / f"ggml-vocab-{family}.gguf", pre=_GGUF[family])


_GGUF_PARTS = st.sampled_from(
    ["a", "Hello", " world", " ", "   ", " " * 40, "\n", "\t", "'s", "12345", "7" * 30, "日本語",
     "é", "e\u0301", "ü", "\u00b2", "1\u00bd", "!", "...", "<|endoftext|>", "<|endof", "text|>",
     "<|im_start|>", "\u212b", "x" * 50, "\ud800"]
)  # fmt: skip


@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_hyp_gguf_counters_equal_count(gguf, data):
    """Both counters of each llama.cpp family against ``count`` after every push (bytes cut
    inside characters, added and special tokens' texts split over pushes). Not pickled here: a
    GGUF encoding pickles by loading its file again (seconds); test_gguf_document pickles."""
    _, enc = gguf
    parts = data.draw(st.lists(_GGUF_PARTS, min_size=1, max_size=12), label="parts")
    cuts = data.draw(
        st.lists(st.none() | st.integers(0, 4), min_size=len(parts), max_size=len(parts)),
        label="cuts",
    )
    _check_appending(enc, parts, cuts, None)
    _check_prepending(enc, parts, [c is not None for c in cuts], None)


def test_gguf_document(gguf):
    """The families' real counters on a document pushed in 7-byte steps and in front in 7
    character steps: equal to ``count`` after every push; pickled halfway (with a character cut
    in two when appending), the copy goes on as the original."""
    family, enc = gguf
    text = read_corpus("multilingual")[:1500] + json.dumps({"k": "ü  日本"}, ensure_ascii=False)
    text += " 日本語の文章。" * 8 + " " * 30
    data = text.encode("utf-8")
    counter = enc.appendable_counter()
    pickled = False
    for i in range(0, len(data), 7):
        counter.push(data[i : i + 7])
        assert counter.count == enc.count(data[: i + 7].decode("utf-8", "ignore")), (family, i)
        if i > len(data) // 2 and counter.pending_bytes and not pickled:
            counter, pickled = pickle.loads(pickle.dumps(counter)), True
    assert pickled
    front = enc.prependable_counter()
    for i in range(len(text), 0, -7):
        front.push(text[max(0, i - 7) : i])
        assert front.count == enc.count(text[max(0, i - 7) :]), (family, i)
        if i == len(text) - 7 * 40:
            front = pickle.loads(pickle.dumps(front))


def test_llama3_lone_surrogate():
    """Llama 3's counters (the compiled counter behind ``_GuardedCounter``) take a lone surrogate
    as U+FFFD, as ``count`` does: the guard read the raw str and raised UnicodeEncodeError after
    the compiled counter had taken the push."""
    enc = bpecore.get_encoding("llama3")
    for counter in (enc.appendable_counter(), enc.prependable_counter()):
        assert counter.push("ab\ud800cd") == enc.count("ab\ufffdcd")
        assert counter.bytes == "ab\ufffdcd".encode()
        assert pickle.loads(pickle.dumps(counter)).count == counter.count

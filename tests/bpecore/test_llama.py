"""Llama 3 / Llama 4 ``tokenizer.model`` against Meta's own tokenizer (`llama-models`): 0 mismatches."""

from __future__ import annotations

import base64
import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.llama import LLAMA3_PATTERN, LLAMA4_PATTERN, installed_path, special_token_names
from bpecore.pretokenize import CL100K_PATTERN, O200K_PATTERN, pattern_kind, split
from bpecore.reference import bpe_encode
from tests.conftest import CORPORA, assert_exact_operations, read_corpus

DEFAULT_CHARS = 200_000  # per corpus in the default run; the slow run takes all of each


def _meta(version: int):
    try:
        if version == 3:
            from llama_models.llama3.tokenizer import Tokenizer
        else:
            from llama_models.llama4.tokenizer import Tokenizer
    except ImportError:
        pytest.skip("llama-models (test extra) is not installed: it is Meta's reference tokenizer")
    return Tokenizer.get_instance()


@pytest.fixture(scope="module", params=[3, 4], ids=["llama3", "llama4"])
def pair(request):
    meta = _meta(request.param)
    return request.param, bpecore.get_encoding(f"llama{request.param}"), meta


def test_specials_and_size_equal_meta(pair):
    version, enc, meta = pair
    assert enc.special_tokens == meta.special_tokens
    assert enc.n_vocab == meta.n_words == {3: 128_256, 4: 202_048}[version]
    assert list(enc.special_tokens) == special_token_names(version)


def _check(enc, meta, text: str) -> None:
    want = meta.model.encode_ordinary(
        text
    )  # Meta's tiktoken Encoding: its pattern, ranks, specials
    assert enc.encode_ordinary(text) == want
    assert enc.count(text) == len(want)


def test_ids_equal_meta_on_corpora(pair):
    _, enc, meta = pair
    for name in CORPORA:
        _check(enc, meta, read_corpus(name)[:DEFAULT_CHARS])


@pytest.mark.slow
def test_ids_equal_meta_full_corpora(pair):
    _, enc, meta = pair
    for name in CORPORA:
        _check(enc, meta, read_corpus(name))


def test_every_token_text_equals_meta(pair):
    """Each token's own text: covers Llama 3's tokens ranked before their parts and those BPE
    never forms (a piece that is one of them is that token, as in tiktoken)."""
    _, enc, meta = pair
    for data in meta.model._mergeable_ranks:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            continue
        assert enc.encode_ordinary(text) == meta.model.encode_ordinary(text), data


def test_meta_encode_without_its_window_cuts(pair):
    """Meta's ``Tokenizer.encode`` itself, on texts without runs it cuts (> 25,000 characters)."""
    _, enc, meta = pair
    text = read_corpus("english")[:50_000] + read_corpus("multilingual")[:50_000]
    assert enc.encode_ordinary(text) == meta.encode(text, bos=False, eos=False)
    marked = "<|begin_of_text|>Hi<|end_of_text|> x"
    assert enc.encode(marked, allowed_special="all") == meta.encode(
        marked, bos=False, eos=False, allowed_special="all"
    )


@given(
    text=st.one_of(
        st.text(max_size=80),
        st.lists(
            st.sampled_from(
                [
                    " ",
                    "\n",
                    "\r",
                    "'s",
                    ".:",
                    ".",
                    ":",
                    "a",
                    "A",
                    "é",
                    "1",
                    "日本",
                    " việc",
                    "\t",
                    " jeho",
                ]
            ),
            max_size=30,
        ).map("".join),
    )
)
def test_hyp_equal_meta(pair, text):
    _, enc, meta = pair
    _check(enc, meta, text)
    marked = text + "<|end_of_text|>" + text
    assert enc.encode(marked, allowed_special="all") == meta.model.encode(
        marked, allowed_special="all"
    )


def test_patterns_are_the_shipped_ones():
    """Llama 4's pattern is o200k's string; Llama 3's is Meta's string (cl100k's before tiktoken's
    possessive rewrite), which cuts a whitespace run at the end of a text differently and has a
    scanner of its own."""
    _meta(3)
    assert LLAMA4_PATTERN == O200K_PATTERN
    assert bpecore.get_encoding("llama4").pattern == O200K_PATTERN
    assert bpecore.get_encoding("llama3").pattern == LLAMA3_PATTERN != CL100K_PATTERN
    assert bpecore.get_encoding("llama3")._core.kind == pattern_kind(LLAMA3_PATTERN)
    assert split(LLAMA3_PATTERN, "a \n  ") == ["a", " \n", "  "]
    assert split(CL100K_PATTERN, "a \n  ") == ["a", " \n  "]


def test_llama3_count_till_limit():
    meta = _meta(3)
    enc = bpecore.get_encoding("llama3")
    text = read_corpus("multilingual")[:20_000]
    n = len(meta.model.encode_ordinary(text))
    assert enc.count_till_limit(text, n) == n and enc.count_till_limit(text, n - 1) is None


def test_llama4_exact_operations():
    _meta(4)
    enc = bpecore.get_encoding("llama4")
    text = read_corpus("english")[:3000]
    k = enc.split_at(text, 50)
    assert enc.count(text[:k]) <= 50 < enc.count(text[: k + 1])
    ic = enc.interval_counter(text)
    assert all(ic.count(a, b) == enc.count(text[a:b]) for a, b in [(0, 100), (17, 950)])


def _rank_file(tmp_path, tokens: list[bytes]):
    lines = [base64.b64encode(t) + b" " + str(i).encode() for i, t in enumerate(tokens)]
    path = tmp_path / "tokenizer.model"
    path.write_bytes(b"\n".join(lines) + b"\n")
    return path


def test_load_llama_version_by_size(tmp_path):
    path = _rank_file(tmp_path, [bytes([b]) for b in range(256)] + [b"ab"])
    with pytest.raises(bpecore.VocabError, match="pass version=3 or version=4"):
        bpecore.load_llama(path)
    enc = bpecore.load_llama(path, version=3, name="tiny")
    assert enc.encode_ordinary("ab") == [256]
    assert enc.special_tokens["<|begin_of_text|>"] == 257
    assert len(enc.special_tokens) == 256
    with pytest.raises(bpecore.VocabError, match="does not match the expected"):
        bpecore.load_llama(path, version=4, expected_sha256="0" * 64)


def test_load_llama_token_ranked_before_its_parts(tmp_path):
    """A token ranked before a part (b"abab" before b"ab") and one BPE never forms (b"bc"):
    ids equal tiktoken's on the same file."""
    tiktoken = pytest.importorskip("tiktoken")
    tokens = [bytes([b]) for b in range(256)] + [b"abab", b"ab", b"bc", b"ca"]
    ranks = {t: i for i, t in enumerate(tokens)}
    enc = bpecore.load_llama(_rank_file(tmp_path, tokens), version=3)
    ref = tiktoken.Encoding("t", pat_str=LLAMA3_PATTERN, mergeable_ranks=ranks, special_tokens={})
    for text in ["abab", "ababab", "bc", "abc", "bca", "cab cabab", "ab bc abab"]:
        assert enc.encode_ordinary(text) == ref.encode_ordinary(text), text
    again = pickle.loads(pickle.dumps(enc))
    assert again.encode_ordinary("cab cabab bc") == ref.encode_ordinary("cab cabab bc")


def test_missing_package_says_how_to_get_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "llama_models" else real(name, *a),
    )
    with pytest.raises(bpecore.VocabError, match="pip install llama-models"):
        installed_path(3)


def test_llama3_compiled_paths_equal_meta():
    """count, count_till_limit and the batch calls find the tokens BPE never forms in the core."""
    meta = _meta(3)
    enc = bpecore.get_encoding("llama3")
    texts = []
    for data in meta.model._mergeable_ranks:
        try:
            texts.append(data.decode("utf-8"))
        except UnicodeDecodeError:
            continue
    whole = [t for t in texts if len(meta.model.encode_ordinary(t)) == 1 and len(t) > 1]
    texts = whole[:2000] + [read_corpus("code")[:30_000], " ".join(whole[:500])]
    want = [meta.model.encode_ordinary(t) for t in texts]
    assert enc.encode_ordinary_batch(texts) == want
    assert enc.count_batch(texts) == [len(w) for w in want]
    assert [enc.count_till_limit(t, len(w)) for t, w in zip(texts, want)] == [len(w) for w in want]
    assert all(enc.count_till_limit(t, len(w) - 1) is None for t, w in zip(texts, want))
    assert [enc.encode_piece(t.encode()) for t in whole[:200]] == want[:200]


def test_llama3_horizon_operations_are_exact():
    """split_at, split_at_end, interval counts and both counters against their definitions
    (brute force over enc.count, which is checked against Meta above), on text that spells
    whole-piece-only tokens (the slower exact path) and text that does not (compiled)."""
    meta = _meta(3)
    enc = bpecore.get_encoding("llama3")
    ranks = meta.model._mergeable_ranks
    whole = []  # tokens tiktoken's merge loop never forms from their bytes
    for data in ranks:
        if len(data) > 1 and len(bpe_encode(ranks, data)) > 1:
            try:
                whole.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                continue
    assert whole and enc._spells_whole(" ".join(whole[:3]))
    plain = read_corpus("english")[:90]
    assert not enc._spells_whole(plain)
    spelled = plain[:40] + whole[0] + " x" + whole[-1] + plain[40:70]
    for text in (plain, spelled):
        assert_exact_operations(enc, text, enc.count)


def _whole_texts(enc) -> list[str]:
    return [t.decode("utf-8") for t in enc._vocab_whole_tokens() if t.isascii() or len(t) < 40][:40]


@given(data=st.data())
def test_hyp_llama3_streaming_counters(data):
    """Both counters of llama3 against ``count`` after every push: pushes cut out of its
    whole-piece-only tokens (which may be completed across pushes, where the counter moves from
    the compiled one to recounting), ASCII and whitespace; and pickled mid-stream."""
    enc = bpecore.get_encoding("llama3")
    words = [*_whole_texts(enc), "a", " ", ".:", "\n", "x y", "日本"]
    parts = data.draw(
        st.lists(
            st.tuples(st.sampled_from(words), st.integers(0, 40), st.integers(1, 40)).map(
                lambda t: t[0][t[1] : t[1] + t[2]] or t[0]
            ),
            min_size=1,
            max_size=8,
        )
    )
    appending, prepending = enc.appendable_counter(), enc.prependable_counter()
    text = ""
    for part in parts:
        text += part
        assert appending.push(part) == enc.count(text)
    text = ""
    for part in reversed(parts):
        text = part + text
        assert prepending.push(part) == enc.count(text)
    for counter in (appending, prepending):
        again = pickle.loads(pickle.dumps(counter))
        assert again.count == counter.count and again.bytes == counter.bytes


def test_llama3_streaming_counters_switch():
    """A whole-piece-only token completed across pushes (or bytes cut inside a character) moves
    the counter to recounting, with the right counts on both sides of the move."""
    enc = bpecore.get_encoding("llama3")
    token = next(t for t in _whole_texts(enc) if not t.isascii())
    head, tail = token[:3], token[3:]
    counter = enc.appendable_counter()
    assert counter.push("hello" + head) == enc.count("hello" + head)
    assert not counter.recounting
    data = tail.encode("utf-8")
    assert counter.push(data[:1]) == enc.count("hello" + head)  # inside a character: pending
    assert counter.push(data[1:]) == enc.count("hello" + token)
    assert counter.recounting
    assert counter.push(" more") == enc.count("hello" + token + " more")
    prepending = enc.prependable_counter()
    assert prepending.push(tail) == enc.count(tail) and not prepending.recounting
    assert prepending.push(head) == enc.count(token) and prepending.recounting


@pytest.mark.parametrize("fill", [" ", "a", "日"])
def test_llama3_streaming_linear(fill):
    """1 MB-class streams of one character pushed a character at a time: 4x the text costs
    about 4x the CPU time (each push recounted the text before: 20,000 spaces took 1.2 s)."""
    import time

    enc = bpecore.get_encoding("llama3")
    times = []
    for size in (50_000, 200_000):
        counter = enc.appendable_counter()
        start = time.process_time()
        for char in fill * size:
            counter.push(char)
        times.append(time.process_time() - start)
        assert counter.count == enc.count(fill * size)
    assert times[1] < 10 * max(times[0], 0.01), times

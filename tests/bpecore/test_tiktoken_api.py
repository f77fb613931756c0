"""tiktoken's public API on bpecore: each call's answer equals tiktoken's on the same ranks."""

from __future__ import annotations

import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import bpecore

tiktoken = pytest.importorskip("tiktoken")

NAMES = ["cl100k_base", "r50k_base", "o200k_base"]


@pytest.fixture(scope="module")
def pair():
    cache: dict[str, tuple] = {}

    def get(name: str):
        if name not in cache:
            enc = bpecore.get_encoding(name)
            ref = tiktoken.Encoding(
                name,
                pat_str=enc.pattern,
                mergeable_ranks=enc._mergeable_ranks,
                special_tokens=enc.special_tokens,
            )
            cache[name] = (enc, ref)
        return cache[name]

    return get


def test_module_functions():
    import tiktoken.model as tm

    for model, name in tm.MODEL_TO_ENCODING.items():
        assert bpecore.encoding_name_for_model(model) == name
    for prefix in tm.MODEL_PREFIX_TO_ENCODING:
        assert bpecore.encoding_name_for_model(prefix + "x-2025") == tm.encoding_name_for_model(
            prefix + "x-2025"
        )
    assert bpecore.encoding_for_model("gpt-oss-20b").name == "o200k_harmony"
    assert bpecore.encoding_for_model("ft:gpt-4o-mini:org::id").name == "o200k_base"
    with pytest.raises(KeyError, match="Could not automatically map nope"):
        bpecore.encoding_for_model("nope")
    assert {
        "gpt2",
        "r50k_base",
        "p50k_base",
        "p50k_edit",
        "cl100k_base",
        "o200k_base",
        "o200k_harmony",
    } <= set(bpecore.list_encoding_names())
    with pytest.raises(ValueError):
        bpecore.get_encoding("nope")
    with pytest.raises(ValueError, match="Expected a string"):
        bpecore.get_encoding(["cl100k_base"])


def test_signatures_match_tiktoken():
    import inspect

    for name in (
        "encode",
        "encode_ordinary",
        "encode_batch",
        "encode_ordinary_batch",
        "encode_to_numpy",
        "encode_with_unstable",
        "encode_single_token",
        "decode",
        "decode_bytes",
        "decode_batch",
        "decode_bytes_batch",
        "decode_with_offsets",
        "decode_single_token_bytes",
        "decode_tokens_bytes",
        "token_byte_values",
        "is_special_token",
        "_encode_single_piece",
        "_encode_bytes",
    ):
        ours = inspect.signature(getattr(bpecore.Encoding, name)).parameters
        theirs = inspect.signature(getattr(tiktoken.Encoding, name)).parameters
        assert [(p.name, p.kind) for p in ours.values()] == [
            (p.name, p.kind) for p in theirs.values()
        ], name
        for p in theirs.values():
            if p.default is not inspect.Parameter.empty:
                assert ours[p.name].default == p.default or (
                    p.default == set() and ours[p.name].default == frozenset()
                ), (name, p.name)


def test_every_public_name_of_tiktoken_encoding_exists():
    names = {n for n in dir(tiktoken.Encoding) if not n.startswith("__")}
    assert names - set(dir(bpecore.Encoding)) == set()
    assert {
        "encoding_for_model",
        "encoding_name_for_model",
        "get_encoding",
        "list_encoding_names",
        "Encoding",
    } <= set(dir(bpecore))


def test_keyword_constructor(pair):
    enc, ref = pair("r50k_base")
    custom = bpecore.Encoding(
        name="custom",
        pat_str=enc._pat_str,
        mergeable_ranks=enc._mergeable_ranks,
        special_tokens={"<|x|>": 100_000},
    )
    assert custom.encode("hi <|x|>", allowed_special="all") == [5303, 220, 100_000]
    assert custom.n_vocab == 100_001
    with pytest.raises(ValueError):
        bpecore.Encoding(
            name="bad",
            pat_str=enc._pat_str,
            mergeable_ranks=enc._mergeable_ranks,
            special_tokens={},
            explicit_n_vocab=50257,
        )


@pytest.mark.parametrize("name", NAMES)
def test_attributes(pair, name):
    enc, ref = pair(name)
    assert enc._pat_str == ref._pat_str
    assert enc._special_tokens == ref._special_tokens
    assert enc._mergeable_ranks == ref._mergeable_ranks
    assert enc.token_byte_values() == ref.token_byte_values()
    assert (enc.n_vocab, enc.max_token_value, enc.eot_token) == (
        ref.n_vocab,
        ref.max_token_value,
        ref.eot_token,
    )
    assert enc.special_tokens_set == ref.special_tokens_set
    for token in (0, 100, enc.eot_token, enc.max_token_value):
        assert enc.is_special_token(token) == ref.is_special_token(token)


def test_errors(pair):
    enc, ref = pair("cl100k_base")
    for call in (
        lambda e: e.decode_single_token_bytes(100261),
        lambda e: e.decode_bytes([1, 100261]),
        lambda e: e.encode_single_token("not one token"),
        lambda e: e.encode_single_token(b"\xff\xfe\xfd"),
    ):
        with pytest.raises(KeyError):
            call(ref)
        with pytest.raises(KeyError):
            call(enc)
    with pytest.raises(ValueError):  # still a ValueError too, as bpecore has always raised
        enc.decode([100261])
    assert (
        enc.encode_single_token(b"<|endoftext|>")
        == ref.encode_single_token(b"<|endoftext|>")
        == 100257
    )
    with pytest.raises(ValueError, match="disallowed special token"):
        enc.encode_with_unstable("<|endoftext|>")


@pytest.mark.parametrize("name", NAMES)
@given(
    text=st.text(max_size=40)
    | st.sampled_from(["hello fanta", "x\n\n", "a  ", "don't", "12345", " \n", "你好"])
)
@settings(max_examples=60)
def test_hyp_encode_with_unstable(pair, name, text):
    enc, ref = pair(name)
    stable, completions = enc.encode_with_unstable(text, allowed_special="all")
    ref_stable, ref_completions = ref.encode_with_unstable(text, allowed_special="all")
    assert stable == ref_stable
    assert sorted(map(tuple, completions)) == sorted(map(tuple, ref_completions))


@pytest.mark.parametrize("name", NAMES)
@given(
    data=st.binary(max_size=40)
    | st.text(max_size=20).map(lambda t: t.encode("utf-8", "replace")[:-1])
)
@settings(max_examples=100)
def test_hyp_encode_bytes(pair, name, data):
    enc, ref = pair(name)
    assert enc._encode_bytes(data) == ref._encode_bytes(data)


@given(text=st.text(max_size=60))
@settings(max_examples=100)
def test_hyp_decode_with_offsets_and_batches(pair, text):
    enc, ref = pair("cl100k_base")
    tokens = enc.encode(text, disallowed_special=())
    assert enc.decode_with_offsets(tokens) == ref.decode_with_offsets(tokens)
    assert enc.decode_batch([tokens, tokens[:1]]) == ref.decode_batch([tokens, tokens[:1]])
    assert enc.decode_bytes_batch([tokens, []]) == ref.decode_bytes_batch([tokens, []])
    if text:  # tiktoken panics on an empty piece; bpecore gives []
        assert enc._encode_single_piece(text) == ref._encode_single_piece(text)
    assert enc._encode_only_native_bpe(text) == ref._encode_only_native_bpe(text)


def test_encode_to_numpy_imports_numpy_only_when_called():
    np = pytest.importorskip("numpy")
    enc = bpecore.get_encoding("cl100k_base")
    arr = enc.encode_to_numpy("hello <|endoftext|>", allowed_special="all")
    assert arr.dtype == np.uint32 and arr.tolist() == [15339, 220, 100257]
    code = "import sys, bpecore; bpecore.get_encoding('cl100k_base').encode('x'); print('numpy' in sys.modules, 'tiktoken' in sys.modules)"
    assert subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout.split() == ["False", "False"]

"""The trainer: merges equal the reference trainer's, exports load everywhere and encode alike."""

from __future__ import annotations

import gzip
import importlib
from pathlib import Path

import pytest
import regex
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore import export, reference, registry
from bpecore import training as train_module
from bpecore.registry import CL100K_PATTERN, O200K_PATTERN
from bpecore.trainer import Trainer
from bpecore.training import SUPERBPE_PATTERN, default_superbpe_transition, train

MIXED = ["english", "code", "multilingual"]


def _slice(corpus, name: str, start: int, size: int) -> str:
    return corpus(name)[start : start + size]


def _merges(enc: bpecore.Encoding) -> list[bytes]:
    ranks = enc.mergeable_ranks
    return sorted((t for t in ranks if ranks[t] >= 256), key=ranks.__getitem__)


# ------------------------------------------------------------------ the Cython core
def test_trainer_tie_break_and_overlaps():
    t = Trainer([bytes([b]) for b in range(256)])
    t.add_pieces({b"abab": 3, b"ab": 1, b"aaaa": 2, b"ba": 2})
    merges = t.train(10, min_frequency=1)
    tokens = t.token_bytes()
    # (a,b)=7 first; then (a,a)=6 (aaaa holds 3 overlapping pairs); then (ab,ab)=3 beats (aa,aa)=2
    assert [(tokens[a], tokens[b]) for a, b in merges[:3]] == [
        (b"a", b"b"),
        (b"a", b"a"),
        (b"ab", b"ab"),
    ]
    assert [tokens[i] for i in t.word_tokens(0)] == [b"aaaa"]  # words in sorted piece order
    ref = reference.train_merges({b"abab": 3, b"ab": 1, b"aaaa": 2, b"ba": 2}, 10, 1)
    assert [(tokens[a], tokens[b]) for a, b in merges] == ref


def test_trainer_never_forms_a_token_twice():
    # "abc" can come from (ab, c) and later from (a, bc): the second is refused.
    pieces = {b"abc": 5, b"bcx": 4, b"xabc": 1, b"zbc": 3, b"abz": 3}
    t = Trainer([bytes([b]) for b in range(256)])
    t.add_pieces(pieces)
    merges = t.train(50, min_frequency=1)
    tokens = t.token_bytes()
    assert len(set(tokens)) == len(tokens)
    assert [(tokens[a], tokens[b]) for a, b in merges] == reference.train_merges(pieces, 50, 1)


# ------------------------------------------------------------------ equivalence with the reference
@pytest.mark.parametrize(
    "name", ["english", "code", "multilingual", "adv_whitespace", "adv_unicode"]
)
@pytest.mark.parametrize("min_frequency", [1, 2])
def test_merges_equal_reference(corpus, name, min_frequency):
    text = _slice(corpus, name, 0, 4000)
    enc = train(
        [text], vocab_size=256 + 150, pattern="o200k", min_frequency=min_frequency, workers=1
    )
    ref = reference.train([text], 256 + 150, O200K_PATTERN, min_frequency)
    assert enc.mergeable_ranks == ref


def test_merges_equal_reference_cl100k_many_docs(corpus):
    docs = [_slice(corpus, n, 10000 * i, 1500) for n in MIXED for i in range(3)]
    enc = train(docs, vocab_size=500, pattern="cl100k", min_frequency=2, workers=1)
    assert enc.mergeable_ranks == reference.train(docs, 500, CL100K_PATTERN, 2)


TEXT_ALPHABET = st.sampled_from(list("ab c\n.0'") + ["é", "中", "  ", "the", " the"])


@given(
    st.lists(st.lists(TEXT_ALPHABET, max_size=40).map("".join), min_size=1, max_size=5),
    st.integers(0, 40),
)
def test_hyp_merges_equal_reference(docs, n_merges):
    enc = train(docs, vocab_size=256 + n_merges, pattern="o200k", min_frequency=1, workers=1)
    assert enc.mergeable_ranks == reference.train(docs, 256 + n_merges, O200K_PATTERN, 1)


@given(st.lists(st.text(max_size=30), min_size=1, max_size=4))
def test_hyp_arbitrary_text_equals_reference(docs):
    enc = train(docs, vocab_size=256 + 20, pattern="cl100k", min_frequency=1, workers=1)
    clean = [d.encode("utf-16", "surrogatepass").decode("utf-16", "replace") for d in docs]
    assert enc.mergeable_ranks == reference.train(clean, 256 + 20, CL100K_PATTERN, 1)


def test_superbpe_merges_equal_reference(corpus):
    text = _slice(corpus, "english", 0, 5000)
    enc = train(
        [text],
        vocab_size=256 + 200,
        pattern="o200k",
        min_frequency=2,
        workers=1,
        superbpe_transition=120,
    )
    ref = reference.train(
        [text],
        256 + 200,
        O200K_PATTERN,
        2,
        superbpe_transition=120,
        superword_pattern=SUPERBPE_PATTERN,
    )
    assert enc.mergeable_ranks == ref
    report = enc.training
    assert report.stages == [1] * 120 + [2] * (len(report.merges) - 120)
    assert enc.pattern == SUPERBPE_PATTERN == report.encode_pattern
    stage2 = [
        left + right for (left, right), stage in zip(report.merges, report.stages) if stage == 2
    ]
    assert any(b" " in token.strip(b" ") for token in stage2), "no superword token spans a space"


def test_superbpe_pattern_pieces():
    # words joined by single spaces and lone punctuation, ending with their newlines; digit groups,
    # punctuation runs and spaces before whitespace apart; no piece starts with a newline
    text = "By the way, I am a fan of the Milky Way.\nIt's 2025: call f(x) -- e.g. now!\n\n  in\tword  two"
    assert regex.findall(SUPERBPE_PATTERN, text) == [
        "By the way, I am a fan of the Milky Way.\n",
        "It's",
        " ",
        "202",
        "5",
        ": call f(x)",
        " --",
        " e.g. now!\n\n",
        " ",
        " in\tword",
        " ",
        " two",
    ]


def test_superbpe_auto_transition(corpus):
    assert [default_superbpe_transition(n) for n in (300, 8000, 32000)] == [0, 6144, 25344]
    docs = [_slice(corpus, "english", 0, 20000)]
    enc = train(
        docs,
        vocab_size=600,
        special_tokens=["<|endoftext|>"],
        workers=1,
        superbpe_transition="auto",
    )
    stages = enc.training.stages  # 599 BPE ids: int(0.8 * 599) - 256 = 223 stage-1 merges
    assert stages == [1] * 223 + [2] * (len(stages) - 223) and len(stages) > 223
    assert enc.pattern == SUPERBPE_PATTERN
    with pytest.raises(ValueError):
        train(docs, vocab_size=600, superbpe_transition="late")


# ------------------------------------------------------------------ properties of trained vocabs
@pytest.fixture(scope="module")
def trained(corpus):
    """~200 KB mixed training text and 60 KB held out; o200k, cl100k and SuperBPE vocabs of 2000 ids."""
    text = [_slice(corpus, n, 0, 70000) for n in MIXED]
    held = "\n".join(_slice(corpus, n, 600000, 20000) for n in MIXED)
    encs = {
        "o200k": train(
            text, vocab_size=2000, pattern="o200k", special_tokens=["<|endoftext|>"], workers=2
        ),
        "cl100k": train(
            text, vocab_size=2000, pattern="cl100k", special_tokens=["<|endoftext|>"], workers=2
        ),
        "superbpe": train(
            text,
            vocab_size=2000,
            pattern="o200k",
            special_tokens=["<|endoftext|>"],
            workers=2,
            superbpe_transition=1500,
        ),
    }
    return encs, held


KINDS = ["o200k", "cl100k", "superbpe"]


@pytest.mark.parametrize("kind", KINDS)
def test_every_token_encodes_to_itself(trained, kind):
    enc = trained[0][kind]
    ranks = enc.mergeable_ranks
    assert len(ranks) == 2000 - 1 and enc.special_tokens == {"<|endoftext|>": 1999}
    assert enc._vocab.n_unreachable == 0
    assert [t for t, r in ranks.items() if reference.bpe_encode(ranks, t) != [r]] == []


@pytest.mark.parametrize("kind", KINDS)
def test_encoder_equals_reference_on_held_out(trained, kind):
    enc = trained[0][kind]
    held = trained[1][:20000]
    assert enc.encode_ordinary(held) == reference.encode_ordinary(
        enc.mergeable_ranks, enc.pattern, held
    )


@pytest.mark.parametrize("kind", KINDS)
def test_roundtrip_tiktoken_file(trained, kind, tmp_path):
    enc, held = trained[0][kind], trained[1]
    path = export.save_tiktoken(enc, tmp_path / "t.tiktoken")
    again = registry.load_saved(path)
    assert again.mergeable_ranks == enc.mergeable_ranks
    assert again.pattern == enc.pattern and again.special_tokens == enc.special_tokens
    assert again.encode(held + "<|endoftext|>", allowed_special="all") == enc.encode(
        held + "<|endoftext|>", allowed_special="all"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_roundtrip_tiktoken(trained, kind):
    tiktoken = pytest.importorskip("tiktoken")
    enc, held = trained[0][kind], trained[1]
    tk = tiktoken.Encoding(
        "t",
        pat_str=enc.pattern,
        mergeable_ranks=enc.mergeable_ranks,
        special_tokens=enc.special_tokens,
    )
    assert tk.encode(held + "<|endoftext|>", allowed_special="all") == enc.encode(
        held + "<|endoftext|>", allowed_special="all"
    )


@pytest.mark.parametrize("kind", KINDS)
def test_roundtrip_hf(trained, kind, tmp_path):
    enc, held = trained[0][kind], trained[1]
    path = export.save_hf(enc, tmp_path / "tokenizer.json")
    loaded = bpecore.load_hf(path)
    assert (
        loaded.mergeable_ranks == enc.mergeable_ranks
        and loaded.special_tokens == enc.special_tokens
    )
    assert loaded.encode_ordinary(held) == enc.encode_ordinary(held)
    tokenizers = pytest.importorskip("tokenizers")
    hf = tokenizers.Tokenizer.from_file(str(path))
    assert hf.encode(held).ids == enc.encode_ordinary(held)
    assert hf.encode("hi<|endoftext|>").ids == enc.encode("hi<|endoftext|>", allowed_special="all")
    assert hf.decode(enc.encode_ordinary(held)) == held


@given(st.text(max_size=60))
def test_hyp_hf_equals_bpecore_on_any_text(trained_small_hf, text):
    enc, hf = trained_small_hf
    assert hf.encode(text).ids == enc.encode_ordinary(text)


@pytest.fixture(scope="module")
def trained_small_hf(trained, tmp_path_factory):
    tokenizers = pytest.importorskip("tokenizers")
    enc = trained[0]["cl100k"]
    path = export.save_hf(enc, tmp_path_factory.mktemp("hf") / "tokenizer.json")
    return enc, tokenizers.Tokenizer.from_file(str(path))


def test_export_hf_pattern_is_oniguruma_safe():
    assert export.hf_regex(CL100K_PATTERN) == CL100K_PATTERN.replace(
        r"\p{N}{1,3}+", r"(?>\p{N}{1,3})"
    )
    assert export.hf_regex(O200K_PATTERN) == O200K_PATTERN


# ------------------------------------------------------------------ determinism, inputs, chunking
@pytest.fixture(scope="module")
def corpus_files(corpus, tmp_path_factory):
    d = tmp_path_factory.mktemp("corpus")
    paths = []
    for n in MIXED:
        p = d / f"{n}.txt.gz"
        p.write_bytes(gzip.compress(_slice(corpus, n, 0, 60000).encode("utf-8")))
        paths.append(str(p))
    return paths


def test_deterministic_over_workers_and_chunking(corpus_files, monkeypatch):
    one = train(corpus_files, vocab_size=1200, workers=1)
    two = train(corpus_files, vocab_size=1200, workers=2)
    assert (
        one.training.merges == two.training.merges
        and one.training.unique_pieces == two.training.unique_pieces
    )
    monkeypatch.setattr(train_module, "CHUNK_BYTES", 3000)  # many small chunks cut at "\n" + letter
    small = train(corpus_files, vocab_size=1200, workers=2)
    assert small.training.merges == one.training.merges
    texts = [gzip.decompress(Path(p).read_bytes()).decode() for p in corpus_files]
    assert train(texts, vocab_size=1200, workers=1).training.merges == one.training.merges
    assert train(iter(texts), vocab_size=1200, workers=2).training.merges == one.training.merges
    assert one.training.input_bytes == sum(len(t.encode()) for t in texts)


def test_superbpe_deterministic_over_chunking(corpus_files, monkeypatch):
    # stage-2 pieces end at the newlines of a "newline + letter" cut, so chunking changes nothing
    one = train(corpus_files, vocab_size=1200, workers=1, superbpe_transition=600)
    monkeypatch.setattr(train_module, "CHUNK_BYTES", 3000)
    small = train(corpus_files, vocab_size=1200, workers=2, superbpe_transition=600)
    assert small.training.merges == one.training.merges and 2 in one.training.stages


def test_long_run_without_cut_point_is_cut_anyway(tmp_path, monkeypatch):
    monkeypatch.setattr(train_module, "CHUNK_BYTES", 1000)
    monkeypatch.setattr(train_module, "MAX_CARRY", 5000)
    path = tmp_path / "one_line.txt"
    path.write_text("word " * 4000)
    enc = train([str(path)], vocab_size=300, min_frequency=1, workers=2)
    assert enc.training.input_bytes == 20000
    assert enc.encode_ordinary(" word") == [enc.mergeable_ranks[b" word"]]


def test_special_tokens_delimit_and_are_not_trained():
    docs = ["<|endoftext|>".join(["hello world"] * 50)]
    enc = train(
        docs, vocab_size=300, special_tokens={"<|endoftext|>": 5000}, min_frequency=1, workers=1
    )
    assert enc.special_tokens == {"<|endoftext|>": 5000}
    assert not any(b"<|" in t for t in enc.mergeable_ranks)
    assert enc.encode("hello world<|endoftext|>", allowed_special="all")[-1] == 5000
    listed = train(
        docs,
        vocab_size=300,
        special_tokens=["<|endoftext|>", "<|pad|>"],
        min_frequency=1,
        workers=1,
    )
    n = len(listed.mergeable_ranks)
    assert listed.special_tokens == {"<|endoftext|>": n, "<|pad|>": n + 1}


def test_min_frequency_stops_early():
    enc = train(["abcd abcd xyz"], vocab_size=1000, min_frequency=2, workers=1)
    assert len(enc.training.merges) == len(enc.mergeable_ranks) - 256 < 1000 - 256
    assert all(len(t) <= 5 for t in enc.mergeable_ranks)


def test_vocab_size_too_small():
    with pytest.raises(ValueError):
        train(["x"], vocab_size=256, special_tokens=["<|endoftext|>"])


def test_cli_main(corpus_files, tmp_path, capsys):
    out = tmp_path / "mytok"
    assert (
        train_module.main(
            [
                *corpus_files,
                *("--vocab-size", "800", "-o", str(out), "--quiet", "--workers", "2"),
                *("--holdout-bytes", "65536"),  # off unless asked: the summary's bytes/token
            ]
        )
        == 0
    )
    summary = capsys.readouterr().out
    assert "merges/s" in summary and "bytes/token" in summary
    enc = registry.load_saved(out / "mytok.tiktoken")
    assert enc.n_vocab == 800 and enc.special_tokens == {"<|endoftext|>": 799}
    assert bpecore.load_hf(out / "tokenizer.json").mergeable_ranks == enc.mergeable_ranks


def test_bpecore_train_is_the_function():
    # the module is bpecore.training: ``bpecore.train`` is only ever the function
    assert bpecore.train is train is train_module.train
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("bpecore.train")

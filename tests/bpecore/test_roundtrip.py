"""Train -> save -> load round trips, the `.tiktoken` sidecar, and vocab paths wherever a name goes."""

from __future__ import annotations

import json

import pytest

import bpecore
from bpecore import cli, export, registry
from bpecore.registry import CL100K_PATTERN, R50K_PATTERN, resolve_encoding

SPECIALS = {"<|endoftext|>": 600, "<|pad|>": 601}


@pytest.fixture(scope="module")
def trained(corpus):
    text = corpus("english")
    return bpecore.train(
        [text[:200_000]],
        vocab_size=600,
        pattern="r50k",
        special_tokens=SPECIALS,
        workers=1,
        name="rt",
    )


@pytest.fixture(scope="module")
def held_out(corpus):
    return (
        corpus("english")[500_000:560_000]
        + corpus("code")[:20_000]
        + "<|endoftext|> the end <|pad|>"
    )


@pytest.fixture()
def saved(trained, tmp_path):
    rank_path = export.save_tiktoken(trained, tmp_path / "rt.tiktoken")
    hf_path = export.save_hf(trained, tmp_path / "tokenizer.json")
    return rank_path, hf_path


def same(a: bpecore.Encoding, b: bpecore.Encoding, text: str) -> None:
    assert (a.name, a.pattern, a.special_tokens, a.n_vocab) == (
        b.name,
        b.pattern,
        b.special_tokens,
        b.n_vocab,
    )
    assert a.encode(text, allowed_special="all") == b.encode(text, allowed_special="all")
    assert a.encode_ordinary(text) == b.encode_ordinary(text)


def test_train_save_load_identical(trained, held_out, saved):
    rank_path, hf_path = saved
    assert trained.pattern == R50K_PATTERN
    same(
        trained, bpecore.load_tiktoken(rank_path), held_out
    )  # the sidecar gives name, pattern, specials
    same(trained, registry.load_saved(rank_path), held_out)
    from_hf = bpecore.load_hf(hf_path, name="rt")
    assert from_hf.encode(held_out, allowed_special="all") == trained.encode(
        held_out, allowed_special="all"
    )
    assert from_hf.special_tokens == trained.special_tokens


def test_tiktoken_reads_what_was_saved(trained, held_out, saved):
    tiktoken = pytest.importorskip("tiktoken")
    from tiktoken.load import load_tiktoken_bpe

    rank_path, _ = saved
    meta = json.loads(open(rank_path + ".json", encoding="utf-8").read())
    ref = tiktoken.Encoding(
        meta["name"],
        pat_str=meta["pattern"],
        mergeable_ranks=load_tiktoken_bpe(rank_path),
        special_tokens=meta["special_tokens"],
    )
    assert ref.encode(held_out, allowed_special="all") == trained.encode(
        held_out, allowed_special="all"
    )


def test_sidecar_rules(trained, saved, tmp_path):
    rank_path, _ = saved
    # The caller's arguments win over the sidecar.
    enc = bpecore.load_tiktoken(rank_path, name="other", pattern=None, special_tokens={})
    assert (enc.name, enc.pattern, enc.special_tokens) == ("other", None, {})
    # Without a sidecar: the name of the file, cl100k's pattern, no specials (as before sidecars were read).
    bare = tmp_path / "bare.tiktoken"
    bare.write_bytes(open(rank_path, "rb").read())
    enc = bpecore.load_tiktoken(bare)
    assert (enc.name, enc.pattern, enc.special_tokens) == ("bare", CL100K_PATTERN, {})
    # A broken sidecar is an error naming it, not a silent fallback.
    (tmp_path / "bare.tiktoken.json").write_text('{"pattern": 3}')
    with pytest.raises(bpecore.VocabError, match="bare.tiktoken.json"):
        bpecore.load_tiktoken(bare)


def test_resolve_encoding(trained, held_out, saved, tmp_path):
    rank_path, hf_path = saved
    assert resolve_encoding("cl100k_base") is bpecore.get_encoding("cl100k_base")
    for spec in (rank_path, rank_path + ".json", hf_path, str(tmp_path)):
        enc = resolve_encoding(spec)
        assert enc.encode(held_out, allowed_special="all") == trained.encode(
            held_out, allowed_special="all"
        ), spec
    with pytest.raises(ValueError, match="unknown encoding"):
        resolve_encoding(str(tmp_path / "missing.tiktoken"))


@pytest.mark.parametrize("which", ["rank", "sidecar", "hf"])
def test_cli_takes_vocab_paths(which, trained, saved, tmp_path, capsys):
    rank_path, hf_path = saved
    spec = {"rank": rank_path, "sidecar": rank_path + ".json", "hf": hf_path}[which]
    text = "a held-out sentence, to count with a vocab just trained.\n"
    (tmp_path / "in.txt").write_text(text)
    assert cli.main(["count", "-e", spec, str(tmp_path / "in.txt")]) == 0
    assert capsys.readouterr().out.split("\t")[0] == str(trained.count(text))
    assert cli.main(["encode", "-e", spec, "--json", str(tmp_path / "in.txt")]) == 0
    assert json.loads(capsys.readouterr().out) == trained.encode_ordinary(text)
    assert cli.main(["chunk", "-e", spec, "-n", "8", "--jsonl", str(tmp_path / "in.txt")]) == 0
    chunks = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert chunks and all(
        c["tokens"] <= 8 and c["tokens"] == trained.count(c["text"]) for c in chunks
    )


def test_cli_bad_vocab_path(tmp_path, capsys):
    bad = tmp_path / "bad.tiktoken"
    bad.write_text("not base64 at all\n")
    assert cli.main(["count", "-e", str(bad), "-"]) == 1
    assert "bad.tiktoken" in capsys.readouterr().err


def test_service_settings_take_vocab_paths(trained, saved):
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from bpecore_service.config import Settings, TiktokenFile
    from bpecore_service.main import create_app, load_encodings

    rank_path, hf_path = saved
    settings = Settings(
        encodings=["cl100k_base", rank_path], default_encoding=rank_path, load_in_background=False
    )
    loaded = load_encodings(settings)
    assert sorted(loaded) == ["cl100k_base", "rt"] and settings.default_encoding == "rt"
    # BPESVC_TIKTOKEN_FILES without a pattern reads the sidecar too.
    loaded = load_encodings(
        Settings(
            encodings=[],
            tiktoken_files=[TiktokenFile(path=rank_path, name="rt2")],
            default_encoding="rt2",
        )
    )
    assert loaded["rt2"].pattern == R50K_PATTERN and loaded["rt2"].special_tokens == SPECIALS
    settings = Settings(encodings=[hf_path], default_encoding=hf_path, load_in_background=False)
    with TestClient(create_app(settings)) as client:
        r = client.post("/v1/count", json={"text": "hello there"})
        assert r.status_code == 200, r.text
        assert r.json()["count"] == trained.count("hello there")

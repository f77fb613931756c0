"""BPESVC_MODEL_ALIASES and open-model files at start-up: vLLM's "model" names resolve."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

import bpecore
from bpecore_service.config import Settings
from bpecore_service.main import create_app, load_encodings
from tests.conftest import read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="builds the model directory's tokenizer.json")
from tokenizers import AddedToken, Regex, models, pre_tokenizers, trainers  # noqa: E402

MODEL = "acme/Tiny-Chat-1B-Instruct"


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    """A model directory (tokenizer.json + tokenizer_config.json) as a hub snapshot holds."""
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(
                Regex(r" ?\p{L}+|\p{N}|\s+|[^\s\p{L}\p{N}]+"), behavior="isolated"
            ),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=400, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([read_corpus("english")[:20_000]], trainer)
    tok.add_special_tokens([AddedToken("<|eot|>", normalized=False)])
    directory = tmp_path_factory.mktemp("models") / "tiny-chat"
    directory.mkdir()
    (directory / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
    (directory / "tokenizer_config.json").write_text(json.dumps({"chat_template": "{{ x }}"}))
    return directory


def test_alias_resolves_in_vllm_tokenize(model_dir):
    settings = Settings(
        encodings=["cl100k_base", str(model_dir)],
        model_aliases={MODEL: "tiny-chat", "gpt-4": "cl100k_base"},
        load_in_background=False,
    )
    enc = bpecore.from_pretrained(model_dir)
    text = "Hello there<|eot|> 2024"
    with TestClient(create_app(settings)) as client:
        body = client.post("/tokenize", json={"model": MODEL, "prompt": text}).json()
        assert body["tokens"] == enc.encode(text, allowed_special="all")
        assert body["count"] == len(body["tokens"])
        other = client.post("/tokenize", json={"model": "gpt-4", "prompt": "hello world"}).json()
        assert other["tokens"] == bpecore.get_encoding("cl100k_base").encode("hello world")
        r = client.post("/v1/count", json={"text": text, "encoding": MODEL})
        assert r.status_code == 200 and r.json()["count"] == enc.count(text)
        assert (
            client.post("/tokenize", json={"model": "acme/other", "prompt": "x"}).status_code == 404
        )
        listed = {e["name"]: e for e in client.get("/v1/encodings").json()["data"]}
        assert sorted(listed) == ["cl100k_base", "tiny-chat"]  # aliases are not encodings
        assert listed["tiny-chat"]["aliases"] == [MODEL]
        assert listed["cl100k_base"]["aliases"] == ["gpt-4"]
        metrics = client.get("/metrics").text
        assert "bpesvc_encodings_loaded 2.0" in metrics


def test_default_alias_marks_its_encoding(model_dir):
    settings = Settings(
        encodings=["cl100k_base", str(model_dir)],
        model_aliases={MODEL: "tiny-chat"},
        default_encoding=MODEL,
        load_in_background=False,
    )
    with TestClient(create_app(settings)) as client:
        data = client.get("/v1/encodings").json()["data"]
    assert [(e["name"], e["aliases"], e["default"]) for e in data] == [
        ("cl100k_base", [], False),
        ("tiny-chat", [MODEL], True),
    ]


def test_default_encoding_may_be_an_alias(model_dir):
    settings = Settings(
        encodings=[str(model_dir)], model_aliases={MODEL: "tiny-chat"}, default_encoding=MODEL
    )
    loaded = load_encodings(settings)
    assert loaded[MODEL] is loaded["tiny-chat"]


@pytest.mark.parametrize(
    "aliases,message",
    [
        ({MODEL: "absent"}, "names 'absent', which is not among the loaded"),
        ({"cl100k_base": "tiny-chat"}, "would hide the loaded encoding 'cl100k_base'"),
    ],
)
def test_bad_aliases_fail_the_load(model_dir, aliases, message):
    settings = Settings(encodings=["cl100k_base", str(model_dir)], model_aliases=aliases)
    with pytest.raises(ValueError, match=message):
        load_encodings(settings)


def test_aliases_from_the_environment(monkeypatch):
    monkeypatch.setenv("BPESVC_MODEL_ALIASES", json.dumps({MODEL: "llama3"}))
    assert Settings().model_aliases == {MODEL: "llama3"}

"""from_pretrained: model directories and hub cache snapshots built in tmp_path, against `tokenizers`."""

from __future__ import annotations

import base64
import gzip
import json
import os
import pickle

import pytest

import bpecore
from bpecore.pretrained import from_pretrained
from tests.conftest import read_corpus

tokenizers = pytest.importorskip("tokenizers", reason="Hugging Face tokenizers is the reference")
from tokenizers import AddedToken, Regex, decoders, models, normalizers, pre_tokenizers, trainers  # noqa: E402

PATTERN = r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
)


def _tokenizer():
    tok = tokenizers.Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(PATTERN), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600, show_progress=False, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tok.train_from_iterator([read_corpus("english")[:30_000]], trainer)
    tok.add_special_tokens([AddedToken("<|im_start|>", normalized=False)])
    return tok


@pytest.fixture(scope="module")
def model_files(tmp_path_factory):
    """(files of a model directory by name, the reference tokenizer with the config's extra token)."""
    tok = _tokenizer()
    tokenizer_json = tok.to_str()
    extra_id = tok.get_vocab_size()
    tok.add_special_tokens([AddedToken("<|im_end|>", normalized=False)])
    assert tok.token_to_id("<|im_end|>") == extra_id
    config = {
        "added_tokens_decoder": {
            str(extra_id): {
                "content": "<|im_end|>",
                "special": True,
                "normalized": False,
                "lstrip": False,
                "rstrip": False,
                "single_word": False,
            }
        },
        "chat_template": TEMPLATE,
        "bos_token": None,
        "eos_token": {"content": "<|im_end|>", "special": True},
        "model_max_length": 131072,
    }
    files = {
        "tokenizer.json": tokenizer_json,
        "tokenizer_config.json": json.dumps(config),
        "config.json": json.dumps({"max_position_embeddings": 32768}),
    }
    return files, tok


def _write(directory, files: dict[str, str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (directory / name).write_text(text, encoding="utf-8")


TEXTS = [
    "",
    "Hello <|im_start|>user\nhi there<|im_end|>\n",
    "Café cafe\u0301 <|im_end|><|im_end|> 12345",
    read_corpus("english")[:5000],
    read_corpus("multilingual")[:5000],
]


def _check(enc, tok) -> None:
    tok.encode_special_tokens = False
    for text in TEXTS:
        want = tok.encode(text, add_special_tokens=False).ids
        assert enc.encode(text, allowed_special="all") == want
    tok.encode_special_tokens = True
    for text in TEXTS:
        want = tok.encode(text, add_special_tokens=False).ids
        assert enc.encode_ordinary(text) == want
        assert enc.count(text) == len(want)


def test_model_directory(tmp_path, model_files):
    files, tok = model_files
    _write(tmp_path / "my-model", files)
    enc = from_pretrained(tmp_path / "my-model")
    assert enc.name == "my-model"
    assert enc.special_tokens["<|im_end|>"] == tok.token_to_id("<|im_end|>")
    _check(enc, tok)
    assert enc.chat_template == TEMPLATE
    assert enc.bos_token is None and enc.eos_token == "<|im_end|>"
    assert enc.max_model_len == 32768
    again = pickle.loads(pickle.dumps(enc))  # the file is read again: the pipeline is kept
    assert type(again) is type(enc) and again.chat_template == TEMPLATE
    assert again.encode_ordinary(TEXTS[2]) == enc.encode_ordinary(TEXTS[2])


def test_hub_cache_snapshot(tmp_path, model_files):
    """The hub cache layout: blobs by hash, snapshots of symlinks, refs/main naming the commit."""
    files, tok = model_files
    repo = tmp_path / "hub" / "models--acme--Tiny-Chat"
    (repo / "blobs").mkdir(parents=True)
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    for name, text in files.items():
        if name == "config.json":
            continue  # absent: max_model_len comes from the tokenizer's model_max_length
        blob = repo / "blobs" / f"blob-{len(text)}"
        blob.write_text(text, encoding="utf-8")
        os.symlink(os.path.relpath(blob, snapshot), snapshot / name)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("0123abcd")
    for path in (snapshot, repo):
        enc = from_pretrained(path)
        assert enc.name == "acme/Tiny-Chat"
        _check(enc, tok)
        assert enc.max_model_len == 131072


def test_template_files_and_unknown_length(tmp_path, model_files):
    files, _ = model_files
    config = json.loads(files["tokenizer_config.json"])
    del config["chat_template"]
    config["model_max_length"] = 1e30  # transformers' "no limit"
    _write(
        tmp_path / "m",
        {
            "tokenizer.json": files["tokenizer.json"],
            "tokenizer_config.json": json.dumps(config),
            "chat_template.json": json.dumps(
                {
                    "chat_template": [
                        {"name": "default", "template": "a"},
                        {"name": "rag", "template": "b"},
                    ]
                }
            ),
        },
    )
    enc = from_pretrained(tmp_path / "m", name="named")
    assert enc.name == "named"
    assert enc.chat_template == {"default": "a", "rag": "b"}
    assert enc.max_model_len is None
    (tmp_path / "m" / "chat_template.jinja").write_text("{{ x }}")
    assert from_pretrained(tmp_path / "m").chat_template == "{{ x }}"


def test_tekken_directory(tmp_path):
    vocab = [
        {"rank": i, "token_bytes": base64.b64encode(bytes([i])).decode(), "token_str": None}
        for i in range(256)
    ] + [{"rank": 256, "token_bytes": base64.b64encode(b"ab").decode(), "token_str": "ab"}]
    doc = {
        "config": {
            "pattern": r"\w+|\s+|[^\w\s]+",
            "default_vocab_size": 277,
            "default_num_special_tokens": 20,
            "version": "v3",
        },
        "vocab": vocab,
    }
    _write(tmp_path / "mistral", {"tekken.json": json.dumps(doc)})
    enc = from_pretrained(tmp_path / "mistral")
    assert enc.encode_ordinary("ab") == [276] and enc.special_tokens["<s>"] == 1
    assert enc.chat_template is None and enc.max_model_len is None


def test_llama_rank_file_directory(tmp_path):
    if not os.path.isfile(_llama3_model()):
        pytest.skip("llama-models (test extra) is not installed")
    directory = tmp_path / "Llama-3.1-8B-Instruct"
    directory.mkdir()
    os.symlink(_llama3_model(), directory / "tokenizer.model")
    enc = from_pretrained(directory)
    llama3 = bpecore.get_encoding("llama3")
    text = read_corpus("multilingual")[:3000]
    assert enc.encode_ordinary(text) == llama3.encode_ordinary(text)
    assert enc.special_tokens == llama3.special_tokens


def _llama3_model() -> str:
    import importlib.util

    spec = importlib.util.find_spec("llama_models")
    if spec is None:
        return ""
    return os.path.join(list(spec.submodule_search_locations)[0], "llama3", "tokenizer.model")


def test_refusals(tmp_path):
    with pytest.raises(bpecore.VocabError, match="not a directory"):
        from_pretrained(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(
        bpecore.VocabError, match="no tokenizer.json, tekken.json or tokenizer.model"
    ):
        from_pretrained(tmp_path / "empty")
    (tmp_path / "sp").mkdir()
    (tmp_path / "sp" / "tokenizer.model").write_bytes(b"\n\x0e\n\x05<unk>\x15\x00\x00\x00\x00")
    with pytest.raises(bpecore.VocabError, match="SentencePiece"):
        from_pretrained(tmp_path / "sp")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "tokenizer.json").write_bytes(gzip.compress(b"{not json"))
    with pytest.raises(bpecore.VocabError, match="not valid JSON"):
        from_pretrained(tmp_path / "bad")

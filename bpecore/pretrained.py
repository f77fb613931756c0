"""``from_pretrained(path)``: the tokenizer of a local model directory, as `transformers` loads it.

``path`` is a model directory (what ``save_pretrained`` writes, or a clone of a hub repository),
a Hugging Face hub cache snapshot (``.../models--org--name/snapshots/<commit>/``) or the cache
entry of a repository (``.../models--org--name``, read at the snapshot ``refs/main`` names).
Nothing is downloaded. The files read, in this order:

- ``tokenizer.json`` (``bpecore.hf``), with the added tokens of ``tokenizer_config.json``'s
  ``added_tokens_decoder`` that it lacks (`transformers` adds those too);
- else ``tekken.json`` (``bpecore.tekken``), else a Llama ``tokenizer.model`` rank file
  (``bpecore.llama``; a SentencePiece model there is refused).

The encoding keeps what the chat and serving layers need: ``chat_template`` (a string, or
``{name: template}`` when the model has several; from ``tokenizer_config.json``,
``chat_template.jinja`` or ``chat_template.json``), ``bos_token`` and ``eos_token`` (strings or
None), ``chat_template_tokens`` (every named special token the template sees: ``bos_token``,
``pad_token``, any other ``*_token`` and the named ``extra_special_tokens``), and ``max_model_len`` (``config.json``'s ``max_position_embeddings``, else the tokenizer's
``model_max_length`` when it is a real length, else None).
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

from bpecore.encoding import Encoding
from bpecore.load import VocabError, read_file

#: `transformers` writes this (about 1e30) as ``model_max_length`` when the length is unknown.
_NO_LENGTH = 10**18


def _read_json(path: str) -> Any:
    try:
        return json.loads(read_file(path))
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise VocabError(f"{path}: not valid JSON: {e}") from e


def _snapshot(path: str) -> tuple[str, str | None]:
    """(directory holding the files, hub repository id or None) of a model path."""
    base = os.path.basename(os.path.normpath(path))
    if base.startswith("models--") and os.path.isdir(os.path.join(path, "snapshots")):
        ref = os.path.join(path, "refs", "main")
        if os.path.isfile(ref):
            with open(ref, encoding="utf-8") as f:
                commit = f.read().strip()
        else:
            found = sorted(os.listdir(os.path.join(path, "snapshots")))
            if len(found) != 1:
                raise VocabError(
                    f"{path}: no refs/main and {len(found)} snapshots; pass the snapshot directory"
                )
            commit = found[0]
        return os.path.join(path, "snapshots", commit), base[len("models--") :].replace("--", "/")
    parent = os.path.dirname(os.path.normpath(path))
    repo = os.path.basename(os.path.dirname(parent))
    if os.path.basename(parent) == "snapshots" and repo.startswith("models--"):
        return path, repo[len("models--") :].replace("--", "/")
    return path, None


def _token_text(value: Any) -> str | None:
    """A special token of ``tokenizer_config.json``: a string or an AddedToken dict."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def _template_tokens(config: dict) -> dict[str, str]:
    """The named special tokens `transformers` passes to a chat template, from the config."""
    out = {}
    for key, value in config.items():
        if key.endswith("_token") and _token_text(value) is not None:
            out[key] = _token_text(value)
    extra = config.get("extra_special_tokens")
    if isinstance(extra, dict):
        for key, value in extra.items():
            if isinstance(key, str) and _token_text(value) is not None:
                out[key] = _token_text(value)
    return out


def _chat_template(directory: str, config: dict) -> str | dict[str, str] | None:
    template = config.get("chat_template")
    jinja = os.path.join(directory, "chat_template.jinja")
    if template is None and os.path.isfile(jinja):
        template = read_file(jinja).decode("utf-8")
    as_json = os.path.join(directory, "chat_template.json")
    if template is None and os.path.isfile(as_json):
        doc = _read_json(as_json)
        if not isinstance(doc, dict):
            raise VocabError(f"{as_json}: not a JSON object")
        template = doc.get("chat_template")
    if isinstance(template, list):  # [{name, template}, ...]
        if not all(
            isinstance(t, dict) and isinstance(t.get("name"), str) and "template" in t
            for t in template
        ):
            raise VocabError(
                f"{os.path.join(directory, 'tokenizer_config.json')}: chat_template list entries "
                "need a 'name' and a 'template'"
            )
        return {t["name"]: t["template"] for t in template}
    return template if isinstance(template, str) else None


def _max_model_len(directory: str, config: dict) -> int | None:
    model_config = os.path.join(directory, "config.json")
    if os.path.isfile(model_config):
        doc = _read_json(model_config)
        if not isinstance(doc, dict):
            raise VocabError(f"{model_config}: not a JSON object")
        for where in (doc, doc.get("text_config") or {}):
            value = where.get("max_position_embeddings") if isinstance(where, dict) else None
            if value is not None and type(value) is not int:
                raise VocabError(
                    f"{model_config}: max_position_embeddings is {value!r}, not an integer"
                )
            if value is not None and value > 0:
                return value
    value = config.get("model_max_length")
    if isinstance(value, (int, float)) and 0 < value < _NO_LENGTH:
        return int(value)
    return None


def _from_tokenizer_json(path: str, config: dict, name: str) -> Encoding:
    from bpecore.hf import _build

    data = read_file(path)
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise VocabError(f"{path}: not valid JSON: {e}") from e
    if not isinstance(doc, dict) or not isinstance(doc.get("model"), dict):
        raise VocabError(f"{path}: no 'model' object")
    decoder = config.get("added_tokens_decoder") or {}
    if not isinstance(decoder, dict):
        raise VocabError(f"{path}: tokenizer_config.json added_tokens_decoder is not an object")
    added = doc.get("added_tokens") or []
    if not isinstance(added, list):
        raise VocabError(f"{path}: added_tokens is not a list")
    added = list(added)
    have = {a.get("id") for a in added if isinstance(a, dict)}
    for key in decoder:
        if not (isinstance(key, str) and key.isdigit() and key.isascii()):
            raise VocabError(
                f"{path}: tokenizer_config.json added_tokens_decoder key {key!r} is not a token id"
            )
    for key, entry in sorted(decoder.items(), key=lambda kv: int(kv[0])):
        if int(key) not in have and isinstance(entry, dict):
            fields = ("content", "special", "normalized", "lstrip", "rstrip", "single_word")
            added.append({"id": int(key), **{k: entry[k] for k in fields if k in entry}})
    doc["added_tokens"] = added
    try:
        enc = _build(doc, name, path)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError) as e:
        if isinstance(e, VocabError):
            raise
        raise VocabError(f"{path}: malformed tokenizer: {type(e).__name__}: {e}") from e
    enc.vocab_sha256 = hashlib.sha256(data).hexdigest()
    return enc


def from_pretrained(path: str | os.PathLike, *, name: str | None = None) -> Encoding:
    """The encoding of a local model directory or hub cache snapshot (nothing is downloaded).

    ``name`` defaults to the hub repository id (``org/model``) for a cache snapshot, else the
    directory's name.
    """
    path = os.fspath(path)
    if not os.path.isdir(path):
        raise VocabError(f"{path}: not a directory")
    directory, repo = _snapshot(path)
    if name is None:
        name = repo or os.path.basename(os.path.abspath(directory)) or "model"
    config_path = os.path.join(directory, "tokenizer_config.json")
    config = _read_json(config_path) if os.path.isfile(config_path) else {}
    if not isinstance(config, dict):
        raise VocabError(f"{config_path}: not a JSON object")
    candidates = {
        f: os.path.join(directory, f) for f in ("tokenizer.json", "tekken.json", "tokenizer.model")
    }
    if os.path.isfile(candidates["tokenizer.json"]):
        enc = _from_tokenizer_json(candidates["tokenizer.json"], config, name)
    elif os.path.isfile(candidates["tekken.json"]):
        from bpecore.tekken import load_tekken

        enc = load_tekken(candidates["tekken.json"], name=name)
    elif os.path.isfile(candidates["tokenizer.model"]):
        with open(candidates["tokenizer.model"], "rb") as f:
            head = f.read(64)
        if not head[:1].isalnum() and head[:1] not in b"+/=":
            raise VocabError(
                f"{candidates['tokenizer.model']}: a SentencePiece model, not a byte-level BPE "
                "rank file; bpecore reads tokenizer.json, tekken.json or a Llama 3/4 tokenizer.model"
            )
        from bpecore.llama import load_llama

        enc = load_llama(candidates["tokenizer.model"], name=name)
    else:
        raise VocabError(f"{directory}: no tokenizer.json, tekken.json or tokenizer.model")
    enc.chat_template = _chat_template(directory, config)
    enc.bos_token = _token_text(config.get("bos_token"))
    enc.eos_token = _token_text(config.get("eos_token"))
    enc.chat_template_tokens = _template_tokens(config)
    enc.max_model_len = _max_model_len(directory, config)
    _pickle_as_reload(enc, from_pretrained, path, name=name)
    return enc


def _pickle_as_reload(enc: Encoding, loader, path: str, **kwargs) -> None:
    """Make an encoding read from a tokenizer file pickle as "load ``path`` again": by value (its
    ranks) it would lose a ``tokenizers`` pipeline (``bpecore.hf.HFEncoding``) or a rank -> id map
    that differs from merge order. The other process needs the same file at the same path."""
    import functools

    enc._reduce_as = (functools.partial(loader, **kwargs), (os.path.abspath(path),))

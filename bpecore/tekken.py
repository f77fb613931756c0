"""Mistral's Tekken vocabularies (``tekken*.json``), encoded as `mistral-common` encodes them.

A Tekken file holds ``config`` (``pattern``, ``default_vocab_size``, ``default_num_special_tokens``,
``version``), ``vocab`` (``{rank, token_bytes (base64), token_str}`` in rank order) and, from v7 on,
``special_tokens`` (``{rank, token_str, is_control}``). `mistral-common` uses only the first
``default_vocab_size - default_num_special_tokens`` ranks, numbers them from
``default_num_special_tokens`` up (the special tokens take the ids below), and splits text with
the file's own pattern; ``Tekkenizer.encode(s, bos=False, eos=False)`` reads special-token strings
as plain text, which is what ``encode_ordinary`` does here.

Shipped: ``get_encoding("tekken")`` is ``tekken_240718.json`` from `mistral-common` (Apache-2.0,
``data/LICENSE.tekken``; SHA-256 in ``data/SHA256SUMS``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os

import regex

from bpecore.encoding import Encoding
from bpecore.load import VocabError, read_file, read_shipped

#: The special tokens of Tekken files older than v7, which do not list them (ids 0..19); the
#: rest, up to ``default_num_special_tokens``, are ``<SPECIAL_{id}>``.
LEGACY_SPECIAL_TOKENS = (
    "<unk>",
    "<s>",
    "</s>",
    "[INST]",
    "[/INST]",
    "[AVAILABLE_TOOLS]",
    "[/AVAILABLE_TOOLS]",
    "[TOOL_RESULTS]",
    "[/TOOL_RESULTS]",
    "[TOOL_CALLS]",
    "[IMG]",
    "<pad>",
    "[IMG_BREAK]",
    "[IMG_END]",
    "[PREFIX]",
    "[MIDDLE]",
    "[SUFFIX]",
    "[SYSTEM_PROMPT]",
    "[/SYSTEM_PROMPT]",
    "[TOOL_CONTENT]",
)
SHIPPED = "tekken_240718.json"


def parse_tekken(
    data: bytes, source: str = "<bytes>"
) -> tuple[dict[bytes, int], str, dict[str, int]]:
    """(mergeable ranks with their ids, pattern, special tokens) of Tekken JSON content."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError, RecursionError) as e:
        raise VocabError(f"{source}: not valid JSON: {e}") from e
    try:
        config, vocab = doc["config"], doc["vocab"]
        pattern = config["pattern"]
        n_special = config["default_num_special_tokens"]
        n_used = config["default_vocab_size"] - n_special
        version = config.get("version", "v3")
    except KeyError as e:
        raise VocabError(f"{source}: not a Tekken file (missing {e})") from e
    except TypeError as e:
        raise VocabError(f"{source}: malformed Tekken config: {e}") from e
    if not (
        isinstance(pattern, str)
        and isinstance(vocab, list)
        and type(n_special) is int
        and type(n_used) is int
    ):
        raise VocabError(f"{source}: malformed Tekken config {config!r}")
    if not 256 <= n_used <= len(vocab) or n_special < 0:
        raise VocabError(
            f"{source}: default_vocab_size - default_num_special_tokens = {n_used} is not "
            f"within 256..{len(vocab)} (the vocab's length)"
        )
    ranks: dict[bytes, int] = {}
    for i, entry in enumerate(vocab[:n_used]):
        try:
            if entry["rank"] != i:
                raise VocabError(f"{source}: vocab[{i}] has rank {entry['rank']!r}, expected {i}")
            token = base64.b64decode(entry["token_bytes"], validate=True)
        except (TypeError, KeyError, binascii.Error, ValueError) as e:
            if isinstance(e, VocabError):
                raise
            raise VocabError(f"{source}: vocab[{i}] is malformed: {e}") from e
        if token in ranks:
            raise VocabError(
                f"{source}: vocab[{i}]: token {token!r} already has rank {ranks[token] - n_special}"
            )
        ranks[token] = i + n_special
    listed = doc.get("special_tokens")
    if listed is None:
        number = str(version).lstrip("v").split(".")[0]
        if not number.isdigit() or int(number) > 7:  # as mistral-common: v8 on must list them
            raise VocabError(f"{source}: Tekken {version} file without special_tokens")
        names = list(LEGACY_SPECIAL_TOKENS)
    else:
        try:
            names = [t["token_str"] for t in sorted(listed, key=lambda t: t["rank"])]
            if [t["rank"] for t in sorted(listed, key=lambda t: t["rank"])] != list(
                range(len(listed))
            ):
                raise VocabError(f"{source}: special token ranks are not 0..{len(listed) - 1}")
        except (TypeError, KeyError) as e:
            raise VocabError(f"{source}: malformed special_tokens: {e}") from e
    if len(names) > n_special or len(set(names)) != len(names):
        raise VocabError(f"{source}: {len(names)} special tokens (distinct?) for {n_special} ids")
    names += [f"<SPECIAL_{i}>" for i in range(len(names), n_special)]
    return ranks, pattern, {name: i for i, name in enumerate(names)}


def load_tekken(path: str | os.PathLike, *, name: str | None = None) -> Encoding:
    """An encoding from a Mistral Tekken JSON file (plain or gzip); ids as `mistral-common` gives them."""
    data = read_file(path)
    ranks, pattern, specials = parse_tekken(data, str(path))
    if name is None:
        name = os.path.basename(os.fspath(path)).split(".")[0]
    try:
        enc = Encoding(name, ranks, pattern, specials)
    except regex.error as e:
        raise VocabError(f"{path}: config pattern does not compile: {e}") from e
    except ValueError as e:
        raise VocabError(f"{path}: {e}") from e
    enc.vocab_sha256 = hashlib.sha256(data).hexdigest()
    return enc


def shipped_tekken() -> Encoding:
    """``get_encoding("tekken")``: the vendored ``tekken_240718.json``, after checking its SHA-256."""
    data, actual, path = read_shipped(SHIPPED)
    ranks, pattern, specials = parse_tekken(data, path)
    enc = Encoding("tekken", ranks, pattern, specials)
    enc.vocab_sha256 = actual
    return enc

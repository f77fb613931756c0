"""Named encodings: the shipped ones (vocab files inside the package, SHA-256 checked) and loaders.

``get_encoding(name)`` builds an encoding once per process (under a lock) and caches it.
Shipped: cl100k_base, o200k_base, o200k_harmony. r50k_base/p50k_base/gpt2 are not shipped: their
rank files are not in any package the registries offer; load them with ``load_tiktoken``.
"""

from __future__ import annotations

import hashlib
import os
import threading
import zlib
from importlib import resources
from typing import Callable

from bpecore.encoding import Encoding
from bpecore.vocab import Vocab
from bpecore.load import VocabError, load_tiktoken_ranks, parse_hf, read_file, tiktoken_vocab

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# The patterns tiktoken uses, with hand-written scanners (bpecore/pretokenize.pyx).
from bpecore.pretokenize import CL100K_PATTERN as CL100K_PATTERN  # noqa: E402
from bpecore.pretokenize import O200K_PATTERN as O200K_PATTERN  # noqa: E402
from bpecore.pretokenize import R50K_PATTERN as R50K_PATTERN  # noqa: E402


def _shipped_sha256() -> dict[str, str]:
    text = resources.files("bpecore").joinpath("data/SHA256SUMS").read_text()
    return {name: digest for digest, name in (line.split() for line in text.splitlines() if line.strip())}


_STEPS_MAGIC = b"bpecore-split-steps 1"


def _split_steps(filename: str, rank_sha256: str) -> bytes | None:
    """The shipped ``Vocab.split_steps()`` of rank file ``filename``, or None if absent or stale.

    ``data/<filename>.steps``: one line ``bpecore-split-steps 1 <rank file SHA-256> <steps SHA-256>``,
    then the steps, zlib-compressed. Used only when the first hash is the rank file's (already
    checked against SHA256SUMS) and the second is that of the steps; otherwise the splits are
    searched from the rank file as if there were no steps file (same tables, ~50 ms more for o200k).
    """
    try:
        blob = resources.files("bpecore").joinpath(f"data/{filename}.steps").read_bytes()
    except OSError:
        return None
    header, _, payload = blob.partition(b"\n")
    fields = header.split()
    if len(fields) != 4 or b" ".join(fields[:2]) != _STEPS_MAGIC or fields[2] != rank_sha256.encode():
        return None
    try:
        steps = zlib.decompress(payload)
    except zlib.error:
        return None
    return steps if hashlib.sha256(steps).hexdigest().encode() == fields[3] else None


def _write_split_steps(filename: str, directory: str | os.PathLike | None = None) -> str:
    """Write ``<filename>.steps`` for a shipped rank file from a fresh build; return its path.

    Run after changing a rank file or the split rule:
    ``python -c "from bpecore.registry import _write_split_steps as w; w('cl100k_base.tiktoken'); w('o200k_base.tiktoken')"``
    """
    data = read_file(str(resources.files("bpecore").joinpath(f"data/{filename}.gz")))
    steps = Vocab.from_tiktoken(data).split_steps()
    blob = b"%s %s %s\n" % (_STEPS_MAGIC, hashlib.sha256(data).hexdigest().encode(),
                             hashlib.sha256(steps).hexdigest().encode()) + zlib.compress(steps, 9)
    path = os.path.join(directory or str(resources.files("bpecore").joinpath("data")), f"{filename}.steps")
    with open(path, "wb") as f:
        f.write(blob)
    return path


def _load_shipped(filename: str) -> tuple[Vocab, str]:
    """The Vocab of a vocab file inside the package, after checking its SHA-256.

    gunzip, SHA-256, parse and table building all release the GIL (o200k: ~0.2 s of ~0.25 s), so
    a service that loads in a thread overlaps it with its own imports. The split search is
    skipped with the shipped steps file when it matches (``_split_steps``).
    """
    path = resources.files("bpecore").joinpath(f"data/{filename}.gz")
    data = read_file(str(path))
    expected = _shipped_sha256()[filename]
    actual = hashlib.sha256(data).hexdigest()
    if actual != expected:
        raise VocabError(f"{path}: SHA-256 {actual} does not match the pinned {expected}; reinstall bpecore")
    vocab = Vocab.from_tiktoken(data, _split_steps(filename, actual))
    return (vocab if vocab is not None else tiktoken_vocab(data, str(path))), actual


_vocabs: dict[str, tuple[Vocab, str]] = {}
_vocab_lock = threading.Lock()


def _shipped_vocab(filename: str) -> tuple[Vocab, str]:
    """The Vocab of a shipped file, built once per process (o200k_base and o200k_harmony share it)."""
    with _vocab_lock:
        if filename not in _vocabs:
            _vocabs[filename] = _load_shipped(filename)
        return _vocabs[filename]


def _shipped(name: str, filename: str, pattern: str, special_tokens: dict[str, int]) -> Callable[[], Encoding]:
    def build() -> Encoding:
        vocab, digest = _shipped_vocab(filename)
        enc = Encoding(name, None, pattern, special_tokens, vocab=vocab)
        enc.vocab_sha256 = digest
        return enc

    return build


ENCODING_CONSTRUCTORS: dict[str, Callable[[], Encoding]] = {
    "cl100k_base": _shipped(
        "cl100k_base",
        "cl100k_base.tiktoken",
        CL100K_PATTERN,
        {ENDOFTEXT: 100257, FIM_PREFIX: 100258, FIM_MIDDLE: 100259, FIM_SUFFIX: 100260, ENDOFPROMPT: 100276},
    ),
    "o200k_base": _shipped("o200k_base", "o200k_base.tiktoken", O200K_PATTERN, {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}),
    "o200k_harmony": _shipped(
        "o200k_harmony",
        "o200k_base.tiktoken",
        O200K_PATTERN,
        {
            ENDOFPROMPT: 200018,
            "<|startoftext|>": 199998,
            ENDOFTEXT: 199999,
            "<|return|>": 200002,
            "<|constrain|>": 200003,
            "<|channel|>": 200005,
            "<|start|>": 200006,
            "<|end|>": 200007,
            "<|message|>": 200008,
            "<|call|>": 200012,
        }
        | {f"<|reserved_{i}|>": i for i in (200000, 200001, 200004, 200009, 200010, 200011, *range(200013, 201088))},
    ),
}

_cache: dict[str, Encoding] = {}
_lock = threading.Lock()


def list_encodings() -> list[str]:
    """Names ``get_encoding`` accepts: the shipped encodings plus any registered ones."""
    return sorted(ENCODING_CONSTRUCTORS)


def get_encoding(name: str) -> Encoding:
    """The encoding called ``name``, built on first use and cached for the process.

    >>> get_encoding("cl100k_base").name
    'cl100k_base'
    """
    enc = _cache.get(name)
    if enc is not None:
        return enc
    with _lock:
        enc = _cache.get(name)
        if enc is None:
            try:
                constructor = ENCODING_CONSTRUCTORS[name]
            except KeyError:
                raise ValueError(f"unknown encoding {name!r}; known: {', '.join(list_encodings())}") from None
            enc = _cache[name] = constructor()
    return enc


def register_encoding(enc: Encoding) -> None:
    """Make ``enc`` available to ``get_encoding(enc.name)`` (e.g. a loaded or trained vocab)."""
    with _lock:
        ENCODING_CONSTRUCTORS[enc.name] = lambda: enc
        _cache[enc.name] = enc


def load_tiktoken(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    pattern: str | None = CL100K_PATTERN,
    special_tokens: dict[str, int] | None = None,
    expected_sha256: str | None = None,
) -> Encoding:
    """An encoding from a `.tiktoken` rank file (plain or gzip) with the caller's pattern and specials.

    ``pattern=None`` makes the whole text one piece.
    """
    data = read_file(path)
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise VocabError(f"{path}: SHA-256 {digest} does not match the expected {expected_sha256}")
    vocab = tiktoken_vocab(data, str(path))
    if name is None:
        name = os.path.basename(os.fspath(path)).split(".")[0]
    try:
        enc = Encoding(name, None, pattern, special_tokens, vocab=vocab)
    except ValueError as e:
        raise VocabError(f"{path}: {e}") from e
    enc.vocab_sha256 = digest
    return enc


def load_hf(path: str | os.PathLike, *, name: str | None = None) -> Encoding:
    """An encoding from a Hugging Face `tokenizer.json` with a byte-level BPE model (``bpecore.hf``).

    Exact against `tokenizers` on the same file; a component it cannot reproduce raises VocabError.
    """
    from bpecore.hf import load_hf as _load_hf

    return _load_hf(path, name=name)


def _tekken() -> Encoding:
    from bpecore.tekken import shipped_tekken

    return shipped_tekken()


ENCODING_CONSTRUCTORS["tekken"] = _tekken

"""Named encodings: the shipped ones (vocab files inside the package, SHA-256 checked) and loaders.

``get_encoding(name)`` builds an encoding once per process (under a lock) and caches it.
Shipped: cl100k_base, o200k_base, o200k_harmony, and the GPT-2 family r50k_base, gpt2, p50k_base,
p50k_edit (tiktoken's names, ranks, patterns and specials), tekken; llama3 and llama4 are read
from an installed `llama-models` package.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import zlib
from collections.abc import Callable
from importlib import resources

from bpecore.encoding import Encoding
from bpecore.export import sidecar_path
from bpecore.load import VocabError, read_file, read_shipped, tiktoken_vocab
from bpecore.vocab import Vocab

ENDOFTEXT = "<|endoftext|>"
FIM_PREFIX = "<|fim_prefix|>"
FIM_MIDDLE = "<|fim_middle|>"
FIM_SUFFIX = "<|fim_suffix|>"
ENDOFPROMPT = "<|endofprompt|>"

# The patterns tiktoken uses, with hand-written scanners (bpecore/pretokenize.pyx).
from bpecore.pretokenize import CL100K_PATTERN as CL100K_PATTERN  # noqa: E402
from bpecore.pretokenize import O200K_PATTERN as O200K_PATTERN  # noqa: E402
from bpecore.pretokenize import R50K_PATTERN as R50K_PATTERN  # noqa: E402

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
    if (
        len(fields) != 4
        or b" ".join(fields[:2]) != _STEPS_MAGIC
        or fields[2] != rank_sha256.encode()
    ):
        return None
    try:
        steps = zlib.decompress(payload)
    except zlib.error:
        return None
    return steps if hashlib.sha256(steps).hexdigest().encode() == fields[3] else None


def _load_shipped(filename: str) -> tuple[Vocab, str]:
    """The Vocab of a vocab file inside the package, after checking its SHA-256.

    gunzip, SHA-256, parse and table building all release the GIL (o200k: ~0.2 s of ~0.25 s), so
    a service that loads in a thread overlaps it with its own imports. The split search is
    skipped with the shipped steps file when it matches (``_split_steps``).
    """
    data, actual, path = read_shipped(filename)
    vocab = Vocab.from_tiktoken(data, _split_steps(filename, actual))
    return (vocab if vocab is not None else tiktoken_vocab(data, path)), actual


_vocabs: dict[str, tuple[Vocab, str]] = {}
_vocab_lock = threading.Lock()


def _shipped_vocab(filename: str) -> tuple[Vocab, str]:
    """The Vocab of a shipped file, built once per process (o200k_base and o200k_harmony share it)."""
    with _vocab_lock:
        if filename not in _vocabs:
            _vocabs[filename] = _load_shipped(filename)
        return _vocabs[filename]


def _shipped(
    name: str, filename: str, pattern: str, special_tokens: dict[str, int]
) -> Callable[[], Encoding]:
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
        {
            ENDOFTEXT: 100257,
            FIM_PREFIX: 100258,
            FIM_MIDDLE: 100259,
            FIM_SUFFIX: 100260,
            ENDOFPROMPT: 100276,
        },
    ),
    "o200k_base": _shipped(
        "o200k_base", "o200k_base.tiktoken", O200K_PATTERN, {ENDOFTEXT: 199999, ENDOFPROMPT: 200018}
    ),
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
        | {
            f"<|reserved_{i}|>": i
            for i in (200000, 200001, 200004, 200009, 200010, 200011, *range(200013, 201088))
        },
    ),
}


# GPT-2's ranks (r50k_base, gpt2) and the same plus runs of 2..25 spaces (p50k_base, p50k_edit), with
# tiktoken's specials and sizes; rank files from the openai-whisper distribution (data/LICENSE.gpt2-ranks).
def _shipped_sized(
    name: str, filename: str, special_tokens: dict[str, int], n_vocab: int | None
) -> Callable[[], Encoding]:
    def build() -> Encoding:
        vocab, digest = _shipped_vocab(filename)
        enc = Encoding(
            name, None, R50K_PATTERN, special_tokens, explicit_n_vocab=n_vocab, vocab=vocab
        )
        enc.vocab_sha256 = digest
        return enc

    return build


ENCODING_CONSTRUCTORS.update(
    {
        "gpt2": _shipped_sized("gpt2", "r50k_base.tiktoken", {ENDOFTEXT: 50256}, 50257),
        "r50k_base": _shipped_sized("r50k_base", "r50k_base.tiktoken", {ENDOFTEXT: 50256}, 50257),
        "p50k_base": _shipped_sized("p50k_base", "p50k_base.tiktoken", {ENDOFTEXT: 50256}, 50281),
        "p50k_edit": _shipped_sized(
            "p50k_edit",
            "p50k_base.tiktoken",
            {ENDOFTEXT: 50256, FIM_PREFIX: 50281, FIM_MIDDLE: 50282, FIM_SUFFIX: 50283},
            None,
        ),
    }
)


def _tekken() -> Encoding:
    """Mistral's Tekken vocabulary (data/LICENSE.tekken), with its own pattern and specials."""
    from bpecore.tekken import shipped_tekken

    return shipped_tekken()


ENCODING_CONSTRUCTORS["tekken"] = _tekken


def _llama(version: int) -> Callable[[], Encoding]:
    def build() -> Encoding:
        """Meta's Llama tokenizer.model from an installed `llama-models` (not shipped: its licence)."""
        from bpecore.llama import installed_llama

        return installed_llama(version)

    return build


ENCODING_CONSTRUCTORS["llama3"] = _llama(3)
ENCODING_CONSTRUCTORS["llama4"] = _llama(4)
# The shipped constructors: an encoding ``get_encoding`` built from one of these pickles by name.
_SHIPPED_CONSTRUCTORS: dict[str, Callable[[], Encoding]] = dict(ENCODING_CONSTRUCTORS)

_cache: dict[str, Encoding] = {}
_lock = threading.Lock()


def _pickles_by_name(enc: Encoding) -> bool:
    """Whether ``enc`` is what ``get_encoding(enc.name)`` gives in any process (a shipped encoding)."""
    constructor = _SHIPPED_CONSTRUCTORS.get(enc.name)
    return (
        constructor is not None
        and ENCODING_CONSTRUCTORS.get(enc.name) is constructor
        and _cache.get(enc.name) is enc
    )


#: Encodings whose vocabulary comes from another package: listed only when it is installed.
_FROM_PACKAGE = {"llama3": "llama_models", "llama4": "llama_models"}


def list_encodings() -> list[str]:
    """Names ``get_encoding`` can build here: the shipped encodings, those whose vocabulary an
    installed package provides (llama3 and llama4 with `llama-models`), and any registered ones."""
    import importlib.util

    return sorted(
        name
        for name, constructor in ENCODING_CONSTRUCTORS.items()
        if name not in _FROM_PACKAGE
        or constructor is not _SHIPPED_CONSTRUCTORS.get(name)
        or importlib.util.find_spec(_FROM_PACKAGE[name]) is not None
    )


def list_encoding_names() -> list[str]:
    """tiktoken's name for ``list_encodings``: the names ``get_encoding`` accepts."""
    return list_encodings()


def get_encoding(name: str) -> Encoding:
    """The encoding called ``name``, built on first use and cached for the process.

    >>> get_encoding("cl100k_base").name
    'cl100k_base'
    """
    if not isinstance(name, str):
        raise ValueError(f"Expected a string in get_encoding, got {type(name)}")
    enc = _cache.get(name)
    if enc is not None:
        return enc
    with _lock:
        enc = _cache.get(name)
        if enc is None:
            try:
                constructor = ENCODING_CONSTRUCTORS[name]
            except KeyError:
                raise ValueError(
                    f"unknown encoding {name!r}; known: {', '.join(list_encodings())}"
                ) from None
            enc = _cache[name] = constructor()
            if _pickles_by_name(enc):
                enc._reduce_as = (get_encoding, (name,))
    return enc


def register_encoding(enc: Encoding) -> None:
    """Make ``enc`` available to ``get_encoding(enc.name)`` (e.g. a loaded or trained vocab)."""
    with _lock:
        old = _cache.get(enc.name)
        if old is not None and old is not enc:
            old._reduce_as = None  # its name now means another encoding: pickle it by value
        ENCODING_CONSTRUCTORS[enc.name] = lambda: enc
        _cache[enc.name] = enc


_FROM_SIDECAR = object()  # load_tiktoken's pattern when the caller gives none


def _sidecar(path: str | os.PathLike) -> dict:
    """The JSON sidecar ``save_tiktoken`` writes beside a rank file (``{}`` when there is none)."""
    sidecar = os.fspath(path) + ".json"
    if not os.path.isfile(sidecar):
        return {}
    try:
        with open(sidecar, encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise VocabError(f"{sidecar}: cannot read the sidecar of {os.fspath(path)}: {e}") from e
    ok = (
        isinstance(meta, dict)
        and isinstance(meta.get("name", ""), str)
        and (meta.get("pattern") is None or isinstance(meta["pattern"], str))
        and isinstance(meta.get("special_tokens", {}), dict)
        and all(
            isinstance(k, str) and type(v) is int for k, v in meta.get("special_tokens", {}).items()
        )
    )
    if not ok:
        raise VocabError(
            f"{sidecar}: expected {{name: str, pattern: str | null, special_tokens: {{str: int}}}}"
        )
    return meta


def resolve_encoding(name_or_path: str | os.PathLike) -> Encoding:
    """The encoding a command line or setting names: a ``get_encoding`` name, else a vocab file.

    A file is read by its kind: a model directory or hub cache snapshot (``from_pretrained``), a
    GGUF file (``.gguf``), a Hugging Face ``tokenizer.json`` or Mistral ``tekken*.json``, a
    ``save_tiktoken`` sidecar (``x.tiktoken.json``: its rank file is loaded), or a `.tiktoken`
    rank file (plain or gzip; its sidecar is read when present). Unknown names that are not
    files raise ValueError, as ``get_encoding`` does.
    """
    spec = os.fspath(name_or_path)
    if spec in ENCODING_CONSTRUCTORS or not os.path.exists(spec):
        return get_encoding(spec)
    if os.path.isdir(spec):
        from bpecore.pretrained import from_pretrained

        return from_pretrained(spec)
    if spec.endswith(".gguf"):
        from bpecore.gguf import load_gguf

        return load_gguf(spec)
    if os.path.basename(spec).startswith("tekken") and ".json" in spec:
        from bpecore.tekken import load_tekken

        return load_tekken(spec)
    if spec.endswith(".json"):
        rank_file = spec[: -len(".json")]
        if os.path.isfile(rank_file) and not _looks_like_json(rank_file):
            return load_tiktoken(rank_file)
        return load_hf(spec)
    return load_tiktoken(spec)


def _looks_like_json(path: str) -> bool:
    with open(path, "rb") as f:
        return f.read(64).lstrip()[:1] == b"{"


def load_tiktoken(
    path: str | os.PathLike,
    *,
    name: str | None = None,
    pattern: str | None = _FROM_SIDECAR,  # type: ignore[assignment]
    special_tokens: dict[str, int] | None = None,
    expected_sha256: str | None = None,
) -> Encoding:
    """An encoding from a `.tiktoken` rank file (plain or gzip) with the caller's pattern and specials.

    What the caller leaves out (``name``, ``pattern``, ``special_tokens``) comes from the
    ``path + ".json"`` sidecar that ``save_tiktoken`` writes, when there is one; else the name is
    the file's up to its first dot, the pattern cl100k's and there are no special tokens.
    ``pattern=None`` makes the whole text one piece.
    """
    meta = _sidecar(path)
    if name is None:
        name = meta.get("name")
    if pattern is _FROM_SIDECAR:
        pattern = meta["pattern"] if "pattern" in meta else CL100K_PATTERN
    if special_tokens is None:
        special_tokens = meta.get("special_tokens")
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


def load_saved(path: str | os.PathLike) -> Encoding:
    """The Encoding ``bpecore.export.save_tiktoken`` wrote to ``path`` (rank file + JSON sidecar)."""
    if not os.path.isfile(sidecar_path(path)):
        raise FileNotFoundError(f"{sidecar_path(path)}: no sidecar beside {os.fspath(path)}")
    return load_tiktoken(path)  # reads the sidecar

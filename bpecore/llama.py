"""Meta's Llama 3 and Llama 4 ``tokenizer.model`` files, encoded as Meta's tiktoken tokenizer does.

A ``tokenizer.model`` is a `.tiktoken` rank file (``<base64 token> <rank>`` per line): 128,000
ranks for Llama 3 (3, 3.1, 3.2, 3.3), 200,000 for Llama 4. Meta's ``Tokenizer`` (`llama-models`,
``llama_models/llama3/tokenizer.py`` and ``llama4/tokenizer.py``) adds its special tokens after
the ranks (256 for Llama 3, 2,048 for Llama 4, the unnamed ones ``<|reserved_special_token_N|>``)
and splits text with one pattern: Llama 3's is tiktoken's cl100k regex as written before tiktoken
0.8 rewrote it with possessive quantifiers (it cuts whitespace runs at the end of a text
differently), Llama 4's is tiktoken's o200k regex verbatim; the encodings use Meta's strings
(LLAMA3_PATTERN and O200K_PATTERN, each with a hand-written scanner). Llama 4 is a plain ``Encoding``
(o200k scanner, every exact operation). Llama 3's ranks are not in merge order (``_reranked``)
and 588 of its tokens are found only as whole pieces (``Vocab.enable_whole_pieces``): it counts
and encodes in the compiled core like any ``Encoding``; the horizon operations run compiled on a
text where none of those 588 occurs, else on a slower exact path (``WholePieceEncoding``).

``encode_ordinary`` equals tiktoken on the same ranks, pattern and specials (`tokenizers` running
Meta's Llama 3 string cuts some whitespace runs differently, so Hugging Face's Llama 3
``tokenizer.json`` can differ there). Meta's ``Tokenizer.encode`` additionally cuts its input into
400,000-character windows and runs of more than 25,000 whitespace or non-whitespace characters
before encoding, which only changes ids at those cuts; bpecore does not cut.

The files are under the Llama Community License and are not shipped: ``get_encoding("llama3")``
and ``("llama4")`` read them from an installed `llama-models` package (``pip install llama-models``)
and check their SHA-256.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os

from bpecore.encoding import Encoding
from bpecore.hf import WholePieceEncoding as WholePieceEncoding  # re-exported: it serves Llama 3
from bpecore.hf import _reranked, _whole_piece_encoding
from bpecore.load import VocabError, parse_tiktoken, read_file, tiktoken_vocab
from bpecore.pretokenize import LLAMA3_PATTERN, O200K_PATTERN

#: Meta's Llama 4 pattern: tiktoken's o200k regex, character for character.
LLAMA4_PATTERN = O200K_PATTERN

#: Ranks in each version's file: how ``load_llama`` tells them apart when no version is given.
RANKS = {3: 128_000, 4: 200_000}
#: SHA-256 of the files in `llama-models` (0.1 to 0.3), checked by ``get_encoding``.
SHA256 = {
    3: "82e9d31979e92ab929cd544440f129d9ecd797b69e327f80f17e1c50d5551b55",
    4: "d0bdbaf59b0762c8c807617e2d8ea51420eb1b1de266df2495be755c8e0ed6ed",
}
#: Meta's Llama 3 pattern as its tokenizer writes it (LLAMA3_PATTERN, a scanner of its own).
_PATTERNS = {3: LLAMA3_PATTERN, 4: O200K_PATTERN}


def _reserved(prefix: str, numbers: range) -> list[str]:
    return [f"<|{prefix}reserved_special_token_{i}|>" for i in numbers]


def special_token_names(version: int) -> list[str]:
    """Meta's special tokens of Llama ``version`` in id order (ids follow the last rank)."""
    if version == 3:
        named = [
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|reserved_special_token_0|>",
            "<|reserved_special_token_1|>",
            "<|finetune_right_pad_id|>",
            "<|step_id|>",
            "<|start_header_id|>",
            "<|end_header_id|>",
            "<|eom_id|>",
            "<|eot_id|>",
            "<|python_tag|>",
            "<|image|>",
        ]
        return named + _reserved("", range(2, 2 + 256 - len(named)))
    if version == 4:
        named = [
            "<|begin_of_text|>",
            "<|end_of_text|>",
            "<|fim_prefix|>",
            "<|fim_middle|>",
            "<|fim_suffix|>",
            "<|header_start|>",
            "<|header_end|>",
            "<|eom|>",
            "<|eot|>",
            "<|step|>",
            *_reserved("text_post_train_", range(6)),
            "<|python_start|>",
            "<|python_end|>",
            "<|finetune_right_pad|>",
            *_reserved("text_post_train_", range(8, 69)),
            "<|image_start|>",
            "<|image_end|>",
            *_reserved("vision_", range(2)),
            "<|tile_x_separator|>",
            "<|tile_y_separator|>",
            *_reserved("vision_", range(2, 6)),
            "<|image|>",
            *_reserved("vision_", range(6, 7)),
            "<|patch|>",
            *_reserved("vision_", range(7, 1048)),
            *_reserved("reasoning_", range(8)),
            "<|reasoning_thinking_start|>",
            "<|reasoning_thinking_end|>",
        ]
        return named + _reserved("", range(2048 - len(named)))
    raise ValueError(f"unknown Llama tokenizer version {version!r}; known: 3, 4")


def load_llama(
    path: str | os.PathLike,
    *,
    version: int | None = None,
    name: str | None = None,
    expected_sha256: str | None = None,
) -> Encoding:
    """An encoding from a Llama 3 or Llama 4 ``tokenizer.model`` with Meta's pattern and specials.

    ``version`` (3 or 4) defaults to the one whose rank count the file has; ``name`` to
    ``llama3`` / ``llama4``. The ids are Meta's: ranks, then the special tokens.
    """
    data = read_file(path)
    digest = hashlib.sha256(data).hexdigest()
    if expected_sha256 is not None and digest != expected_sha256:
        raise VocabError(f"{path}: SHA-256 {digest} does not match the expected {expected_sha256}")
    try:
        vocab = tiktoken_vocab(data, str(path))
        whole: dict[bytes, int] = {}
    except VocabError as refused:
        try:
            vocab, whole = _reranked(parse_tiktoken(data, str(path)), str(path))
        except KeyError:  # a byte without its token: the first refusal says which
            raise refused from None
    if version is None:
        found = [v for v, n in RANKS.items() if n == len(vocab)]
        if not found:
            raise VocabError(
                f"{path}: {len(vocab)} ranks is neither Llama 3's ({RANKS[3]}) nor Llama 4's "
                f"({RANKS[4]}); pass version=3 or version=4"
            )
        version = found[0]
    if version not in RANKS:
        raise ValueError(f"unknown Llama tokenizer version {version!r}; known: 3, 4")
    if vocab.max_id != len(vocab) - 1:
        raise VocabError(f"{path}: ranks are not 0..{len(vocab) - 1}")
    first = len(vocab)
    specials = {s: first + i for i, s in enumerate(special_token_names(version))}
    name = name or f"llama{version}"
    try:
        if whole:
            enc = _whole_piece_encoding(name, vocab, _PATTERNS[version], specials, whole)
        else:
            enc = Encoding(name, None, _PATTERNS[version], specials, vocab=vocab)
    except ValueError as e:
        raise VocabError(f"{path}: {e}") from e
    enc.vocab_sha256 = digest
    # Pickled as "load this file again" (get_encoding's ones as their name): by value, a file
    # whose ranks needed reordering would lose its whole-piece table or be refused.
    enc._reduce_as = (
        functools.partial(load_llama, version=version, name=name, expected_sha256=digest),
        (os.path.abspath(path),),
    )
    return enc


def installed_path(version: int) -> str:
    """The ``tokenizer.model`` of Llama ``version`` inside the installed `llama-models` package."""
    spec = importlib.util.find_spec("llama_models")  # found, not imported (its imports are heavy)
    if spec is None or not spec.submodule_search_locations:
        raise VocabError(
            f"llama{version} needs Meta's tokenizer.model (Llama Community License, not shipped "
            "with bpecore): pip install llama-models"
        )
    package = list(spec.submodule_search_locations)[0]
    path = os.path.join(package, f"llama{version}", "tokenizer.model")
    if not os.path.isfile(path):
        raise VocabError(
            f"{path}: the installed llama-models has no Llama {version} tokenizer.model; "
            "pip install --upgrade llama-models"
        )
    return path


def installed_llama(version: int) -> Encoding:
    """``get_encoding("llama3")`` / ``("llama4")``: the installed file, after checking its SHA-256."""
    return load_llama(installed_path(version), version=version, expected_sha256=SHA256[version])

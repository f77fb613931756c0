"""Named pre-tokenizer patterns: the one table ``train``, ``bpecore train`` and the service read.

A pattern may be given by name wherever one is asked for (``train(pattern="o200k")``,
``bpecore train --pattern cl100k``, the service's ``tiktoken_files[].pattern``); anything else is
taken as a regex (``regex`` module syntax). The regexes themselves live beside their hand-written
scanners in ``bpecore.pretokenize``.
"""

from __future__ import annotations

from bpecore.pretokenize import CL100K_PATTERN, O200K_PATTERN, R50K_PATTERN

#: The split of Hugging Face's ByteLevel pre-tokenizer with ``use_regex`` (GPT-2's original regex,
#: not tiktoken's possessive rewrite R50K_PATTERN): what ``bpecore.hf`` runs for such a stage.
BYTELEVEL_PATTERN = (
    r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
)

#: Name -> regex: the short name and the encoding's name of each shipped pattern (gpt2 = r50k).
NAMED_PATTERNS: dict[str, str] = {
    "cl100k": CL100K_PATTERN,
    "cl100k_base": CL100K_PATTERN,
    "o200k": O200K_PATTERN,
    "o200k_base": O200K_PATTERN,
    "r50k": R50K_PATTERN,
    "r50k_base": R50K_PATTERN,
    "gpt2": R50K_PATTERN,
}


def resolve_pattern(pattern: str | None) -> str | None:
    """The regex named ``pattern``; ``pattern`` itself when it is no name (a regex, or None).

    >>> from bpecore.patterns import resolve_pattern
    >>> resolve_pattern("gpt2") == resolve_pattern("r50k_base")
    True
    >>> resolve_pattern("[a-z]+")
    '[a-z]+'
    """
    if pattern is None:
        return None
    return NAMED_PATTERNS.get(pattern, pattern)

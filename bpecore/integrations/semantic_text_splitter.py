"""semantic-text-splitter's splitters counting with a bpecore encoding
(``pip install 'bpecore[semantic-text-splitter]'``).

semantic-text-splitter takes any ``Callable[[str], int]`` as its chunk sizer
(``TextSplitter.from_callback``); an encoding's ``count`` is that callable, exact and cheap enough
to be called for every candidate chunk. semantic-text-splitter does the cutting: its chunks have
at most ``capacity`` tokens, and ``chunk_indices`` gives their character offsets.
"""

from __future__ import annotations

from semantic_text_splitter import MarkdownSplitter, TextSplitter

from bpecore.encoding import Encoding


def _encoding(encoding: str | Encoding) -> Encoding:
    if isinstance(encoding, str):
        from bpecore.registry import get_encoding

        return get_encoding(encoding)
    return encoding


def text_splitter(
    encoding: str | Encoding = "cl100k_base",
    capacity: int | tuple[int, int] = 512,
    overlap: int = 0,
    trim: bool = True,
) -> TextSplitter:
    """A ``semantic_text_splitter.TextSplitter`` whose chunk size is ``encoding``'s token count.

    >>> splitter = text_splitter(capacity=6)
    >>> splitter.chunks("One. Two three.\\n\\nFour five six.")
    ['One. Two three.', 'Four five six.']
    """
    return TextSplitter.from_callback(_encoding(encoding).count, capacity, overlap, trim)


def markdown_splitter(
    encoding: str | Encoding = "cl100k_base",
    capacity: int | tuple[int, int] = 512,
    overlap: int = 0,
    trim: bool = True,
) -> MarkdownSplitter:
    """A ``semantic_text_splitter.MarkdownSplitter`` whose chunk size is ``encoding``'s token count."""
    return MarkdownSplitter.from_callback(_encoding(encoding).count, capacity, overlap, trim)

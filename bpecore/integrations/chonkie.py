"""A chonkie tokenizer backed by a bpecore encoding (``pip install 'bpecore[chonkie]'``).

chonkie's chunkers take ``tokenizer=``: a name, a token-counting callable (counts only: chunkers
that encode, such as ``TokenChunker``, then fail), or a ``chonkie.tokenizer.Tokenizer``.
``BPETokenizer`` is the last kind, so every chunker works with it: it encodes, decodes and counts
exactly as the encoding does (``count_tokens`` without building the token list). For counting
alone, ``encoding.count`` is the callable. chonkie does the cutting.
"""

from __future__ import annotations

from collections.abc import Sequence

from chonkie.tokenizer import Tokenizer

from bpecore.encoding import Encoding


class BPETokenizer(Tokenizer):
    """``encoding`` as a chonkie ``Tokenizer``.

    >>> from chonkie import RecursiveChunker
    >>> chunker = RecursiveChunker(tokenizer=BPETokenizer("cl100k_base"), chunk_size=6)
    >>> [(c.text, c.token_count) for c in chunker("One. Two three. Four five six.")]
    [('One. Two three. Four', 6), (' five six.', 3)]
    """

    def __init__(self, encoding: str | Encoding = "cl100k_base") -> None:
        super().__init__()
        if isinstance(encoding, str):
            from bpecore.registry import get_encoding

            encoding = get_encoding(encoding)
        self.encoding = encoding

    def __repr__(self) -> str:
        return f"BPETokenizer({self.encoding.name!r})"

    def encode(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def decode(self, tokens: Sequence[int]) -> str:
        return self.encoding.decode(list(tokens))

    def tokenize(self, text: str) -> list[int]:
        return self.encoding.encode_ordinary(text)

    def count_tokens(self, text: str) -> int:
        return self.encoding.count(text)

    def encode_batch(self, texts: Sequence[str]) -> list[list[int]]:
        return self.encoding.encode_ordinary_batch(list(texts))

    def decode_batch(self, token_sequences: Sequence[Sequence[int]]) -> list[str]:
        return [self.encoding.decode(list(t)) for t in token_sequences]

    def count_tokens_batch(self, texts: Sequence[str]) -> list[int]:
        return self.encoding.count_batch(list(texts))

"""A LangChain ``TextSplitter`` that cuts with ``bpecore.chunk`` (``pip install 'bpecore[langchain]'``).

Each chunk has at most ``chunk_size`` tokens of the encoding, exactly, and its documents carry the
chunk's character offsets into the source text (``start_index``, the key LangChain's own
``add_start_index`` uses, and ``end_index``) and its token count (``tokens``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from typing import Any

from langchain_core.documents import Document
from langchain_text_splitters import TextSplitter

from bpecore.chunker import Chunk, chunk
from bpecore.encoding import Encoding


class BPETextSplitter(TextSplitter):
    """Split text at the best boundary (section, paragraph, line, sentence, word) that keeps each
    chunk within ``chunk_size`` tokens.

    Args:
        encoding: an encoding name (``"cl100k_base"``, ``"o200k_base"``) or an ``Encoding``.
        chunk_size: the most tokens a chunk may have.
        chunk_overlap: each chunk after the first starts with at most this many tokens of the
            previous chunk's end (``0 <= chunk_overlap < chunk_size``).
        strip_whitespace: strip whitespace at chunk edges (the offsets stay true).
        markdown: treat Markdown headings as the best boundaries.

    >>> splitter = BPETextSplitter(chunk_size=6)
    >>> [d.metadata for d in splitter.create_documents(["One. Two three.\\n\\nFour five six."])]
    [{'start_index': 0, 'end_index': 15, 'tokens': 5}, {'start_index': 17, 'end_index': 31, 'tokens': 4}]
    """

    def __init__(
        self,
        encoding: str | Encoding = "cl100k_base",
        chunk_size: int = 512,
        chunk_overlap: int = 0,
        strip_whitespace: bool = True,
        markdown: bool = False,
        **kwargs: Any,
    ) -> None:
        if isinstance(encoding, str):
            from bpecore.registry import get_encoding

            encoding = get_encoding(encoding)
        if not 0 <= chunk_overlap < chunk_size:
            raise ValueError(
                f"chunk_overlap must be >= 0 and below chunk_size ({chunk_size}), got {chunk_overlap}"
            )
        super().__init__(
            chunk_size=chunk_size,
            chunk_overlap=chunk_overlap,
            length_function=encoding.count,
            strip_whitespace=strip_whitespace,
            add_start_index=True,
            **kwargs,
        )
        self.encoding = encoding
        self.markdown = markdown

    def chunks(self, text: str) -> list[Chunk]:
        """The ``bpecore.Chunk`` objects (start, end, text, tokens) this splitter cuts ``text`` into."""
        return chunk(
            text,
            self.encoding,
            max_tokens=self._chunk_size,
            overlap=self._chunk_overlap,
            trim=self._strip_whitespace,
            markdown=self.markdown,
        )

    def split_text(self, text: str) -> list[str]:
        return [c.text for c in self.chunks(text)]

    def create_documents(
        self, texts: list[str], metadatas: list[dict[Any, Any]] | None = None
    ) -> list[Document]:
        """One ``Document`` per chunk, its metadata the text's plus ``start_index``, ``end_index``
        and ``tokens`` (offsets from the cut itself, not from searching the text)."""
        metadatas = metadatas or [{}] * len(texts)
        documents = []
        for text, metadata in zip(texts, metadatas, strict=True):
            for c in self.chunks(text):
                meta = copy.deepcopy(metadata)
                meta.update(start_index=c.start, end_index=c.end, tokens=c.tokens)
                documents.append(Document(page_content=c.text, metadata=meta))
        return documents

    def split_documents(self, documents: Iterable[Document]) -> list[Document]:
        documents = list(documents)
        return self.create_documents(
            [d.page_content for d in documents], [d.metadata for d in documents]
        )

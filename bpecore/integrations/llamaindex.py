"""A LlamaIndex node parser that cuts with ``bpecore.chunk`` (``pip install 'bpecore[llamaindex]'``).

Each node's text has at most ``max_tokens`` tokens of the encoding, exactly. Its character offsets
into the source document are ``start_char_idx``/``end_char_idx`` (from the cut itself, not from
searching the text, so repeated passages keep their true place) and are in the metadata too
(``start_index``, ``end_index``, ``tokens``: kept out of the embedding and LLM text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.node_parser import TextSplitter
from llama_index.core.node_parser.node_utils import build_nodes_from_splits
from llama_index.core.schema import BaseNode, Document, TextNode
from pydantic import Field, PrivateAttr

from bpecore.chunker import Chunk, chunk
from bpecore.encoding import Encoding

OFFSET_KEYS = ("start_index", "end_index", "tokens")


class BPENodeParser(TextSplitter):
    """Split documents into nodes of at most ``max_tokens`` tokens at the best boundary (section,
    paragraph, line, sentence, word).

    >>> from llama_index.core import Document
    >>> nodes = BPENodeParser(max_tokens=6).get_nodes_from_documents(
    ...     [Document(text="One. Two three.\\n\\nFour five six.")])
    >>> [(n.start_char_idx, n.end_char_idx, n.metadata["tokens"]) for n in nodes]
    [(0, 15, 5), (17, 31, 4)]
    """

    encoding_name: str = Field(
        default="cl100k_base", description="Encoding name, used when no Encoding is given."
    )
    max_tokens: int = Field(default=512, gt=0, description="Most tokens a node's text may have.")
    overlap: int = Field(
        default=0,
        ge=0,
        description="Each node after the first starts with at most this many tokens of the "
        "previous one's end (below max_tokens).",
    )
    trim: bool = Field(default=True, description="Strip whitespace at node edges.")
    markdown: bool = Field(default=False, description="Markdown headings are the best boundaries.")
    _encoding: Encoding = PrivateAttr()

    def __init__(self, encoding: str | Encoding | None = None, **kwargs: Any) -> None:
        if encoding is None:  # also from_dict / from_json: the name is among the fields
            encoding = kwargs.get("encoding_name", "cl100k_base")
        if isinstance(encoding, str):
            from bpecore.registry import get_encoding

            kwargs["encoding_name"] = encoding
            encoding = get_encoding(encoding)
        else:
            kwargs["encoding_name"] = encoding.name
        super().__init__(**kwargs)
        if self.overlap >= self.max_tokens:
            raise ValueError(
                f"overlap must be below max_tokens ({self.max_tokens}), got {self.overlap}"
            )
        self._encoding = encoding

    @classmethod
    def class_name(cls) -> str:
        return "BPENodeParser"

    def chunks(self, text: str) -> list[Chunk]:
        """The ``bpecore.Chunk`` objects (start, end, text, tokens) this parser cuts ``text`` into."""
        return chunk(
            text,
            self._encoding,
            max_tokens=self.max_tokens,
            overlap=self.overlap,
            trim=self.trim,
            markdown=self.markdown,
        )

    def split_text(self, text: str) -> list[str]:
        return [c.text for c in self.chunks(text)]

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        out: list[BaseNode] = []
        for node in nodes:
            chunks = self.chunks(node.get_content())
            built = build_nodes_from_splits([c.text for c in chunks], node, id_func=self.id_func)
            for new, c in zip(built, chunks, strict=True):
                new.metadata.update(start_index=c.start, end_index=c.end, tokens=c.tokens)
                for keys in (new.excluded_embed_metadata_keys, new.excluded_llm_metadata_keys):
                    keys.extend(k for k in OFFSET_KEYS if k not in keys)
                new.start_char_idx, new.end_char_idx = c.start, c.end
            out.extend(built)
        return out

    def _postprocess_parsed_nodes(
        self, nodes: list[BaseNode], parent_doc_map: dict[str, Document]
    ) -> list[BaseNode]:
        # LlamaIndex re-derives the offsets by searching the document for each node's text, which
        # can land on an earlier copy of a repeated passage: the cut's own offsets win.
        nodes = super()._postprocess_parsed_nodes(nodes, parent_doc_map)
        for node in nodes:
            if isinstance(node, TextNode) and "start_index" in node.metadata:
                node.start_char_idx = node.metadata["start_index"]
                node.end_char_idx = node.metadata["end_index"]
        return nodes

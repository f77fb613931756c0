"""Adapters for text-splitting frameworks, one module each; ``import bpecore`` imports none of them.

* ``bpecore.integrations.langchain``: ``BPETextSplitter``, a LangChain ``TextSplitter``;
* ``bpecore.integrations.llamaindex``: ``BPENodeParser``, a LlamaIndex node parser;
* ``bpecore.integrations.chonkie``: ``BPETokenizer``, the tokenizer object chonkie's chunkers take;
* ``bpecore.integrations.semantic_text_splitter``: ``text_splitter`` / ``markdown_splitter``, built
  on ``TextSplitter.from_callback`` with an encoding's exact ``count``.

The first two cut with ``bpecore.chunk`` (exact: no chunk over the limit, character offsets in each
chunk's metadata); the last two hand the framework an exact counter and let it cut.
"""

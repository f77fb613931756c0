"""Framework adapters (bpecore.integrations) with the real packages: every chunk within the limit,
offsets true, and each framework's own API (split_documents, get_nodes_from_documents, chonkie's
chunkers, semantic-text-splitter's chunk_indices) returns what bpecore cuts or counts."""

from __future__ import annotations

import doctest
import importlib
import subprocess
import sys

import pytest

import bpecore

TEXTS = {
    "english": 40_000,
    "code": 30_000,
    "multilingual": 30_000,
    "adv_whitespace": 8_000,
}
# a passage repeated: a search for the chunk text finds the first copy, the cut knows its own
REPEATED = ("The same paragraph, word for word, once again.\n\n" * 30).strip()


@pytest.fixture(scope="module")
def texts(corpus):
    out = {name: corpus(name)[:size] for name, size in TEXTS.items()}
    out["repeated"] = REPEATED
    return out


@pytest.fixture(scope="module")
def cl100k():
    return bpecore.get_encoding("cl100k_base")


def test_import_bpecore_imports_no_integration():
    frameworks = ("langchain_core", "langchain_text_splitters", "llama_index", "chonkie")
    code = (
        "import sys, bpecore; bpecore.get_encoding('cl100k_base').count('x');"
        f"print([m for m in sys.modules if m.startswith('bpecore.integrations') or m.split('.')[0] in {frameworks!r} or m == 'semantic_text_splitter'])"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize("name", ["langchain", "llamaindex", "chonkie", "semantic_text_splitter"])
def test_docstring_examples(name):
    pytest.importorskip(
        {
            "langchain": "langchain_text_splitters",
            "llamaindex": "llama_index.core",
            "chonkie": "chonkie",
            "semantic_text_splitter": "semantic_text_splitter",
        }[name]
    )
    module = importlib.import_module(f"bpecore.integrations.{name}")
    tests = doctest.DocTestFinder(exclude_empty=True).find(module)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    assert sum(len(t.examples) for t in tests) > 0
    for t in tests:
        runner.run(t)
    assert runner.failures == 0


def assert_exact(enc, source: str, pieces, limit: int) -> None:
    """pieces: (start, end, text, tokens or None) in order: true offsets, within the limit, exact."""
    assert pieces
    previous = -1
    for start, end, text, tokens in pieces:
        assert source[start:end] == text
        assert start > previous
        previous = start
        n = enc.count(text)
        assert n <= limit, (n, limit, text[:80])
        if tokens is not None:
            assert tokens == n


# ------------------------------------------------------------------------------------ LangChain
@pytest.fixture(scope="module")
def lc():
    """(Document, BPETextSplitter), or a skip naming the missing package."""
    pytest.importorskip("langchain_text_splitters", reason="pip install 'bpecore[langchain]'")
    from langchain_core.documents import Document

    from bpecore.integrations.langchain import BPETextSplitter

    return Document, BPETextSplitter


@pytest.mark.parametrize("size,overlap", [(64, 0), (200, 30), (512, 0)])
def test_langchain_split_documents(lc, texts, cl100k, size, overlap):
    LCDocument, BPETextSplitter = lc
    splitter = BPETextSplitter("cl100k_base", chunk_size=size, chunk_overlap=overlap)
    docs = [LCDocument(page_content=t, metadata={"source": n}) for n, t in texts.items()]
    out = splitter.split_documents(docs)
    for name, text in texts.items():
        mine = [d for d in out if d.metadata["source"] == name]
        expected = bpecore.chunk(text, cl100k, max_tokens=size, overlap=overlap)
        assert [
            (
                d.metadata["start_index"],
                d.metadata["end_index"],
                d.page_content,
                d.metadata["tokens"],
            )
            for d in mine
        ] == [(c.start, c.end, c.text, c.tokens) for c in expected]
        assert_exact(
            cl100k,
            text,
            [
                (
                    d.metadata["start_index"],
                    d.metadata["end_index"],
                    d.page_content,
                    d.metadata["tokens"],
                )
                for d in mine
            ],
            size,
        )
    assert splitter.split_text(texts["english"]) == [
        c.text for c in bpecore.chunk(texts["english"], cl100k, max_tokens=size, overlap=overlap)
    ]


def test_langchain_untrimmed_chunks_tile_the_text(lc, texts):
    _, BPETextSplitter = lc
    splitter = BPETextSplitter("o200k_base", chunk_size=100, strip_whitespace=False)
    enc = bpecore.get_encoding("o200k_base")
    for text in texts.values():
        docs = splitter.create_documents([text])
        assert "".join(d.page_content for d in docs) == text
        assert all(enc.count(d.page_content) <= 100 for d in docs)


def test_langchain_transform_documents_and_bad_overlap(lc):
    LCDocument, BPETextSplitter = lc
    splitter = BPETextSplitter(chunk_size=8)
    out = splitter.transform_documents([LCDocument(page_content=REPEATED, metadata={"k": 1})])
    assert [d.metadata["start_index"] for d in out] == [
        c.start for c in bpecore.chunk(REPEATED, max_tokens=8)
    ]
    assert all(d.metadata["k"] == 1 for d in out)
    with pytest.raises(ValueError, match="chunk_overlap"):
        BPETextSplitter(chunk_size=8, chunk_overlap=8)


# ----------------------------------------------------------------------------------- LlamaIndex
@pytest.fixture(scope="module")
def li():
    """(Document, MetadataMode, BPENodeParser), or a skip naming the missing package."""
    pytest.importorskip("llama_index.core", reason="pip install 'bpecore[llamaindex]'")
    from llama_index.core import Document
    from llama_index.core.schema import MetadataMode

    from bpecore.integrations.llamaindex import BPENodeParser

    return Document, MetadataMode, BPENodeParser


@pytest.mark.parametrize("size,overlap", [(64, 0), (200, 30)])
def test_llamaindex_get_nodes_from_documents(li, texts, cl100k, size, overlap):
    LIDocument, MetadataMode, BPENodeParser = li
    parser = BPENodeParser("cl100k_base", max_tokens=size, overlap=overlap)
    docs = [LIDocument(text=t, metadata={"source": n}) for n, t in texts.items()]
    nodes = parser.get_nodes_from_documents(docs)
    for doc in docs:
        mine = [n for n in nodes if n.ref_doc_id == doc.doc_id]
        expected = bpecore.chunk(doc.text, cl100k, max_tokens=size, overlap=overlap)
        assert [(n.start_char_idx, n.end_char_idx, n.text) for n in mine] == [
            (c.start, c.end, c.text) for c in expected
        ]
        assert_exact(
            cl100k,
            doc.text,
            [(n.start_char_idx, n.end_char_idx, n.text, n.metadata["tokens"]) for n in mine],
            size,
        )
        for n in mine:
            assert n.metadata["source"] == doc.metadata["source"]
            assert (n.metadata["start_index"], n.metadata["end_index"]) == (
                n.start_char_idx,
                n.end_char_idx,
            )
            # the offsets are metadata for the program, not text for the embedder or the LLM
            for mode in (MetadataMode.EMBED, MetadataMode.LLM):
                assert "start_index" not in n.get_content(metadata_mode=mode)


def test_llamaindex_repeated_passages_keep_their_place(li, cl100k):
    LIDocument, _, BPENodeParser = li
    nodes = BPENodeParser(max_tokens=12).get_nodes_from_documents([LIDocument(text=REPEATED)])
    starts = [n.start_char_idx for n in nodes]
    assert starts == [c.start for c in bpecore.chunk(REPEATED, cl100k, max_tokens=12)]
    assert len(set(starts)) == len(starts) > 20
    with pytest.raises(ValueError, match="overlap"):
        BPENodeParser(max_tokens=8, overlap=8)


def test_llamaindex_other_encoding_object(li, texts):
    BPENodeParser = li[2]
    enc = bpecore.get_encoding("o200k_base")
    parser = BPENodeParser(enc, max_tokens=128, markdown=True)
    assert parser.encoding_name == "o200k_base"
    text = texts["english"]
    assert parser.split_text(text) == [
        c.text for c in bpecore.chunk(text, enc, max_tokens=128, markdown=True)
    ]
    # built from its fields alone (as from saved settings), the encoding comes from encoding_name
    fields = parser.to_dict()
    again = BPENodeParser(**{k: fields[k] for k in ("encoding_name", "max_tokens", "markdown")})
    assert (again.encoding_name, again.max_tokens, again.markdown) == ("o200k_base", 128, True)
    assert again.split_text(text) == parser.split_text(text)


# -------------------------------------------------------------------------------------- chonkie
@pytest.fixture(scope="module")
def ck():
    """(the chonkie module, BPETokenizer), or a skip naming the missing package."""
    chonkie = pytest.importorskip("chonkie", reason="pip install 'bpecore[chonkie]'")
    from bpecore.integrations.chonkie import BPETokenizer

    return chonkie, BPETokenizer


@pytest.mark.parametrize("chunker_name", ["RecursiveChunker", "SentenceChunker"])
@pytest.mark.parametrize("counter", ["tokenizer", "callable"])
def test_chonkie_chunkers_with_our_counter(ck, texts, cl100k, chunker_name, counter):
    chonkie, BPETokenizer = ck
    tokenizer = BPETokenizer(cl100k) if counter == "tokenizer" else cl100k.count
    kwargs = {"chunk_overlap": 0} if chunker_name == "SentenceChunker" else {}
    chunker = getattr(chonkie, chunker_name)(tokenizer=tokenizer, chunk_size=128, **kwargs)
    for name in ("english", "code", "repeated"):
        text = texts[name]
        chunks = chunker(text)
        assert_exact(
            cl100k,
            text,
            [(c.start_index, c.end_index, c.text, c.token_count) for c in chunks],
            128,
        )


def test_chonkie_token_chunker_encodes_with_us(ck, texts, cl100k):
    chonkie, BPETokenizer = ck
    # TokenChunker cuts the token list itself: each chunk is `chunk_size` of our ids, decoded
    chunker = chonkie.TokenChunker(tokenizer=BPETokenizer(cl100k), chunk_size=100)
    text = texts["english"]
    chunks = chunker(text)
    ids = cl100k.encode_ordinary(text)
    assert [c.token_count for c in chunks[:-1]] == [100] * (len(chunks) - 1)
    assert sum(c.token_count for c in chunks) == len(ids)
    assert "".join(c.text for c in chunks) == text
    tokenizer = BPETokenizer("cl100k_base")
    assert tokenizer.count_tokens_batch([text, "hi"]) == [len(ids), 1]
    assert tokenizer.decode(tokenizer.encode(text)) == text


# ------------------------------------------------------------------------ semantic-text-splitter
@pytest.mark.parametrize("make", ["text_splitter", "markdown_splitter"])
@pytest.mark.parametrize("capacity,overlap", [(64, 0), (200, 20)])
def test_semantic_text_splitter_with_our_counter(texts, make, capacity, overlap):
    pytest.importorskip(
        "semantic_text_splitter", reason="pip install 'bpecore[semantic-text-splitter]'"
    )
    from bpecore.integrations import semantic_text_splitter

    make = getattr(semantic_text_splitter, make)
    enc = bpecore.get_encoding("o200k_base")
    splitter = make(enc, capacity=capacity, overlap=overlap)
    for text in texts.values():
        pieces = splitter.chunk_indices(text)
        assert_exact(enc, text, [(start, start + len(t), t, None) for start, t in pieces], capacity)

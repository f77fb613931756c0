"""The compiled chunker (``bpecore/chunker.py`` built with the C types of ``chunker.pxd``) gives
what the same source gives run by the interpreter: the C integers, C string indexing and C calls
the .pxd brings keep Python's meaning. (A build older than its .py fails here too, when the two
differ on these inputs: rebuild with ``python setup.py build_ext --inplace``.)"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import random
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore import chunker

from ..conftest import ADVERSARIAL_CHARS, CORPORA


def _interpreted():
    """``bpecore/chunker.py`` loaded from source as its own module, never the extension."""
    source = Path(chunker.__file__).with_name("chunker.py")
    name = "bpecore._chunker_interpreted"
    loader = importlib.machinery.SourceFileLoader(name, str(source))
    spec = importlib.util.spec_from_loader(name, loader)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # (dataclasses look their module up)
    loader.exec_module(module)
    return module


PY = _interpreted()


@pytest.fixture(scope="module")
def cl100k():
    return bpecore.get_encoding("cl100k_base")


OPTIONS = [
    {},
    {"trim": False},
    {"overlap": 7},
    {"balance": True},
    {"markdown": True},
    {"language": "python"},
    {"language": "text", "balance": True, "overlap": 3},
]


def both(text: str, enc, max_tokens: int, **kw):
    def run(module):
        try:
            return [
                (c.start, c.end, c.tokens, c.text)
                for c in module.chunk(text, enc, max_tokens, **kw)
            ]
        except ValueError as e:
            return str(e)

    return run(chunker), run(PY)


def test_the_chunker_is_compiled(cl100k):
    assert Path(chunker.__file__).suffix in (".so", ".pyd"), chunker.__file__
    assert not hasattr(chunker._Chunker(cl100k, "a b", 4, 0, True, False), "__dict__")
    assert PY.__file__.endswith("chunker.py")
    assert hasattr(PY._Chunker(cl100k, "a b", 4, 0, True, False), "__dict__")


@pytest.mark.parametrize("name", CORPORA)
def test_corpus_slices(corpus, cl100k, name):
    rng = random.Random(name)
    text = corpus(name)
    for opts in OPTIONS:
        start = rng.randrange(len(text) - 20_000)
        piece = text[start : start + rng.randrange(2_000, 20_000)]
        for max_tokens in (9, 64, 300):
            compiled, interpreted = both(piece, cl100k, max_tokens, **opts)
            assert compiled == interpreted, (name, opts, max_tokens)


_PIECES = st.sampled_from(
    [
        "word",
        "Title",
        " ",
        "  ",
        "\n",
        "\n\n",
        "\r\n",
        "\t",
        ". ",
        "! ",
        "? ",
        ", ",
        "; ",
        ":",
        ")",
        '"',
        "Dr. ",
        "e.g. ",
        "2. ",
        "\\n",
        "\\n\\n",
        "# ",
        "## ",
        "```\n",
        "===\n",
        "def f():\n",
        "    return 1\n",
        "@deco\n",
        "class A:\n",
        "\u3002",
        "e\u0301",
        "\U0001f469\u200d\U0001f4bb",
        "日本語",
        "12345",
    ]
)


@given(
    st.lists(st.one_of(_PIECES, st.text(alphabet=ADVERSARIAL_CHARS, max_size=6)), max_size=80),
    st.integers(1, 40),
    st.sampled_from(OPTIONS),
)
def test_generated(cl100k, parts, max_tokens, opts):
    text = "".join(parts)
    if not text:
        return
    opts = dict(opts)
    if opts.get("overlap", 0) >= max_tokens:
        opts["overlap"] = max_tokens - 1
    compiled, interpreted = both(text, cl100k, max_tokens, **opts)
    assert compiled == interpreted


class _CountOnly:
    """An encoding whose interval counter has only ``count`` (as the slice counters of pipeline
    encodings do), so the chunker asks its searches from Python (``_CountSearches``)."""

    def __init__(self, enc):
        self.enc = enc

    def count(self, text):
        return self.enc.count(text)

    def interval_counter(self, text, piece_tables=True):
        ic = self.enc.interval_counter(text, piece_tables=piece_tables)
        return type(
            "Slices", (), {"count": lambda _, a, b: ic.count(a, b), "__len__": lambda _: len(ic)}
        )()


@pytest.mark.parametrize("name", ["multilingual", "code"])
def test_o200k_and_searches_from_python(corpus, name):
    text = corpus(name)[50_000:58_000]
    o200k = bpecore.get_encoding("o200k_base")
    for enc in (o200k, _CountOnly(o200k)):
        for max_tokens in (16, 200):
            for opts in ({}, {"overlap": 5, "balance": True}):
                compiled, interpreted = both(text, enc, max_tokens, **opts)
                assert compiled == interpreted

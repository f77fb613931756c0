"""bpecore/utf8.pxd against ``str.encode("utf-8")``: the SSE2 path and the scalar code alike.

utf8.pxd is cdef-only (cimported by backtrack and batch), so a small probe module that cimports
it is compiled here twice: as the package is built (SSE2 on x86-64) and with ``-DBPE_NO_SSE2``
(the portable code other CPUs get). Each probe converts a text three ways: ``utf8_size`` +
``utf8_fill`` as built, the 16-unit block path and the scalar code, into a buffer with a guard
zone that must stay untouched (utf8_fill_blocks stores 16 bytes at a time).
"""

from __future__ import annotations

import gzip
import importlib.util
import os
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
# cython: language_level=3
from cpython.unicode cimport PyUnicode_GET_LENGTH
from libc.stdint cimport uint8_t
from libc.string cimport memset

from bpecore._simd cimport BPE_SSE2
from bpecore.utf8 cimport (
    utf8_fill, utf8_fill_blocks, utf8_fill_scalar, utf8_size, utf8_size_blocks, utf8_size_scalar,
)

cdef extern from "Python.h":
    unsigned int PyUnicode_KIND(object o)
    const void* PyUnicode_DATA(object o)

SSE2 = BPE_SSE2
GUARD = 32


def convert(str text, str how):
    '''(kind, UTF-8 bytes or None for a lone surrogate, guard zone intact).'''
    cdef unsigned int kind = PyUnicode_KIND(text)
    cdef const void* data = PyUnicode_DATA(text)
    cdef Py_ssize_t m = PyUnicode_GET_LENGTH(text), n
    if how == "built":
        n = utf8_size(kind, data, m)
    elif how == "blocks":
        n = utf8_size_blocks(kind, data, m)
    else:
        n = utf8_size_scalar(kind, data, m)
    if n < 0:
        return kind, None, True
    out = bytearray(b"\\xaa" * (n + GUARD))
    cdef uint8_t[::1] view = out
    if how == "built":
        utf8_fill(kind, data, m, &view[0])
    elif how == "blocks":
        utf8_fill_blocks(kind, data, m, &view[0])
    else:
        utf8_fill_scalar(kind, data, m, &view[0])
    return kind, bytes(out[:n]), out[n:] == b"\\xaa" * GUARD
"""


def _build(tmp: Path, name: str, macros: list[tuple[str, str | None]]):
    cython_build = pytest.importorskip("Cython.Build")
    from setuptools import Distribution, Extension

    (tmp / f"{name}.pyx").write_text(PROBE)
    ext = Extension(
        name,
        [str(tmp / f"{name}.pyx")],
        include_dirs=[str(ROOT)],
        language="c++",
        define_macros=macros,
        extra_compile_args=["-O2", "-std=c++17"],
    )
    dist = Distribution(
        {
            "ext_modules": cythonize_quiet(cython_build, ext, tmp),
            "script_args": ["build_ext", "--build-lib", str(tmp), "--build-temp", str(tmp)],
        }
    )
    cwd = os.getcwd()
    try:
        os.chdir(tmp)
        dist.parse_command_line()
        dist.run_commands()
    finally:
        os.chdir(cwd)
    path = next(tmp.glob(f"{name}*.so"), None) or next(tmp.glob(f"{name}*.pyd"))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    sys.modules[name] = module
    return module


def cythonize_quiet(cython_build, ext, tmp: Path):
    return cython_build.cythonize(
        [ext], include_path=[str(ROOT)], quiet=True, build_dir=str(tmp / "c")
    )


@pytest.fixture(scope="module", params=["built", "portable"])
def probe(request, tmp_path_factory):
    tmp = tmp_path_factory.mktemp(f"utf8_{request.param}")
    macros = [("BPE_NO_SSE2", "1")] if request.param == "portable" else []
    return _build(tmp, f"_utf8_probe_{request.param}", macros)


def expected(text: str) -> bytes | None:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return None


def check(probe, text: str) -> None:
    want = expected(text)
    for how in ("built", "blocks", "scalar"):
        _, got, guard = probe.convert(text, how)
        assert got == want, (how, text)
        assert guard, (how, text)


def test_portable_build_has_no_sse2(probe):
    if probe.__name__.endswith("portable"):
        assert probe.SSE2 is False or probe.SSE2 == 0
    elif os.uname().machine in ("x86_64", "AMD64"):
        assert probe.SSE2


# One character of each UTF-8 length (and a lone surrogate) at every position of an ASCII text of
# every length 0-70, in a text of each PEP 393 kind: every run straddles the 16-unit steps.
WIDE = {1: "é", 2: "€", 4: "😀"}
ODD = ["é", "ÿ", "\x80", "ߺ", "ࠀ", "€", "\ud800", "\udfff", "\ue000", "\uffff", "😀", "\U0010ffff"]


def _kind(c: str) -> int:
    return 1 if ord(c) < 0x100 else 2 if ord(c) < 0x10000 else 4


@pytest.mark.parametrize(("kind", "odd"), [(k, c) for k in (1, 2, 4) for c in ODD if _kind(c) <= k])
def test_one_char_at_every_position(probe, kind, odd):
    widen = WIDE[kind] if _kind(odd) < kind else ""  # one character that makes the text `kind`
    base = "the quick brown fox jumps over the lazy dog 0123456789 ABCDEFGHIJKLMNOPQRSTUVWXYZ"
    for n in range(71):
        for p in range(n + 1):
            text = base[:p] + odd + base[p:n]
            for t in (text + widen, widen + text):
                assert probe.convert(t, "built")[0] == kind
                check(probe, t)


def test_ascii_of_every_kind_and_length(probe):
    for n in range(71):
        for prefix in ("", "é", "€", "😀"):
            check(probe, prefix + "a" * n)
            check(probe, "a" * n + prefix)


def _chars(max_codepoint: int):
    ascii_chars = st.characters(max_codepoint=0x7F)
    wide = st.characters(min_codepoint=0x80, max_codepoint=max_codepoint)
    parts = [ascii_chars, ascii_chars, wide]
    if max_codepoint > 0xFFFF:
        parts.append(st.characters(min_codepoint=0x800, max_codepoint=0xFFFF))
    if max_codepoint > 0xFF:
        parts.append(st.integers(0xD800, 0xDFFF).map(chr))  # lone surrogates
    return st.one_of(parts)


runs = st.lists(
    st.one_of(
        st.integers(0, 40).map(lambda n: "x" * n),
        st.sampled_from(["é", "€", "😀", "\ud800", "\udc00", "中文", " \n"]),
    ),
    max_size=8,
).map("".join)
texts = st.one_of(
    st.text(alphabet=_chars(0xFF), max_size=70),
    st.text(alphabet=_chars(0xFFFF), max_size=70),
    st.text(alphabet=_chars(0x10FFFF), max_size=70),
    runs,
)


@given(text=texts)
def test_hyp_agrees_with_str_encode(probe, text):
    check(probe, text)


@pytest.mark.parametrize("prefix", ["", "é", "’", "😀"])
def test_long_texts(probe, prefix):
    corpora = ROOT.parent / "shared" / "corpora"
    for name in ("english", "code", "multilingual", "adv_unicode"):
        path = corpora / f"{name}.1mb.txt.gz"
        if path.exists():
            check(probe, prefix + gzip.decompress(path.read_bytes()).decode("utf-8")[:200_000])
    check(probe, prefix + ("abcdefghijklmnop’" * 5000))

"""Generate bpecore/_unicode_tables.h: two flag bytes per code point, as the `regex` module sees it.

The pre-tokenizer scanners (bpecore/pretokenize.pyx) must classify characters exactly as
`regex` does, and `regex` ships its own Unicode database (newer than Python's ``unicodedata``),
so the tables are measured from `regex` itself: every code point 0..0x10FFFF except the
surrogates (which valid UTF-8 cannot hold) is matched against \\p{Lu} \\p{Ll} \\p{Lt} \\p{Lm}
\\p{Lo} \\p{M} \\p{N} and \\s.

A second flag byte (the ``BPE_UT2_`` tables) holds the classes only DeepSeek V3's pattern names:
\\p{P}, \\p{S} and its CJK set ``[\\u4e00-\\u9fa5\\u3040-\\u309f\\u30a0-\\u30ff]``. These, and the
first byte's classes, are also what `tokenizers`' Oniguruma matches (tests/bpecore/test_hf.py
checks every code point).

Layout (two-stage table, ``SHIFT`` bits per block), the same for both bytes:
    flags(cp) = BPE_UT_STAGE2[(BPE_UT_STAGE1[cp >> SHIFT] << SHIFT) | (cp & (2**SHIFT - 1))]
Identical blocks are stored once. Surrogates get flags 0.

Usage: python scripts/gen_unicode_tables.py [--sizes]
    --sizes  print the table size for each block size instead of writing the header
"""

import os
import sys
from importlib.metadata import version as _dist_version

import regex

#: The PyPI release of `regex` the tables are measured from (its __version__ is an internal number
#: in older releases). Keep it equal to the Unicode version tiktoken's Rust regex uses: see
#: tests/bpecore/test_pretokenize.py and the `regex==` pin in pyproject.toml's test extra.
REGEX_RELEASE = _dist_version("regex")

#: Flag bits, in this order; \p{L} is the union of the first five (checked below).
PROPERTIES = [
    ("LU", r"\p{Lu}"),
    ("LL", r"\p{Ll}"),
    ("LT", r"\p{Lt}"),
    ("LM", r"\p{Lm}"),
    ("LO", r"\p{Lo}"),
    ("M", r"\p{M}"),
    ("N", r"\p{N}"),
    ("WS", r"\s"),
]
#: Bits of the second flag byte (BPE_UT2_*).
PROPERTIES2 = [
    ("P", r"\p{P}"),
    ("S", r"\p{S}"),
    ("CJK", "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]"),
]
SHIFT = 7
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bpecore", "_unicode_tables.h")
MAX_CP = 0x110000


def all_code_points_text():
    """Every code point except the surrogates, in order, as one str."""
    return "".join(chr(c) for c in range(MAX_CP) if not 0xD800 <= c <= 0xDFFF)


def measure(properties, text):
    """bytearray of MAX_CP flag bytes, bit k set iff `regex` matches properties[k] at that code point."""
    flags = bytearray(MAX_CP)
    for bit, (_, prop) in enumerate(properties):
        for m in regex.finditer(prop + "+", text):
            for ch in m.group():
                flags[ord(ch)] |= 1 << bit
    return flags


def measure_flags():
    """(first flag bytes, second flag bytes) of every code point, checked for the unions the
    scanners assume."""
    text = all_code_points_text()
    flags = measure(PROPERTIES, text)
    flags2 = measure(PROPERTIES2, text)
    letters = bytearray(MAX_CP)
    for m in regex.finditer(r"\p{L}+", text):
        for ch in m.group():
            letters[ord(ch)] = 1
    assert all(bool(f & 0x1F) == bool(x) for f, x in zip(flags, letters)), (
        r"\p{L} != Lu|Ll|Lt|Lm|Lo"
    )
    assert all(bin(f & 0x1F).count("1") <= 1 for f in flags), (
        "a code point in two letter categories"
    )
    assert all(not (f & 0x80) or f == 0x80 for f in flags), (
        r"a \s code point that is also L, M or N"
    )
    assert all(not (g & 3) or (g & 3 != 3 and not f) for f, g in zip(flags, flags2)), (
        r"a \p{P} or \p{S} code point that is also \p{S}, \p{P}, L, M, N or \s"
    )
    return flags, flags2


def two_stage(flags, shift):
    """(stage1 block indexes, stage2 bytes) for blocks of 2**shift code points."""
    size = 1 << shift
    blocks, stage1, stage2 = {}, [], bytearray()
    for start in range(0, MAX_CP, size):
        block = bytes(flags[start : start + size])
        if block not in blocks:
            blocks[block] = len(blocks)
            stage2 += block
        stage1.append(blocks[block])
    return stage1, stage2


def table_bytes(stage1, stage2):
    return len(stage1) * (1 if max(stage1) < 256 else 2) + len(stage2)


def c_array(ctype, name, values, per_line=24):
    rows = [
        ", ".join(str(v) for v in values[i : i + per_line]) for i in range(0, len(values), per_line)
    ]
    return "static const %s %s[%d] = {\n    %s\n};\n" % (
        ctype,
        name,
        len(values),
        ",\n    ".join(rows),
    )


def tables(prefix, flags):
    """The C arrays of one flag byte: its ASCII table and its two stages."""
    stage1, stage2 = two_stage(flags, SHIFT)
    stage1_type = "uint8_t" if max(stage1) < 256 else "uint16_t"
    return [
        "/* %d blocks of %d code points, %d bytes in all */"
        % (len(stage2) >> SHIFT, 1 << SHIFT, table_bytes(stage1, stage2)),
        "",
        "/* flags of U+0000..U+007F, for the scanners' one-byte fast path */",
        c_array("uint8_t", prefix + "_ASCII", list(flags[:128])),
        c_array(stage1_type, prefix + "_STAGE1", stage1),
        c_array("uint8_t", prefix + "_STAGE2", list(stage2)),
    ]


def render(flags, flags2):
    lines = [
        "/* Generated by scripts/gen_unicode_tables.py from regex %s; do not edit. */"
        % REGEX_RELEASE,
        "/* Code point flags as the `regex` module classifies them; see the script's docstring. */",
        "#pragma once",
        "#include <stdint.h>",
        "",
        "#define BPE_UT_SHIFT %d" % SHIFT,
        '#define BPE_UT_REGEX_VERSION "%s"' % REGEX_RELEASE,
    ]
    lines += ["#define BPE_UT_%s %d" % (name, 1 << bit) for bit, (name, _) in enumerate(PROPERTIES)]
    lines += [
        "#define BPE_UT2_%s %d" % (name, 1 << bit) for bit, (name, _) in enumerate(PROPERTIES2)
    ]
    lines += tables("BPE_UT", flags)
    lines += ["/* the second flag byte: \\p{P}, \\p{S}, DeepSeek V3's CJK set */"]
    lines += tables("BPE_UT2", flags2)
    return "\n".join(lines)


def main(argv):
    flags, flags2 = measure_flags()
    if "--sizes" in argv:
        for shift in range(4, 11):
            stage1, stage2 = two_stage(flags, shift)
            print(
                "shift %2d: %4d blocks, %6d bytes"
                % (shift, len(stage2) >> shift, table_bytes(stage1, stage2))
            )
        return
    with open(OUT, "w", encoding="ascii", newline="\n") as f:
        f.write(render(flags, flags2))
    print("wrote", os.path.normpath(OUT))


if __name__ == "__main__":
    main(sys.argv[1:])

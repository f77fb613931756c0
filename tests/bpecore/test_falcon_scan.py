"""Falcon's one regex (``bpecore.hf._FALCON_PATTERN``) cut by its compiled scanner (PAT_FALCON).

Oracle: ``regex.finditer`` of the pattern. Checked on slices of every shared corpus (whole files
in the slow run), on every code point alone and between letters, digits, spaces and punctuation,
and on generated text over the classes the scanner tells apart. That the pattern cuts as Falcon's
chain does is ``test_hf.py``'s (against `tokenizers`).
"""

from __future__ import annotations

import pytest
import regex
from hypothesis import example, given
from hypothesis import strategies as st

from bpecore import pretokenize
from bpecore.hf import _FALCON_PATTERN, _FALCON_REGEX
from bpecore.prefix import KIND_REGEX
from bpecore.pretokenize import _piece_ends_one_by_one, pattern_kind, piece_ends, split
from tests.conftest import CORPORA, read_corpus

_RX = regex.compile(_FALCON_PATTERN)
_KIND = pattern_kind(_FALCON_PATTERN)

#: One or more characters of each class: letters (ASCII, accented, CJK, marks), ASCII digits and
#: other numerals, whitespace (space, tab, line breaks, NEL, no-break and ideographic space),
#: `tokenizers`' punctuation (ASCII symbols too, and U+111C9, a mark it counts), `regex`'s \p{P}
#: that it does not count (U+0609, U+2E42) and other characters (controls, symbols, unassigned).
_CHARS = (
    "aZé中ßǅʰ\u0301\u111c9"
    "0123456789²¹¼١٢\u2167"
    " \t\n\r\u000b\u0085\u00a0\u2028\u3000"
    ".,;!'\"-_$+<=>^`|~()[]{}@#%&*/\\?:\u00a1\u00bf\u2014\u3001\u3002\uff0c"
    "\u0609\u2e42©®°€\u0000\u0007\u00ad\U0001f600\U0010ffff\u0378"
)


def _check(text: str) -> None:
    want = [m.group() for m in _RX.finditer(text)]
    assert split(_KIND, text) == want
    data = text.encode("utf-8")
    assert piece_ends(_KIND, data) == _piece_ends_one_by_one(_KIND, data)


def test_falcon_pattern_has_the_scanner():
    assert _KIND == 9 and _KIND != KIND_REGEX
    assert pattern_kind(_FALCON_REGEX) == KIND_REGEX  # the exact operations' plain encoding


@pytest.mark.parametrize("name", [*CORPORA, "adv_unicode", "adv_whitespace", "adv_digits"])
def test_falcon_scanner_on_corpora(name):
    _check(read_corpus(name)[:200_000])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [*CORPORA, "adv_unicode", "adv_whitespace", "adv_digits", "adv_base64", "adv_repeat_a"]
)
def test_falcon_scanner_full_corpora(name):
    _check(read_corpus(name))


@pytest.mark.parametrize("sep", ["", " ", "  ", "a", " 1", "1234", ",", "\n ", " \u00a0"])
def test_falcon_scanner_every_code_point(sep):
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    _check(sep.join(chars))


@given(st.text(st.sampled_from(_CHARS), max_size=40))
@example("  a  ,  1234567 ²² \u00a0\u00a0x")
@example("x \u3001 \u0609 \u2e42  \n\n\u111c9,")
@example("end in spaces   ")
def test_hyp_falcon_scanner_equals_regex(text):
    _check(text)


def test_register_falcon_maps_only_its_pattern():
    """Registering is idempotent and maps exactly the pattern string."""
    from bpecore.hf import _PUNCT_RANGES

    assert pretokenize.register_falcon(_FALCON_PATTERN, _PUNCT_RANGES) == _KIND
    assert pattern_kind(_FALCON_PATTERN + "|x") == KIND_REGEX
    _check("Hello, world! 12345 ²³ — «quoted» \u3001end")

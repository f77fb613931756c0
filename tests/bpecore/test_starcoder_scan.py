"""StarCoder2's one regex (``bpecore.hf._STARCODER_PATTERN``) cut by its compiled scanner
(PAT_STARCODER).

Oracle: ``regex.finditer`` of the pattern. Checked on slices of every shared corpus (whole files
in the slow run), on every code point alone and between digits, spaces and apostrophes, and on
generated text over the classes the scanner tells apart. That the pattern cuts as StarCoder2's
chain does is ``test_hf.py``'s and ``test_gguf_vocabs.py``'s (against `tokenizers`).
"""

from __future__ import annotations

import pytest
import regex
from hypothesis import example, given
from hypothesis import strategies as st

from bpecore import pretokenize
from bpecore.hf import _DIGIT_SET, _STARCODER_PATTERN, _STARCODER_REGEX
from bpecore.prefix import KIND_REGEX
from bpecore.pretokenize import _piece_ends_one_by_one, pattern_kind, piece_ends, split
from tests.conftest import CORPORA, read_corpus

_RX = regex.compile(_STARCODER_PATTERN)
_KIND = pattern_kind(_STARCODER_PATTERN)

#: One or more characters of each class: letters (ASCII, accented, CJK, titlecase, modifier),
#: ASCII digits and other numerals (and `tokenizers`' digits that `regex` leaves unassigned),
#: whitespace (space, tab, line breaks, NEL, no-break and ideographic space), the contractions'
#: letters and apostrophe, and other characters (punctuation, marks, symbols, controls,
#: unassigned).
_CHARS = (
    "aZé中ßǅʰsStTdmlvre"
    "0123456789²¹¼١٢\u2167\U00011de0\U00011de9\U00016ff4\U00016ff6"
    " \t\n\r\u000b\u0085\u00a0\u2028\u3000"
    "'\u2019.,;!\"-_$+<=>`|~()[]{}@#%&*/\\?:\u00a1\u2014\u3001"
    "\u0301©°€\u0000\u0007\u00ad\U0001f600\U0010ffff\u0378\U00011de1\U00016ff7"
)


def _check(text: str) -> None:
    want = [m.group() for m in _RX.finditer(text)]
    assert split(_KIND, text) == want
    data = text.encode("utf-8")
    assert piece_ends(_KIND, data) == _piece_ends_one_by_one(_KIND, data)


def test_starcoder_pattern_has_the_scanner():
    assert _KIND == 10 and _KIND != KIND_REGEX
    assert pattern_kind(_STARCODER_REGEX) == KIND_REGEX  # the exact operations' plain encoding


def test_starcoder_extra_digits_are_the_digit_set():
    """The ranges hf.py registers are those of ``_DIGIT_SET`` that ``\\p{N}`` lacks."""
    extra = regex.compile(f"(?V1)[[{_DIGIT_SET}]--\\p{{N}}]")
    chars = [chr(c) for c in range(0x110000) if extra.match(chr(c))]
    assert [ord(c) for c in chars] == [*range(0x11DE0, 0x11DEA), *range(0x16FF4, 0x16FF7)]
    _check(" " + "  ".join(chars) + " a" + "".join(chars) + "'s" + "".join(chars))


@pytest.mark.parametrize("name", [*CORPORA, "adv_unicode", "adv_whitespace", "adv_digits"])
def test_starcoder_scanner_on_corpora(name):
    _check(read_corpus(name)[:200_000])


@pytest.mark.slow
@pytest.mark.parametrize(
    "name", [*CORPORA, "adv_unicode", "adv_whitespace", "adv_digits", "adv_base64", "adv_repeat_a"]
)
def test_starcoder_scanner_full_corpora(name):
    _check(read_corpus(name))


@pytest.mark.parametrize(
    "sep", ["", " ", "  ", "a", " 1", "1 ", "  1", "\n1", "'", " '", "'s", ",", "\n ", " \u00a0"]
)
def test_starcoder_scanner_every_code_point(sep):
    chars = [chr(c) for c in range(0x110000) if not 0xD800 <= c < 0xE000]
    _check(sep.join(chars))


@given(st.text(st.sampled_from(_CHARS), max_size=40))
@example("  a  ,  1234567 ²² \u00a0\u00a0x")
@example("don't we'll they're I've 'S 'Ll \u2019s")
@example(" \U00011de0 \U00011de1  \U00016ff6\t\U00016ff7")
@example("end in spaces   ")
def test_hyp_starcoder_scanner_equals_regex(text):
    _check(text)


def test_register_starcoder_maps_only_its_pattern():
    """Registering is idempotent, maps exactly the pattern string and refuses a digit range
    that holds a letter, whitespace or ASCII."""
    ranges = ((0x11DE0, 0x11DE9), (0x16FF4, 0x16FF6))
    assert pretokenize.register_starcoder(_STARCODER_PATTERN, ranges) == _KIND
    assert pattern_kind(_STARCODER_PATTERN + "|x") == KIND_REGEX
    for bad in ((0x41, 0x41), (0xE9, 0xE9), (0x3000, 0x3000)):
        with pytest.raises(ValueError):
            pretokenize.register_starcoder(_STARCODER_PATTERN + "|y", (bad,))
    assert pattern_kind(_STARCODER_PATTERN + "|y") == KIND_REGEX
    _check("Hello, world! 12345 ²³ — don't «quoted» \U00011de5\u3001end")

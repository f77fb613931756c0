"""Inputs the fuzzers found that once crashed or answered wrong; each stays here for good."""

from __future__ import annotations

import pytest

import bpecore


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base"])
@pytest.mark.parametrize("bad", [2**63, 2**64, -(2**63) - 1, 10**30, -(10**30)])
def test_decode_id_beyond_c_range_is_valueerror(name, bad):
    # was OverflowError ("Python int too large to convert to C ssize_t"), which is not a ValueError
    enc = bpecore.get_encoding(name)
    for call in (enc.decode_bytes, enc.decode, enc.decode_tokens_bytes):
        with pytest.raises(ValueError):
            call([15339, bad])
    with pytest.raises(ValueError):
        enc.decode_single_token_bytes(bad)

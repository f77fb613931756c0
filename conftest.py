"""Doctests run as ``pytest --doctest-modules bpecore/...`` see ``get_encoding``, as the docs' examples assume."""

import pytest


@pytest.fixture(autouse=True)
def _doctest_get_encoding(doctest_namespace):
    from bpecore import get_encoding

    doctest_namespace["get_encoding"] = get_encoding

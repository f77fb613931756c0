"""service/preload.py reads BPESVC_ENCODINGS as pydantic-settings does, and leaves anything odd to
the lifespan (which reports it)."""

from __future__ import annotations

import pytest

from bpecore_service import preload
from bpecore_service.config import Settings


@pytest.mark.parametrize(
    "raw, names",
    [
        (None, []),  # unset: every shipped encoding
        ('["cl100k_base"]', ["cl100k_base"]),
        ('["o200k_base", "mine"]', ["o200k_base", "mine"]),
        ("cl100k_base", None),  # not JSON: pydantic-settings refuses it; nothing preloaded
        ('{"a": 1}', None),
        ("[1]", None),
    ],
)
def test_names_from_env(monkeypatch, raw, names):
    monkeypatch.delenv("BPESVC_ENCODINGS", raising=False)
    if raw is not None:
        monkeypatch.setenv("bpesvc_encodings", raw)  # the name is case-insensitive, as in Settings
    assert preload._names_from_env() == names
    if names:
        assert Settings().encodings == names


def test_build_swallows_errors():
    preload._build(["cl100k_base", "not_shipped"])  # unknown names are the lifespan's to report

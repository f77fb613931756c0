"""Start building the shipped encodings before the web framework is imported.

Importing FastAPI, pydantic and the routes takes about as long as building the vocabularies, and
the build releases the GIL for most of its time; so ``bpecore_service.main`` calls ``start()`` before its
other imports and the two overlap on two cores. The lifespan's ``load_encodings`` then finds the
encodings in bpecore's cache (or waits for the build under bpecore's lock). Only shipped encodings
named by the environment are built here (``BPESVC_ENCODINGS``, read as pydantic-settings reads it:
a JSON list, the name case-insensitive; unset means every shipped one); anything unusual is left
to the lifespan, which reports errors. Nothing is preloaded when ``bpecore serve`` imports the
module (its process may only supervise workers): ``run()`` starts it for a single worker.
"""

from __future__ import annotations

import json
import os
import sys
import threading

_started: threading.Thread | None = None


def _names_from_env() -> list[str] | None:
    raw = None
    for key, value in os.environ.items():
        if key.upper() == "BPESVC_ENCODINGS":
            raw = value
    if raw is None:
        return []  # every shipped encoding
    try:
        names = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(names, list) or not all(isinstance(n, str) for n in names):
        return None
    return names


def _build(names: list[str]) -> None:
    try:
        import bpecore

        shipped = bpecore.list_encodings()
        for name in names or shipped:
            if name in shipped:
                bpecore.get_encoding(name)
    except Exception:  # the lifespan builds them again and reports the error
        pass


def start(from_cli_ok: bool = False) -> threading.Thread | None:
    """Build the environment's shipped encodings in a daemon thread (once per process)."""
    global _started
    if _started is not None or ("bpecore.cli" in sys.modules and not from_cli_ok):
        return _started
    names = _names_from_env()
    if names is None:
        return None
    _started = threading.Thread(target=_build, args=(names,), name="bpesvc-preload", daemon=True)
    _started.start()
    return _started

"""GET /: the playground page, where a person pastes text and sees its tokens, counts and cuts.

Plain HTML, CSS and JavaScript from ``static/`` (package data, mounted under ``/playground``), no
build step and nothing from another host: the page's Content-Security-Policy allows this origin
only, so a browser refuses any other request. Everything it shows comes from the API itself:
``GET /v1/encodings``, the ``/v1/stream`` WebSocket (the count as you type), ``POST /v1/encode``
with an ``offsets_range`` (the tokens on screen), ``/v1/split`` and ``/v1/chunk``.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_DIR = Path(__file__).parent / "static"
ASSETS_URL = "/playground"
# 'self' covers ws:// and wss:// to this host too (CSP level 3), which the count stream uses.
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)


def install(app: FastAPI, url: str = "/") -> None:
    """Serve the page at ``url`` and its assets under ``/playground`` (both outside the schema)."""
    # follow_symlink: a strict editable install links each asset into its build tree.
    app.mount(ASSETS_URL, StaticFiles(directory=STATIC_DIR, follow_symlink=True), name="playground")
    page = (STATIC_DIR / "playground.html").read_text(encoding="utf-8")

    @app.get(url, include_in_schema=False)
    def playground() -> HTMLResponse:
        return HTMLResponse(
            page, headers={"Content-Security-Policy": CSP, "Cache-Control": "no-cache"}
        )

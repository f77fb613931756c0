"""/docs and /redoc work offline: the pages name no URL off this server, and every asset they
load is served here."""

from __future__ import annotations

import re

import pytest


def page_urls(html: str) -> list[str]:
    """Every URL the page loads or points the UI at: src/href attributes and quoted 'url' values."""
    urls = re.findall(r"""(?:src|href)=["']([^"']+)["']""", html)
    urls += re.findall(r"""\b(?:url|spec-url)["']?\s*[:=]\s*["']([^"']+)["']""", html)
    return urls


@pytest.mark.parametrize("path", ["/docs", "/redoc"])
def test_docs_page_loads_nothing_from_elsewhere(client, path):
    r = client.get(path)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text
    assert "://" not in html.replace("http://www.w3.org", "")  # no absolute URL at all
    urls = page_urls(html)
    assert "/openapi.json" in urls
    assets = [u for u in urls if u.startswith("/docs-assets/")]
    assert any(u.endswith(".js") for u in assets)
    for url in assets:
        asset = client.get(url)
        assert asset.status_code == 200, url
        if url.endswith(".js"):
            assert len(asset.content) > 100_000 and "javascript" in asset.headers["content-type"]


def test_swagger_ui_validator_is_off(client):
    html = client.get("/docs").text
    assert '"validatorUrl": null' in html


def test_oauth2_redirect_page(client):
    assert client.get("/docs/oauth2-redirect").status_code == 200

"""/metrics exposes request and domain metrics; health routes are not counted."""

from __future__ import annotations

import re

import bpecore


def metric(text: str, name: str, **labels) -> float:
    """The value of the sample ``name`` whose labels are exactly ``labels`` (0 if absent)."""
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$", line)
        if not m or m.group(1) != name:
            continue
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2) or ""))
        if found == {k: str(v) for k, v in labels.items()}:
            return float(m.group(3))
    return 0.0


def test_domain_counters(client, cl100k):
    before = client.get("/metrics").text
    text = "hello world, this is a metrics test"
    client.post("/v1/count", json={"text": text, "encoding": "o200k_base"})
    client.post("/v1/encode", json={"text": text})
    client.get("/healthz")
    after = client.get("/metrics")
    assert after.headers["content-type"].startswith("text/plain")
    m = after.text
    tokens = metric(m, "bpesvc_tokens_total", encoding="o200k_base", op="count") - metric(
        before, "bpesvc_tokens_total", encoding="o200k_base", op="count"
    )
    assert tokens == len(text.split()) or tokens > 0
    assert metric(m, "bpesvc_bytes_total", encoding="cl100k_base", op="encode") >= len(text)
    assert metric(m, "bpesvc_requests_total", route="/v1/count", method="POST", status="200") >= 1
    assert metric(m, "bpesvc_request_seconds_count", route="/v1/encode", method="POST") >= 1
    assert metric(m, "bpesvc_op_seconds_count", op="count") >= 1
    assert metric(m, "bpesvc_request_bytes_count", op="encode") >= 1
    assert metric(m, "bpesvc_ready") == 1.0
    assert metric(m, "bpesvc_encodings_loaded") == len(bpecore.list_encodings())
    assert not re.search(r'bpesvc_requests_total\{route="/(healthz|readyz|metrics)"', m)


def test_error_counter(client):
    client.post("/v1/count", json={"text": "a", "encoding": "nope"})
    assert (
        metric(client.get("/metrics").text, "bpesvc_errors_total", type="encoding_not_found") >= 1
    )

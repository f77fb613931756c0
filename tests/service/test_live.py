"""A real uvicorn process started with the Dockerfile's CMD, driven over HTTP (httpx)."""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import time

import httpx

import bpecore


def test_cmd_uses_uvloop_and_httptools(live):
    cmd = live.proc.args
    assert cmd[:2] == ["uvicorn", "bpecore_service.main:app"]
    assert cmd[cmd.index("--loop") + 1] == "uvloop" and cmd[cmd.index("--http") + 1] == "httptools"


def test_live_readyz_503_until_loaded(live):
    # the server listens from the start; the shipped encodings start building before the imports
    # (service/preload.py), so they may be ready by the first poll: 503 until then, never after
    assert live.ready_statuses in ([503, 200], [200])
    assert httpx.get(live.url + "/readyz").json()["encodings"] == sorted(bpecore.list_encodings())


def test_live_endpoints_equal_library(live):
    text = "Ünïcödé ☃ hello world " * 50
    with httpx.Client(base_url=live.url) as c:
        assert c.get("/healthz").status_code == 200
        for name in bpecore.list_encodings():
            enc = bpecore.get_encoding(name)
            body = c.post("/v1/count", json={"text": text, "encoding": name}).json()
            assert body["count"] == enc.count(text)
            body = c.post("/v1/encode", json={"text": text, "encoding": name}).json()
            assert body["tokens"] == enc.encode(text)
            assert (
                c.post("/v1/decode", json={"tokens": body["tokens"], "encoding": name}).json()[
                    "text"
                ]
                == text
            )


def test_live_concurrent_requests(live):
    cl100k = bpecore.get_encoding("cl100k_base")
    texts = [f"request {i} " + "word " * (i * 37 % 500) for i in range(64)]

    async def main():
        limits = httpx.Limits(max_connections=16)
        async with httpx.AsyncClient(base_url=live.url, limits=limits) as c:
            rs = await asyncio.gather(*(c.post("/v1/count", json={"text": t}) for t in texts))
        return [r.json()["count"] for r in rs]

    assert asyncio.run(main()) == [cl100k.count(t) for t in texts]


def test_live_bad_input_never_kills_the_worker(live):
    with httpx.Client(base_url=live.url) as c:
        assert c.post("/v1/count", json={"text": "a" * 1_100_000}).status_code == 413
        assert (
            c.post(
                "/v1/count", content=b"\xff\xfe", headers={"content-type": "application/json"}
            ).status_code
            == 400
        )
        assert c.post("/v1/count", json={"texts": ["a"] * 9}).status_code == 422
        assert c.post("/v1/decode", json={"tokens": [2**31]}).status_code == 400
        assert c.post("/v1/count", json={"text": "x", "encoding": "nope"}).status_code == 404
    # a raw request with a lying Content-Length and garbage: the server answers or closes, and lives
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as s:
        s.sendall(b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{")
        s.recv(4096)
    with socket.create_connection(("127.0.0.1", live.port), timeout=5) as s:
        s.sendall(b"\x00\x01garbage\r\n\r\n")
        s.recv(4096)
    assert httpx.get(live.url + "/readyz").status_code == 200
    assert live.proc.poll() is None


def test_live_request_log_line(live):
    secret = "do-not-log-this-text-" + str(time.time())
    r = httpx.post(
        live.url + "/v1/count", json={"text": secret}, headers={"X-Request-ID": "live-req-1"}
    )
    assert r.headers["x-request-id"] == "live-req-1"
    deadline = time.monotonic() + 5
    while True:
        lines = [rec for rec in live.log_lines() if rec.get("request_id") == "live-req-1"]
        if lines or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    (line,) = lines
    assert line["msg"] == "request" and line["status"] == 200 and line["route"] == "/v1/count"
    assert (
        line["encoding"] == "cl100k_base"
        and line["tokens"] == r.json()["count"]
        and line["latency_ms"] > 0
    )
    assert secret not in live.output()


def test_live_metrics(live):
    httpx.post(live.url + "/v1/count", json={"text": "metrics please"})
    m = httpx.get(live.url + "/metrics").text
    assert 'bpesvc_tokens_total{encoding="cl100k_base",op="count"}' in m
    assert "bpesvc_request_seconds_bucket" in m and "bpesvc_ready 1.0" in m


def test_sigterm_drains_then_exits(start_server):
    """SIGTERM: /readyz 503 at once, requests still served while draining, an in-flight upload
    completes, then a clean exit 0."""
    server = start_server({"BPESVC_ENCODINGS": '["cl100k_base"]', "BPESVC_DRAIN_SECONDS": "1.5"})
    seen = server.wait_ready()
    body = json.dumps({"text": "hello world"}).encode()
    inflight = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    inflight.sendall(
        b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        + f"Content-Length: {len(body)}\r\n\r\n".encode()
        + body[:5]
    )
    time.sleep(0.2)
    t0 = time.monotonic()
    server.proc.send_signal(signal.SIGTERM)
    deadline = t0 + 1.0
    while httpx.get(server.url + "/readyz").status_code != 503:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert httpx.get(server.url + "/readyz").json()["status"] == "draining"
    assert httpx.post(server.url + "/v1/count", json={"text": "hello world"}).json()["count"] == 2
    # after the drain uvicorn stops accepting, and waits for the upload
    deadline = time.monotonic() + 15
    while True:
        assert time.monotonic() < deadline, "still accepting connections after the drain"
        try:
            httpx.get(server.url + "/healthz", timeout=1)
        except httpx.TransportError:
            break
        time.sleep(0.05)
    assert time.monotonic() - t0 >= 1.5  # not before the drain period is over
    inflight.sendall(body[5:])
    chunks = []
    while chunk := inflight.recv(65536):  # the server closes the connection after replying
        chunks.append(chunk)
    inflight.close()
    reply = b"".join(chunks).decode()
    assert reply.startswith("HTTP/1.1 200") and '"count":2' in reply, reply
    assert server.stop(), server.output()
    assert any(rec.get("msg") == "draining" for rec in server.log_lines())
    assert seen[-1] == 200


def test_python_m_service(start_server):
    """`python -m bpecore_service` (what `bpecore serve` runs): settings from BPESVC_*, uvloop + httptools."""
    import sys

    server = start_server(
        {"BPESVC_ENCODINGS": '["o200k_base"]', "BPESVC_DEFAULT_ENCODING": "o200k_base"},
        cmd=[sys.executable, "-m", "bpecore_service"],
    )
    server.wait_ready()
    assert (
        httpx.post(server.url + "/v1/count", json={"text": "hello world"}).json()["encoding"]
        == "o200k_base"
    )
    assert server.stop(), server.output()

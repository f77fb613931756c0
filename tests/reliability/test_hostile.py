"""Hostile HTTP against a real uvicorn (the Dockerfile's CMD): each attack gets its documented 4xx or a
closed connection, memory stays bounded, and the process stays ready (/readyz 200) afterwards."""

from __future__ import annotations

import asyncio
import json
import socket
import time

import httpx
import pytest

import bpecore

websockets = pytest.importorskip("websockets")

ENV = {
    "BPESVC_ENCODINGS": '["cl100k_base"]',
    "BPESVC_MAX_REQUEST_BYTES": "1000000",
    "BPESVC_MAX_RANGES": "1000",
    "BPESVC_MAX_STREAMS": "4",
    "BPESVC_MAX_STREAM_BYTES": "200000",
    "BPESVC_MAX_HEADER_BYTES": "16384",
    "BPESVC_HEADER_TIMEOUT": "1",
    "BPESVC_BODY_TIMEOUT": "1",
}


@pytest.fixture(scope="module")
def hostile(start_server):
    server = start_server(ENV)
    server.wait_ready()
    yield server
    assert server.proc.poll() is None, server.output()
    assert httpx.get(server.url + "/readyz").status_code == 200
    assert server.stop(), server.output()


def rss_mib(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        return int(f.read().split("VmRSS:")[1].split()[0]) / 1024


def raw(server, data: bytes, timeout: float = 5.0) -> tuple[bytes, float]:
    """Send ``data`` on a fresh connection; (what came back until close or timeout, seconds taken)."""
    t0 = time.monotonic()
    out = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=timeout) as s:
        try:
            s.sendall(data)
            while chunk := s.recv(65536):
                out += chunk
                head, sep, body = out.partition(b"\r\n\r\n")
                length = [
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                ]
                if sep and length and len(body) >= length[0]:
                    break  # one whole response
        except TimeoutError:
            out += b"<timeout>"
        except (ConnectionResetError, BrokenPipeError):
            out += b"<reset>"
    return out, time.monotonic() - t0


def status_of(response: bytes) -> int | None:
    return int(response.split(b" ", 2)[1]) if response.startswith(b"HTTP/1.1 ") else None


def assert_ready(server) -> None:
    assert server.proc.poll() is None, server.output()
    r = httpx.get(server.url + "/readyz", timeout=5)
    assert r.status_code == 200, r.text


def test_oversize_bodies(hostile):
    with httpx.Client(base_url=hostile.url, timeout=30) as c:
        r = c.post("/v1/count", json={"text": "a" * 1_100_000})
        assert r.status_code == 413 and r.json()["error"]["type"] == "payload_too_large"
        assert r.headers.get_list("x-request-id") and len(r.headers.get_list("x-request-id")) == 1
    # chunked, no Content-Length: cut off once past the limit
    chunk = b"a" * 0x40000
    body = b"".join(b"40000\r\n" + chunk + b"\r\n" for _ in range(8)) + b"0\r\n\r\n"
    out, _ = raw(
        hostile,
        b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n" + body,
    )
    assert status_of(out) == 413
    # a lying Content-Length far above the limit: refused before reading
    out, _ = raw(
        hostile,
        b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n{",
        timeout=3,
    )
    assert status_of(out) == 413
    assert_ready(hostile)


@pytest.mark.parametrize("what", ["one-huge-header", "many-headers", "huge-url"])
def test_oversize_request_heads_431(hostile, what):
    if what == "one-huge-header":
        head = b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (1 << 20) + b"\r\n\r\n"
    elif what == "many-headers":
        head = (
            b"GET /readyz HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-%d: a\r\n" % i for i in range(20_000))
            + b"\r\n"
        )
    else:
        head = b"GET /readyz?" + b"a" * (1 << 20) + b" HTTP/1.1\r\nHost: x\r\n\r\n"
    out, _ = raw(hostile, head)
    assert status_of(out) == 431 and b"connection: close" in out.lower(), out[:300]
    assert b'"type": "headers_too_large"' in out.split(b"\r\n\r\n", 1)[1]
    # a head just under the limit is fine
    out, _ = raw(
        hostile,
        b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Ok: "
        + b"a" * 8000
        + b"\r\n\r\n",
    )
    assert status_of(out) == 200
    assert_ready(hostile)


def test_endless_header_memory_is_bounded(hostile):
    """httptools alone buffers a header of any size (300 MB grew the worker by ~370 MB): now 431 at the
    limit, and the server's memory does not follow what the clients send."""
    before = rss_mib(hostile.proc.pid)
    sent = 0
    socks = []
    for _ in range(4):
        s = socket.create_connection(("127.0.0.1", hostile.port), timeout=5)
        s.sendall(b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Big: ")
        try:
            for _ in range(64):
                s.sendall(b"a" * (1 << 20))
                sent += 1
        except OSError:
            pass  # closed on us: the point
        socks.append(s)
    grew = rss_mib(hostile.proc.pid) - before
    for s in socks:
        s.close()
    assert sent < 4 * 64 or grew < 64, (sent, grew)
    assert grew < 64, f"RSS grew {grew:.0f} MiB"
    assert_ready(hostile)


def test_deeply_nested_json_400(hostile):
    with httpx.Client(base_url=hostile.url, timeout=30) as c:
        for body in (
            b"[" * 200_000 + b"]" * 200_000,
            b'{"text": ' + b"[" * 200_000 + b"]" * 200_000 + b"}",
            b'{"messages":[{"role":"user","content":['
            + b'{"a":' * 100_000
            + b"1"
            + b"}" * 100_000
            + b"]}]}",
        ):
            for path in ("/v1/count", "/v1/chat/count", "/tokenize"):
                r = c.post(path, content=body, headers={"content-type": "application/json"})
                assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_json", (
                    path,
                    r.text,
                )
    assert_ready(hostile)


def test_huge_ranges_lists(hostile):
    with httpx.Client(base_url=hostile.url, timeout=30) as c:
        r = c.post("/v1/intervals", json={"text": "abc", "ranges": [[0, 1]] * 100_000})
        assert r.status_code == 422 and r.json()["error"]["type"] == "limit_exceeded"
        r = c.post("/v1/intervals", json={"text": "abc", "ranges": [[0, 1]] * 1000})
        assert r.status_code == 200 and r.json()["counts"] == [1] * 1000
        r = c.post("/v1/intervals", json={"text": "abc", "ranges": [[2, 1]]})
        assert r.status_code == 422 and r.json()["error"]["type"] == "invalid_range"
    assert_ready(hostile)


@pytest.mark.parametrize(
    "value, split, chunk, count",
    [
        (b"0", 200, 422, 200),
        (str(2**63).encode(), 422, 422, 422),
        (str(2**64).encode(), 422, 422, 422),
        (b"1" + b"0" * 400, 422, 422, 422),
        (b"-1", 422, 422, 422),
        (b"1e309", 422, 422, 422),
        (b"NaN", 422, 422, 422),
    ],
)
def test_extreme_max_tokens(hostile, value, split, chunk, count):
    with httpx.Client(base_url=hostile.url, timeout=30) as c:
        for path, body, want in (
            ("/v1/split", b'{"text": "hello world", "max_tokens": %s}' % value, split),
            ("/v1/chunk", b'{"text": "hello world", "max_tokens": %s}' % value, chunk),
            ("/v1/count", b'{"text": "hello world", "limit": %s}' % value, count),
        ):
            r = c.post(path, content=body, headers={"content-type": "application/json"})
            assert r.status_code == want, (path, value, r.text)
            if want == 200 and path == "/v1/split":
                assert r.json()["offset"] == 0 and r.json()["count"] == 0
            if want == 200 and path == "/v1/count":
                assert r.json()["within_limit"] is False
    assert_ready(hostile)


def test_slow_clients_are_cut_off(hostile):
    """Slowloris: a head that never ends gets 408 after header_timeout; a connection that says nothing is
    closed; a body that stops gets 408 after body_timeout. Many at once do not stop others being served."""
    out, took = raw(hostile, b"GET /readyz HTTP/1.1\r\nHost: x\r\n", timeout=10)
    assert status_of(out) == 408 and took < 5, (out[:200], took)
    out, took = raw(hostile, b"", timeout=10)
    assert out == b"" and took < 5
    out, took = raw(
        hostile, b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{", timeout=10
    )
    assert status_of(out) == 408 and b"connection: close" in out.lower() and took < 5, (
        out[:200],
        took,
    )

    async def crowd():
        conns = []
        for i in range(200):
            r, w = await asyncio.open_connection("127.0.0.1", hostile.port)
            w.write(b"GET /readyz HTTP/1.1\r\nHost: x\r\nX-Slow: %d\r\n" % i)  # never finished
            conns.append((r, w))
        t0 = time.monotonic()
        async with httpx.AsyncClient(base_url=hostile.url) as c:
            r = await c.post("/v1/count", json={"text": "still served"})
        served = time.monotonic() - t0
        closed = 0
        for r_, w in conns:
            try:
                data = await asyncio.wait_for(r_.read(), 10)
                closed += data.startswith(b"HTTP/1.1 408")
            finally:
                w.close()
        return r.status_code, served, closed

    status, served, closed = asyncio.run(crowd())
    assert status == 200 and served < 1.0
    assert closed == 200
    assert_ready(hostile)


def test_websocket_tiny_frame_flood(hostile):
    """20 000 one-byte frames: every answer exact and in order, nothing else slowed down much."""
    enc = bpecore.get_encoding("cl100k_base")
    text = ("flood of tiny frames, ünïcödé ☃ " * 700)[:20_000]
    data = text.encode()

    async def main():
        async with websockets.connect(hostile.ws_url + "/v1/stream", max_queue=None) as ws:

            async def sender():
                for i in range(len(data)):
                    await ws.send(data[i : i + 1])

            task = asyncio.create_task(sender())
            last = None
            for _ in range(len(data)):
                last = json.loads(await ws.recv())
            await task
            return last

    last = asyncio.run(main())
    assert (
        last["count"] == enc.count(text)
        and last["bytes"] == len(data)
        and last["frames"] == len(data)
    )
    assert_ready(hostile)


def test_streams_that_never_read(hostile):
    """Clients that push and never read their answers: bounded by max_streams (then 429 with
    Retry-After) and max_stream_bytes (then 1009); everyone else is still served."""

    async def main():
        socks = []
        for _ in range(4):
            ws = await websockets.connect(hostile.ws_url + "/v1/stream", max_queue=1)
            socks.append(ws)
        # push frames without reading an answer, until the server stops us (1009) or our buffers fill
        frame = b"never read " * 1000
        outcomes = []
        for ws in socks:
            try:
                for _ in range(40):
                    await asyncio.wait_for(ws.send(frame), 2)
                outcomes.append("sent")
            except websockets.ConnectionClosed as e:
                outcomes.append(e.rcvd.code if e.rcvd else None)
            except TimeoutError:
                outcomes.append("blocked")
        async with httpx.AsyncClient(base_url=hostile.url) as c:
            t0 = time.monotonic()
            r = await c.post("/v1/count", json={"text": "others are served"})
            served = time.monotonic() - t0
            ready = (await c.get("/readyz")).status_code
        for ws in socks:
            ws.transport.abort()
        return outcomes, r.status_code, served, ready

    outcomes, status, served, ready = asyncio.run(main())
    assert all(o in (1009, "blocked", "sent") for o in outcomes), outcomes
    assert status == 200 and served < 1.0 and ready == 200
    time.sleep(0.5)
    assert_ready(hostile)


def test_stream_limit_429_with_retry_after(hostile):
    async def main():
        held = [await websockets.connect(hostile.ws_url + "/v1/stream") for _ in range(4)]
        try:
            with pytest.raises(websockets.InvalidStatus) as info:
                await websockets.connect(hostile.ws_url + "/v1/stream")
            return info.value.response
        finally:
            for ws in held:
                await ws.close()

    response = asyncio.run(main())
    assert response.status_code == 429
    assert response.headers.get("Retry-After") == "1"
    assert_ready(hostile)


def test_garbage_and_half_requests(hostile):
    for data in (
        b"\x00\x01garbage\r\n\r\n",
        b"GET / HTTP/9.9\r\n\r\n",
        b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n",
        b"POST /v1/count HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 64,
    ):  # a TLS ClientHello
        out, _ = raw(hostile, data, timeout=5)
        assert out == b"" or status_of(out) in (400, 404, 408, 413, 422), (data[:30], out[:200])
    assert_ready(hostile)

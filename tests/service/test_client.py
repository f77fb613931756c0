"""bpecore.client against a real uvicorn process (the Dockerfile's CMD on a free port): every method
equals the library, every error type arrives as a ServiceError, 429/503 are retried as Retry-After
says (and no longer than allowed), timeouts and refused connections surface."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import subprocess
import sys
import threading
import time

import httpx
import pytest

import bpecore
from bpecore.client import AsyncClient, Client, ServiceError

TEXT = "Ünïcödé ☃ hello world.\n\nA second paragraph, with <|endoftext|> in it. " * 20
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "How many tokens is this?"},
]


@pytest.fixture(scope="module")
def server(start_server):
    s = start_server(
        {
            "BPESVC_MAX_INFLIGHT": "1",
            "BPESVC_MAX_STREAMS": "1",
            "BPESVC_MAX_STREAM_BYTES": "1000",
            "BPESVC_MAX_REQUEST_BYTES": "100000",
            "BPESVC_MAX_TEXTS": "4",
            "BPESVC_MAX_TOKENS": "5000",
        }
    )
    s.wait_ready()
    yield s
    assert s.stop(), s.output()


@pytest.fixture
def loading_server(start_server, tmp_path):
    """A server still loading its encodings: it reads a vocab file from a named pipe, and every API
    call is 503 not_ready (Retry-After: 1) until ``server.finish_loading()`` writes the vocab."""
    fifo = tmp_path / "slow.tiktoken"
    os.mkfifo(fifo)
    vocab = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    s = start_server(
        {"BPESVC_ENCODINGS": json.dumps([str(fifo)]), "BPESVC_DEFAULT_ENCODING": "slow"}
    )
    done = []

    def finish_loading() -> None:
        """Write the vocab into the pipe once the server has it open (never hangs: the vocab is
        smaller than a pipe's buffer, and a server that died leaves no reader)."""
        deadline = time.monotonic() + 10
        while not done and time.monotonic() < deadline:
            try:
                fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)  # ENXIO while no reader
            except OSError:
                time.sleep(0.02)
                continue
            with os.fdopen(fd, "w") as f:
                f.write(vocab)
            done.append(True)

    s.finish_loading = finish_loading
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            if httpx.get(s.url + "/readyz", timeout=1).json().get("status") == "loading":
                break
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    else:
        raise AssertionError(s.output())
    yield s
    finish_loading()
    assert s.stop(), s.output()


@pytest.fixture
def client(server):
    with Client(server.url, retries=0) as c:
        yield c


def held_in_flight(server) -> socket.socket:
    """A request whose body is still arriving: it holds the server's only in-flight slot."""
    s = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    s.sendall(
        b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 13\r\n\r\n{"text":'
    )
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:  # wait until the server counts it
        if httpx.post(server.url + "/v1/count", json={"text": "x"}).status_code == 429:
            return s
        time.sleep(0.01)
    raise AssertionError("the held request never filled the in-flight slot")


def release(s: socket.socket) -> None:
    s.sendall(b'"abc"}')
    s.recv(4096)
    s.close()


@pytest.mark.parametrize("name", ["cl100k_base", "o200k_base", "r50k_base"])
def test_client_equals_library(server, name):
    enc = bpecore.get_encoding(name)
    with Client(server.url, encoding=name) as c:
        assert c.count(TEXT) == enc.count(TEXT)
        assert c.count_batch(["a b", TEXT]) == [enc.count("a b"), enc.count(TEXT)]
        assert c.count_till_limit(TEXT, 10) is None
        assert c.count_till_limit(TEXT, 5000) == enc.count(TEXT)
        ids = enc.encode(TEXT, allowed_special="all")
        assert c.encode(TEXT, allowed_special="all") == ids
        assert c.encode(TEXT, disallowed_special=()) == enc.encode(TEXT, disallowed_special=())
        assert c.decode(ids) == enc.decode(ids) == TEXT
        for n in (0, 1, 17, 100):
            assert c.split_at(TEXT, n) == enc.split_at(TEXT, n)
            assert c.split_at_end(TEXT, n) == enc.split_at_end(TEXT, n)
        ranges = [(0, 10), (5, 200), (0, len(TEXT)), (300, 300)]
        counter = enc.interval_counter(TEXT)
        assert c.count_intervals(TEXT, ranges) == [counter.count(a, b) for a, b in ranges]
        assert c.chunk(TEXT, 40, 8, markdown=True) == bpecore.chunk(TEXT, enc, 40, 8, markdown=True)
        assert c.chunk(TEXT, 12, language="python") == bpecore.chunk(
            TEXT, enc, 12, language="python"
        )
        assert c.chunk(TEXT, 25, trim=False) == bpecore.chunk(TEXT, enc, 25, trim=False)
        assert c.chunk(TEXT, 25, balance=True) == bpecore.chunk(TEXT, enc, 25, balance=True)
    # a per-call encoding overrides the client's
    with Client(server.url) as c:
        assert c.count(TEXT, encoding=name) == enc.count(TEXT)


def test_count_messages_and_encodings(client):
    assert client.count_messages(MESSAGES, model="gpt-4o") == bpecore.count_messages(
        MESSAGES, model="gpt-4o"
    )
    data = client.encodings()
    assert sorted(e["name"] for e in data) == sorted(bpecore.list_encodings())
    assert [e["name"] for e in data if e["default"]] == ["cl100k_base"]


def test_async_client_equals_library(server):
    enc = bpecore.get_encoding("o200k_base")

    async def main():
        async with AsyncClient(server.url, encoding="o200k_base", retries=20) as c:
            return await asyncio.gather(
                c.count(TEXT),
                c.encode(TEXT, disallowed_special=()),
                c.decode([9906, 2375]),
                c.split_at(TEXT, 30),
                c.split_at_end(TEXT, 30),
                c.count_intervals(TEXT, [(0, 50), (10, 20)]),
                c.chunk(TEXT, 50),
                c.count_messages(MESSAGES),
            )

    # gather sends them together, so max_inflight=1 answers most with 429: retries (their jitter
    # spreads them out) absorb them
    results = asyncio.run(main())
    counter = enc.interval_counter(TEXT)
    assert results == [
        enc.count(TEXT),
        enc.encode(TEXT, disallowed_special=()),
        enc.decode([9906, 2375]),
        enc.split_at(TEXT, 30),
        enc.split_at_end(TEXT, 30),
        [counter.count(0, 50), counter.count(10, 20)],
        bpecore.chunk(TEXT, enc, 50),
        bpecore.count_messages(MESSAGES),
    ]


def test_stream_counter_equals_library(client):
    enc = bpecore.get_encoding("cl100k_base")
    pieces = ["Hello", " wor", "ld", "! ", "日本", "語"]
    with client.stream(limit=3) as s:
        for i, piece in enumerate(pieces):
            sent = "".join(pieces[: i + 1])
            assert s.push(piece) == enc.count(sent)
            assert s.within_limit == (enc.count(sent) <= 3)
        # bytes may end inside a character
        raw = "é".encode()
        assert s.push(raw[:1]) >= 0 and s.push(raw[1:]) == enc.count("".join(pieces) + "é")
        assert s.frames == len(pieces) + 2


def test_async_stream_counter(server):
    enc = bpecore.get_encoding("r50k_base")

    async def main():
        async with AsyncClient(server.url, encoding="r50k_base") as c:
            async with c.stream() as s:
                return [await s.push(p) for p in ("one", " two", " three")], s.within_limit

    counts, within = asyncio.run(main())
    assert counts == [enc.count("one"), enc.count("one two"), enc.count("one two three")]
    assert within is None


ERRORS = [
    (lambda c: c.count("x", encoding="nope_base"), 404, "encoding_not_found"),
    (lambda c: c.count_messages(MESSAGES, model="no-such-model"), 404, "model_not_found"),
    (lambda c: c.chunk("abc", 4, overlap=4), 422, "validation_error"),
    (lambda c: c.split_at("abc", 6000), 422, "limit_exceeded"),
    (lambda c: c.count_batch(["a"] * 5), 422, "limit_exceeded"),
    (lambda c: c.count_intervals("abc", [(2, 1)]), 422, "invalid_range"),
    (lambda c: c.chunk("\U0001f600" * 3, 1), 422, "chunk_error"),
    (
        # a remote image: never fetched, so its size (and count) is unknown
        lambda c: c.count_messages(
            [
                {
                    "role": "user",
                    "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}],
                }
            ]
        ),
        422,
        "unsupported_message",
    ),
    (lambda c: c.encode("a <|endoftext|>"), 400, "disallowed_special_token"),
    (lambda c: c.decode([2**31]), 400, "invalid_token"),
    (lambda c: c.count("a" * 200_000), 413, "payload_too_large"),
]


@pytest.mark.parametrize("call, status, type", ERRORS, ids=[e[2] for e in ERRORS])
def test_every_error_type(client, call, status, type):
    with pytest.raises(ServiceError) as e:
        call(client)
    assert (e.value.status, e.value.type) == (status, type)
    assert e.value.message and e.value.request_id
    assert str(e.value).startswith(f"{status} {type}: ")


def test_stream_errors(server, client):
    with pytest.raises(ServiceError) as e:
        client.stream(encoding="nope_base").open()
    assert (e.value.status, e.value.type) == (404, "encoding_not_found")
    with pytest.raises(ServiceError) as e:
        client.stream(limit=10**9).open()
    assert (e.value.status, e.value.type) == (422, "limit_exceeded")
    with client.stream() as s:
        with pytest.raises(ServiceError) as e:  # the server allows one stream
            client.stream().open()
        assert (e.value.status, e.value.type) == (429, "too_many_streams")
        s.push("a" * 600)
        with pytest.raises(ServiceError) as e:  # over BPESVC_MAX_STREAM_BYTES
            s.push("a" * 600)
        assert (e.value.status, e.value.type) == (413, "stream_too_large")


def test_429_retried_after_retry_after(server):
    held = held_in_flight(server)
    threading.Timer(0.3, release, [held]).start()
    t0 = time.monotonic()
    with Client(server.url, retries=3) as c:
        assert c.count("hello world") == 2
    # the 429 said Retry-After: 1, and the slot was free again well before that
    assert 1.0 <= time.monotonic() - t0 < 3.0


def test_429_retries_are_bounded(server):
    held = held_in_flight(server)
    try:
        t0 = time.monotonic()
        with Client(server.url, retries=0) as c, pytest.raises(ServiceError) as e:
            c.count("x")
        assert (e.value.status, e.value.type) == (429, "too_many_requests")
        assert time.monotonic() - t0 < 0.9  # no wait without retries
        t0 = time.monotonic()
        with Client(server.url, retries=3, max_retry_wait=0.1) as c, pytest.raises(ServiceError):
            c.count("x")
        assert 0.3 <= time.monotonic() - t0 < 0.9  # three waits, each capped at 0.1 s
    finally:
        release(held)


def test_503_retried_then_raised_then_served(loading_server):
    url = loading_server.url
    t0 = time.monotonic()
    with Client(url, retries=2) as c, pytest.raises(ServiceError) as e:
        c.count("x")
    assert (e.value.status, e.value.type) == (503, "not_ready")
    assert "still loading" in e.value.message
    assert 2.0 <= time.monotonic() - t0 < 4.0  # two waits of Retry-After: 1

    async def split():
        async with AsyncClient(url, retries=1) as c:
            await c.split_at("x", 1)

    t0 = time.monotonic()
    with pytest.raises(ServiceError) as e:
        asyncio.run(split())
    assert e.value.type == "not_ready" and 1.0 <= time.monotonic() - t0 < 3.0

    # loading finishes during the wait: the retry is served
    threading.Timer(0.3, loading_server.finish_loading).start()
    t0 = time.monotonic()
    with Client(url, retries=5) as c:
        assert c.encode("abc") == [97, 98, 99]
    assert 1.0 <= time.monotonic() - t0 < 4.0


def test_timeout_raises():
    # a real listening socket that never answers
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        with Client(url, timeout=0.3) as c, pytest.raises(httpx.ReadTimeout):
            c.count("x")
        assert time.monotonic() - t0 < 2.0


def test_refused_connection_retried_then_raised():
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{s.getsockname()[1]}"
        t0 = time.monotonic()
        with Client(url, retries=2, backoff=0.1) as c, pytest.raises(httpx.ConnectError):
            c.count("x")
        assert time.monotonic() - t0 >= 0.3  # 0.1 then 0.2


def test_import_bpecore_does_not_import_httpx():
    code = "import sys, bpecore; print([m for m in ('httpx', 'websockets') if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_error_body_not_the_services():
    # another HTTP server (a proxy's error page, a wrong port): type http_error, status kept
    import http.server

    httpd = http.server.HTTPServer(("127.0.0.1", 0), http.server.SimpleHTTPRequestHandler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{httpd.server_address[1]}"
        with Client(url, retries=0) as c, pytest.raises(ServiceError) as e:
            c.count("x")  # POST: the stdlib server answers 501 with an HTML page
        assert (e.value.status, e.value.type) == (501, "http_error")
        assert "501" in e.value.message
    finally:
        httpd.shutdown()
        httpd.server_close()

"""The documented limits hold at their values, against a real uvicorn (the Dockerfile's CMD) over raw
sockets: BPESVC_MAX_HEADER_BYTES refuses a head of limit + 1 bytes and serves one of the limit,
however the bytes arrive; a refusal the parser makes is the JSON error body; and each start-up
failure exits with its own code (README, "HTTP service" and "Command line")."""

from __future__ import annotations

import json
import socket
import sys
import time

import pytest

import bpecore
from bpecore._exitcodes import EXIT_LISTEN, EXIT_USAGE
from tests.service.conftest import dockerfile_cmd, with_port

LIMIT = 64 * 1024  # the documented default of BPESVC_MAX_HEADER_BYTES
ENV = {"BPESVC_ENCODINGS": '["cl100k_base"]'}


@pytest.fixture(scope="module")
def default_limits(start_server):
    server = start_server(ENV)  # BPESVC_MAX_HEADER_BYTES unset: its default applies
    server.wait_ready()
    yield server
    assert server.stop(), server.output()


@pytest.fixture(scope="module")
def large_heads(start_server):
    server = start_server({**ENV, "BPESVC_MAX_HEADER_BYTES": str(4 * LIMIT)})
    server.wait_ready()
    yield server
    assert server.stop(), server.output()


def head(size: int, where: str = "header", path: bytes = b"/healthz") -> bytes:
    """A GET head of exactly ``size`` bytes (request line to the blank line), padded in a header
    value or in the URL's query."""
    if where == "header":
        start = b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nX-Pad: "
        end = b"\r\n\r\n"
    else:
        start = b"GET " + path + b"?pad="
        end = b" HTTP/1.1\r\nHost: x\r\n\r\n"
    pad = size - len(start) - len(end)
    assert pad > 0
    out = start + b"a" * pad + end
    assert len(out) == size
    return out


def exchange(server, data: bytes, step: int | None = None, responses: int = 1) -> list[bytes]:
    """Send ``data`` (in ``step``-byte writes if given) on one connection; the whole responses that
    came back, at most ``responses`` of them, until the server closes or 5 s pass."""
    out = b""
    with socket.create_connection(("127.0.0.1", server.port), timeout=5) as s:
        try:
            if step is None:
                s.sendall(data)
            else:
                for i in range(0, len(data), step):
                    s.sendall(data[i : i + step])
                    time.sleep(0.001)
        except (BrokenPipeError, ConnectionResetError):
            pass  # refused mid-send: what was answered is read below
        try:
            while len(split_responses(out)) < responses and (chunk := s.recv(65536)):
                out += chunk
        except (TimeoutError, ConnectionResetError):
            pass
    return split_responses(out)


def split_responses(out: bytes) -> list[bytes]:
    found = []
    while b"\r\n\r\n" in out:
        head_, _, rest = out.partition(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head_.lower().split(b"\r\n")
            if line.startswith(b"content-length:")
        )
        if len(rest) < length:
            break
        found.append(head_ + b"\r\n\r\n" + rest[:length])
        out = rest[length:]
    return found


def status(response: bytes) -> int:
    return int(response.split(b" ", 2)[1])


def error_of(response: bytes) -> dict:
    head_, _, body = response.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head_.lower(), response[:300]
    return json.loads(body)["error"]


@pytest.mark.parametrize("where", ["header", "url"])
@pytest.mark.parametrize("step", [None, 1000], ids=["one-write", "1000-byte-writes"])
def test_header_limit_at_its_value(default_limits, where, step):
    for size in (LIMIT - 1, LIMIT):
        (response,) = exchange(default_limits, head(size, where), step)
        assert status(response) == 200, (size, response[:300])
    for size in (LIMIT + 1, 100_000):
        (response,) = exchange(default_limits, head(size, where), step)
        assert status(response) == 431, (size, response[:300])
        assert b"connection: close" in response.lower()
        err = error_of(response)
        assert err == {
            "type": "headers_too_large",
            "code": 431,
            "message": f"request line and headers exceed {LIMIT} bytes",
        }


def test_header_limit_on_a_kept_alive_connection(default_limits):
    # the second head on the connection is counted from its own first byte
    (first, second) = exchange(
        default_limits, head(LIMIT) + head(LIMIT), step=LIMIT // 3, responses=2
    )
    assert status(first) == 200 and status(second) == 200
    # a head of limit + 1 after a served request: refused
    first, second = exchange(
        default_limits, head(LIMIT - 1) + head(LIMIT + 1), step=LIMIT, responses=2
    )
    assert status(first) == 200 and status(second) == 431, second[:300]


def test_header_limit_with_a_body_behind(default_limits):
    # a head at the limit, its body in the same writes: the body is not counted against the head
    body = json.dumps({"text": "hello world " * 20_000}).encode()
    start = (
        b"POST /v1/count HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\nX-Pad: " % len(body)
    )
    data = start + b"a" * (LIMIT - len(start) - 4) + b"\r\n\r\n"
    assert len(data) == LIMIT
    (response,) = exchange(default_limits, data + body)
    assert status(response) == 200, response[:300]
    count = bpecore.get_encoding("cl100k_base").count("hello world " * 20_000)
    assert json.loads(response.partition(b"\r\n\r\n")[2])["count"] == count


def test_request_line_of_100_kb_gets_the_json_error(default_limits, large_heads):
    # over the limit: 431 with the JSON body, not uvicorn's plain-text 400
    (response,) = exchange(default_limits, head(100_000, "url"))
    assert status(response) == 431 and error_of(response)["type"] == "headers_too_large"
    # within a larger limit, a URL httptools cannot parse (over 64 KiB) is still a JSON 400
    (response,) = exchange(large_heads, head(100_000, "url"))
    assert status(response) == 400, response[:300]
    assert error_of(response) == {
        "type": "bad_request",
        "code": 400,
        "message": "Invalid HTTP request received.",
    }
    (response,) = exchange(large_heads, head(100_000, "header"))
    assert status(response) == 200


def test_malformed_request_gets_the_json_error(default_limits):
    (response,) = exchange(default_limits, b"NOT HTTP AT ALL\r\n\r\n")
    assert status(response) == 400 and error_of(response)["type"] == "bad_request"
    (response,) = exchange(default_limits, b"GET / HTTP/1.1\r\nHost x\r\n\r\n")
    assert status(response) == 400 and error_of(response)["type"] == "bad_request"


def _exit_code(server, timeout: float = 60.0) -> int:
    try:
        return server.proc.wait(timeout)
    finally:
        server.log.close()


@pytest.mark.parametrize("how", ["dockerfile-cmd", "python-m"])
def test_port_in_use_exits_with_its_own_code(start_server, how):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {**ENV, "BPESVC_PORT": str(port)}
        if how == "dockerfile-cmd":
            cmd = with_port(dockerfile_cmd(), port)
            cmd[cmd.index("--host") + 1] = "127.0.0.1"  # where the port is taken
            i = cmd.index("--port")  # one argument, so that start_server keeps this port
            cmd[i : i + 2] = [f"--port={port}"]
            server = start_server(env, cmd)
        else:
            server = start_server(env, [sys.executable, "-m", "bpecore_service"])
        code = _exit_code(server)
    assert code == EXIT_LISTEN == 4, server.output()
    assert "address already in use" in server.output()


@pytest.mark.parametrize("how", ["dockerfile-cmd", "python-m"])
def test_bad_setting_exits_with_its_own_code(start_server, how):
    env = {**ENV, "BPESVC_MAX_TEXTS": "many"}
    cmd = None if how == "dockerfile-cmd" else [sys.executable, "-m", "bpecore_service"]
    server = start_server(env, cmd)
    code = _exit_code(server)
    assert code == EXIT_USAGE == 2, server.output()
    lines = server.output().strip().splitlines()
    assert lines[-1].startswith("bpecore_service: bad setting: BPESVC_MAX_TEXTS: "), lines
    assert "Traceback" not in server.output()

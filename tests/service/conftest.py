"""Service fixtures: an in-process TestClient (lifespan run, encodings loaded once per session) and a
real uvicorn process started with the Dockerfile's CMD (on a free port), driven over HTTP/WebSocket."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

import bpecore
from bpecore_service.config import Settings
from bpecore_service.main import create_app

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def settings() -> Settings:
    return Settings(
        load_in_background=False,
        max_texts=8,
        max_ranges=50,
        max_tokens=100_000,
        max_streams=3,
        max_request_bytes=1_000_000,
    )


@pytest.fixture(scope="session")
def client(settings):
    with TestClient(create_app(settings)) as c:
        yield c


@pytest.fixture(scope="session")
def cl100k():
    return bpecore.get_encoding("cl100k_base")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dockerfile_cmd() -> list[str]:
    """The runtime stage's CMD, exec form, as a list."""
    lines = (ROOT / "Dockerfile").read_text().splitlines()
    cmds = [line for line in lines if line.startswith("CMD ")]
    return json.loads(cmds[-1][4:])


def with_port(cmd: list[str], port: int) -> list[str]:
    cmd = list(cmd)
    cmd[cmd.index("--port") + 1] = str(port)
    return cmd


class Server:
    """A uvicorn child process; ``stop()`` sends SIGTERM and returns the exit code."""

    def __init__(self, cmd: list[str], env: dict[str, str], port: int, log_dir: Path) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}"
        self.ws_url = f"ws://127.0.0.1:{port}"
        self.log_path = log_dir / f"service-{port}.log"
        self.log = open(self.log_path, "wb")
        full_env = {**os.environ, "PYTHONPATH": str(ROOT), **env}
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, env=full_env, stdout=self.log, stderr=subprocess.STDOUT
        )

    def wait_ready(self, timeout: float = 30.0) -> list[int]:
        """Poll /readyz until 200; returns the statuses seen (a 503 first shows 'not ready before load')."""
        seen: list[int] = []
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"server exited {self.proc.returncode}: {self.output()}")
            try:
                status = httpx.get(self.url + "/readyz", timeout=1).status_code
                if not seen or seen[-1] != status:
                    seen.append(status)
                if status == 200:
                    return seen
            except httpx.TransportError:
                pass
            time.sleep(0.02)
        raise TimeoutError(f"not ready after {timeout}s: {self.output()}")

    def stop(self, timeout: float = 30.0) -> bool:
        """SIGTERM, wait; True for a clean exit: uvicorn finishes its shutdown and then re-raises the
        signal it caught, so a clean exit is status 0 or death by that SIGTERM (143 in a container)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout)
        finally:
            self.log.close()
        finished = any(
            rec.get("msg") == "Application shutdown complete." for rec in self.log_lines()
        )
        return code in (0, -signal.SIGTERM) and finished

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def log_lines(self) -> list[dict]:
        out = []
        for line in self.output().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                pass
        return out


@pytest.fixture(scope="session")
def start_server(tmp_path_factory):
    """Starts servers; each one's log is kept in pytest's temporary directory (the last runs' are kept)."""
    servers: list[Server] = []
    log_dir = tmp_path_factory.mktemp("service-logs")

    def start(env: dict[str, str] | None = None, cmd: list[str] | None = None) -> Server:
        port = free_port()
        cmd = cmd or dockerfile_cmd()
        if "--port" in cmd:
            cmd = with_port(cmd, port)
        server = Server(
            cmd,
            {"BPESVC_HOST": "127.0.0.1", "BPESVC_PORT": str(port), **(env or {})},
            port,
            log_dir,
        )
        servers.append(server)
        return server

    yield start
    for server in servers:
        if server.proc.poll() is None:
            server.proc.kill()
            server.proc.wait()


@pytest.fixture(scope="session")
def live(start_server):
    """The image's CMD, run on the host: limits small enough to hit in tests."""
    server = start_server(
        {"BPESVC_MAX_STREAMS": "2", "BPESVC_MAX_REQUEST_BYTES": "1000000", "BPESVC_MAX_TEXTS": "8"}
    )
    server.ready_statuses = server.wait_ready()
    yield server
    assert server.stop(), server.output()


@pytest.fixture(scope="session")
def toy_tiktoken(tmp_path_factory) -> Path:
    """A tiny `.tiktoken` file: the 256 bytes and a few merges (``he``, ``ll``, ``hell``, ``hello``)."""
    tokens = [bytes([b]) for b in range(256)] + [b"he", b"ll", b"hell", b"hello"]
    path = tmp_path_factory.mktemp("vocab") / "toy.tiktoken"
    path.write_text("".join(f"{base64.b64encode(t).decode()} {i}\n" for i, t in enumerate(tokens)))
    return path


@pytest.fixture(scope="session")
def toy_hf(tmp_path_factory) -> Path:
    """A tiny byte-level BPE `tokenizer.json` with the same merges as ``toy_tiktoken``."""
    from bpecore.load import bytes_to_unicode

    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("hell", "o")]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    doc = {
        "version": "1.0",
        "added_tokens": [{"id": 260, "content": "<|end|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }
    path = tmp_path_factory.mktemp("hf") / "toyhf" / "tokenizer.json"
    path.parent.mkdir()
    path.write_text(json.dumps(doc))
    return path

"""Faults against a real uvicorn: a corrupt or missing vocab configured at start-up stops the process
with a non-zero exit and a clear message (never serving with a wrong vocab); SIGTERM under load loses
no in-flight request; a worker killed mid-request is replaced and the others keep serving."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import signal
import time

import httpx
import pytest

import bpecore

EXIT_LOAD_FAILED = 3


def _wait_exit(server, timeout: float = 30.0) -> int:
    try:
        return server.proc.wait(timeout)
    finally:
        server.log.close()


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    good = "".join(f"{base64.b64encode(bytes([b])).decode()} {b}\n" for b in range(256))
    (d / "corrupt.tiktoken").write_text(good + "!!!notbase64 256\n")
    (d / "duprank.tiktoken").write_text(good + f"{base64.b64encode(b'ab').decode()} 7\n")
    (d / "good.tiktoken").write_text(good)
    (d / "corrupt").mkdir()
    (d / "corrupt" / "tokenizer.json").write_bytes(b'{"model": {"type": "BPE", "vocab": {"a": ')
    return d


CI_CASES = {("missing-tiktoken", "true"), ("corrupt-hf", "true"), ("duplicate-rank", "false")}


@pytest.mark.parametrize(
    "case, background",
    [
        pytest.param(
            case,
            bg,
            id=f"{case}-{'background' if bg == 'true' else 'lifespan'}",
            marks=() if (case, bg) in CI_CASES else pytest.mark.slow,
        )
        for case in (
            "missing-tiktoken",
            "corrupt-tiktoken",
            "duplicate-rank",
            "wrong-sha256",
            "corrupt-hf",
            "missing-hf",
        )
        for bg in ("true", "false")
    ],
)
def test_bad_vocab_at_startup_exits_nonzero(start_server, bad_files, case, background):
    env = {"BPESVC_ENCODINGS": '["cl100k_base"]', "BPESVC_LOAD_IN_BACKGROUND": background}
    if case == "missing-tiktoken":
        env["BPESVC_TIKTOKEN_FILES"] = json.dumps([{"path": str(bad_files / "nope.tiktoken")}])
    elif case == "corrupt-tiktoken":
        env["BPESVC_TIKTOKEN_FILES"] = json.dumps([{"path": str(bad_files / "corrupt.tiktoken")}])
    elif case == "duplicate-rank":
        env["BPESVC_TIKTOKEN_FILES"] = json.dumps([{"path": str(bad_files / "duprank.tiktoken")}])
    elif case == "wrong-sha256":
        env["BPESVC_TIKTOKEN_FILES"] = json.dumps(
            [{"path": str(bad_files / "good.tiktoken"), "sha256": "0" * 64}]
        )
    elif case == "corrupt-hf":
        env["BPESVC_HF_FILES"] = json.dumps(
            [{"path": str(bad_files / "corrupt" / "tokenizer.json")}]
        )
    else:
        env["BPESVC_HF_FILES"] = json.dumps([{"path": str(bad_files / "nope" / "tokenizer.json")}])
    server = start_server(env)
    served = []
    deadline = time.monotonic() + 30
    while server.proc.poll() is None and time.monotonic() < deadline:
        try:
            served.append(httpx.get(server.url + "/readyz", timeout=1).status_code)
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    code = _wait_exit(server)
    assert code == EXIT_LOAD_FAILED, (code, server.output())
    assert 200 not in served  # never ready with a wrong vocab
    errors = [rec for rec in server.log_lines() if rec.get("msg") == "encodings failed to load"]
    assert errors and "VocabError" in errors[0]["error"], server.output()


def test_sigterm_under_load_loses_no_inflight_request(start_server):
    """Clients stop sending once /readyz turns 503 (as a load balancer would); everything sent before
    that, and everything in flight at SIGTERM, is answered in full and correctly."""
    server = start_server({"BPESVC_ENCODINGS": '["cl100k_base"]', "BPESVC_DRAIN_SECONDS": "1.0"})
    server.wait_ready()
    enc = bpecore.get_encoding("cl100k_base")
    texts = [f"in flight {i} " + "words and more words " * (200 * (i % 7 + 1)) for i in range(32)]
    want = {t: enc.count(t) for t in texts}

    async def main():
        stop = asyncio.Event()
        results = {"ok": 0, "wrong": 0, "lost": [], "after_sigterm": 0}
        sigterm_at = None

        async def client(i: int, c: httpx.AsyncClient):
            nonlocal sigterm_at
            n = 0
            while not stop.is_set():
                text = texts[(i + n) % len(texts)]
                n += 1
                sent = time.monotonic()
                try:
                    r = await c.post("/v1/count", json={"text": text}, timeout=30)
                except httpx.TransportError as e:
                    results["lost"].append(repr(e))
                    continue
                if sigterm_at is not None and sent > sigterm_at:
                    results["after_sigterm"] += 1
                if r.status_code == 200 and r.json()["count"] == want[text]:
                    results["ok"] += 1
                else:
                    results["wrong"] += 1

        async def balancer(c: httpx.AsyncClient):
            nonlocal sigterm_at
            await asyncio.sleep(1.0)
            sigterm_at = time.monotonic()
            server.proc.send_signal(signal.SIGTERM)
            while (await c.get("/readyz")).status_code == 200:
                await asyncio.sleep(0.01)
            stop.set()  # the load balancer takes the pod out

        async with httpx.AsyncClient(
            base_url=server.url, limits=httpx.Limits(max_connections=16)
        ) as c:
            await asyncio.gather(balancer(c), *(client(i, c) for i in range(16)))
        return results

    results = asyncio.run(main())
    assert server.stop(), server.output()
    assert results["lost"] == [] and results["wrong"] == 0, results
    assert results["ok"] > 50 and results["after_sigterm"] > 0, results


def _children(pid: int) -> set[int]:
    out = set()
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        out.add(int(entry))
            except OSError:
                pass
    return out


def _workers(server) -> set[int]:
    """uvicorn worker processes of the supervisor (skipping multiprocessing helpers)."""
    out = set()
    for pid in _children(server.proc.pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
        except OSError:
            continue
        if b"resource_tracker" not in cmd and b"semaphore_tracker" not in cmd:
            out.add(pid)
    return out


def test_worker_killed_mid_request_is_replaced(start_server):
    from tests.service.conftest import dockerfile_cmd

    server = start_server(
        {"BPESVC_ENCODINGS": '["cl100k_base"]'}, cmd=dockerfile_cmd() + ["--workers", "2"]
    )
    server.wait_ready(60)
    deadline = time.monotonic() + 30
    while len(_workers(server)) < 2 and time.monotonic() < deadline:
        time.sleep(0.1)
    workers = _workers(server)
    assert len(workers) == 2, workers
    deadline = (
        time.monotonic() + 30
    )  # both workers loaded: /readyz 200 from each (connections spread)
    while (
        time.monotonic() < deadline
        and sum(httpx.get(server.url + "/readyz").status_code == 200 for _ in range(20)) < 20
    ):
        time.sleep(0.2)
    enc = bpecore.get_encoding("cl100k_base")
    text = "a long request to be killed in the middle of " * 40_000
    victim = min(workers)

    async def main():
        async with httpx.AsyncClient(
            base_url=server.url, limits=httpx.Limits(max_connections=8)
        ) as c:
            inflight = [
                asyncio.create_task(c.post("/v1/count", json={"text": text}, timeout=30))
                for _ in range(8)
            ]
            await asyncio.sleep(0.05)
            os.kill(victim, signal.SIGKILL)
            done = await asyncio.gather(*inflight, return_exceptions=True)
            # the others keep serving right away
            after = [
                await c.post(
                    "/v1/count", json={"text": "still here"}, headers={"connection": "close"}
                )
                for _ in range(20)
            ]
            return done, after

    done, after = asyncio.run(main())
    answered = [r for r in done if isinstance(r, httpx.Response)]
    assert all(r.status_code == 200 and r.json()["count"] == enc.count(text) for r in answered)
    assert all(r.status_code in (200, 503) for r in after)
    assert sum(r.status_code == 200 for r in after) >= 10
    deadline = time.monotonic() + 60  # the supervisor starts a replacement, which loads and serves
    while time.monotonic() < deadline:
        now = _workers(server)
        if len(now) == 2 and victim not in now:
            break
        time.sleep(0.2)
    assert len(now) == 2 and victim not in now, (workers, now)
    # the replacement loads in the background (503 meanwhile, like any starting worker), then serves
    deadline = time.monotonic() + 60
    while sum(rec.get("msg") == "encodings loaded" for rec in server.log_lines()) < 3:
        assert time.monotonic() < deadline, server.output()
        time.sleep(0.1)
    assert all(
        httpx.post(
            server.url + "/v1/count", json={"text": "hello world"}, headers={"connection": "close"}
        ).json()["count"]
        == 2
        for _ in range(20)
    )
    assert server.stop(60), server.output()

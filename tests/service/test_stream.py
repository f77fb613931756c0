"""WS /v1/stream: after every frame, the reply equals count(everything sent so far)."""

from __future__ import annotations

import asyncio
import json
import signal

import pytest
import websockets
from starlette.websockets import WebSocketDisconnect

import bpecore

FRAMES = [
    "Hel",
    "lo wor",
    "ld",
    "  ",
    " \n",
    "Ünï",
    "cödé ☃",
    " 日本",
    "語",
    "",
    "!!!",
    " " * 7,
    "end.",
]


def test_stream_counts_after_every_frame(client, cl100k):
    sent = ""
    with client.websocket_connect("/v1/stream") as ws:
        for i, frame in enumerate(FRAMES, 1):
            ws.send_text(frame)
            sent += frame
            reply = ws.receive_json()
            assert reply == {
                "count": cl100k.count(sent),
                "bytes": len(sent.encode()),
                "frames": i,
                "within_limit": None,
            }
        metrics = client.get("/metrics").text
        assert "bpesvc_streams_open 1.0" in metrics
        assert 'bpesvc_tokens_total{encoding="cl100k_base",op="stream"}' in metrics


def test_stream_bytes_split_inside_a_character(client):
    enc = bpecore.get_encoding("o200k_base")
    data = "Ünïcödé ☃ 🎉 ok".encode()
    sent = b""
    with client.websocket_connect("/v1/stream?encoding=o200k_base&limit=5") as ws:
        for i in range(len(data)):
            ws.send_bytes(data[i : i + 1])
            sent += data[i : i + 1]
            reply = ws.receive_json()
            expected = enc.count(sent.decode("utf-8", "replace")) if _complete(sent) else None
            if expected is not None:
                assert reply["count"] == expected
                assert reply["within_limit"] == (expected <= 5)


def _complete(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize(
    "url,status,type",
    [
        ("/v1/stream?encoding=nope", 404, "encoding_not_found"),
        ("/v1/stream?limit=-1", 422, "validation_error"),
        ("/v1/stream?limit=x", 422, "validation_error"),
        ("/v1/stream?limit=999999999", 422, "limit_exceeded"),
    ],
)
def test_stream_refusals(client, url, status, type):
    from starlette.testclient import WebSocketDenialResponse

    with pytest.raises(WebSocketDenialResponse) as e:
        with client.websocket_connect(url):
            pass
    assert e.value.status_code == status
    assert e.value.json()["error"]["type"] == type


def test_stream_over_byte_limit_closes_1009():
    from fastapi.testclient import TestClient

    from bpecore_service.config import Settings
    from bpecore_service.main import create_app

    app = create_app(
        Settings(max_stream_bytes=10, encodings=["cl100k_base"], load_in_background=False)
    )
    with TestClient(app) as c, c.websocket_connect("/v1/stream") as ws:
        ws.send_text("hello")
        assert ws.receive_json()["count"] == 1
        ws.send_text("world!")
        assert ws.receive_json()["error"]["type"] == "stream_too_large"
        with pytest.raises(WebSocketDisconnect) as e:
            ws.receive_json()
        assert e.value.code == 1009


def test_stream_limit_of_open_streams_live(live):
    """max_streams=2 on the live server: the third is refused with HTTP 429 and a JSON error."""

    async def main():
        a = await websockets.connect(live.ws_url + "/v1/stream")
        b = await websockets.connect(live.ws_url + "/v1/stream")
        with pytest.raises(websockets.exceptions.InvalidStatus) as e:
            await websockets.connect(live.ws_url + "/v1/stream")
        assert e.value.response.status_code == 429
        assert json.loads(e.value.response.body)["error"]["type"] == "too_many_streams"
        await a.close()
        await b.close()
        await asyncio.sleep(0.1)
        c = await websockets.connect(live.ws_url + "/v1/stream")  # a slot is free again
        await c.send("hi")
        assert json.loads(await c.recv())["count"] == 1
        await c.close()

    asyncio.run(main())


def test_stream_live_equals_count(live, cl100k):
    text = open(__file__, encoding="utf-8").read()[:20000]

    async def main():
        sent = ""
        async with websockets.connect(live.ws_url + "/v1/stream?limit=1000") as ws:
            pos = 0
            step = 1
            while pos < len(text):
                frame = text[pos : pos + step]
                pos += step
                step = step * 3 % 997 + 1
                sent += frame
                await ws.send(frame)
                reply = json.loads(await ws.recv())
                expected = cl100k.count(sent)
                assert reply["count"] == expected
                assert reply["within_limit"] == (expected <= 1000)

    asyncio.run(main())


def test_stream_unknown_encoding_live(live):
    async def main():
        with pytest.raises(websockets.exceptions.InvalidStatus) as e:
            await websockets.connect(live.ws_url + "/v1/stream?encoding=nope")
        assert e.value.response.status_code == 404
        assert json.loads(e.value.response.body)["error"]["type"] == "encoding_not_found"

    asyncio.run(main())


def test_sigterm_closes_streams_cleanly(start_server):
    server = start_server({"BPESVC_ENCODINGS": '["cl100k_base"]', "BPESVC_DRAIN_SECONDS": "0.5"})
    server.wait_ready()

    async def main():
        async with websockets.connect(server.ws_url + "/v1/stream") as ws:
            await ws.send("hello")
            assert json.loads(await ws.recv())["count"] == 1
            server.proc.send_signal(signal.SIGTERM)
            with pytest.raises(websockets.exceptions.ConnectionClosedOK) as e:
                await asyncio.wait_for(ws.recv(), 5)
            return e.value.rcvd.code

    assert asyncio.run(main()) == 1001
    assert server.stop(), server.output()

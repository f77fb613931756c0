"""WS /v1/stream: an appending token counter per connection.

    ws://host/v1/stream?encoding=cl100k_base&limit=4096

Each frame is appended (text frames as text; binary frames as raw UTF-8 bytes, which may end
inside a character) and answered with ``{"count", "bytes", "frames", "within_limit"}``: the exact
token count of everything received so far, as if sent on its own (``Encoding.appendable_counter``;
total work linear in the stream's length). ``within_limit`` is null without a ``limit``.

Refusals before the handshake completes are HTTP responses with the usual error body: 404 unknown
encoding, 422 bad query, 429 too many open streams, 503 not loaded. After it: a frame that would
pass ``max_stream_bytes`` gets an error message and close code 1009; a draining server closes
every stream with 1001.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time

from fastapi import APIRouter, WebSocket, WebSocketDisconnect
from starlette.concurrency import run_in_threadpool

from bpecore_service.errors import error_body, error_response, not_found_encoding

router = APIRouter(prefix="/v1", tags=["stream"])
log = logging.getLogger("bpesvc")

INLINE_BYTES = (
    16384  # frames up to this size are counted on the event loop; larger ones in a thread
)


async def _refuse(ws: WebSocket, status: int, type: str, message: str) -> None:
    ws.scope.setdefault("bpesvc", {})["error_type"] = type
    ws.app.state.metrics.errors.labels(type).inc()
    if "websocket.http.response" in ws.scope.get("extensions", {}):
        await ws.send_denial_response(error_response(status, type, message))
    else:
        await ws.close(code=1008 if status < 500 else 1013, reason=message[:120])


@router.websocket("/stream")
async def stream(ws: WebSocket) -> None:
    state = ws.app.state
    settings = state.settings
    if not state.loaded:
        return await _refuse(ws, 503, "not_ready", "encodings are still loading")
    if state.draining:
        return await _refuse(ws, 503, "draining", "server is shutting down")
    query = ws.query_params
    name = query.get("encoding") or settings.default_encoding
    enc = state.encodings.get(name)
    if enc is None:
        err = not_found_encoding(name, sorted(state.encodings))
        return await _refuse(ws, err.status, err.type, err.message)
    limit = None
    if query.get("limit") is not None:
        try:
            limit = int(query["limit"])
        except ValueError:
            limit = -1
        if limit < 0:
            return await _refuse(ws, 422, "validation_error", "limit must be an integer >= 0")
        if limit > settings.max_tokens:
            return await _refuse(
                ws,
                422,
                "limit_exceeded",
                f"limit is {limit}, above the server limit of {settings.max_tokens}",
            )
    if len(state.streams) >= settings.max_streams:
        return await _refuse(
            ws, 429, "too_many_streams", f"{settings.max_streams} streams already open"
        )

    await ws.accept()
    state.streams.add(ws)
    state.metrics.streams_open.inc()
    counter = enc.appendable_counter()
    metrics = state.metrics
    rid = ws.scope.get("bpesvc", {}).get("request_id")
    t0 = time.perf_counter()
    total_bytes = frames = count = 0
    close_code = 1000
    drain = asyncio.ensure_future(state.drain_event.wait())
    try:
        while True:
            recv = asyncio.ensure_future(ws.receive())
            done, _ = await asyncio.wait({recv, drain}, return_when=asyncio.FIRST_COMPLETED)
            if recv not in done:
                recv.cancel()
                close_code = 1001
                await ws.close(code=1001, reason="server draining")
                break
            message = recv.result()
            if message["type"] == "websocket.disconnect":
                close_code = message.get("code", 1000)
                break
            data = message.get("text")
            if data is None:
                data = message.get("bytes") or b""
                nbytes = len(data)
            else:
                nbytes = len(data) if data.isascii() else len(data.encode("utf-8", "surrogatepass"))
            if total_bytes + nbytes > settings.max_stream_bytes:
                close_code = 1009
                body = error_body(
                    413, "stream_too_large", f"stream exceeds {settings.max_stream_bytes} bytes"
                )
                await ws.send_text(json.dumps(body))
                await ws.close(code=1009, reason="stream too large")
                break
            t = time.perf_counter()
            before = count
            try:
                if nbytes > INLINE_BYTES:
                    count = await run_in_threadpool(counter.push, data)
                else:
                    count = counter.push(data)
            except ValueError as e:
                close_code = 1007
                await ws.send_text(json.dumps(error_body(400, "invalid_frame", str(e))))
                await ws.close(code=1007, reason="invalid frame")
                break
            metrics.observe_op(
                "stream", enc.name, nbytes, max(count - before, 0), time.perf_counter() - t
            )
            total_bytes += nbytes
            frames += 1
            await ws.send_text(
                json.dumps(
                    {
                        "count": count,
                        "bytes": total_bytes,
                        "frames": frames,
                        "within_limit": None if limit is None else count <= limit,
                    }
                )
            )
    except WebSocketDisconnect as e:
        close_code = e.code
    finally:
        drain.cancel()
        state.streams.discard(ws)
        metrics.streams_open.dec()
        log.info(
            "stream",
            extra={
                "fields": {
                    "request_id": rid,
                    "route": "/v1/stream",
                    "encoding": enc.name,
                    "frames": frames,
                    "bytes": total_bytes,
                    "tokens": count,
                    "close_code": close_code,
                    "latency_ms": round((time.perf_counter() - t0) * 1000, 3),
                }
            },
        )

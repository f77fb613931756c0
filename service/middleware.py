"""The one ASGI middleware in front of the app: request id, body-size and in-flight limits,
request metrics and the per-request JSON log line.

Pure ASGI (no BaseHTTPMiddleware): the body is read here, up to ``max_request_bytes``, and replayed
to the app, so an oversized body is refused with 413 before any parsing. Routes (and their lean
handlers, ``bpecore_service.lean``) add what they did (encoding, op, bytes, tokens) to ``scope["bpesvc"]``,
which ends up in the log line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid

from bpecore_service.body import replay
from bpecore_service.errors import RETRY_AFTER_SECONDS, RETRY_AFTER_STATUSES, error_body
from bpecore_service.metrics import EXCLUDED_PATHS, Metrics

log = logging.getLogger("bpesvc")
_REQUEST_ID = re.compile(r"^[A-Za-z0-9._:@/+=-]{1,128}$")
_BODY_METHODS = frozenset({"POST", "PUT", "PATCH"})


def request_id_from(headers: list[tuple[bytes, bytes]]) -> str:
    for k, v in headers:
        if k == b"x-request-id":
            rid = v.decode("latin-1")
            if _REQUEST_ID.match(rid):
                return rid
            break
    return uuid.uuid4().hex


class ServiceMiddleware:
    def __init__(self, app, *, settings, metrics: Metrics) -> None:
        self.app = app
        self.settings = settings
        self.metrics = metrics
        self.inflight = 0

    async def _send_error(
        self, send, status: int, type: str, message: str, rid: str, info: dict, close: bool = False
    ) -> None:
        info["error_type"] = type
        body = json.dumps(error_body(status, type, message)).encode()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ]
        if close:
            headers.append((b"connection", b"close"))
        if status in RETRY_AFTER_STATUSES:
            headers.append((b"retry-after", RETRY_AFTER_SECONDS.encode()))
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] == "websocket":
            scope["bpesvc"] = {"request_id": request_id_from(scope["headers"])}
            return await self.app(scope, receive, send)
        if scope["type"] != "http":
            return await self.app(scope, receive, send)

        start = time.perf_counter()
        rid = request_id_from(scope["headers"])
        info = scope["bpesvc"] = {"request_id": rid}
        path = scope["path"]
        method = scope["method"]
        counted = path not in EXCLUDED_PATHS
        status_holder = {"status": 500, "bytes_out": 0}
        bytes_in = 0

        async def send_wrapper(message) -> None:
            if message["type"] == "http.response.start":
                status_holder["status"] = message["status"]
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [(b"x-request-id", rid.encode())]
            elif message["type"] == "http.response.body":
                status_holder["bytes_out"] += len(message.get("body", b""))
            await send(message)

        over_inflight = counted and self.inflight >= self.settings.max_inflight
        self.inflight += 1
        self.metrics.inflight.inc()
        try:
            if over_inflight:
                await self._send_error(
                    send_wrapper, 429, "too_many_requests", "server busy; retry later", rid, info
                )
                return
            if method not in _BODY_METHODS:
                await self.app(scope, receive, send_wrapper)
                return
            limit = self.settings.max_request_bytes
            declared = None
            for k, v in scope["headers"]:
                if k == b"content-length":
                    try:
                        declared = int(v)
                    except ValueError:
                        declared = None
            if declared is not None and declared > limit:
                await self._send_error(
                    send_wrapper,
                    413,
                    "payload_too_large",
                    f"request body of {declared} bytes exceeds the limit of {limit} bytes",
                    rid,
                    info,
                )
                return
            chunks = []
            more = True
            while more:
                try:
                    async with asyncio.timeout(
                        self.settings.body_timeout
                    ):  # no task per read, unlike wait_for
                        message = await receive()
                except TimeoutError:
                    await self._send_error(
                        send_wrapper,
                        408,
                        "request_timeout",
                        f"no request body data for {self.settings.body_timeout:g} s",
                        rid,
                        info,
                        close=True,
                    )
                    return
                if message["type"] == "http.disconnect":
                    return
                chunk = message.get("body", b"")
                bytes_in += len(chunk)
                if bytes_in > limit:
                    await self._send_error(
                        send_wrapper,
                        413,
                        "payload_too_large",
                        f"request body exceeds the limit of {limit} bytes",
                        rid,
                        info,
                    )
                    return
                chunks.append(chunk)
                more = message.get("more_body", False)
            body = b"".join(chunks)
            await self.app(scope, replay(body, receive), send_wrapper)
        finally:
            self.inflight -= 1
            self.metrics.inflight.dec()
            elapsed = time.perf_counter() - start
            status = status_holder["status"]
            template = getattr(scope.get("route"), "path", None) or "<unmatched>"
            if counted:
                self.metrics.observe_request(template, method, status, elapsed)
            if status >= 400:
                self.metrics.errors.labels(info.get("error_type", str(status))).inc()
            fields = {
                "request_id": rid,
                "method": method,
                "path": path,
                "route": template,
                "status": status,
                "latency_ms": round(elapsed * 1000, 3),
                "bytes_in": bytes_in,
                "bytes_out": status_holder["bytes_out"],
            }
            for key in ("encoding", "op", "bytes", "tokens", "error_type"):
                if key in info:
                    fields[key] = info[key]
            if (counted or status >= 400) and log.isEnabledFor(logging.INFO):
                log.info("request", extra={"fields": fields})

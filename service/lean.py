"""Lean handlers: routes that declare one answer well-formed requests ahead of FastAPI's router.

A route declares ``@lean(Model, answer)`` where ``answer(request_model, ctx)`` is the same function
its endpoint calls: it checks the server limits, does the work and builds the response (a model,
or its JSON bytes). ``create_app`` installs ``LeanRoutes`` in front of the router for exactly the
routes that declare one. For a ``POST`` with an ``application/json`` body to such a route, once the
encodings are loaded, ``LeanRoutes`` parses the body, validates it with the route's request model
and calls ``answer``; that skips routing, dependency solving, the response-model pass and, for
bodies answered on the event loop, the threadpool hop of a ``def`` endpoint. A body the model refuses goes on to the route unchanged, so every
validation error keeps the route's status and body; an ``APIError`` raised by ``answer`` is answered
here with the body the app's error handler gives it. The route stays the definition (and the OpenAPI
description) of the endpoint; ``tests/service/test_lean.py`` checks both answer alike.

Bodies up to the handler's ``thread_bytes`` are answered on the event loop (counting 1 KB takes
15-25 µs with the GIL released, less than a thread hop: /v1/count); larger ones in a worker thread
(every body for /v1/encode and /v1/chunk, whose work can take long for a small body too), parsed
with ``bpecore_service.body`` (at most ~64K characters per GIL-holding call) instead of FastAPI's
``json.loads`` on the event loop. Bodies above ``SERIAL_BYTES`` are answered one at a time, so
the loop competes for the GIL with one such thread, not with every one (smaller bodies are still
answered in parallel). Figures: docs/perf/service.md.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import anyio.to_thread
from fastapi.routing import APIRoute
from pydantic import BaseModel, ValidationError

from bpecore_service import body as body_json
from bpecore_service.deps import Context
from bpecore_service.errors import APIError, error_response

THREAD_BYTES = 16 * 1024  # bodies above this are parsed and answered in a worker thread
SERIAL_BYTES = 1024 * 1024  # bodies above this are answered one at a time


@dataclass(frozen=True)
class Lean:
    """A route's lean handler: its request model, the answer function its endpoint also calls, and
    the body size from which the work moves off the event loop."""

    model: type[BaseModel]
    answer: Callable[[Any, Context], Any]
    thread_bytes: int = THREAD_BYTES

    def parse(self, body: bytes) -> BaseModel | None:
        """The validated request, or None when the route must answer (it refuses the body).

        Up to ``PIECE_CHARS`` bytes, pydantic-core parses and validates the JSON in one call; a body
        its parser refuses that ``json.loads`` (the route's parser) accepts, such as a lone surrogate
        escape or a BOM, is parsed again as the route would. Larger bodies are parsed a piece at a
        time (``bpecore_service.body``) and validated as Python objects, as the route does.
        """
        try:
            if len(body) <= body_json.PIECE_CHARS:
                try:
                    return self.model.model_validate_json(body)
                except ValidationError as e:
                    if not any(err["type"] == "json_invalid" for err in e.errors()):
                        return None
            return self.model.model_validate(body_json.loads(body))
        except (ValueError, RecursionError):  # ValidationError is a ValueError
            return None


def lean(
    model: type[BaseModel],
    answer: Callable[[Any, Context], Any],
    *,
    thread_bytes: int = THREAD_BYTES,
):
    """Declare the endpoint's lean handler (see the module docstring)."""

    def mark(endpoint):
        endpoint.lean = Lean(model, answer, thread_bytes)
        return endpoint

    return mark


def lean_routes(routes) -> dict[str, APIRoute]:
    """The POST routes, by path, whose endpoint declares a lean handler (paths without parameters)."""
    return {
        r.path: r
        for r in routes
        if isinstance(r, APIRoute)
        and isinstance(getattr(r.endpoint, "lean", None), Lean)
        and "POST" in r.methods
        and "{" not in r.path
    }


def _to_json(result) -> bytes:
    return result if isinstance(result, bytes) else result.__pydantic_serializer__.to_json(result)


class LeanRoutes:
    """The ASGI layer in front of the router that runs the declared lean handlers."""

    def __init__(self, app, *, routes: dict[str, APIRoute], state) -> None:
        self.app = app
        self.routes = routes
        self.state = state
        self._large = threading.Lock()

    def _answer(self, handler: Lean, body: bytes, info: dict) -> bytes | APIError | None:
        if len(body) > SERIAL_BYTES:
            with (
                self._large
            ):  # one large body at a time: the loop has one thread to wait for, not many
                return self._answer_one(handler, body, info)
        return self._answer_one(handler, body, info)

    def _answer_one(self, handler: Lean, body: bytes, info: dict) -> bytes | APIError | None:
        req = handler.parse(body)
        if req is None:
            return None
        try:
            return _to_json(handler.answer(req, Context(self.state, info)))
        except APIError as e:
            return e

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            return await self.app(scope, receive, send)
        route = self.routes.get(scope["path"])
        if (
            route is None
            or not self.state.loaded
            or not body_json.json_content_type(scope["headers"])
        ):
            return await self.app(scope, receive, send)
        chunks = []
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client left
            chunks.append(message.get("body", b""))
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        handler: Lean = route.endpoint.lean
        info = scope.setdefault("bpesvc", {})
        if len(body) <= handler.thread_bytes:
            out = self._answer(handler, body, info)
        else:  # parse and answer off the loop, so it stays free to answer others
            out = await anyio.to_thread.run_sync(self._answer, handler, body, info)
        if out is None:
            return await self.app(scope, body_json.replay(body, receive), send)
        scope["route"] = route  # the route template, for the request metrics and the log line
        if isinstance(out, APIError):
            info["error_type"] = out.type
            return await error_response(out.status, out.type, out.message)(scope, receive, send)
        await send(
            {
                "type": "http.response.start",
                "status": 200,
                "headers": [
                    (b"content-length", b"%d" % len(out)),
                    (b"content-type", b"application/json"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": out})

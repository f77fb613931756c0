"""Dependencies shared by the routes: readiness gate, encoding lookup, op timing for metrics and logs."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Annotated, Iterator

from fastapi import Depends, Request, Response
from pydantic import BaseModel

from bpecore import Encoding
from service.config import Settings
from service.errors import APIError, not_found_encoding


class Context:
    """What a route needs: the settings, the loaded encodings, and a way to record what it did."""

    def __init__(self, request: Request) -> None:
        state = request.app.state
        self.request = request
        self.settings: Settings = state.settings
        self.encodings: dict[str, Encoding] = state.encodings
        self.metrics = state.metrics
        self.info: dict = request.scope.setdefault("bpesvc", {})

    def encoding(self, name: str | None) -> Encoding:
        """The loaded encoding called ``name`` (default encoding for None), else 404."""
        if name is None:
            name = self.settings.default_encoding
        enc = self.encodings.get(name)
        if enc is None:
            raise not_found_encoding(name, sorted(self.encodings))
        return enc

    def check_max(self, what: str, value: int, limit: int) -> None:
        if value > limit:
            raise APIError(422, "limit_exceeded", f"{what} is {value}, above the server limit of {limit}")

    @contextmanager
    def op(self, op: str, enc: Encoding, nbytes: int) -> Iterator[dict]:
        """Time a library call; the caller sets ``rec["tokens"]``. Feeds metrics and the log line."""
        rec = {"tokens": 0}
        t0 = time.perf_counter()
        yield rec
        seconds = time.perf_counter() - t0
        self.metrics.observe_op(op, enc.name, nbytes, rec["tokens"], seconds)
        info = self.info
        info["op"] = op
        info["encoding"] = enc.name if "encoding" not in info or info["encoding"] == enc.name else "multiple"
        info["bytes"] = info.get("bytes", 0) + nbytes
        info["tokens"] = info.get("tokens", 0) + rec["tokens"]


async def get_context(request: Request) -> Context:
    """Async on purpose: a sync dependency would cost a threadpool hop per request."""
    state = request.app.state
    # Draining servers still answer: requests that arrive before the balancer notices are served.
    if not state.loaded:
        if state.load_error:
            raise APIError(503, "not_ready", f"encodings failed to load: {state.load_error}")
        raise APIError(503, "not_ready", "encodings are still loading")
    return Context(request)


Ctx = Annotated[Context, Depends(get_context)]


def reply(model: BaseModel) -> Response:
    """Serialize ``model`` here, in the endpoint's thread: returning a Response skips FastAPI's own
    response-model pass (another threadpool hop and a second validation of a model we just built)."""
    return Response(model.__pydantic_serializer__.to_json(model), media_type="application/json")


def utf8_len(text: str) -> int:
    """UTF-8 length of a (surrogate-free) str without encoding it when it is ASCII."""
    return len(text) if text.isascii() else len(text.encode("utf-8"))

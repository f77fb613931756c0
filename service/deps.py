"""Dependencies shared by the routes: readiness gate, encoding lookup, op timing for metrics and logs."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated

from fastapi import Depends, Request, Response
from pydantic import BaseModel

from bpecore import Encoding
from bpecore_service.body import text_and_size
from bpecore_service.config import Settings
from bpecore_service.errors import APIError, not_found_encoding


class Context:
    """What a route needs: the settings, the loaded encodings, and a way to record what it did."""

    def __init__(self, state, info: dict) -> None:
        self.settings: Settings = state.settings
        self.encodings: dict[str, Encoding] = state.encodings
        self.metrics = state.metrics
        self.info = info  # the request's log fields (``scope["bpesvc"]``)

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
            raise APIError(
                422, "limit_exceeded", f"{what} is {value}, above the server limit of {limit}"
            )

    @contextmanager
    def op(self, op: str, enc: Encoding, nbytes: int) -> Iterator[dict]:
        """Time a library call; the caller sets ``rec["tokens"]``. Feeds metrics and the log line."""
        rec = {"tokens": 0}
        t0 = time.perf_counter()
        yield rec
        self.record(op, enc.name, nbytes, rec["tokens"], time.perf_counter() - t0)

    def record(self, op: str, name: str, nbytes: int, tokens: int, seconds: float) -> None:
        """Record one library call (what ``op`` does, for callers that time it themselves)."""
        self.metrics.observe_op(op, name, nbytes, tokens, seconds)
        info = self.info
        info["op"] = op
        info["encoding"] = (
            name if "encoding" not in info or info["encoding"] == name else "multiple"
        )
        info["bytes"] = info.get("bytes", 0) + nbytes
        info["tokens"] = info.get("tokens", 0) + tokens


async def get_context(request: Request) -> Context:
    """Async on purpose: a sync dependency would cost a threadpool hop per request."""
    state = request.app.state
    # Draining servers still answer: requests that arrive before the balancer notices are served.
    if not state.loaded:
        if state.load_error:
            raise APIError(503, "not_ready", f"encodings failed to load: {state.load_error}")
        raise APIError(503, "not_ready", "encodings are still loading")
    return Context(state, request.scope.setdefault("bpesvc", {}))


Ctx = Annotated[Context, Depends(get_context)]


def reply(model: BaseModel) -> Response:
    """Serialize ``model`` here, in the endpoint's thread: returning a Response skips FastAPI's own
    response-model pass (another threadpool hop and a second validation of a model we just built)."""
    return Response(model.__pydantic_serializer__.to_json(model), media_type="application/json")


def utf8_len(text: str) -> int:
    """UTF-8 length of a (surrogate-free) str without encoding it when it is ASCII; a long text is
    encoded a piece at a time (``bpecore_service.body``), so the GIL is never held for long."""
    return len(text) if text.isascii() else text_and_size(text)[1]

"""A client for the bpecore HTTP service, with the library's names (needs the ``client`` extra).

    from bpecore.client import Client
    with Client("http://127.0.0.1:8000") as c:
        c.count("hello world")                    # 2
        c.split_at(text, 100)                     # the cut, a character offset
        with c.stream() as s:                     # an appending counter over the WebSocket
            s.push("hello"); s.push(" world")     # 1, then 2

``AsyncClient`` has the same methods as coroutines (``await c.count(...)``, ``async with
c.stream() as s: await s.push(...)``). Every method takes ``encoding=`` (default: the client's
``encoding``, else the server's default). A refused request raises ``ServiceError`` carrying the
service's error ``type`` and ``message`` and the HTTP ``status``. 429 and 503 answers (busy, still
loading, draining) are retried up to ``retries`` times, waiting what ``Retry-After`` says, capped at
``max_retry_wait`` seconds (exponential backoff from ``backoff`` without the header), plus up to
25% at random so that clients refused together spread out; so are connection failures, where the
request never reached the server.

httpx is imported here only, never by ``import bpecore``; the WebSocket counter also needs
``websockets``.
"""

from __future__ import annotations

import asyncio
import email.utils
import json
import random
import time
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import httpx

from bpecore.chunker import Chunk

__all__ = ["AsyncClient", "AsyncStreamCounter", "Client", "ServiceError", "StreamCounter"]

RETRY_STATUSES = frozenset({429, 503})
RETRY_JITTER = 0.25
DEFAULT_TIMEOUT = 30.0


class ServiceError(Exception):
    """An error answer of the service: ``status`` (HTTP), ``type`` (stable, machine-readable, such
    as ``encoding_not_found``), ``message`` (for humans) and the server's ``request_id``."""

    def __init__(self, status: int, type: str, message: str, request_id: str | None = None) -> None:
        super().__init__(f"{status} {type}: {message}")
        self.status = status
        self.type = type
        self.message = message
        self.request_id = request_id


def _error_from(status: int, body: bytes, request_id: str | None = None) -> ServiceError:
    """The ``ServiceError`` of an error answer: the service's ``{"error": {...}}``, or for any other
    body (a proxy's page) type ``http_error`` with the start of the body as the message."""
    try:
        err = json.loads(body)["error"]
        return ServiceError(
            int(err.get("code", status)), str(err["type"]), str(err["message"]), request_id
        )
    except (ValueError, KeyError, TypeError):
        text = body[:200].decode("utf-8", "replace").strip() or "no body"
        return ServiceError(status, "http_error", text, request_id)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait from a ``Retry-After`` header: delta-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(when.timestamp() - time.time(), 0.0)


def _ws_url(base_url: str, encoding: str | None, limit: int | None) -> str:
    url = httpx.URL(base_url.rstrip("/") + "/v1/stream")
    url = url.copy_with(scheme={"https": "wss", "http": "ws"}.get(url.scheme, url.scheme))
    params = {}
    if encoding is not None:
        params["encoding"] = encoding
    if limit is not None:
        params["limit"] = str(limit)
    return str(url.copy_merge_params(params))


def _chunks(body: dict) -> list[Chunk]:
    return [Chunk(c["start"], c["end"], c["text"], c["tokens"]) for c in body["chunks"]]


class _Methods:
    """The service's operations under the library's names. Each builds its request and the
    function that reads the answer, and hands both to ``_call`` (blocking or a coroutine)."""

    encoding: str | None

    def _call(self, path: str, payload: dict | None, read: Callable[[Any], Any]) -> Any:
        raise NotImplementedError

    def _enc(self, encoding: str | None) -> dict:
        name = encoding if encoding is not None else self.encoding
        return {} if name is None else {"encoding": name}

    def count(self, text: str, *, encoding: str | None = None) -> Any:
        """Tokens in ``text`` (``Encoding.count``)."""
        return self._call("/v1/count", {"text": text, **self._enc(encoding)}, lambda b: b["count"])

    def count_batch(self, texts: Sequence[str], *, encoding: str | None = None) -> Any:
        """Tokens in each of ``texts``, in one request."""
        return self._call(
            "/v1/count", {"texts": list(texts), **self._enc(encoding)}, lambda b: b["counts"]
        )

    def count_till_limit(self, text: str, limit: int, *, encoding: str | None = None) -> Any:
        """``count(text)`` if it is at most ``limit``, else ``None`` (``Encoding.count_till_limit``)."""
        return self._call(
            "/v1/count",
            {"text": text, "limit": limit, **self._enc(encoding)},
            lambda b: b["count"] if b["within_limit"] else None,
        )

    def encode(
        self,
        text: str,
        *,
        allowed_special: Iterable[str] | str = (),
        disallowed_special: Iterable[str] | str = "all",
        encoding: str | None = None,
    ) -> Any:
        """Token ids of ``text``, with tiktoken's special-token rules (``Encoding.encode``)."""
        payload = {
            "text": text,
            "allowed_special": allowed_special
            if allowed_special == "all"
            else list(allowed_special),
            "disallowed_special": disallowed_special
            if disallowed_special == "all"
            else list(disallowed_special),
            **self._enc(encoding),
        }
        return self._call("/v1/encode", payload, lambda b: b["tokens"])

    def decode(self, tokens: Sequence[int], *, encoding: str | None = None) -> Any:
        """The text of ``tokens``, invalid UTF-8 replaced (``Encoding.decode``)."""
        return self._call(
            "/v1/decode", {"tokens": list(tokens), **self._enc(encoding)}, lambda b: b["text"]
        )

    def split_at(self, text: str, n: int, *, encoding: str | None = None) -> Any:
        """The largest character offset ``k`` with ``count(text[:k]) <= n``."""
        return self._call(
            "/v1/split",
            {"text": text, "max_tokens": n, "keep": "head", **self._enc(encoding)},
            lambda b: b["offset"],
        )

    def split_at_end(self, text: str, n: int, *, encoding: str | None = None) -> Any:
        """The smallest character offset ``k`` with ``count(text[k:]) <= n``."""
        return self._call(
            "/v1/split",
            {"text": text, "max_tokens": n, "keep": "tail", **self._enc(encoding)},
            lambda b: b["offset"],
        )

    def count_intervals(
        self, text: str, ranges: Iterable[tuple[int, int]], *, encoding: str | None = None
    ) -> Any:
        """``count(text[a:b])`` for each ``(a, b)`` in ``ranges`` (``IntervalCounter.count``)."""
        return self._call(
            "/v1/intervals",
            {"text": text, "ranges": [[a, b] for a, b in ranges], **self._enc(encoding)},
            lambda b: b["counts"],
        )

    def chunk(
        self,
        text: str,
        max_tokens: int,
        overlap: int = 0,
        *,
        trim: bool = True,
        markdown: bool = False,
        language: str | None = None,
        balance: bool = False,
        encoding: str | None = None,
    ) -> Any:
        """Token-exact chunks of ``text`` as ``bpecore.Chunk`` (``bpecore.chunk``)."""
        payload = {
            "text": text,
            "max_tokens": max_tokens,
            "overlap": overlap,
            "trim": trim,
            "markdown": markdown,
            **({"language": language} if language is not None else {}),
            **({"balance": True} if balance else {}),
            **self._enc(encoding),
        }
        return self._call("/v1/chunk", payload, _chunks)

    def count_messages(
        self, messages: Sequence[dict], model: str = "gpt-4o", tools: Sequence[dict] | None = None
    ) -> Any:
        """Prompt tokens of OpenAI-style chat messages for ``model`` (``bpecore.count_messages``)."""
        payload: dict = {"messages": list(messages), "model": model}
        if tools is not None:
            payload["tools"] = list(tools)
        return self._call("/v1/chat/count", payload, lambda b: b["count"])

    def encodings(self) -> Any:
        """The server's encodings: name, n_vocab, special_tokens, pattern, vocab_sha256, default."""
        return self._call("/v1/encodings", None, lambda b: b["data"])


class _Base(_Methods):
    def __init__(
        self,
        base_url: str,
        *,
        encoding: str | None,
        timeout: float | httpx.Timeout,
        retries: int,
        max_retry_wait: float,
        backoff: float,
        headers: dict[str, str] | None,
    ) -> None:
        if retries < 0:
            raise ValueError(f"retries must be >= 0, not {retries}")
        self.base_url = base_url.rstrip("/")
        self.encoding = encoding
        self.timeout = timeout
        self.retries = retries
        self.max_retry_wait = max_retry_wait
        self.backoff = backoff
        self.headers = dict(headers or {})

    def _wait(self, attempt: int, response: httpx.Response | None) -> float:
        """Seconds before retry number ``attempt + 1``: the server's Retry-After, else backoff."""
        after = _retry_after(response.headers.get("retry-after")) if response is not None else None
        if after is None:
            after = self.backoff * 2**attempt
        # up to a quarter more, at random: clients refused together do not all come back together
        return min(after * (1 + random.random() * RETRY_JITTER), self.max_retry_wait)

    def _request(self, path: str, payload: dict | None) -> httpx.Request:
        method = "GET" if payload is None else "POST"
        return self._http.build_request(method, path, json=payload)

    @staticmethod
    def _read(response: httpx.Response, read: Callable[[Any], Any]) -> Any:
        if response.status_code >= 400:
            raise _error_from(
                response.status_code, response.content, response.headers.get("x-request-id")
            )
        return read(response.json())

    def _retryable(self, attempt: int, response: httpx.Response | None) -> bool:
        return attempt < self.retries and (
            response is None or response.status_code in RETRY_STATUSES
        )


class Client(_Base):
    """A blocking client of the service at ``base_url`` (``http://host:port``).

    Args:
        encoding: default encoding for every call (None: the server's default).
        timeout: seconds for connecting, sending and reading (or an ``httpx.Timeout``).
        retries: retries of a 429 or 503 answer or of a failed connection (0: none).
        max_retry_wait: the longest wait before one retry, whatever ``Retry-After`` says.
        backoff: first wait when the answer has no ``Retry-After`` (doubles each retry).
        headers: sent with every request (``Authorization``, ``X-Request-ID``).
        transport: an ``httpx`` transport, to reuse or instrument connections.
    """

    def __init__(
        self,
        base_url: str,
        *,
        encoding: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: int = 3,
        max_retry_wait: float = 30.0,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            encoding=encoding,
            timeout=timeout,
            retries=retries,
            max_retry_wait=max_retry_wait,
            backoff=backoff,
            headers=headers,
        )
        self._http = httpx.Client(
            base_url=self.base_url, timeout=timeout, headers=self.headers, transport=transport
        )

    def _call(self, path: str, payload: dict | None, read: Callable[[Any], Any]) -> Any:
        attempt = 0
        while True:
            response = None
            try:
                response = self._http.send(self._request(path, payload))
            except httpx.ConnectError:
                if not self._retryable(attempt, None):
                    raise
            if response is not None and not self._retryable(attempt, response):
                return self._read(response, read)
            time.sleep(self._wait(attempt, response))
            attempt += 1

    def stream(self, *, encoding: str | None = None, limit: int | None = None) -> StreamCounter:
        """An appending token counter over the service's WebSocket (``/v1/stream``)."""
        name = encoding if encoding is not None else self.encoding
        return StreamCounter(_ws_url(self.base_url, name, limit), self.timeout, self.headers)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncClient(_Base):
    """``Client`` for asyncio: the same arguments, and every method is a coroutine."""

    def __init__(
        self,
        base_url: str,
        *,
        encoding: str | None = None,
        timeout: float | httpx.Timeout = DEFAULT_TIMEOUT,
        retries: int = 3,
        max_retry_wait: float = 30.0,
        backoff: float = 0.5,
        headers: dict[str, str] | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        super().__init__(
            base_url,
            encoding=encoding,
            timeout=timeout,
            retries=retries,
            max_retry_wait=max_retry_wait,
            backoff=backoff,
            headers=headers,
        )
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=timeout, headers=self.headers, transport=transport
        )

    async def _call(self, path: str, payload: dict | None, read: Callable[[Any], Any]) -> Any:
        attempt = 0
        while True:
            response = None
            try:
                response = await self._http.send(self._request(path, payload))
            except httpx.ConnectError:
                if not self._retryable(attempt, None):
                    raise
            if response is not None and not self._retryable(attempt, response):
                return self._read(response, read)
            await asyncio.sleep(self._wait(attempt, response))
            attempt += 1

    def stream(
        self, *, encoding: str | None = None, limit: int | None = None
    ) -> AsyncStreamCounter:
        """An appending token counter over the service's WebSocket (``/v1/stream``)."""
        name = encoding if encoding is not None else self.encoding
        return AsyncStreamCounter(_ws_url(self.base_url, name, limit), self.timeout, self.headers)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


# ----------------------------------------------------------------------------- WebSocket counter
def _seconds(timeout: float | httpx.Timeout) -> float | None:
    return timeout.read if isinstance(timeout, httpx.Timeout) else timeout


def _refusal(exc: Exception) -> ServiceError | None:
    """The ``ServiceError`` of a handshake the server refused with an HTTP error answer."""
    response = getattr(exc, "response", None)
    if response is None or not hasattr(response, "status_code"):
        return None
    return _error_from(response.status_code, response.body or b"")


class _StreamState:
    url: str
    count: int = 0
    bytes: int = 0
    frames: int = 0
    within_limit: bool | None = None

    def _answer(self, raw: str | bytes) -> int:
        body = json.loads(raw)
        if "error" in body:
            err = body["error"]
            raise ServiceError(int(err["code"]), err["type"], err["message"])
        self.count = body["count"]
        self.bytes = body["bytes"]
        self.frames = body["frames"]
        self.within_limit = body["within_limit"]
        return self.count


class StreamCounter(_StreamState):
    """The exact token count of everything pushed so far, kept by the server
    (``Encoding.appendable_counter`` over ``/v1/stream``). Use as a context manager.

    ``push(data)`` appends text (or raw UTF-8 bytes, which may end inside a character) and returns
    the count; ``count``, ``bytes``, ``frames`` and ``within_limit`` hold the last answer."""

    def __init__(self, url: str, timeout: float | httpx.Timeout, headers: dict[str, str]) -> None:
        self.url = url
        self._timeout = _seconds(timeout)
        self._headers = headers
        self._ws = None

    def open(self) -> StreamCounter:
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        try:
            # entered at once: a connection kept open across calls, closed by close()
            self._ws = connect(
                self.url, open_timeout=self._timeout, additional_headers=self._headers or None
            ).__enter__()
        except InvalidStatus as e:
            raise _refusal(e) or e from None
        return self

    def push(self, data: str | bytes) -> int:
        if self._ws is None:
            self.open()
        from websockets.exceptions import ConnectionClosed

        try:
            self._ws.send(data)
            return self._answer(self._ws.recv(timeout=self._timeout))
        except ConnectionClosed as e:
            raise ServiceError(0, "stream_closed", f"the server closed the stream ({e})") from None

    def close(self) -> None:
        if self._ws is not None:
            self._ws.close()
            self._ws = None

    def __enter__(self) -> StreamCounter:
        return self.open()

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncStreamCounter(_StreamState):
    """``StreamCounter`` for asyncio: ``async with``, ``await push(data)``."""

    def __init__(self, url: str, timeout: float | httpx.Timeout, headers: dict[str, str]) -> None:
        self.url = url
        self._timeout = _seconds(timeout)
        self._headers = headers
        self._ws = None

    async def open(self) -> AsyncStreamCounter:
        from websockets.asyncio.client import connect
        from websockets.exceptions import InvalidStatus

        try:
            self._ws = await connect(
                self.url, open_timeout=self._timeout, additional_headers=self._headers or None
            )
        except InvalidStatus as e:
            raise _refusal(e) or e from None
        return self

    async def push(self, data: str | bytes) -> int:
        if self._ws is None:
            await self.open()
        from websockets.exceptions import ConnectionClosed

        try:
            await self._ws.send(data)
            return self._answer(await asyncio.wait_for(self._ws.recv(), self._timeout))
        except ConnectionClosed as e:
            raise ServiceError(0, "stream_closed", f"the server closed the stream ({e})") from None

    async def aclose(self) -> None:
        if self._ws is not None:
            await self._ws.close()
            self._ws = None

    async def __aenter__(self) -> AsyncStreamCounter:
        return await self.open()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

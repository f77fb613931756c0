"""Limits on the request head that uvicorn's httptools protocol lacks, and its start-up exit code.

httptools buffers a request line or header of any size (300 MB of one header grew the worker by
~370 MB) and waits forever for a head that never ends (slowloris). Installed from the lifespan,
this adds to ``HttpToolsProtocol``:

* ``max_header_bytes``: a request head (request line, headers and the blank line that ends them)
  may be this many bytes. While a head is open the parser is fed at most the bytes the limit still
  allows, so a head of ``max_header_bytes + 1`` bytes is refused when its last allowed byte has
  been read and the head is still open: 431 and the connection closes, whatever the read sizes
  (after the responses of the requests pipelined before it, if they are still being written). A
  head pipelined behind a request *body* inside the same read is counted from the next read on;
* ``header_timeout``: a new connection must start a request, and a started request must finish its
  head, within this many seconds; else 408 (or a silent close if nothing came) and the connection
  closes. Idle keep-alive connections are uvicorn's own ``--timeout-keep-alive``;
* a request the parser refuses (malformed, or a URL httptools cannot parse) gets the JSON error
  body with 400 instead of uvicorn's plain-text one.

uvicorn's CLI resolves ``--http`` to a class before it imports the app, so a subclass cannot be
chosen from the Dockerfile's CMD; the methods are wrapped on the class instead, once per process.
The h11 protocol has its own head limit (``--h11-max-incomplete-event-size``) and is not wrapped.
The request *body* has its own limits in the middleware (``max_request_bytes``, ``body_timeout``).

``watch_listen`` tells a failure to listen apart from the other start-up failures: uvicorn exits 3
for all of them, and 3 is the service's code for encodings that failed to load.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from bpecore_service.errors import error_body

LIMITS = {"max_header_bytes": 64 * 1024, "header_timeout": 10.0}
_installed = False


def _respond(proto, status: int, reason: bytes, type_: str, message: str) -> None:
    body = json.dumps(error_body(status, type_, message)).encode()
    proto.transport.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % (status, reason, len(body))
        + body
    )
    proto.transport.close()


def _reject(proto, status: int, reason: bytes, type_: str, message: str) -> None:
    if getattr(proto, "_bpesvc_refusal", None) is not None:
        return  # already refused, waiting for the earlier responses
    if proto.cycle is not None and not proto.cycle.response_complete:
        # An earlier request's response is still being written: stop reading and refuse once the
        # responses before this one are out (on_response_complete), so the client gets them all.
        proto._bpesvc_refusal = (status, reason, type_, message)
        proto.flow.pause_reading()
        return
    _respond(proto, status, reason, type_, message)


def _too_large(proto) -> None:
    _disarm(proto)
    _reject(
        proto,
        431,
        b"Request Header Fields Too Large",
        "headers_too_large",
        f"request line and headers exceed {LIMITS['max_header_bytes']} bytes",
    )


def _arm(proto) -> None:
    timer = getattr(proto, "_bpesvc_timer", None)
    if timer is not None:
        timer.cancel()
    proto._bpesvc_timer = proto.loop.call_later(LIMITS["header_timeout"], _timed_out, proto)


def _disarm(proto) -> None:
    timer = getattr(proto, "_bpesvc_timer", None)
    if timer is not None:
        timer.cancel()
        proto._bpesvc_timer = None


def _timed_out(proto) -> None:
    proto._bpesvc_timer = None
    if not proto._bpesvc_in_head or proto.transport.is_closing():
        return
    if proto._bpesvc_head_bytes == 0 and not proto._bpesvc_started:
        proto.transport.close()  # connected and said nothing
        return
    _reject(
        proto,
        408,
        b"Request Timeout",
        "request_timeout",
        f"request head not received within {LIMITS['header_timeout']:g} s",
    )


def install(max_header_bytes: int, header_timeout: float) -> bool:
    """Wrap HttpToolsProtocol (once; later calls only update the limits). False without httptools."""
    global _installed
    LIMITS.update(max_header_bytes=max_header_bytes, header_timeout=header_timeout)
    if _installed:
        return True
    try:
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as cls
    except ImportError:
        return False
    orig = {
        name: getattr(cls, name)
        for name in (
            "connection_made",
            "connection_lost",
            "data_received",
            "on_message_begin",
            "on_headers_complete",
            "on_message_complete",
            "on_response_complete",
        )
    }

    def connection_made(self, transport) -> None:
        orig["connection_made"](self, transport)
        self._bpesvc_in_head = True  # bytes read now belong to a request head
        self._bpesvc_started = False
        self._bpesvc_head_bytes = 0  # bytes of the open head fed to the parser
        self._bpesvc_heads = 0  # heads begun after the first: a feed that began one is not counted
        _arm(self)

    def connection_lost(self, exc) -> None:
        _disarm(self)
        orig["connection_lost"](self, exc)

    def on_message_begin(self) -> None:
        orig["on_message_begin"](self)
        self._bpesvc_started = True
        _arm(self)

    def on_headers_complete(self) -> None:
        self._bpesvc_in_head = False
        _disarm(self)
        orig["on_headers_complete"](self)

    def on_message_complete(self) -> None:
        orig["on_message_complete"](self)
        self._bpesvc_in_head = True
        self._bpesvc_head_bytes = 0
        self._bpesvc_heads += 1

    def on_response_complete(self) -> None:
        refusal = getattr(self, "_bpesvc_refusal", None)
        if refusal is not None and not self.pipeline:
            self._bpesvc_refusal = None
            self.server_state.total_requests += 1
            if not self.transport.is_closing():
                _respond(self, *refusal)
            return
        orig["on_response_complete"](self)
        if refusal is not None:
            self.flow.pause_reading()  # the next pipelined request runs; still read nothing

    def data_received(self, data: bytes) -> None:
        if getattr(self, "_bpesvc_refusal", None) is not None:
            return  # refused: what follows the refused head is not read
        # While a head is open, feed the parser no more than the limit allows (and no further than
        # the blank line that ends the head, so that a head pipelined behind a bodiless request is
        # counted from its first byte): if the head is still open once it has had every byte the
        # limit allows, it is longer than the limit.
        pos, n = 0, len(data)
        while self._bpesvc_in_head and not self.transport.is_closing():
            room = LIMITS["max_header_bytes"] - self._bpesvc_head_bytes
            if room <= 0:
                _too_large(self)
                return
            end = data.find(b"\r\n\r\n", pos, pos + room)
            cut = end + 4 if end >= 0 else min(n, pos + room)
            heads = self._bpesvc_heads
            orig["data_received"](
                self, data if pos == 0 and cut == n else memoryview(data)[pos:cut]
            )
            if self.transport.is_closing():
                return
            if self._bpesvc_in_head and self._bpesvc_heads == heads:
                self._bpesvc_head_bytes += cut - pos
            pos = cut
            if pos == n:
                if self._bpesvc_in_head and self._bpesvc_head_bytes >= LIMITS["max_header_bytes"]:
                    _too_large(self)  # every allowed byte read, and the head goes on
                return
        if pos < n and not self.transport.is_closing():
            rest = data if pos == 0 else memoryview(data)[pos:]
            proto = self.transport.get_protocol()  # a WebSocket upgrade hands the connection over
            if proto is self:
                orig["data_received"](self, rest)
            else:
                proto.data_received(bytes(rest))

    def send_400_response(self, msg: str) -> None:
        _respond(self, 400, b"Bad Request", "bad_request", msg)

    cls.connection_made = connection_made
    cls.connection_lost = connection_lost
    cls.on_message_begin = on_message_begin
    cls.on_headers_complete = on_headers_complete
    cls.on_message_complete = on_message_complete
    cls.on_response_complete = on_response_complete
    cls.data_received = data_received
    cls.send_400_response = send_400_response
    _installed = True
    return True


class _ListenFailure(logging.Filter):
    """Sees uvicorn's bind failure: it logs the ``OSError`` itself to ``uvicorn.error`` (and then
    shuts the lifespan down and exits with its start-up code). Once uvicorn says it is running,
    nothing it logs later counts."""

    def __init__(self, on_failure: Callable[[OSError], None]) -> None:
        super().__init__()
        self.on_failure = on_failure
        self.listening = False

    def filter(self, record: logging.LogRecord) -> bool:
        if self.listening:
            return True
        if isinstance(record.msg, OSError):
            self.on_failure(record.msg)
        elif isinstance(record.msg, str) and record.msg.startswith("Uvicorn running on"):
            self.listening = True
        return True


def watch_listen(on_failure: Callable[[OSError], None]) -> Callable[[], None]:
    """Call ``on_failure(error)`` if the server cannot listen on its address; returns the undo."""
    logger = logging.getLogger("uvicorn.error")
    watcher = _ListenFailure(on_failure)
    logger.addFilter(watcher)
    return lambda: logger.removeFilter(watcher)

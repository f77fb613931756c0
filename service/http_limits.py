"""Limits on the request head that uvicorn's httptools protocol lacks.

httptools buffers a request line or header of any size (300 MB of one header grew the worker by
~370 MB) and waits forever for a head that never ends (slowloris). Installed from the lifespan,
this adds to ``HttpToolsProtocol``:

* ``max_header_bytes``: once the bytes of one request head (request line and headers) pass it, the
  answer is 431 and the connection closes; the buffer is bounded by the limit plus one read;
* ``header_timeout``: a new connection must start a request, and a started request must finish its
  head, within this many seconds; else 408 (or a silent close if nothing came) and the connection
  closes. Idle keep-alive connections are uvicorn's own ``--timeout-keep-alive``.

uvicorn's CLI resolves ``--http`` to a class before it imports the app, so a subclass cannot be
chosen from the Dockerfile's CMD; the methods are wrapped on the class instead, once per process.
The h11 protocol has its own head limit (``--h11-max-incomplete-event-size``) and is not wrapped.
The request *body* has its own limits in the middleware (``max_request_bytes``, ``body_timeout``).
"""

from __future__ import annotations

import json

from bpecore_service.errors import error_body

LIMITS = {"max_header_bytes": 64 * 1024, "header_timeout": 10.0}
_installed = False


def _reject(proto, status: int, reason: bytes, type_: str, message: str) -> None:
    if proto.cycle is not None and not proto.cycle.response_complete:
        proto.transport.close()  # a pipelined earlier response is still being written: just close
        return
    body = json.dumps(error_body(status, type_, message)).encode()
    proto.transport.write(
        b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
        % (status, reason, len(body))
        + body
    )
    proto.transport.close()


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
        )
    }

    def connection_made(self, transport) -> None:
        orig["connection_made"](self, transport)
        self._bpesvc_in_head = True
        self._bpesvc_started = False
        self._bpesvc_head_bytes = 0
        _arm(self)

    def connection_lost(self, exc) -> None:
        _disarm(self)
        orig["connection_lost"](self, exc)

    def on_message_begin(self) -> None:
        orig["on_message_begin"](self)
        self._bpesvc_in_head = True
        self._bpesvc_started = True
        self._bpesvc_head_bytes = 0
        _arm(self)

    def on_headers_complete(self) -> None:
        self._bpesvc_in_head = False
        _disarm(self)
        orig["on_headers_complete"](self)

    def data_received(self, data: bytes) -> None:
        orig["data_received"](self, data)
        if self._bpesvc_in_head and self._bpesvc_started and not self.transport.is_closing():
            self._bpesvc_head_bytes += len(data)
            if self._bpesvc_head_bytes > LIMITS["max_header_bytes"]:
                _disarm(self)
                _reject(
                    self,
                    431,
                    b"Request Header Fields Too Large",
                    "headers_too_large",
                    f"request line and headers exceed {LIMITS['max_header_bytes']} bytes",
                )

    cls.connection_made = connection_made
    cls.connection_lost = connection_lost
    cls.on_message_begin = on_message_begin
    cls.on_headers_complete = on_headers_complete
    cls.data_received = data_received
    _installed = True
    return True

"""Prometheus metrics, one registry per app (so tests can build many apps in one process).

Request metrics (``bpesvc_requests_total``, ``bpesvc_request_seconds``) are labelled by route
template, never by raw path; /healthz, /readyz and /metrics are left out of them. Domain metrics:
``bpesvc_tokens_total{encoding,op}``, ``bpesvc_bytes_total{encoding,op}``,
``bpesvc_request_bytes{op}`` (histogram of input sizes) and ``bpesvc_op_seconds{op}``.
One uvicorn worker per container: no multiprocess mode.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.exposition import CONTENT_TYPE_LATEST

EXCLUDED_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
_SIZE_BUCKETS = (64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216)

CONTENT_TYPE = CONTENT_TYPE_LATEST

# `*_created` series double the output and nothing here reads them.
disable_created_metrics()


class Metrics:
    """The app's collectors; ``observe_op`` records one library operation."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "bpesvc_requests",
            "HTTP requests by route template, method and status.",
            ["route", "method", "status"],
            registry=r,
        )
        self.request_seconds = Histogram(
            "bpesvc_request_seconds",
            "HTTP request latency by route template.",
            ["route", "method"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.inflight = Gauge("bpesvc_requests_inflight", "HTTP requests in progress.", registry=r)
        self.tokens = Counter(
            "bpesvc_tokens",
            "Tokens produced or counted, by encoding and operation.",
            ["encoding", "op"],
            registry=r,
        )
        self.bytes = Counter(
            "bpesvc_bytes",
            "UTF-8 bytes of input text, by encoding and operation.",
            ["encoding", "op"],
            registry=r,
        )
        self.request_bytes = Histogram(
            "bpesvc_request_bytes",
            "UTF-8 bytes of input text per operation call.",
            ["op"],
            buckets=_SIZE_BUCKETS,
            registry=r,
        )
        self.op_seconds = Histogram(
            "bpesvc_op_seconds",
            "Time spent in the library per operation call.",
            ["op"],
            buckets=_LATENCY_BUCKETS,
            registry=r,
        )
        self.errors = Counter(
            "bpesvc_errors", "Error responses by error type.", ["type"], registry=r
        )
        self.streams_open = Gauge("bpesvc_streams_open", "WebSocket streams open.", registry=r)
        self.ready = Gauge(
            "bpesvc_ready",
            "1 when every configured encoding is loaded and not draining.",
            registry=r,
        )
        self.encodings_loaded = Gauge(
            "bpesvc_encodings_loaded", "Encodings loaded (an alias is not one more).", registry=r
        )
        self.load_seconds = Gauge(
            "bpesvc_load_seconds", "Seconds the start-up vocab load took.", registry=r
        )

        # labelled children, cached: ``labels()`` costs more than the increment
        self._op_children: dict[tuple[str, str], tuple] = {}
        self._request_children: dict[tuple[str, str, int], tuple] = {}

    def observe_op(self, op: str, encoding: str, nbytes: int, tokens: int, seconds: float) -> None:
        children = self._op_children.get((op, encoding))
        if children is None:
            children = self._op_children[(op, encoding)] = (
                self.tokens.labels(encoding, op),
                self.bytes.labels(encoding, op),
                self.request_bytes.labels(op),
                self.op_seconds.labels(op),
            )
        tokens_c, bytes_c, size_h, seconds_h = children
        tokens_c.inc(tokens)
        bytes_c.inc(nbytes)
        size_h.observe(nbytes)
        seconds_h.observe(seconds)

    def observe_request(self, route: str, method: str, status: int, seconds: float) -> None:
        children = self._request_children.get((route, method, status))
        if children is None:
            children = self._request_children[(route, method, status)] = (
                self.requests.labels(route, method, str(status)),
                self.request_seconds.labels(route, method),
            )
        children[0].inc()
        children[1].observe(seconds)

    def render(self) -> bytes:
        return generate_latest(self.registry)

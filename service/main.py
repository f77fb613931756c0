"""The app factory, its lifespan (load encodings, then ready) and ``run()`` for ``bpecore serve``.

Lifecycle:
1. start-up: the server starts listening at once; the configured encodings load in a thread
   (``load_in_background``), /healthz is 200, /readyz and the API are 503 until they are loaded;
   if loading fails (a missing or corrupt vocab file) the server stops and the process exits 3;
   if it cannot listen (port in use) it exits 4, and with a ``BPESVC_`` setting that does not parse,
   2 (``bpecore._exitcodes``: the ``bpecore serve`` codes);
2. SIGTERM/SIGINT: /readyz turns 503 (``draining``), open streams are closed with 1001, and after
   ``drain_seconds`` uvicorn's own handler runs: it stops accepting, lets in-flight requests finish
   and then runs the lifespan shutdown. A second signal goes straight to uvicorn.
"""

from __future__ import annotations

from bpecore_service import preload

preload.start()  # first: the vocabularies build while the imports below run

import asyncio  # noqa: E402
import gc  # noqa: E402
import logging  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from contextlib import asynccontextmanager  # noqa: E402

import anyio.to_thread  # noqa: E402
from fastapi import FastAPI  # noqa: E402

import bpecore  # noqa: E402
from bpecore import Encoding  # noqa: E402
from bpecore._exitcodes import EXIT_LISTEN, EXIT_LOAD, EXIT_USAGE  # noqa: E402
from bpecore_service.config import Settings, get_settings  # noqa: E402
from bpecore_service.docs import install as install_docs  # noqa: E402
from bpecore_service.errors import install as install_errors  # noqa: E402
from bpecore_service.http_limits import install as install_http_limits  # noqa: E402
from bpecore_service.http_limits import watch_listen  # noqa: E402
from bpecore_service.lean import LeanRoutes, lean_routes  # noqa: E402
from bpecore_service.logging import configure_logging  # noqa: E402
from bpecore_service.metrics import Metrics  # noqa: E402
from bpecore_service.middleware import ServiceMiddleware  # noqa: E402
from bpecore_service.playground import install as install_playground  # noqa: E402
from bpecore_service.schemas import ErrorResponse, with_request_examples  # noqa: E402

log = logging.getLogger("bpesvc")
EXIT_LOAD_FAILED = EXIT_LOAD  # 3, as uvicorn exits for a failed lifespan start-up


def load_encodings(settings: Settings) -> dict[str, Encoding]:
    """Every encoding the settings ask for, by name; raises (VocabError, ValueError) on a bad one."""
    from bpecore import registry
    from bpecore.patterns import resolve_pattern

    out: dict[str, Encoding] = {}
    names = settings.encodings if settings.encodings is not None else bpecore.list_encodings()
    for name in names:
        enc = registry.resolve_encoding(
            name
        )  # a name, or a vocab file's path (keyed by its encoding's name)
        out[name if name in registry.ENCODING_CONSTRUCTORS else enc.name] = enc
    for spec in settings.tiktoken_files:
        pattern = resolve_pattern(spec.pattern)
        if "pattern" not in spec.model_fields_set:
            pattern = registry._FROM_SIDECAR  # the file's sidecar, else cl100k's
        enc = bpecore.load_tiktoken(
            spec.path,
            name=spec.name,
            pattern=pattern,
            special_tokens=spec.special_tokens
            if "special_tokens" in spec.model_fields_set
            else None,
            expected_sha256=spec.sha256,
        )
        out[enc.name] = enc
    for spec in settings.hf_files:
        enc = bpecore.load_hf(spec.path, name=spec.name)
        out[enc.name] = enc
    if (
        settings.default_encoding not in out
        and settings.default_encoding not in registry.ENCODING_CONSTRUCTORS
    ):
        path = settings.default_encoding
        if os.path.exists(
            path
        ):  # a vocab file: loaded, and from now on named by its encoding's name
            enc = registry.resolve_encoding(path)
            out.setdefault(enc.name, enc)
            settings.default_encoding = enc.name
    for alias, target in settings.model_aliases.items():
        if target not in out:
            raise ValueError(
                f"model alias {alias!r} names {target!r}, which is not among the loaded {sorted(out)}"
            )
        if alias in out and out[alias] is not out[target]:
            raise ValueError(f"model alias {alias!r} would hide the loaded encoding {alias!r}")
        out[alias] = out[target]
    if settings.default_encoding not in out:
        raise ValueError(
            f"default_encoding {settings.default_encoding!r} is not among the loaded {sorted(out)}"
        )
    return out


class _Drain:
    """Chains in front of uvicorn's SIGTERM/SIGINT handlers: mark draining, close streams, then pass on."""

    def __init__(self, app: FastAPI, loop: asyncio.AbstractEventLoop) -> None:
        self.app = app
        self.loop = loop
        self.previous: dict[int, object] = {}
        self.signalled = False
        self.task: asyncio.Task | None = None

    def install(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False  # e.g. TestClient: no signals to chain
        for sig in (signal.SIGTERM, signal.SIGINT):
            self.previous[sig] = signal.signal(sig, self._handle)
        return True

    def uninstall(self) -> None:
        for sig, handler in self.previous.items():
            if signal.getsignal(sig) == self._handle:
                signal.signal(sig, handler)
        self.previous.clear()

    def _pass_on(self, sig: int, frame) -> None:
        handler = self.previous.get(sig)
        if callable(handler):
            handler(sig, frame)
        elif handler == signal.SIG_DFL:
            signal.signal(sig, signal.SIG_DFL)
            signal.raise_signal(sig)

    def _handle(self, sig: int, frame) -> None:
        if self.signalled:
            self._pass_on(sig, frame)
            return
        self.signalled = True
        self.loop.call_soon_threadsafe(self._start, sig)

    def stop_now(self) -> None:
        """Have uvicorn stop at once (no drain), as SIGTERM would."""
        self.signalled = True
        self._pass_on(signal.SIGTERM, None)

    def _start(self, sig: int) -> None:
        self.task = asyncio.ensure_future(
            self._drain(sig)
        )  # keep a reference: the loop holds tasks weakly

    async def _drain(self, sig: int) -> None:
        start_draining(self.app)
        log.info(
            "draining",
            extra={
                "fields": {
                    "signal": signal.Signals(sig).name,
                    "drain_seconds": self.app.state.settings.drain_seconds,
                }
            },
        )
        await asyncio.sleep(self.app.state.settings.drain_seconds)
        # streams were told to close at the start of the drain; give them a moment to finish
        deadline = time.monotonic() + 2.0
        while self.app.state.streams and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        self._pass_on(sig, None)


def start_draining(app: FastAPI) -> None:
    """Readiness 503 from now on, and every open stream is asked to close (1001)."""
    state = app.state
    state.draining = True
    state.metrics.ready.set(0)
    state.drain_event.set()


@asynccontextmanager
async def lifespan(app: FastAPI):
    state = app.state
    settings: Settings = state.settings
    configure_logging(settings.log_level)
    anyio.to_thread.current_default_thread_limiter().total_tokens = settings.threadpool_size
    # The loop waits this long for the GIL from a worker thread running Python code (default 5 ms):
    # with large bodies parsed in threads, that wait is the latency of every answer the loop gives.
    sys.setswitchinterval(settings.gil_switch_seconds)
    install_http_limits(settings.max_header_bytes, settings.header_timeout)

    def cannot_listen(error: OSError) -> None:  # uvicorn would exit 3, the code for a failed load
        state.exit_code = state.exit_code or EXIT_LISTEN

    unwatch = watch_listen(cannot_listen)
    thresholds = gc.get_threshold()
    if settings.gc_threshold:
        gc.set_threshold(settings.gc_threshold, *thresholds[1:])
    # Before the encodings load: each one's piece cache table is made with its encoder.
    bpecore.set_cache_size(settings.piece_cache_bytes)
    state.drain_event = asyncio.Event()
    drain = _Drain(app, asyncio.get_running_loop())
    serving = drain.install()  # False under TestClient: no process to stop

    async def load() -> None:
        t0 = time.perf_counter()
        try:
            encodings = await anyio.to_thread.run_sync(load_encodings, settings)
        except Exception as e:  # a bad vocab file or setting: not ready, not alive
            state.load_error = f"{type(e).__name__}: {e}"
            log.error("encodings failed to load", extra={"fields": {"error": state.load_error}})
            if not settings.load_in_background:
                raise
            if (
                serving
            ):  # never serve with a missing or wrong vocab: stop, and exit non-zero (below)
                state.exit_code = EXIT_LOAD_FAILED
                log.error(
                    "stopping: encodings failed to load",
                    extra={"fields": {"exit_code": EXIT_LOAD_FAILED}},
                )
                drain.stop_now()
            return
        seconds = time.perf_counter() - t0
        state.encodings.update(encodings)
        if settings.gc_freeze:
            # The loaded encodings, modules and app are ~10^6 long-lived objects: out of the
            # collector's generations, a full collection no longer walks them while requests wait
            # (docs/perf/service.md, section 4).
            gc.freeze()
        state.loaded = True
        state.metrics.encodings_loaded.set(len({id(enc) for enc in encodings.values()}))
        state.metrics.load_seconds.set(seconds)
        if not state.draining:
            state.metrics.ready.set(1)
        log.info(
            "encodings loaded",
            extra={"fields": {"encodings": sorted(encodings), "seconds": round(seconds, 3)}},
        )

    task = None
    if settings.load_in_background:
        task = asyncio.create_task(load())
    else:
        await load()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if settings.gc_freeze:
            gc.unfreeze()  # an app made again in this process (tests) freezes its own objects
        state.draining = True
        state.metrics.ready.set(0)
        state.drain_event.set()
        if task is not None and not task.done():
            task.cancel()
        drain.uninstall()
        unwatch()
        log.info("stopped")
        if state.exit_code:  # uvicorn would exit 0 (or re-raise SIGTERM): make the failure visible
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(state.exit_code)


def create_app(settings: Settings | None = None) -> FastAPI:
    """A new app for ``settings`` (default: from the ``BPESVC_`` environment)."""
    from bpecore_service.routes import chat, chunks, compat, health, stream, tokens

    settings = settings or get_settings()
    app = FastAPI(
        title="bpecore service",
        version=bpecore.__version__,
        description="Exact BPE token counts, encodes, cuts and chunks, identical to tiktoken.",
        lifespan=lifespan,
        docs_url=None,  # /docs and /redoc: bpecore_service.docs, with their assets served here
        redoc_url=None,
        responses={
            500: {"model": ErrorResponse, "description": "A bug; the log has the request id."}
        },
    )
    state = app.state
    state.settings = settings
    state.metrics = Metrics()
    state.encodings = {}
    state.loaded = False
    state.draining = False
    state.load_error = None
    state.exit_code = 0
    state.streams = set()
    state.drain_event = asyncio.Event()
    install_errors(app)
    install_docs(app)
    install_playground(app)  # GET /: the playground page
    default_openapi = app.openapi
    app.openapi = lambda: with_request_examples(default_openapi())  # cached by FastAPI's own
    routers = [module.router for module in (health, tokens, chunks, chat, compat, stream)]
    for router in routers:
        app.include_router(router)  # no prefix: the routers' paths are the app's
    routes = lean_routes(route for router in routers for route in router.routes)
    if (
        settings.fast_path and routes
    ):  # inside ServiceMiddleware: limits, metrics and the log line apply
        app.add_middleware(LeanRoutes, routes=routes, state=state)
    app.add_middleware(ServiceMiddleware, settings=settings, metrics=state.metrics)
    return app


def settings_or_exit() -> Settings:
    """The environment's settings; a ``BPESVC_`` variable that does not parse is one line on
    stderr and exit 2 (``EXIT_USAGE``), not a traceback."""
    try:
        return get_settings()
    except ValueError as e:  # pydantic's ValidationError
        errors = e.errors() if hasattr(e, "errors") else []
        what = "; ".join(
            f"BPESVC_{str(x['loc'][0]).upper()}: {x['msg']}" for x in errors if x.get("loc")
        )
        print(f"bpecore_service: bad setting: {what or e}", file=sys.stderr, flush=True)
        raise SystemExit(EXIT_USAGE) from None


def run(host: str | None = None, port: int | None = None, workers: int | None = None) -> None:
    """Serve with uvicorn (uvloop + httptools when installed): the ``bpecore serve`` entry point."""
    import uvicorn

    settings = settings_or_exit()
    configure_logging(settings.log_level)
    if (workers if workers is not None else settings.workers) == 1:
        preload.start(from_cli_ok=True)
    uvicorn.run(
        "bpecore_service.main:app",
        host=host if host is not None else settings.host,
        port=port if port is not None else settings.port,
        workers=workers if workers is not None else settings.workers,
        loop="auto",
        http="auto",
        ws="auto",
        access_log=False,
        log_config=None,
        timeout_graceful_shutdown=30,
        proxy_headers=True,
    )


# JSON logs from the first uvicorn line on, when uvicorn imports this module (`uvicorn bpecore_service.main:app`).
configure_logging(settings_or_exit().log_level)
app = create_app()

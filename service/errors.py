"""One error shape for every failure: ``{"error": {"type", "message", "code"}}``.

Routes raise ``APIError``; the handlers here turn it, FastAPI's validation errors, Starlette's HTTP
errors and any unexpected exception into that shape. Nothing a client sends may produce a 500.
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("bpesvc")

# type names by status, for errors raised without one
_TYPES = {
    400: "bad_request",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    429: "too_many_requests",
    500: "internal_error",
    503: "not_ready",
}


class APIError(Exception):
    """An error with its HTTP status, a stable machine-readable ``type`` and a message for humans."""

    def __init__(self, status: int, type: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.type = type
        self.message = message


def not_found_encoding(name: str, known: list[str]) -> APIError:
    return APIError(
        404, "encoding_not_found", f"unknown encoding {name!r}; loaded: {', '.join(known)}"
    )


RETRY_AFTER_STATUSES = frozenset({429, 503})
RETRY_AFTER_SECONDS = "1"


def decode_bytes(enc, tokens) -> bytes:
    """``enc.decode_bytes(tokens)``, an unknown token id answered with 400 ``invalid_token``."""
    try:
        return enc.decode_bytes(tokens)
    except (ValueError, KeyError, OverflowError) as e:
        raise APIError(400, "invalid_token", str(e)) from None


def error_body(status: int, type: str, message: str) -> dict:
    return {"error": {"type": type, "message": message, "code": status}}


def error_response(
    status: int,
    type: str,
    message: str,
    headers: dict | None = None,
    request: Request | None = None,
) -> JSONResponse:
    if request is not None:
        request.scope.setdefault("bpesvc", {})["error_type"] = type
    if (
        status in RETRY_AFTER_STATUSES
    ):  # busy or not ready: tell clients (and proxies) when to come back
        headers = {"Retry-After": RETRY_AFTER_SECONDS, **(headers or {})}
    return JSONResponse(error_body(status, type, message), status_code=status, headers=headers)


def _non_json_content_type(request: Request) -> str | None:
    """The request's Content-Type when it is not JSON (``application/json`` or
    ``application/*+json``, the types FastAPI parses), ``"none"`` when missing, else None."""
    value = request.headers.get("content-type")
    if not value:
        return "none"
    media = value.split(";", 1)[0].strip().lower()
    if media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    ):
        return None
    return media


def _describe(errors: list[dict]) -> str:
    parts = []
    for e in errors[:5]:
        loc = ".".join(str(x) for x in e.get("loc", ()) if x != "body") or "body"
        parts.append(f"{loc}: {e.get('msg', 'invalid')}")
    if len(errors) > 5:
        parts.append(f"... and {len(errors) - 5} more")
    return "; ".join(parts)


def install(app: FastAPI) -> None:
    """Register the handlers on ``app``."""

    @app.exception_handler(APIError)
    async def _api_error(request: Request, exc: APIError) -> JSONResponse:
        return error_response(exc.status, exc.type, exc.message, request=request)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        errors = list(exc.errors())
        # A body sent as a form (curl -d's default) or text: FastAPI did not read it as JSON, and
        # the schema error it gives ("Input should be a valid dictionary") would only puzzle.
        media = _non_json_content_type(request)
        if media is not None:
            return error_response(
                415,
                "unsupported_media_type",
                f"the body must be JSON sent with Content-Type: application/json, not {media} "
                "(curl: --json '{...}', or -H 'Content-Type: application/json' -d '{...}')",
                request=request,
            )
        # A body that is not JSON (or not UTF-8) is the client's syntax error, not a schema error.
        if any(e.get("type") == "json_invalid" for e in errors):
            return error_response(
                400,
                "invalid_json",
                "request body is not valid JSON (UTF-8): " + _describe(errors),
                request=request,
            )
        return error_response(422, "validation_error", _describe(errors), request=request)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        status = exc.status_code
        message = exc.detail if isinstance(exc.detail, str) else str(exc.detail)
        if status == 400 and "parsing the body" in message:
            return error_response(
                400, "invalid_json", "request body is not valid JSON (UTF-8)", request=request
            )
        return error_response(
            status, _TYPES.get(status, "error"), message, getattr(exc, "headers", None), request
        )

    @app.exception_handler(Exception)
    async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.exception(
            "unhandled error",
            extra={"request_id": request.scope.get("bpesvc", {}).get("request_id")},
        )
        return error_response(
            500,
            "internal_error",
            "internal error; see the server log for this request id",
            request=request,
        )

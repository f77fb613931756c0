"""GET /healthz (liveness), /readyz (readiness), /metrics (Prometheus): outside /v1."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse

from bpecore_service.metrics import CONTENT_TYPE
from bpecore_service.schemas import HealthResponse

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=HealthResponse, summary="Liveness")
def healthz(request: Request):
    """200 while the process is alive and its encodings are loading or loaded; 503 if loading failed."""
    state = request.app.state
    if state.load_error:
        return JSONResponse(
            HealthResponse(status="failed", detail=state.load_error).model_dump(), status_code=503
        )
    return HealthResponse(status="ok", encodings=sorted(state.encodings))


@router.get(
    "/readyz",
    response_model=HealthResponse,
    responses={503: {"model": HealthResponse, "description": "Loading, failed or draining."}},
    summary="Readiness",
)
def readyz(request: Request):
    """200 only when every configured encoding is loaded and the server is not draining."""
    state = request.app.state
    if state.draining:
        body, code = HealthResponse(status="draining", detail="shutting down"), 503
    elif state.load_error:
        body, code = HealthResponse(status="failed", detail=state.load_error), 503
    elif not state.loaded:
        body, code = HealthResponse(status="loading", detail="encodings are still loading"), 503
    else:
        return HealthResponse(status="ok", encodings=sorted(state.encodings))
    return JSONResponse(body.model_dump(), status_code=code)


@router.get("/metrics", summary="Prometheus metrics", response_class=Response)
def metrics(request: Request) -> Response:
    """Request counts and latencies, tokens and bytes per encoding and operation, streams, readiness."""
    return Response(request.app.state.metrics.render(), media_type=CONTENT_TYPE)

"""POST /v1/split, /v1/intervals, /v1/chunk."""

from __future__ import annotations

from fastapi import APIRouter

from service.schemas import COMMON_ERRORS

router = APIRouter(prefix="/v1", tags=["chunks"], responses=COMMON_ERRORS)

"""POST /v1/chat/count."""

from __future__ import annotations

from fastapi import APIRouter

from service.schemas import COMMON_ERRORS

router = APIRouter(prefix="/v1", tags=["chat"], responses=COMMON_ERRORS)

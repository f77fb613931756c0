"""POST /v1/chat/count."""

from __future__ import annotations

from fastapi import APIRouter, Response

from bpecore.chat import count_messages
from service.deps import Ctx, reply
from service.errors import APIError
from service.schemas import COMMON_ERRORS, ChatCountRequest, ChatCountResponse

router = APIRouter(prefix="/v1", tags=["chat"], responses=COMMON_ERRORS)


@router.post("/chat/count", response_model=ChatCountResponse, summary="Count a chat request")
def chat_count(body: ChatCountRequest, ctx: Ctx) -> Response:
    """Prompt tokens of OpenAI-style chat messages (and tools) for a model, overheads included."""
    ctx.check_max("number of messages", len(body.messages), ctx.settings.max_texts)
    messages = [m.model_dump(exclude_none=True) for m in body.messages]
    try:
        n = count_messages(messages, model=body.model, tools=body.tools)
    except ValueError as e:
        if str(e).startswith("unknown chat model"):
            raise APIError(404, "model_not_found", str(e)) from None
        raise APIError(422, "unsupported_message", str(e)) from None
    ctx.info.update(op="chat_count", tokens=n)
    return reply(ChatCountResponse(model=body.model, count=n))

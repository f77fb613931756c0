"""POST /v1/chat/count: a whole OpenAI chat request body, counted as the model sees it."""

from __future__ import annotations

from fastapi import APIRouter, Response

from bpecore.chat import count_request
from bpecore_service.deps import Ctx, reply
from bpecore_service.errors import APIError
from bpecore_service.schemas import COMMON_ERRORS, ChatCountRequest, ChatCountResponse

router = APIRouter(prefix="/v1", tags=["chat"], responses=COMMON_ERRORS)


@router.post("/chat/count", response_model=ChatCountResponse, summary="Count a chat request")
def chat_count(body: ChatCountRequest, ctx: Ctx) -> Response:
    """Prompt tokens of an OpenAI chat request (messages, tools, tool_choice, response_format),
    per message, and whether the count is exact or an estimate. Other request fields are ignored."""
    ctx.check_max("number of messages", len(body.messages), ctx.settings.max_texts)
    request = body.model_dump(exclude_none=True)
    try:
        r = count_request(request)
    except ValueError as e:
        if str(e).startswith("unknown chat model"):
            raise APIError(404, "model_not_found", str(e)) from None
        raise APIError(422, "unsupported_message", str(e)) from None
    ctx.info.update(op="chat_count", tokens=r.total)
    return reply(
        ChatCountResponse(
            model=body.model,
            count=r.total,
            exact=r.exact,
            estimated=list(r.estimated),
            messages=list(r.messages),
            tools=r.tools,
            priming=r.priming,
            rules_version=r.rules_version,
        )
    )

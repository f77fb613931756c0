"""POST /v1/chat/count: a whole OpenAI chat request body, counted as the model sees it.

``model`` names an OpenAI model (the published rules, ``bpecore.chat``), or a loaded encoding
(or alias) with a chat template: an open model, whose own template renders the request
(``bpecore.chat_template``). A template that fails or passes a limit (time, output size,
nesting, the sandbox) is a 422 whose type is ``template_<reason>``. The helpers here also serve
vLLM's /tokenize chat form (``bpecore_service.routes.compat``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from fastapi import APIRouter, Response

from bpecore.chat import count_request
from bpecore.chat_template import ChatTemplateError, has_chat_template
from bpecore_service.deps import Context, Ctx, reply
from bpecore_service.errors import APIError
from bpecore_service.schemas import COMMON_ERRORS, ChatCountRequest, ChatCountResponse

router = APIRouter(prefix="/v1", tags=["chat"], responses=COMMON_ERRORS)

#: Request fields a template's variables may not override.
_RESERVED = frozenset(
    {"messages", "tools", "documents", "add_generation_prompt", "continue_final_message"}
    | {"chat_template", "tokenize", "seconds", "max_chars"}
)


def template_error(e: ChatTemplateError) -> APIError:
    """The answer to a chat template that failed: 422, type ``template_<reason>``."""
    return APIError(422, f"template_{e.reason}", str(e))


def template_limits(ctx: Context) -> dict[str, Any]:
    """The server's bounds on one render (``seconds``, ``max_chars``)."""
    limits: dict[str, Any] = {"seconds": ctx.settings.chat_template_seconds}
    if ctx.settings.chat_template_max_chars is not None:
        limits["max_chars"] = ctx.settings.chat_template_max_chars
    return limits


def template_kwargs(extra: Mapping[str, Any] | None) -> dict[str, Any]:
    """``chat_template_kwargs``, refused when they would set a request field."""
    clash = sorted(set(extra or {}) & _RESERVED)
    if clash:
        raise APIError(422, "validation_error", f"chat_template_kwargs may not set {clash}")
    return dict(extra or {})


def vllm_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as vLLM hands them to a chat template: text parts joined with newlines, tool-call
    arguments parsed from JSON (an empty or missing one is ``{}``), an empty ``tool_calls``
    dropped, reasoning under both ``reasoning`` and ``reasoning_content``."""
    out = []
    for i, message in enumerate(messages):
        m = {k: v for k, v in message.items() if v is not None}
        if not isinstance(m.get("role"), str):
            raise APIError(422, "unsupported_message", f"message {i} needs a string role")
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" for p in content):
                raise APIError(
                    422, "unsupported_message", f"message {i}: only text content parts are counted"
                )
            m["content"] = "\n".join(str(p.get("text", "")) for p in content)
        calls = m.get("tool_calls")
        if m["role"] == "assistant" and isinstance(calls, list):
            if not calls:
                del m["tool_calls"]
            else:
                m["tool_calls"] = [_parsed_call(i, c) for c in calls]
        reasoning = m.get("reasoning", m.get("reasoning_content"))
        if m["role"] == "assistant" and reasoning is not None:
            m["reasoning"] = m["reasoning_content"] = reasoning
        out.append(m)
    return out


def _parsed_call(i: int, call: Any) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, dict) else None
    if not isinstance(fn, dict):
        raise APIError(422, "unsupported_message", f"message {i}: a tool call needs a function")
    args = fn.get("arguments")
    if not args:
        args = {}
    elif isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError as e:
            raise APIError(
                422, "unsupported_message", f"message {i}: tool call arguments are not JSON: {e}"
            ) from None
    return {**call, "function": {**fn, "arguments": args}}


@router.post("/chat/count", response_model=ChatCountResponse, summary="Count a chat request")
def chat_count(body: ChatCountRequest, ctx: Ctx) -> Response:
    """Prompt tokens of an OpenAI chat request (messages, tools, tool_choice, response_format),
    per message, and whether the count is exact or an estimate. Other request fields are ignored.
    For an open model (a loaded encoding with a chat template), its template renders the request."""
    ctx.check_max("number of messages", len(body.messages), ctx.settings.max_texts)
    request = body.model_dump(exclude_none=True)
    enc = ctx.encodings.get(body.model)
    if enc is not None and not (has_chat_template(enc) or body.chat_template is not None):
        enc = None  # an encoding without a template: not an open chat model
    try:
        if enc is not None:
            request["chat_template_kwargs"] = template_kwargs(body.chat_template_kwargs)
            request.update(template_limits(ctx))
        r = count_request(request, encoding=enc)
    except ChatTemplateError as e:
        raise template_error(e) from None
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

"""Drop-in routes for clients of other servers.

vLLM:  POST /tokenize   {model?, prompt, add_special_tokens?, return_token_strs?}
                        -> {count, max_model_len, tokens, token_strs}
       POST /tokenize   {model?, messages, add_generation_prompt?, continue_final_message?,
                         chat_template?, chat_template_kwargs?, tools?, return_token_strs?}
                        -> the same, for an open model: its chat template renders the messages
       POST /detokenize {model?, tokens} -> {prompt}
TEI:   POST /tei/tokenize {inputs: str | [str], add_special_tokens?} -> [[{id, text, special, start, stop}]]
       POST /decode, /tei/decode {ids: [int] | [[int]], skip_special_tokens?} -> [str]

vLLM and TEI both own ``POST /tokenize``. Here ``/tokenize`` tells them apart by the body: a body
with ``inputs`` is TEI's, one with ``prompt`` is vLLM's (the two share no required field), and
``/tei/tokenize`` is TEI's unambiguously; a body with ``messages`` is vLLM's chat form. ``model`` names an encoding (default: the server's).
Special-token strings in the text become special tokens, as Hugging Face tokenizers do. TEI
``start``/``stop`` are UTF-8 byte offsets, as TEI reports them.
"""

from __future__ import annotations

from fastapi import APIRouter, Response

from bpecore.chat_template import ChatTemplateError, apply_chat_template
from bpecore_service.deps import Ctx, reply, utf8_len
from bpecore_service.errors import APIError, decode_bytes
from bpecore_service.offsets import token_byte_offsets
from bpecore_service.routes.chat import (
    template_error,
    template_kwargs,
    template_limits,
    vllm_messages,
)
from bpecore_service.schemas import (
    COMMON_ERRORS,
    TeiDecodeRequest,
    TeiToken,
    TeiTokenizeRequest,
    VllmDetokenizeRequest,
    VllmDetokenizeResponse,
    VllmTokenizeChatRequest,
    VllmTokenizeRequest,
    VllmTokenizeResponse,
)

router = APIRouter(tags=["compatibility"], responses=COMMON_ERRORS)


def _vllm_reply(enc, tokens: list[int], return_token_strs: bool, ctx: Ctx) -> Response:
    """vLLM's /tokenize answer for ``tokens`` (both request forms)."""
    strs = None
    if return_token_strs:
        ctx.check_max("tokens with strings", len(tokens), ctx.settings.max_offsets)
        strs = [enc.decode_bytes([t]).decode("utf-8", "replace") for t in tokens]
    return reply(
        VllmTokenizeResponse(
            count=len(tokens),
            max_model_len=getattr(enc, "max_model_len", None),
            tokens=tokens,
            token_strs=strs,
        )
    )


def _vllm_tokenize(body: VllmTokenizeRequest, ctx: Ctx) -> Response:
    enc = ctx.encoding(body.model)
    with ctx.op("encode", enc, utf8_len(body.prompt)) as rec:
        tokens = enc.encode(body.prompt, allowed_special="all")
        rec["tokens"] = len(tokens)
    return _vllm_reply(enc, tokens, body.return_token_strs, ctx)


def _vllm_tokenize_chat(body: VllmTokenizeChatRequest, ctx: Ctx) -> Response:
    """vLLM's chat form: the model's chat template renders the messages, which are encoded with
    the special tokens the template wrote (vLLM's default add_special_tokens=false)."""
    if body.add_special_tokens:
        raise APIError(
            422,
            "unsupported_option",
            "add_special_tokens=true adds the tokenizer's own BOS/EOS around the rendered chat, "
            "which bpecore does not model; the chat template writes the model's special tokens",
        )
    if body.continue_final_message and body.add_generation_prompt:
        raise APIError(
            422,
            "validation_error",
            "Cannot set both continue_final_message and add_generation_prompt to true",
        )
    ctx.check_max("number of messages", len(body.messages), ctx.settings.max_texts)
    enc = ctx.encoding(body.model)
    messages = vllm_messages(body.messages)
    with ctx.op("chat_template", enc, 0) as rec:
        try:
            tokens = apply_chat_template(
                enc,
                messages,
                tools=body.tools,
                chat_template=body.chat_template,
                add_generation_prompt=body.add_generation_prompt,
                continue_final_message=body.continue_final_message,
                **template_limits(ctx),
                **template_kwargs(body.chat_template_kwargs),
            )
        except ChatTemplateError as e:
            raise template_error(e) from None
        except ValueError as e:
            raise APIError(422, "unsupported_message", str(e)) from None
        rec["tokens"] = len(tokens)
    return _vllm_reply(enc, tokens, body.return_token_strs, ctx)


def _tei_tokenize(body: TeiTokenizeRequest, ctx: Ctx) -> list[list[TeiToken]]:
    enc = ctx.encoding(None)
    texts = [body.inputs] if isinstance(body.inputs, str) else body.inputs
    ctx.check_max("number of texts", len(texts), ctx.settings.max_texts)
    special_ids = set(enc.special_tokens.values())
    out = []
    for text in texts:
        with ctx.op("encode", enc, utf8_len(text)) as rec:
            tokens = enc.encode(text, allowed_special="all")
            rec["tokens"] = len(tokens)
        ctx.check_max("tokens", len(tokens), ctx.settings.max_offsets)
        out.append(
            [
                TeiToken(
                    id=t,
                    text=raw.decode("utf-8", "replace"),
                    special=t in special_ids,
                    start=a,
                    stop=b,
                )
                for t, raw, a, b in token_byte_offsets(enc, tokens)
            ]
        )
    return out


@router.post(
    "/tokenize",
    response_model=VllmTokenizeResponse | list[list[TeiToken]],
    summary="Tokenize (vLLM or TEI, by body shape)",
)
def tokenize(body: VllmTokenizeRequest | VllmTokenizeChatRequest | TeiTokenizeRequest, ctx: Ctx):
    """vLLM's /tokenize for a body with ``prompt`` or ``messages`` (the chat form, for an open
    model with a chat template); TEI's /tokenize for a body with ``inputs``."""
    if isinstance(body, TeiTokenizeRequest):
        return _tei_tokenize(body, ctx)
    if isinstance(body, VllmTokenizeChatRequest):
        return _vllm_tokenize_chat(body, ctx)
    return _vllm_tokenize(body, ctx)


@router.post("/detokenize", response_model=VllmDetokenizeResponse, summary="Detokenize (vLLM)")
def detokenize(body: VllmDetokenizeRequest, ctx: Ctx) -> Response:
    enc = ctx.encoding(body.model)
    with ctx.op("decode", enc, 0) as rec:
        text = decode_bytes(enc, body.tokens).decode("utf-8", "replace")
        rec["tokens"] = len(body.tokens)
    return reply(VllmDetokenizeResponse(prompt=text))


@router.post("/tei/tokenize", response_model=list[list[TeiToken]], summary="Tokenize (TEI)")
def tei_tokenize(body: TeiTokenizeRequest, ctx: Ctx) -> list[list[TeiToken]]:
    return _tei_tokenize(body, ctx)


def _tei_decode(body: TeiDecodeRequest, ctx: Ctx) -> list[str]:
    enc = ctx.encoding(None)
    batches = body.ids if body.ids and isinstance(body.ids[0], list) else [body.ids]
    ctx.check_max("number of texts", len(batches), ctx.settings.max_texts)
    special_ids = set(enc.special_tokens.values())
    out = []
    for ids in batches:
        if body.skip_special_tokens:
            ids = [t for t in ids if t not in special_ids]
        with ctx.op("decode", enc, 0) as rec:
            out.append(decode_bytes(enc, ids).decode("utf-8", "replace"))
            rec["tokens"] = len(ids)
    return out


@router.post("/decode", response_model=list[str], summary="Decode (TEI)")
def tei_decode(body: TeiDecodeRequest, ctx: Ctx) -> list[str]:
    return _tei_decode(body, ctx)


@router.post("/tei/decode", response_model=list[str], summary="Decode (TEI)")
def tei_decode_prefixed(body: TeiDecodeRequest, ctx: Ctx) -> list[str]:
    return _tei_decode(body, ctx)

"""POST /v1/count, /v1/encode, /v1/decode; GET /v1/encodings."""

from __future__ import annotations

from fastapi import APIRouter, Response

from service.deps import Ctx, reply, utf8_len
from service.errors import APIError, decode_bytes
from service.offsets import token_offsets
from service.schemas import (
    COMMON_ERRORS,
    CountRequest,
    CountResponse,
    CountResult,
    DecodeRequest,
    DecodeResponse,
    EncodeRequest,
    EncodeResponse,
    EncodingInfo,
    EncodingsResponse,
    TokenOffset,
)

router = APIRouter(prefix="/v1", tags=["tokens"], responses=COMMON_ERRORS)


def _special(policy: list[str] | str) -> str | frozenset[str]:
    return "all" if policy == "all" else frozenset(policy)


@router.post("/count", response_model=CountResponse, summary="Count tokens")
def count(body: CountRequest, ctx: Ctx) -> Response:
    """Token counts of one text or several, with one encoding or several, optionally against a limit."""
    s = ctx.settings
    names = body.encodings if body.encodings is not None else [body.encoding]
    ctx.check_max("number of encodings", len(names), s.max_encodings)
    encs = [ctx.encoding(n) for n in names]
    texts = body.texts if body.texts is not None else [body.text]
    ctx.check_max("number of texts", len(texts), s.max_texts)
    if body.limit is not None:
        ctx.check_max("limit", body.limit, s.max_tokens)
    nbytes = sum(utf8_len(t) for t in texts)
    results = []
    for enc in encs:
        with ctx.op("count", enc, nbytes) as rec:
            if body.limit is None:
                counts = [enc.count(t) for t in texts]
            else:
                count_till_limit = getattr(enc, "count_till_limit", None)
                if count_till_limit is None:  # an older bpecore
                    raise APIError(422, "unsupported", "'limit' needs a bpecore with Encoding.count_till_limit")
                counts = [count_till_limit(t, body.limit) for t in texts]
            rec["tokens"] = sum(c for c in counts if c is not None)
        # count_till_limit gives None for a text over the limit; the total is then unknown too.
        fits = all(c is not None for c in counts)
        results.append(
            CountResult(
                encoding=enc.name,
                count=sum(counts) if fits else None,
                counts=counts if body.texts is not None else None,
                within_limit=None if body.limit is None else fits,
            )
        )
    first = results[0]
    return reply(CountResponse(**first.model_dump(), results=results))


@router.post("/encode", response_model=EncodeResponse, summary="Encode text")
def encode(body: EncodeRequest, ctx: Ctx) -> Response:
    """Token ids of a text, with tiktoken's special-token rules, optionally with per-token offsets."""
    enc = ctx.encoding(body.encoding)
    with ctx.op("encode", enc, utf8_len(body.text)) as rec:
        try:
            tokens = enc.encode(
                body.text,
                allowed_special=_special(body.allowed_special),
                disallowed_special=_special(body.disallowed_special),
            )
        except ValueError as e:
            raise APIError(400, "disallowed_special_token", str(e).split("\n")[0]) from None
        rec["tokens"] = len(tokens)
    offsets = None
    if body.return_offsets:
        ctx.check_max("tokens with offsets", len(tokens), ctx.settings.max_offsets)
        offsets = [TokenOffset(id=i, text=t, start=a, end=b) for i, t, a, b in token_offsets(enc, tokens)]
    return reply(EncodeResponse(encoding=enc.name, count=len(tokens), tokens=tokens, offsets=offsets))


@router.post("/decode", response_model=DecodeResponse, summary="Decode token ids")
def decode(body: DecodeRequest, ctx: Ctx) -> Response:
    """The text of token ids (invalid UTF-8 replaced), optionally with per-token offsets into it."""
    enc = ctx.encoding(body.encoding)
    with ctx.op("decode", enc, 0) as rec:
        raw = decode_bytes(enc, body.tokens)
        rec["tokens"] = len(body.tokens)
    offsets = None
    if body.return_offsets:
        ctx.check_max("tokens with offsets", len(body.tokens), ctx.settings.max_offsets)
        offsets = [TokenOffset(id=i, text=t, start=a, end=b) for i, t, a, b in token_offsets(enc, body.tokens)]
    return reply(
        DecodeResponse(encoding=enc.name, count=len(body.tokens), text=raw.decode("utf-8", "replace"), offsets=offsets)
    )


@router.get("/encodings", response_model=EncodingsResponse, summary="List encodings")
def encodings(ctx: Ctx) -> Response:
    """The loaded encodings: name, vocabulary size, special tokens, pattern and vocab SHA-256."""
    return reply(EncodingsResponse(
        data=[
            EncodingInfo(
                name=enc.name,
                n_vocab=enc.n_vocab,
                special_tokens=dict(enc.special_tokens),
                pattern=enc.pattern,
                vocab_sha256=enc.vocab_sha256,
                default=enc.name == ctx.settings.default_encoding,
            )
            for enc in ctx.encodings.values()
        ]
    ))

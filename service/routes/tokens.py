"""POST /v1/count, /v1/encode, /v1/decode; GET /v1/encodings."""

from __future__ import annotations

import time
from functools import lru_cache

from fastapi import APIRouter, Response
from pydantic_core import to_json

from bpecore_service.deps import Context, Ctx, reply, utf8_len
from bpecore_service.errors import APIError, decode_bytes
from bpecore_service.lean import lean
from bpecore_service.offsets import token_offsets, token_offsets_window
from bpecore_service.schemas import (
    COMMON_ERRORS,
    CountRequest,
    CountResponse,
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


def count_tokens(body: CountRequest, ctx: Context) -> bytes:
    """The JSON answer to ``POST /v1/count`` (a ``CountResponse``): the server limits checked, then
    the counts. The endpoint and its lean handler (``bpecore_service.lean``) both call this."""
    s = ctx.settings
    names = body.encodings if body.encodings is not None else [body.encoding]
    ctx.check_max("number of encodings", len(names), s.max_encodings)
    encs = [ctx.encoding(n) for n in names]
    texts = body.texts if body.texts is not None else [body.text]
    ctx.check_max("number of texts", len(texts), s.max_texts)
    limit = body.limit
    if limit is not None:
        ctx.check_max("limit", limit, s.max_tokens)
    nbytes = sum(utf8_len(t) for t in texts)
    results = []
    for enc in encs:
        t0 = time.perf_counter()
        if limit is None:
            count = enc.count
            counts = [count(t) for t in texts]
        else:
            count_till_limit = enc.count_till_limit
            counts = [count_till_limit(t, limit) for t in texts]
        tokens = sum(c for c in counts if c is not None)
        ctx.record("count", enc.name, nbytes, tokens, time.perf_counter() - t0)
        # count_till_limit gives None for a text over the limit; the total is then unknown too.
        fits = None not in counts
        # CountResult's JSON, written here: a model per result and its serializer cost more than the count of 1 KB
        results.append(
            b'{"encoding":%s,"count":%s,"counts":%s,"within_limit":%s}'
            % (
                _name_json(enc.name),
                b"%d" % sum(counts) if fits else b"null",
                b"null"
                if body.texts is None
                else b"[" + b",".join(b"null" if c is None else b"%d" % c for c in counts) + b"]",
                b"null" if limit is None else (b"true" if fits else b"false"),
            )
        )
    # CountResponse: the first result's fields, then every result
    return results[0][:-1] + b',"results":[' + b",".join(results) + b"]}"


@lru_cache(maxsize=256)
def _name_json(name: str) -> bytes:
    return to_json(name)


@router.post("/count", response_model=CountResponse, summary="Count tokens")
@lean(CountRequest, count_tokens)
def count(body: CountRequest, ctx: Ctx) -> Response:
    """Token counts of one text or several, with one encoding or several, optionally against a limit."""
    return Response(count_tokens(body, ctx), media_type="application/json")


def encode_text(body: EncodeRequest, ctx: Context) -> EncodeResponse:
    """The answer to ``POST /v1/encode``; the endpoint and its lean handler both call this."""
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
    offsets = first = None
    if body.return_offsets:
        if body.offsets_range is None:
            first, window = 0, None
            ctx.check_max("tokens with offsets", len(tokens), ctx.settings.max_offsets)
        else:
            lo, hi = body.offsets_range
            if not 0 <= lo <= hi <= len(body.text):
                raise APIError(
                    422,
                    "invalid_range",
                    f"offsets_range [{lo}, {hi}] is not within 0 <= start <= end <= {len(body.text)}",
                )
            first, window = token_offsets_window(enc, tokens, body.text, lo, hi)
            ctx.check_max("tokens with offsets", len(window), ctx.settings.max_offsets)
        offsets = [
            TokenOffset(
                id=i,
                text=t,
                start=a,
                end=b,
                bytes=enc.decode_bytes([i]).hex() if body.return_bytes else None,
            )
            for i, t, a, b in (token_offsets(enc, tokens) if window is None else window)
        ]
    return EncodeResponse(
        encoding=enc.name, count=len(tokens), tokens=tokens, offsets=offsets, offsets_first=first
    )


# thread_bytes=0: encoding (and offsets) can take long even for a small body; the route runs in a thread too
@router.post("/encode", response_model=EncodeResponse, summary="Encode text")
@lean(EncodeRequest, encode_text, thread_bytes=0)
def encode(body: EncodeRequest, ctx: Ctx) -> Response:
    """Token ids of a text, with tiktoken's special-token rules, optionally with per-token offsets."""
    return reply(encode_text(body, ctx))


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
        offsets = [
            TokenOffset(id=i, text=t, start=a, end=b)
            for i, t, a, b in token_offsets(enc, body.tokens)
        ]
    return reply(
        DecodeResponse(
            encoding=enc.name,
            count=len(body.tokens),
            text=raw.decode("utf-8", "replace"),
            offsets=offsets,
        )
    )


@router.get("/encodings", response_model=EncodingsResponse, summary="List encodings")
def encodings(ctx: Ctx) -> Response:
    """The loaded encodings: name, aliases, vocabulary size, special tokens, pattern and SHA-256.

    An alias (``BPESVC_MODEL_ALIASES``) is listed under the encoding it names, not as one more.
    """
    names: dict[int, list[str]] = {}
    distinct = []
    for key, enc in ctx.encodings.items():
        if id(enc) not in names:
            names[id(enc)] = []
            distinct.append(enc)
        names[id(enc)].append(key)
    default = ctx.settings.default_encoding
    return reply(
        EncodingsResponse(
            data=[
                EncodingInfo(
                    name=enc.name,
                    aliases=sorted(k for k in names[id(enc)] if k != enc.name),
                    n_vocab=enc.n_vocab,
                    special_tokens=dict(enc.special_tokens),
                    pattern=enc.pattern,
                    vocab_sha256=enc.vocab_sha256,
                    default=default == enc.name or default in names[id(enc)],
                )
                for enc in distinct
            ]
        )
    )

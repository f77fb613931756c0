"""POST /v1/split, /v1/intervals, /v1/chunk."""

from __future__ import annotations

from fastapi import APIRouter, Response

from bpecore.chunker import chunk as chunk_text
from bpecore_service.deps import Context, Ctx, reply, utf8_len
from bpecore_service.errors import APIError
from bpecore_service.lean import lean
from bpecore_service.schemas import (
    COMMON_ERRORS,
    ChunkOut,
    ChunkRequest,
    ChunkResponse,
    IntervalsRequest,
    IntervalsResponse,
    SplitRequest,
    SplitResponse,
)

router = APIRouter(prefix="/v1", tags=["chunks"], responses=COMMON_ERRORS)


def chunk_texts(body: ChunkRequest, ctx: Context) -> ChunkResponse:
    """The answer to ``POST /v1/chunk``; the endpoint and its lean handler both call this."""
    enc = ctx.encoding(body.encoding)
    ctx.check_max("max_tokens", body.max_tokens, ctx.settings.max_tokens)
    texts = body.texts if body.texts is not None else [body.text]
    ctx.check_max("number of texts", len(texts), ctx.settings.max_texts)
    # A bound on the work and the reply: too many chunks is refused before chunking (one fast count).
    step = body.max_tokens - body.overlap
    estimate = sum(-(-enc.count(t) // step) for t in texts)
    ctx.check_max("estimated number of chunks", estimate, ctx.settings.max_chunks)
    results = []
    for text in texts:
        with ctx.op("chunk", enc, utf8_len(text)) as rec:
            try:
                chunks = chunk_text(
                    text,
                    enc,
                    body.max_tokens,
                    body.overlap,
                    body.trim,
                    body.markdown,
                    body.language,
                    body.balance,
                )
            except ValueError as e:
                raise APIError(422, "chunk_error", str(e)) from None
            rec["tokens"] = sum(c.tokens for c in chunks)
        results.append(
            [ChunkOut(text=c.text, start=c.start, end=c.end, tokens=c.tokens) for c in chunks]
        )
    n = sum(len(r) for r in results)
    if body.texts is None:
        return ChunkResponse(encoding=enc.name, count=n, chunks=results[0])
    return ChunkResponse(encoding=enc.name, count=n, results=results)


@router.post("/chunk", response_model=ChunkResponse, summary="Chunk text")
@lean(
    ChunkRequest, chunk_texts, thread_bytes=0
)  # chunking takes long even for small bodies: always in a thread
def chunk(body: ChunkRequest, ctx: Ctx) -> Response:
    """Token-exact chunks (every chunk's count <= max_tokens), cut at the best boundary available."""
    return reply(chunk_texts(body, ctx))


@router.post("/split", response_model=SplitResponse, summary="Cut text at a token budget")
def split(body: SplitRequest, ctx: Ctx) -> Response:
    """The exact cut: the longest prefix ('head') or suffix ('tail') whose count is <= max_tokens."""
    enc = ctx.encoding(body.encoding)
    ctx.check_max("max_tokens", body.max_tokens, ctx.settings.max_tokens)
    text = body.text
    with ctx.op("split", enc, utf8_len(text)) as rec:
        if body.keep == "head":
            k = enc.split_at(text, body.max_tokens)
            start, end = 0, k
        else:
            k = enc.split_at_end(text, body.max_tokens)
            start, end = k, len(text)
        kept = text[start:end]
        n = enc.count(kept)
        rec["tokens"] = n
    return reply(
        SplitResponse(encoding=enc.name, offset=k, start=start, end=end, text=kept, count=n)
    )


@router.post(
    "/intervals", response_model=IntervalsResponse, summary="Count many slices of one text"
)
def intervals(body: IntervalsRequest, ctx: Ctx) -> Response:
    """Exact counts of text[start:end] for many ranges, after one pass over the text."""
    enc = ctx.encoding(body.encoding)
    ctx.check_max("number of ranges", len(body.ranges), ctx.settings.max_ranges)
    n = len(body.text)
    for idx, (i, j) in enumerate(body.ranges):
        if not 0 <= i <= j <= n:
            raise APIError(
                422,
                "invalid_range",
                f"ranges[{idx}] = [{i}, {j}] is not within 0 <= start <= end <= {n}",
            )
    rec_bytes = utf8_len(body.text)
    with ctx.op("intervals", enc, rec_bytes) as rec:
        # the per-piece tables pay for their pass from about one range per 24 bytes of text on
        counter = enc.interval_counter(body.text, piece_tables=len(body.ranges) * 24 >= rec_bytes)
        counts = counter.count_many(body.ranges)
        total = counter.count(0, n)
        rec["tokens"] = total
    return reply(IntervalsResponse(encoding=enc.name, count=total, counts=counts))

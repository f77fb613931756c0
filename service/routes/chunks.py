"""POST /v1/split, /v1/intervals, /v1/chunk."""

from __future__ import annotations

from fastapi import APIRouter, Response

from bpecore.chunker import chunk as chunk_text
from service.deps import Ctx, reply, utf8_len
from service.errors import APIError
from service.schemas import COMMON_ERRORS, ChunkOut, ChunkRequest, ChunkResponse

router = APIRouter(prefix="/v1", tags=["chunks"], responses=COMMON_ERRORS)


@router.post("/chunk", response_model=ChunkResponse, summary="Chunk text")
def chunk(body: ChunkRequest, ctx: Ctx) -> Response:
    """Token-exact chunks (every chunk's count <= max_tokens), cut at the best boundary available."""
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
                chunks = chunk_text(text, enc, body.max_tokens, body.overlap, body.trim, body.markdown)
            except ValueError as e:
                raise APIError(422, "chunk_error", str(e)) from None
            rec["tokens"] = sum(c.tokens for c in chunks)
        results.append([ChunkOut(text=c.text, start=c.start, end=c.end, tokens=c.tokens) for c in chunks])
    n = sum(len(r) for r in results)
    if body.texts is None:
        return reply(ChunkResponse(encoding=enc.name, count=n, chunks=results[0]))
    return reply(ChunkResponse(encoding=enc.name, count=n, results=results))

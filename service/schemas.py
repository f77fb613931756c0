"""Request and response models. Requests forbid unknown fields; every field is described.

Offsets are character offsets (code points) into the request's text, as everywhere in bpecore.
Texts may carry lone surrogates (JSON ``"\\ud800"``): they are replaced with U+FFFD on arrival, as
tiktoken does, which keeps every offset unchanged.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, StrictInt, model_validator

from bpecore_service.body import text_and_size


def _clean_text(text: str) -> str:
    """``text`` with lone surrogates replaced (checked a piece at a time: ``bpecore_service.body``)."""
    return text_and_size(text)[0]


Text = Annotated[str, AfterValidator(_clean_text)]
EncodingName = Annotated[str, Field(min_length=1, max_length=200)]
TokenId = Annotated[int, Field(ge=0, lt=2**32)]


class Request(BaseModel):
    # strict: a JSON value of the wrong type is a 422 ("1" is not an integer, 0 is not a boolean),
    # as the OpenAPI schema says; unknown fields are refused.
    model_config = ConfigDict(extra="forbid", strict=True)


def _example(example: dict) -> ConfigDict:
    """``Request``'s config plus a request example for the OpenAPI schema: the body "Try it out"
    starts from. Examples name no encoding, so they work whatever the server's default is; their
    token ids are below 50,257 (every shipped encoding has them). tests/service/test_examples.py
    sends each one."""
    return ConfigDict(extra="forbid", strict=True, json_schema_extra={"examples": [example]})


# FastAPI validates the parsed body (Python objects), where strict mode wants a tuple for a tuple:
# a JSON pair arrives as a list, so the pair itself is lax and its two integers strict.
Pair = Annotated[tuple[StrictInt, StrictInt], Field(strict=False)]


class Response(BaseModel):
    pass


# ----------------------------------------------------------------------------------- errors
class ErrorDetail(Response):
    type: str = Field(
        description="Stable machine-readable error kind, e.g. 'validation_error', 'encoding_not_found'."
    )
    message: str = Field(description="What went wrong, for humans.")
    code: int = Field(description="The HTTP status code.")


class ErrorResponse(Response):
    error: ErrorDetail = Field(description="The error.")


def error_responses(*codes: int) -> dict[int | str, dict[str, Any]]:
    text = {
        400: "Bad input: invalid JSON or UTF-8, a disallowed special token, an unknown token id.",
        404: "Unknown encoding or model.",
        413: "Request body larger than the configured limit.",
        415: "A body sent with a Content-Type other than application/json.",
        422: "The body does not match the schema, or exceeds a count limit (texts, ranges, max_tokens).",
        429: "Too many requests or streams in progress.",
        503: "Encodings not loaded yet, or the server is draining.",
    }
    return {c: {"model": ErrorResponse, "description": text[c]} for c in codes}


COMMON_ERRORS = error_responses(400, 404, 413, 415, 422, 429, 503)


# ----------------------------------------------------------------------------------- count
class CountRequest(Request):
    model_config = _example({"text": "Hello, world!"})

    text: Text | None = Field(
        default=None, description="The text to count. Give exactly one of text and texts."
    )
    texts: list[Text] | None = Field(
        default=None, description="Several texts to count, each on its own."
    )
    encoding: EncodingName | None = Field(
        default=None,
        description="Encoding name; default: the server's default encoding. Not with encodings.",
    )
    encodings: list[EncodingName] | None = Field(
        default=None,
        description="Several encodings to count with in one call; one result per encoding.",
    )
    limit: int | None = Field(
        default=None,
        ge=0,
        description="Token budget. With a limit, counting stops soon after the limit is passed: a text over "
        "it gets count null and within_limit false.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> CountRequest:
        if (self.text is None) == (self.texts is None):
            raise ValueError("give exactly one of 'text' and 'texts'")
        if self.encoding is not None and self.encodings is not None:
            raise ValueError("give at most one of 'encoding' and 'encodings'")
        if self.encodings is not None and not self.encodings:
            raise ValueError("'encodings' is empty")
        return self


class CountResult(Response):
    encoding: str = Field(description="The encoding these counts are for.")
    count: int | None = Field(
        description="Tokens in text (or the sum over texts); null when a limit was given and exceeded."
    )
    counts: list[int | None] | None = Field(
        default=None, description="Per text, when texts was given; null entries are over the limit."
    )
    within_limit: bool | None = Field(
        default=None,
        description="With a limit: whether the text (every text) fits. Null without a limit.",
    )


class CountResponse(CountResult):
    results: list[CountResult] = Field(
        description="One result per requested encoding (the top-level fields repeat the first)."
    )


# ----------------------------------------------------------------------------------- encode / decode
SpecialPolicy = list[str] | Literal["all"]


class TokenOffset(Response):
    id: int = Field(description="Token id.")
    text: str = Field(
        description="The token's bytes decoded as UTF-8 (U+FFFD for a partial character)."
    )
    start: int = Field(description="Character offset of the first character the token touches.")
    end: int = Field(
        description="Character offset just after the last character the token touches. Tokens that split "
        "a character both cover it."
    )
    bytes: str | None = Field(
        default=None, description="The token's bytes in hex, when return_bytes was set."
    )


class EncodeRequest(Request):
    model_config = _example({"text": "Hello, world!", "return_offsets": True})

    text: Text = Field(description="The text to encode.")
    encoding: EncodingName | None = Field(
        default=None, description="Encoding name; default: the server's default."
    )
    allowed_special: SpecialPolicy = Field(
        default_factory=list,
        description="Special-token strings encoded as their special ids: a list, or 'all'. "
        "Others are plain text or an error (see disallowed_special), as in tiktoken.",
    )
    disallowed_special: SpecialPolicy = Field(
        default="all",
        description="Special-token strings that make the request fail with 400 if present: a list, or 'all' "
        "(every special token not allowed). [] encodes them as plain text.",
    )
    return_offsets: bool = Field(
        default=False, description="Also return {id, text, start, end} per token."
    )
    offsets_range: Pair | None = Field(
        default=None,
        description="With return_offsets: [start, end] character offsets; offsets only for the tokens "
        "that overlap text[start:end] (a window onto a long text), from token offsets_first on.",
    )
    return_bytes: bool = Field(
        default=False,
        description="With return_offsets: each offset also carries its token's bytes.",
    )


class EncodeResponse(Response):
    encoding: str = Field(description="The encoding used.")
    count: int = Field(description="Number of tokens.")
    tokens: list[int] = Field(description="Token ids.")
    offsets: list[TokenOffset] | None = Field(
        default=None, description="Per token, when return_offsets was set."
    )
    offsets_first: int | None = Field(
        default=None,
        description="With return_offsets: the index in tokens of the first offset (0 unless "
        "offsets_range was given).",
    )


class DecodeRequest(Request):
    model_config = _example({"tokens": [9906, 11, 1917, 0]})

    tokens: list[TokenId] = Field(description="Token ids to decode.")
    encoding: EncodingName | None = Field(
        default=None, description="Encoding name; default: the server's default."
    )
    return_offsets: bool = Field(
        default=False,
        description="Also return {id, text, start, end} per token, offsets into the decoded text.",
    )


class DecodeResponse(Response):
    encoding: str = Field(description="The encoding used.")
    count: int = Field(description="Number of tokens decoded.")
    text: str = Field(description="The decoded text; invalid UTF-8 is replaced with U+FFFD.")
    offsets: list[TokenOffset] | None = Field(
        default=None, description="Per token, when return_offsets was set."
    )


# ----------------------------------------------------------------------------------- split / intervals
class SplitRequest(Request):
    model_config = _example(
        {"text": "Hello, world! How are you today?", "max_tokens": 4, "keep": "head"}
    )

    text: Text = Field(description="The text to cut.")
    max_tokens: int = Field(ge=0, description="Token budget of the kept part.")
    keep: Literal["head", "tail"] = Field(
        default="head",
        description="'head': keep the longest prefix with count <= max_tokens; "
        "'tail': keep the longest suffix with count <= max_tokens.",
    )
    encoding: EncodingName | None = Field(
        default=None, description="Encoding name; default: the server's default."
    )


class SplitResponse(Response):
    encoding: str = Field(description="The encoding used.")
    offset: int = Field(
        description="The cut, a character offset: kept = text[:offset] (head) or text[offset:] (tail)."
    )
    start: int = Field(description="Character offset where the kept text starts.")
    end: int = Field(description="Character offset where the kept text ends.")
    text: str = Field(description="The kept text.")
    count: int = Field(description="Tokens in the kept text on its own (<= max_tokens).")


class IntervalsRequest(Request):
    model_config = _example({"text": "Hello, world!", "ranges": [[0, 5], [7, 13]]})

    text: Text = Field(description="The text the ranges index into.")
    ranges: list[Pair] = Field(
        description="[start, end] character offsets, 0 <= start <= end <= len(text); each counted as text[start:end]."
    )
    encoding: EncodingName | None = Field(
        default=None, description="Encoding name; default: the server's default."
    )


class IntervalsResponse(Response):
    encoding: str = Field(description="The encoding used.")
    count: int = Field(description="Tokens in the whole text.")
    counts: list[int] = Field(
        description="Per range, the count of text[start:end] sent on its own."
    )


# ----------------------------------------------------------------------------------- chunk
class ChunkRequest(Request):
    model_config = _example(
        {
            "text": "First paragraph, a few words long.\n\nSecond paragraph, a few more words.",
            "max_tokens": 8,
            "overlap": 2,
        }
    )

    text: Text | None = Field(
        default=None, description="The text to chunk. Give exactly one of text and texts."
    )
    texts: list[Text] | None = Field(
        default=None, description="Several texts, each chunked on its own."
    )
    encoding: EncodingName | None = Field(
        default=None, description="Encoding name; default: the server's default."
    )
    max_tokens: int = Field(
        ge=1, description="Most tokens per chunk (exact: every chunk's count is <= this)."
    )
    overlap: int = Field(
        default=0,
        ge=0,
        description="Tokens of the previous chunk's end each chunk starts with (at most).",
    )
    trim: bool = Field(
        default=True,
        description="Strip whitespace at chunk edges (offsets stay true). False: without overlap the chunks "
        "tile the text exactly.",
    )
    markdown: bool = Field(
        default=False, description="Treat Markdown headings as the best boundaries."
    )
    language: str | None = Field(
        default=None,
        description="Source language whose definitions and blocks are the best boundaries: "
        "python, javascript, typescript, go, rust, or markdown; text: plain text. Default: source "
        "code is detected from the text's start, other text is chunked as plain text.",
        examples=["python"],
    )
    balance: bool = Field(
        default=False,
        description="Share a line that needs several chunks evenly between them (at its sentence, "
        "punctuation or word ends) instead of filling each and leaving a short last piece.",
    )

    @model_validator(mode="after")
    def _one_of(self) -> ChunkRequest:
        if (self.text is None) == (self.texts is None):
            raise ValueError("give exactly one of 'text' and 'texts'")
        if self.overlap >= self.max_tokens:
            raise ValueError("'overlap' must be smaller than 'max_tokens'")
        return self


class ChunkOut(Response):
    text: str = Field(description="The chunk's text, text[start:end].")
    start: int = Field(description="Character offset where the chunk starts.")
    end: int = Field(description="Character offset where the chunk ends.")
    tokens: int = Field(description="Tokens in the chunk on its own.")


class ChunkResponse(Response):
    encoding: str = Field(description="The encoding used.")
    count: int = Field(description="Number of chunks (over all texts).")
    chunks: list[ChunkOut] | None = Field(default=None, description="The chunks of text, in order.")
    results: list[list[ChunkOut]] | None = Field(
        default=None, description="Per text (when texts was given), its chunks."
    )


# ----------------------------------------------------------------------------------- chat
class ChatModel(BaseModel):
    # Message parts are refused when they carry a field the counter does not know: a field it
    # cannot see is a field it cannot count.
    model_config = ConfigDict(extra="forbid", strict=True)


class ChatFunctionCall(ChatModel):
    name: str = Field(description="The function called.")
    arguments: str = Field(default="", description="Its arguments, a JSON string.")


class ChatToolCall(ChatModel):
    id: str | None = Field(default=None, description="Call id, which the tool result refers to.")
    type: Literal["function"] = Field(default="function", description="Always 'function'.")
    function: ChatFunctionCall = Field(description="The function called and its arguments.")


class ChatImageURL(ChatModel):
    url: str = Field(
        description="A base64 data URL (its size is read from the header bytes) or a remote URL "
        "(never fetched: give width and height)."
    )
    detail: Literal["auto", "low", "high"] | None = Field(
        default=None, description="OpenAI's detail level; auto (the default) is counted as high."
    )
    width: int | None = Field(default=None, ge=1, description="Image width in pixels.")
    height: int | None = Field(default=None, ge=1, description="Image height in pixels.")


class ChatContentPart(ChatModel):
    type: Literal["text", "image_url", "input_audio", "refusal"] = Field(
        description="Part kind; input_audio is refused (audio is billed by duration)."
    )
    text: str | None = Field(default=None, description="The text of a 'text' part.")
    image_url: ChatImageURL | None = Field(
        default=None, description="The image of an 'image_url' part."
    )
    input_audio: dict[str, Any] | None = Field(default=None, description="Audio (refused).")
    refusal: str | None = Field(default=None, description="The text of a 'refusal' part.")


class ChatMessage(ChatModel):
    role: str = Field(description="'system', 'developer', 'user', 'assistant', 'tool', ...")
    content: str | list[ChatContentPart] | None = Field(
        default=None, description="Message text, or a list of content parts (text, image_url)."
    )
    name: str | None = Field(default=None, description="Optional participant name.")
    tool_calls: list[ChatToolCall] | None = Field(
        default=None, description="An assistant message's tool calls."
    )
    tool_call_id: str | None = Field(
        default=None, description="A tool message's call id (the call names the tool)."
    )
    function_call: ChatFunctionCall | None = Field(
        default=None, description="Legacy: an assistant message's function call."
    )
    refusal: str | None = Field(default=None, description="An assistant message's refusal text.")
    reasoning_content: str | None = Field(
        default=None,
        description="gpt-oss only: an assistant message's reasoning (harmony's analysis channel).",
    )


class ChatCountRequest(Request):
    # A whole OpenAI chat request body: fields that never reach the prompt (temperature, stream,
    # ...) are ignored rather than refused, so a gateway can send the body it is about to forward.
    model_config = ConfigDict(
        extra="ignore",
        strict=True,
        json_schema_extra={
            "examples": [
                {
                    "messages": [
                        {"role": "system", "content": "You are terse."},
                        {"role": "user", "content": "How many tokens is this?"},
                    ],
                    "model": "gpt-4o",
                }
            ]
        },
    )

    messages: list[ChatMessage] = Field(description="OpenAI chat messages.")
    model: str = Field(
        default="gpt-4o",
        description="Model whose message overheads, image rules and encoding apply, or a loaded "
        "encoding (or alias) with a chat template: an open model, whose template renders the "
        "request.",
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="OpenAI tool (function) definitions."
    )
    functions: list[dict[str, Any]] | None = Field(
        default=None, description="Legacy function definitions (used when tools is absent)."
    )
    tool_choice: str | dict[str, Any] | None = Field(
        default=None,
        description="'auto', 'none', 'required' or {type: 'function', function: {name}}.",
    )
    function_call: str | dict[str, Any] | None = Field(
        default=None, description="Legacy tool_choice (used when tool_choice is absent)."
    )
    response_format: dict[str, Any] | None = Field(
        default=None, description="{type: 'text' | 'json_object' | 'json_schema', json_schema?}."
    )
    reasoning_effort: Literal["low", "medium", "high"] | None = Field(
        default=None, description="gpt-oss: the harmony system message's reasoning effort."
    )
    add_generation_prompt: bool | None = Field(
        default=None,
        description="Open models: end the prompt with the assistant's header (default true, "
        "false with continue_final_message).",
    )
    continue_final_message: bool = Field(
        default=False,
        description="Open models: leave the last message open, for the model to continue it.",
    )
    chat_template: str | None = Field(
        default=None,
        description="Open models: a chat template, or the name of one of the model's, to use "
        "instead of its default.",
    )
    chat_template_kwargs: dict[str, Any] | None = Field(
        default=None,
        description="Open models: more template variables (e.g. enable_thinking).",
    )
    documents: list[dict[str, Any]] | None = Field(
        default=None, description="Open models: documents for templates that render them (RAG)."
    )


class ChatCountResponse(Response):
    model: str = Field(description="The model counted for.")
    count: int = Field(description="Prompt tokens the request costs, overheads included.")
    exact: bool = Field(
        description="True when every part was counted by a rule OpenAI publishes, or by the "
        "model's own chat template; false for an estimate (see estimated)."
    )
    estimated: list[str] = Field(
        description="Which parts were estimated, and how (empty if exact)."
    )
    messages: list[int] = Field(
        description="Tokens of each message, its overheads included (empty for an open model: "
        "its template renders the conversation as a whole)."
    )
    tools: int = Field(
        description="Tokens of the tool definitions, tool_choice and response_format."
    )
    priming: int = Field(
        description="Tokens priming the reply (count = messages + tools + priming)."
    )
    rules_version: str = Field(
        description="Version of the table of counting constants used ('chat_template' for an "
        "open model)."
    )


# ----------------------------------------------------------------------------------- encodings
class EncodingInfo(Response):
    name: str = Field(description="Encoding name.")
    aliases: list[str] = Field(
        default_factory=list,
        description="Other names that select this encoding (BPESVC_MODEL_ALIASES), sorted.",
    )
    n_vocab: int = Field(description="Number of ids, special tokens included (max id + 1).")
    special_tokens: dict[str, int] = Field(description="Special-token strings and their ids.")
    pattern: str | None = Field(
        description="Pre-tokenization regex (null: the whole text is one piece)."
    )
    vocab_sha256: str | None = Field(
        description="SHA-256 of the rank file the encoding was built from."
    )
    default: bool = Field(description="Whether requests naming no encoding use this one.")


class EncodingsResponse(Response):
    data: list[EncodingInfo] = Field(description="The loaded encodings.")


# ----------------------------------------------------------------------------------- health
class HealthResponse(Response):
    status: str = Field(description="'ok', 'loading', 'draining' or 'failed'.")
    encodings: list[str] = Field(default_factory=list, description="Encodings loaded.")
    detail: str | None = Field(default=None, description="Why not ready, when not.")


# ----------------------------------------------------------------------------------- compatibility
class VllmTokenizeRequest(Request):
    model_config = _example({"prompt": "Hello, world!"})

    model: str | None = Field(
        default=None, description="Encoding name (or a model bpecore maps to one)."
    )
    prompt: Text = Field(description="Text to tokenize.")
    add_special_tokens: bool = Field(
        default=True, description="Accepted for compatibility; these encodings add none."
    )
    return_token_strs: bool | None = Field(
        default=False, description="Also return each token's text."
    )


class VllmTokenizeChatRequest(Request):
    # An open model's own template is used when "chat_template" is absent; the example gives one,
    # so it works whatever encoding the server serves by default.
    model_config = _example(
        {
            "messages": [{"role": "user", "content": "Hello!"}],
            "add_generation_prompt": True,
            "chat_template": "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}\n"
            "{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}",
        }
    )

    model: str | None = Field(
        default=None,
        description="Encoding (or alias) of an open model, with a chat template (default: the "
        "server's default encoding).",
    )
    messages: list[dict[str, Any]] = Field(
        description="Chat messages, as vLLM takes them: role, content (a string, or text parts, "
        "joined with newlines), tool_calls (JSON-string arguments are parsed), tool_call_id, "
        "reasoning, ..."
    )
    add_generation_prompt: bool = Field(
        default=True, description="End the prompt with the assistant's header."
    )
    continue_final_message: bool = Field(
        default=False,
        description="Leave the last message open, for the model to continue it (not with "
        "add_generation_prompt).",
    )
    add_special_tokens: bool = Field(
        default=False,
        description="Must stay false: the template writes the model's special tokens (true would "
        "add the tokenizer's BOS again, which bpecore does not model).",
    )
    return_token_strs: bool | None = Field(
        default=False, description="Also return each token's text."
    )
    chat_template: str | None = Field(
        default=None, description="A chat template, or the name of one of the model's."
    )
    chat_template_kwargs: dict[str, Any] | None = Field(
        default=None, description="More template variables (e.g. enable_thinking)."
    )
    tools: list[dict[str, Any]] | None = Field(
        default=None, description="Tool definitions the template renders."
    )


class VllmTokenizeResponse(Response):
    count: int = Field(description="Number of tokens.")
    max_model_len: int | None = Field(
        description="The model's context length from its config (an encoding loaded with "
        "from_pretrained); null when unknown."
    )
    tokens: list[int] = Field(description="Token ids.")
    token_strs: list[str] | None = Field(
        default=None, description="Per token, its text (when asked)."
    )


class VllmDetokenizeRequest(Request):
    model_config = _example({"tokens": [9906, 11, 1917, 0]})

    model: str | None = Field(
        default=None, description="Encoding name (or a model bpecore maps to one)."
    )
    tokens: list[TokenId] = Field(description="Token ids to decode.")


class VllmDetokenizeResponse(Response):
    prompt: str = Field(description="The decoded text.")


class TeiTokenizeRequest(Request):
    model_config = _example({"inputs": "Hello, world!"})

    inputs: Text | list[Text] = Field(description="Text or texts to tokenize.")
    add_special_tokens: bool = Field(
        default=True, description="Accepted for compatibility; these encodings add none."
    )
    prompt_name: str | None = Field(
        default=None, description="Accepted for compatibility; ignored."
    )


class TeiToken(Response):
    id: int = Field(description="Token id.")
    text: str = Field(description="The token's text.")
    special: bool = Field(description="Whether this is a special token.")
    start: int | None = Field(
        description="UTF-8 byte offset where the token starts (TEI convention)."
    )
    stop: int | None = Field(description="UTF-8 byte offset where the token ends (TEI convention).")


class TeiDecodeRequest(Request):
    model_config = _example({"ids": [9906, 11, 1917, 0]})

    ids: list[TokenId] | list[list[TokenId]] = Field(
        description="Token ids, or a list of id lists."
    )
    skip_special_tokens: bool = Field(
        default=True, description="Drop special tokens from the text."
    )


def with_request_examples(openapi: dict) -> dict:
    """``openapi`` with each request model's example also on its request body's media type
    (``content["application/json"]["examples"]``), which every OpenAPI UI offers in "Try it out";
    a body that is one of several models (``/tokenize``) gets one example per model."""
    models = openapi.get("components", {}).get("schemas", {})
    for ops in openapi.get("paths", {}).values():
        for op in ops.values():
            media = op.get("requestBody", {}).get("content", {}).get("application/json")
            if not media:
                continue
            schema = media.get("schema", {})
            refs = [s.get("$ref", "") for s in schema.get("anyOf", [schema])]
            examples = {}
            for ref in refs:
                name = ref.rsplit("/", 1)[-1]
                for i, value in enumerate(models.get(name, {}).get("examples", [])):
                    examples[name if i == 0 else f"{name} {i + 1}"] = {"value": value}
            if examples:
                media["examples"] = examples
    return openapi

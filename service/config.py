"""Service settings, read from the environment with the ``BPESVC_`` prefix (``BPESVC_PORT=9000``).

Complex fields take JSON: ``BPESVC_ENCODINGS='["cl100k_base"]'``,
``BPESVC_TIKTOKEN_FILES='[{"path": "/vocab/my.tiktoken", "pattern": "cl100k"}]'``,
``BPESVC_MODEL_ALIASES='{"meta-llama/Llama-3.1-8B-Instruct": "llama3"}'``.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import BaseModel, ConfigDict, Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class TiktokenFile(BaseModel):
    """A `.tiktoken` rank file to load at start-up, with the pattern and specials it needs."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(
        description="Path of the rank file (plain or gzip): one '<base64 token> <rank>' per line."
    )
    name: str | None = Field(
        default=None, description="Encoding name; default: the file name up to its first dot."
    )
    pattern: str | None = Field(
        default="cl100k",
        description="Pre-tokenization regex, or the name of a shipped one: 'cl100k', 'o200k', 'r50k'. "
        "null makes the whole text one piece. Unset: the file's sidecar (path + '.json') if any, else cl100k.",
    )
    special_tokens: dict[str, int] = Field(
        default_factory=dict,
        description="Special-token strings and their ids. Unset: the file's sidecar if any, else none.",
    )
    sha256: str | None = Field(
        default=None, description="Expected SHA-256 of the (decompressed) file, checked at load."
    )


class HFFile(BaseModel):
    """A Hugging Face `tokenizer.json` (byte-level BPE) to load at start-up."""

    model_config = ConfigDict(extra="forbid")

    path: str = Field(description="Path of the tokenizer.json file.")
    name: str | None = Field(
        default=None, description="Encoding name; default: the name of the file's directory."
    )


class Settings(BaseSettings):
    """Everything the service can be told; each field is ``BPESVC_<FIELD>`` in the environment."""

    model_config = SettingsConfigDict(env_prefix="BPESVC_", extra="ignore")

    host: str = Field(
        default="127.0.0.1",
        description="Address `python -m bpecore_service` listens on (the image and manifests set 0.0.0.0).",
    )
    port: int = Field(default=8000, description="Port `python -m bpecore_service` listens on.")
    workers: int = Field(
        default=1, description="uvicorn worker processes (one per container is advised)."
    )
    encodings: list[str] | None = Field(
        default=None,
        description="Encodings to load, by name or by vocab file path (a .tiktoken file, read with its "
        "sidecar when present, or a tokenizer.json; served under its encoding's name); default: every one "
        "bpecore ships.",
    )
    tiktoken_files: list[TiktokenFile] = Field(
        default_factory=list, description="Extra .tiktoken files to load."
    )
    hf_files: list[HFFile] = Field(
        default_factory=list, description="Extra tokenizer.json files to load."
    )
    model_aliases: dict[str, str] = Field(
        default_factory=dict,
        description="More names for loaded encodings, alias -> encoding name (JSON: "
        '\'{"meta-llama/Llama-3.1-8B-Instruct": "llama3"}\'), so requests naming a model '
        '(vLLM\'s /tokenize "model") resolve; an alias may not take the name of another loaded '
        "encoding.",
    )
    default_encoding: str = Field(
        default="cl100k_base",
        description="Encoding used when a request names none: a name, or a vocab file path (loaded too).",
    )
    load_in_background: bool = Field(
        default=True,
        description="Load encodings after the server starts listening (/readyz is 503 meanwhile); "
        "False loads them inside the lifespan before serving.",
    )

    max_request_bytes: int = Field(
        default=8 * 1024 * 1024, description="Largest request body (413 above)."
    )
    max_texts: int = Field(default=1024, description="Most texts in one batch request.")
    max_ranges: int = Field(
        default=100_000, description="Most ranges in one /v1/intervals request."
    )
    max_tokens: int = Field(
        default=1_000_000, description="Largest max_tokens / limit a request may ask for."
    )
    max_offsets: int = Field(
        default=200_000,
        description="Most tokens a request may ask per-token objects for (offsets, TEI tokens).",
    )
    max_chunks: int = Field(
        default=100_000,
        description="Most chunks a /v1/chunk request may produce, estimated as "
        "count(text) / (max_tokens - overlap) before chunking.",
    )
    max_encodings: int = Field(default=8, description="Most encodings in one /v1/count request.")
    chat_template_seconds: float = Field(
        default=2.0,
        gt=0,
        description="Longest an open model's chat template may render (422 template_timeout after).",
    )
    chat_template_max_chars: int | None = Field(
        default=None,
        gt=0,
        description="Longest text a chat template may build or output (422 template_output_size "
        "above); default 1,000,000 plus 8 times the characters of the request.",
    )
    max_streams: int = Field(
        default=256, description="Most WebSocket streams open at once (429 above)."
    )
    max_stream_bytes: int = Field(
        default=64 * 1024 * 1024, description="Most bytes one stream may append in total."
    )
    max_inflight: int = Field(
        default=512, description="Most HTTP requests in progress at once (429 above)."
    )
    max_header_bytes: int = Field(
        default=64 * 1024,
        description="Largest request line + headers (431 and close above; httptools only).",
    )
    header_timeout: float = Field(
        default=10.0,
        description="Seconds a connection has to send a whole request head (408 and close after).",
    )
    body_timeout: float = Field(
        default=30.0,
        description="Most seconds between two reads of a request body (408 and close after).",
    )
    fast_path: bool = Field(
        default=True,
        description="Answer well-formed requests to routes with a lean handler (POST /v1/count, /v1/encode, "
        "/v1/chunk) ahead of FastAPI's router (same answers, a fraction of the cost per request); False "
        "sends every request through the FastAPI routes.",
    )
    gil_switch_seconds: float = Field(
        default=0.001,
        description="sys.setswitchinterval: most time a thread running Python code keeps the GIL while "
        "another waits for it (Python's default is 0.005); bounds how long the event loop waits.",
    )
    threadpool_size: int = Field(
        default=40, description="Threads running the (GIL-releasing) endpoint bodies."
    )
    gc_freeze: bool = Field(
        default=True,
        description="gc.freeze() once the encodings are loaded: the long-lived objects leave the "
        "collector's generations, so a full collection does not walk them while requests wait.",
    )
    gc_threshold: int = Field(
        default=50_000,
        ge=0,
        description="gc.set_threshold's first value (allocations between young collections; Python's "
        "is 700); 0 keeps Python's.",
    )
    piece_cache_bytes: int = Field(
        default=8 << 20,
        ge=0,
        description="Memory cap of each encoding's piece cache (BPE results of the pieces seen, kept "
        "across requests and shared by threads), allocated by the encoding's first request; 0 turns "
        "it off.",
    )

    drain_seconds: float = Field(
        default=0.0,
        description="On SIGTERM: seconds to keep serving with /readyz 503 before uvicorn stops accepting "
        "(lets the load balancer drop the pod first; use instead of a preStop sleep).",
    )
    log_level: str = Field(default="INFO", description="Log level of the JSON logs.")


@lru_cache
def get_settings() -> Settings:
    """The process settings, read from the environment once."""
    return Settings()

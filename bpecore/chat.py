"""Token counts of OpenAI chat requests as the model sees them, and of growing histories.

Where OpenAI publishes a rule it is followed exactly (``CHAT_RULES["published"]``):
- the cookbook "How to count tokens with tiktoken" (sections 6 and 7): each message costs
  ``tokens_per_message`` plus the tokens of its string values (role, content, name, ...); a
  ``name`` costs ``tokens_per_name`` more; every reply is primed with 3 tokens; function
  definitions cost the per-function, per-property and per-enum-item constants plus the tokens of
  ``name:description`` and ``property:type:description``;
- the vision pricing rules ("Images and vision", "Calculating costs"): tiles of 512 px for
  ``detail: high`` (``low`` is the base alone), or 32-px patches times a per-model multiplier.

Where OpenAI publishes none, the count renders the part as the open-weight models' harmony format
documents it, counts that text, and marks the result an estimate (``ChatCount.exact`` is false and
``ChatCount.estimated`` says why): assistant tool calls, tool results, a forced ``tool_choice``,
``response_format`` schemas, tool parameters the cookbook formula does not cover (nested objects,
arrays, unions: the ``namespace functions { ... }`` TypeScript rendering), ``detail: auto`` images
(counted as ``high``), and models whose overheads are not published (gpt-4o's are used).
Every constant is in ``CHAT_RULES``, versioned by ``CHAT_RULES["version"]``.

``gpt-oss-*`` requests are exact: rendered in the harmony format and counted with o200k_harmony
(``bpecore.harmony``), checked against the ``openai-harmony`` package's renderer.

Open models are exact too: pass the encoding of a model directory (``from_pretrained``, which
keeps its ``chat_template``) as the model, and the request is rendered with the model's own chat
template as `transformers` renders it and encoded with its special tokens parsed
(``bpecore.chat_template``; checked against ``apply_chat_template(..., tokenize=True)``)::

    enc = bpecore.from_pretrained("models/Qwen2.5-7B-Instruct")
    count_messages(messages, model=enc, tools=tools)     # what the model is fed, reply header included
    count_request({"messages": messages, "add_generation_prompt": False}, encoding=enc)

The request fields a template sees: ``messages``, ``tools``, ``documents``,
``add_generation_prompt`` (default true here: the prompt a chat completion sends),
``continue_final_message``, ``chat_template`` (a template, or the name of one of the model's) and
``chat_template_kwargs`` (more template variables, e.g. ``enable_thinking``). A template renders
the conversation as a whole, so ``ChatCount.messages`` is empty; ``ChatCounter`` re-renders on
each ``add`` (its per-message counts are what each message added to the rendered prompt);
``trim_to_budget`` drops whole turns (a user message and what follows it, which keeps
alternating templates valid) and cuts the oldest kept turn's first message to fit. Rendering is
bounded in time and output size; a template that fails or passes a limit raises
``ChatTemplateError`` (a ``ValueError``) with its ``reason``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from bpecore.chat_template import ChatTemplateError, apply_chat_template
from bpecore.harmony import typescript
from bpecore.images import image_size, patch_count, tile_count

__all__ = [
    "CHAT_RULES",
    "ChatCount",
    "ChatTemplateError",
    "ChatCounter",
    "count_messages",
    "count_request",
    "fits",
    "trim_to_budget",
]


@dataclass(frozen=True, slots=True)
class _Family:
    """Overheads of one model family, in tokens."""

    encoding: str
    tokens_per_message: int  # every message: <|start|>{role}\n{content}<|end|>\n
    tokens_per_name: int  # a message with "name" (-1: the name replaces the role)
    reply_priming: int  # once: every reply is primed with <|start|>assistant<|message|>
    func_init: int  # each function definition
    prop_init: int  # a function with at least one parameter property
    prop_key: int  # each property
    enum_init: int  # a property with an enum
    enum_item: int  # each enum value
    func_end: int  # once, when any function is defined


#: Every constant the chat counts use. Bump "version" whenever a number or a rendering changes.
CHAT_RULES: dict[str, Any] = {
    "version": "2026-11-24.2",
    # OpenAI cookbook, "How to count tokens with tiktoken" (published; exact for its examples).
    "published": {
        "gpt-3.5-turbo-0301": _Family("cl100k_base", 4, -1, 3, 10, 3, 3, -3, 3, 12),
        "gpt-3.5-turbo": _Family("cl100k_base", 3, 1, 3, 10, 3, 3, -3, 3, 12),
        "gpt-4": _Family("cl100k_base", 3, 1, 3, 10, 3, 3, -3, 3, 12),
        "gpt-4o": _Family("o200k_base", 3, 1, 3, 7, 3, 3, -3, 3, 12),
    },
    # Model name prefix -> (family, published?); the longest prefix wins (after tiktoken's map).
    # Unpublished: newer models, for which OpenAI has given no overheads; gpt-4o's are used.
    "models": {
        "gpt-3.5-turbo-0301": ("gpt-3.5-turbo-0301", True),
        "gpt-3.5": ("gpt-3.5-turbo", True),
        "gpt-35-turbo": ("gpt-3.5-turbo", True),
        "gpt-4": ("gpt-4", True),
        "gpt-4o": ("gpt-4o", True),
        "chatgpt-4o": ("gpt-4o", True),
        "gpt-4.1": ("gpt-4o", False),
        "gpt-4.5": ("gpt-4o", False),
        "gpt-5": ("gpt-4o", False),
        "o1": ("gpt-4o", False),
        "o3": ("gpt-4o", False),
        "o4-mini": ("gpt-4o", False),
    },
    # OpenAI "Images and vision", "Calculating costs" (published). Tile models: (base, per tile);
    # detail low = base. Patch models: multiplier on 32-px patches, capped at "patch_cap".
    "image_tiles": {
        "gpt-4o": (85, 170),
        "chatgpt-4o": (85, 170),
        "gpt-4-turbo": (85, 170),
        "gpt-4.1": (85, 170),
        "gpt-4.5": (85, 170),
        "gpt-5": (70, 140),
        "gpt-4o-mini": (2833, 5667),
        "o1": (75, 150),
        "o3": (75, 150),
    },
    "image_patches": {
        "gpt-4.1-mini": 1.62,
        "gpt-5-mini": 1.62,
        "gpt-4.1-nano": 2.46,
        "gpt-5-nano": 2.46,
        "o4-mini": 1.72,
    },
    "patch_cap": 1536,
    # Estimates: the harmony format's renderings (special tokens count 1 each).
    # (bpecore.harmony; each text piece is encoded on its own, as the reference renderer does)
    # assistant tool call: <|start|>assistant to=functions.{name}<|channel|>commentary
    #   <|constrain|>json<|message|>{arguments}<|call|>
    "tool_call_specials": 5,
    # tool result: <|start|>functions.{name} to=assistant<|channel|>commentary<|message|>{content}<|end|>
    "tool_result_specials": 4,
    # forced tool_choice: the reply is primed with to=functions.{name}<|channel|>commentary <|constrain|>json
    "forced_call_specials": 2,
}

_IMAGE_DETAILS = ("auto", "low", "high")


def _prefix_of(model: str, table: str) -> str:
    """The longest key of ``CHAT_RULES[table]`` that ``model`` (less any ``ft:``) starts with."""
    name = model.removeprefix("ft:")
    return max((p for p in CHAT_RULES[table] if name.startswith(p)), key=len, default="")


def _family(model: str) -> tuple[_Family, bool]:
    hit = CHAT_RULES["models"].get(_prefix_of(model, "models"))
    if hit is None:
        known = ", ".join(sorted(CHAT_RULES["models"]))
        raise ValueError(
            f"unknown chat model {model!r}; known models: any name starting with {known}"
        )
    return CHAT_RULES["published"][hit[0]], hit[1]


@dataclass(frozen=True, slots=True)
class ChatCount:
    """The prompt tokens of a chat request, part by part.

    ``total == sum(messages) + tools + priming``. ``exact`` is true when every part was counted
    by a rule OpenAI publishes; otherwise ``estimated`` names the parts that were not.
    """

    total: int
    messages: tuple[int, ...]  #: each message, its overheads included
    tools: int  #: tool/function definitions, tool_choice and response_format
    priming: int  #: the reply priming
    exact: bool
    estimated: tuple[str, ...]  #: why the count is an estimate (empty when exact)
    model: str
    encoding: str
    rules_version: str = CHAT_RULES["version"]


# ------------------------------------------------------------------------------ rendering
def _ts_function(fn: Mapping[str, Any]) -> str:
    """One function of the harmony ``namespace functions { ... }`` block."""
    head = "".join(f"// {line}\n" for line in (fn.get("description") or "").splitlines())
    params = fn.get("parameters")
    if params is None:
        return f"{head}type {fn['name']} = () => any;\n"
    return f"{head}type {fn['name']} = (_: {typescript(params)}) => any;\n"


def _check_function(fn: Mapping[str, Any], params: Mapping[str, Any]) -> None:
    """``TypeError`` for a definition neither rendering can read (reported as malformed)."""
    if not isinstance(fn.get("name"), str):
        raise TypeError("a function needs a string name")
    if not isinstance(fn.get("description") or "", str):
        raise TypeError("a function description must be a string")
    props = params.get("properties") or {}
    if not isinstance(props, Mapping) or not all(isinstance(p, Mapping) for p in props.values()):
        raise TypeError("parameters.properties must map names to JSON schemas")


def _flat(params: Mapping[str, Any]) -> bool:
    """Whether the cookbook's function formula covers these parameters (scalar properties)."""
    for prop in (params.get("properties") or {}).values():
        if not isinstance(prop, Mapping) or any(
            k in prop for k in ("properties", "items", "anyOf", "oneOf", "allOf", "$ref")
        ):
            return False
        if prop.get("type") not in ("string", "number", "integer", "boolean", "null"):
            return False
    return True


# ------------------------------------------------------------------------------ counting
class ChatCounter:
    """A chat request's count, kept up to date as messages are added.

    ``add(message)`` costs time proportional to that message, not to the history: the per-message
    rules are additive, and the only state carried is the name of each tool call by id.

    ``model`` may be an open model's encoding (``from_pretrained``): each ``add`` then renders the
    model's chat template over the whole history (a template sees the conversation as a whole),
    and ``template_options`` are the template's request fields (``documents``,
    ``add_generation_prompt``, ``chat_template``, ``chat_template_kwargs``, ``seconds``,
    ``max_chars``).

    >>> c = ChatCounter("gpt-4o")
    >>> c.add({"role": "user", "content": "Hello!"}), c.total
    (6, 9)
    """

    def __init__(
        self,
        model: str | Any = "gpt-4o",
        tools: Iterable[Mapping[str, Any]] | None = None,
        *,
        tool_choice: Any = None,
        response_format: Mapping[str, Any] | None = None,
        template_options: Mapping[str, Any] | None = None,
    ) -> None:
        from bpecore.registry import get_encoding

        self._template: dict[str, Any] | None = None
        if not isinstance(model, str):
            self._init_template(model, tools, template_options or {})
            return
        if model.startswith("gpt-oss"):
            raise ValueError(
                "gpt-oss requests are counted whole by count_request: the harmony format drops "
                "earlier reasoning once a final answer follows, so message counts do not add up"
            )
        self.model = model
        self._fam, published = _family(model)
        self._enc = get_encoding(self._fam.encoding)
        self._encoding_name = self._fam.encoding
        self._reasons: dict[str, None] = {}
        if not published:
            self._note(f"{model}: overheads not published (gpt-4o's used)")
        self._call_names: dict[str, str] = {}
        self.counts: list[int] = []
        self._messages_total = 0
        try:
            self.tools_tokens = (
                self._tools(list(tools or ()))
                + self._tool_choice(tool_choice)
                + self._response_format(response_format)
            )
        except (KeyError, TypeError, AttributeError) as e:
            raise ValueError(f"malformed tool definition ({type(e).__name__}: {e})") from None
        self.priming = self._fam.reply_priming

    def _init_template(self, enc: Any, tools: Any, options: Mapping[str, Any]) -> None:
        if not callable(getattr(enc, "encode", None)):
            raise ValueError(f"model must be a model name or an encoding, got {enc!r}")
        self.model = enc.name
        self._enc = enc
        self._encoding_name = enc.name
        self._reasons = {}
        self._call_names = {}
        self.counts = []
        self._messages_total = 0
        self.tools_tokens = 0
        self.priming = 0
        self._history: list[Mapping[str, Any]] = []
        self._template = _template_options({**options, "tools": tools})

    # -- public
    @property
    def total(self) -> int:
        """Tokens of the request so far: messages, tools and reply priming."""
        return self._messages_total + self.tools_tokens + self.priming

    @property
    def exact(self) -> bool:
        return not self._reasons

    @property
    def estimated(self) -> tuple[str, ...]:
        return tuple(self._reasons)

    def add(self, message: Mapping[str, Any]) -> int:
        """Count ``message`` into the request; returns that message's tokens."""
        if not isinstance(message, Mapping):
            raise ValueError(f"a message must be an object, got {type(message).__name__}")
        if self._template is not None:
            self._history.append(message)
            try:
                total = len(apply_chat_template(self._enc, self._history, **self._template))
            except ValueError:
                self._history.pop()
                raise
            n = total - self._messages_total
            self.counts.append(n)
            self._messages_total = total
            return n
        n = self._message(message)
        self.counts.append(n)
        self._messages_total += n
        return n

    def extend(self, messages: Iterable[Mapping[str, Any]]) -> int:
        """Add every message; returns the new total."""
        for m in messages:
            self.add(m)
        return self.total

    def result(self) -> ChatCount:
        return ChatCount(
            total=self.total,
            messages=tuple(self.counts),
            tools=self.tools_tokens,
            priming=self.priming,
            exact=self.exact,
            estimated=self.estimated,
            model=self.model,
            encoding=self._encoding_name,
            rules_version="chat_template" if self._template is not None else CHAT_RULES["version"],
        )

    # -- parts
    def _note(self, reason: str) -> None:
        self._reasons.setdefault(reason)

    def _count(self, text: str) -> int:
        return self._enc.count(text)

    def _message(self, message: Mapping[str, Any]) -> int:
        role = message.get("role")
        if not isinstance(role, str):
            raise ValueError(f"a message needs a string role, got {role!r}")
        if role in ("tool", "function"):
            return self._tool_result(message)
        for key in ("reasoning_content", "reasoning"):
            if message.get(key):
                raise ValueError(
                    f"{key} is read for gpt-oss models only (harmony's analysis channel)"
                )
        calls = self._calls(message)
        fam = self._fam
        total = 0
        has_text = any(
            message.get(k) not in (None, "", [])
            for k in message
            if k not in ("tool_calls", "function_call", "role")
        )
        if has_text or not calls:
            total += fam.tokens_per_message
            for key, value in message.items():
                if key in ("tool_calls", "function_call"):
                    continue
                total += self._value(key, value)
                if key == "name":
                    total += fam.tokens_per_name
        if calls:
            self._note("assistant tool calls (harmony rendering)")
            for name, arguments in calls:
                total += (
                    CHAT_RULES["tool_call_specials"]
                    + self._count("assistant")
                    + self._count(f" to=functions.{name}")
                    + self._count("commentary")
                    + self._count(" ")
                    + self._count("json")
                    + self._count(arguments)
                )
        return total

    def _calls(self, message: Mapping[str, Any]) -> list[tuple[str, str]]:
        out = []
        raw = list(message.get("tool_calls") or ())
        if message.get("function_call"):
            raw.append({"function": message["function_call"]})
        for call in raw:
            fn = call.get("function") if isinstance(call, Mapping) else None
            if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                raise ValueError(f"a tool call needs function.name, got {call!r}")
            args = fn.get("arguments") or ""
            if not isinstance(args, str):
                args = json.dumps(args)
            if isinstance(call.get("id"), str):
                self._call_names[call["id"]] = fn["name"]
            out.append((fn["name"], args))
        return out

    def _tool_result(self, message: Mapping[str, Any]) -> int:
        self._note("tool results (harmony rendering)")
        name = message.get("name")
        if not isinstance(name, str):
            call_id = message.get("tool_call_id")
            name = self._call_names.get(call_id, "tool") if isinstance(call_id, str) else "tool"
        content = self._value("content", message.get("content"))
        return (
            CHAT_RULES["tool_result_specials"]
            + self._count(f"functions.{name}")
            + self._count(" to=assistant")
            + self._count("commentary")
            + content
        )

    def _value(self, key: str, value: Any) -> int:
        if value is None:
            return 0
        if isinstance(value, str):
            return self._count(value)
        if key == "content" and isinstance(value, list):
            return sum(self._part(p) for p in value)
        raise ValueError(
            f"message field {key!r} has no published token rule (got {type(value).__name__})"
        )

    def _part(self, part: Any) -> int:
        kind = part.get("type") if isinstance(part, Mapping) else None
        if kind == "text" and isinstance(part.get("text"), str):
            return self._count(part["text"])
        if kind == "refusal" and isinstance(part.get("refusal"), str):
            return self._count(part["refusal"])
        if kind == "image_url" and isinstance(part.get("image_url"), Mapping):
            return self._image(part["image_url"])
        if kind == "input_audio":
            raise ValueError(
                "input_audio parts are not counted: OpenAI bills audio input by its duration, "
                "with no published rule from bytes to tokens"
            )
        raise ValueError(f"content part {part!r} has no published token rule")

    def _image(self, image: Mapping[str, Any]) -> int:
        detail = image.get("detail", "auto")
        if detail not in _IMAGE_DETAILS:
            raise ValueError(f"image detail must be one of {_IMAGE_DETAILS}, got {detail!r}")
        tile_prefix = _prefix_of(self.model, "image_tiles")
        patch_prefix = _prefix_of(self.model, "image_patches")
        if not tile_prefix and not patch_prefix:
            raise ValueError(f"model {self.model!r} has no published image token rule")
        if len(patch_prefix) > len(tile_prefix):  # gpt-4.1-mini is a patch model, gpt-4.1 not
            w, h = self._image_dims(image)
            patches = patch_count(w, h, CHAT_RULES["patch_cap"])
            return int(patches * CHAT_RULES["image_patches"][patch_prefix] + 0.5)
        tiles = CHAT_RULES["image_tiles"][tile_prefix]
        base, per_tile = tiles
        if detail == "low":
            return base
        if detail == "auto":
            self._note("image detail auto (counted as high)")
        w, h = self._image_dims(image)
        return base + per_tile * tile_count(w, h)

    @staticmethod
    def _image_dims(image: Mapping[str, Any]) -> tuple[int, int]:
        w, h = image.get("width"), image.get("height")
        if w is not None or h is not None:
            if not (isinstance(w, int) and isinstance(h, int) and w > 0 and h > 0):
                raise ValueError("image width and height must both be positive integers")
            return w, h
        url = image.get("url")
        if not isinstance(url, str):
            raise ValueError("image_url needs a url (or a width and height)")
        return image_size(url)

    def _tools(self, tools: list[Mapping[str, Any]]) -> int:
        fam = self._fam
        total = 0
        for tool in tools:
            fn = tool.get("function", tool)
            params = fn.get("parameters") or {}
            _check_function(fn, params)
            total += fam.func_init
            if not _flat(params):
                self._note("tool parameters beyond the cookbook formula (harmony TypeScript)")
                total += self._count(_ts_function(fn))
                continue
            desc = (fn.get("description") or "").removesuffix(".")
            total += self._count(f"{fn['name']}:{desc}")
            properties = params.get("properties") or {}
            if properties:
                total += fam.prop_init
                for key, prop in properties.items():
                    total += fam.prop_key
                    if "enum" in prop:
                        total += fam.enum_init
                        for item in prop["enum"]:
                            total += fam.enum_item + self._count(str(item))
                    p_desc = (prop.get("description") or "").removesuffix(".")
                    total += self._count(f"{key}:{prop.get('type', '')}:{p_desc}")
        if tools:
            total += fam.func_end
        return total

    def _tool_choice(self, choice: Any) -> int:
        if choice in (None, "auto", "none"):
            return 0
        if choice == "required":
            self._note("tool_choice required (no rule: 0 tokens)")
            return 0
        if isinstance(choice, Mapping):
            fn = choice.get("function", choice)
            name = fn.get("name") if isinstance(fn, Mapping) else None
            if isinstance(name, str):
                self._note("forced tool_choice (harmony rendering)")
                return (
                    CHAT_RULES["forced_call_specials"]
                    + self._count(f" to=functions.{name}")
                    + self._count("commentary")
                    + self._count(" ")
                    + self._count("json")
                )
        raise ValueError(f"tool_choice must be auto, none, required or a function, got {choice!r}")

    def _response_format(self, fmt: Mapping[str, Any] | None) -> int:
        if fmt is None or fmt.get("type") == "text":
            return 0
        if fmt.get("type") == "json_object":
            self._note("response_format json_object (no rule: 0 tokens)")
            return 0
        if fmt.get("type") == "json_schema":
            self._note("response_format schema (harmony rendering)")
            spec = fmt["json_schema"]
            desc = f"// {spec['description']}\n" if spec.get("description") else ""
            text = f"# Response Formats\n\n## {spec['name']}\n\n{desc}"
            return self._count(text + json.dumps(spec.get("schema", {}), separators=(",", ":")))
        raise ValueError(f"response_format type must be text, json_object or json_schema: {fmt!r}")


def _counter(request: Mapping[str, Any]) -> ChatCounter:
    tools = request.get("tools")
    if tools is None:
        tools = request.get("functions")
    choice = request.get("tool_choice")
    if choice is None and request.get("function_call") is not None:
        choice = request["function_call"]
    return ChatCounter(
        request.get("model") or "gpt-4o",
        tools,
        tool_choice=choice,
        response_format=request.get("response_format"),
    )


def _count_harmony(request: Mapping[str, Any]) -> ChatCount:
    """A gpt-oss request, rendered in the harmony format and counted with o200k_harmony."""
    from bpecore.harmony import harmony_pieces
    from bpecore.registry import get_encoding

    enc = get_encoding("o200k_harmony")
    per = [0] * len(request.get("messages") or ())
    header = 0
    for index, _channel, specials, texts in harmony_pieces(request):
        n = specials + sum(enc.count(t) for t in texts)
        if index < 0:
            header += n
        else:
            per[index] += n
    priming = 1 + enc.count("assistant")  # <|start|>assistant
    return ChatCount(
        total=sum(per) + header + priming,
        messages=tuple(per),
        tools=header,
        priming=priming,
        exact=True,
        estimated=(),
        model=request["model"],
        encoding="o200k_harmony",
    )


_TEMPLATE_FIELDS = (
    "tools",
    "documents",
    "add_generation_prompt",
    "continue_final_message",
    "chat_template",
    "seconds",
    "max_chars",
)


def _template_options(request: Mapping[str, Any]) -> dict[str, Any]:
    """``apply_chat_template`` keywords from a request's template fields (see the docstring)."""
    options = {k: request[k] for k in _TEMPLATE_FIELDS if request.get(k) is not None}
    options.setdefault("add_generation_prompt", not options.get("continue_final_message"))
    extra = request.get("chat_template_kwargs") or {}
    if not isinstance(extra, Mapping):
        raise ValueError("chat_template_kwargs must be an object")
    clash = sorted(set(extra) & {"messages", *_TEMPLATE_FIELDS, "tokenize"})
    if clash:
        raise ValueError(f"chat_template_kwargs may not set {clash}")
    return {**options, **extra}


def _count_template(request: Mapping[str, Any], enc: Any) -> ChatCount:
    """A request rendered with the encoding's chat template, counted exactly."""
    ids = apply_chat_template(
        enc, list(request.get("messages") or ()), **_template_options(request)
    )
    model = request.get("model")
    return ChatCount(
        total=len(ids),
        messages=(),
        tools=0,
        priming=0,
        exact=True,
        estimated=(),
        model=model if isinstance(model, str) else enc.name,
        encoding=enc.name,
        rules_version="chat_template",
    )


def _open_model(request: Mapping[str, Any], encoding: Any) -> Any:
    """The encoding whose chat template renders ``request``, or None (an OpenAI model)."""
    if encoding is not None:
        return encoding
    model = request.get("model")
    return None if model is None or isinstance(model, str) else model


def count_request(request: Mapping[str, Any], encoding: Any = None) -> ChatCount:
    """Prompt tokens of a whole OpenAI chat request body, part by part.

    Reads ``model`` (default gpt-4o), ``messages``, ``tools`` (or legacy ``functions``),
    ``tool_choice`` (or legacy ``function_call``) and ``response_format``; other request fields
    do not reach the prompt and are ignored. ``ValueError`` for an unknown model, a remote image
    without width and height, audio input, or a malformed part.

    With ``encoding`` (or an encoding as ``model``), the request is an open model's: rendered
    with its chat template and counted exactly (the template fields of the module docstring).

    >>> count_request({"model": "gpt-4o", "messages": [{"role": "user", "content": "Hello!"}]}).total
    9
    """
    enc = _open_model(request, encoding)
    if enc is not None:
        return _count_template(request, enc)
    if str(request.get("model") or "").startswith("gpt-oss"):
        return _count_harmony(request)
    counter = _counter(request)
    counter.extend(request.get("messages") or ())
    return counter.result()


def count_messages(
    messages: Iterable[Mapping[str, Any]],
    model: str | Any = "gpt-4o",
    tools: Iterable[Mapping[str, Any]] | None = None,
) -> int:
    """Prompt tokens of a chat request's messages (and tools) for ``model``.

    The total of ``count_request({"model": model, "messages": messages, "tools": tools})``;
    that function also says whether the count is exact and gives the per-message breakdown.
    ``model`` may be an open model's encoding: its chat template renders the request, reply
    header included.

    >>> count_messages([{"role": "user", "content": "Hello!"}], model="gpt-4o")
    9
    """
    return count_request({"model": model, "messages": list(messages), "tools": tools}).total


def fits(request: Mapping[str, Any], budget: int, encoding: Any = None) -> bool:
    """Whether the request's prompt is at most ``budget`` tokens; stops counting once over.

    An open model's request (``encoding``, or an encoding as ``model``) is rendered once, whole.
    """
    enc = _open_model(request, encoding)
    if enc is not None:
        return _count_template(request, enc).total <= budget
    counter = _counter(request)
    if counter.total > budget:
        return False
    for message in request.get("messages") or ():
        counter.add(message)
        if counter.total > budget:
            return False
    return True


_PINNED = ("system", "developer")


def _cuttable(message: Mapping[str, Any]) -> bool:
    return (
        isinstance(message.get("content"), str)
        and message.get("role") not in ("tool", "function")
        and not message.get("tool_calls")
        and not message.get("function_call")
    )


def trim_to_budget(
    messages: Iterable[Mapping[str, Any]],
    budget: int,
    model: str | Any = "gpt-4o",
    *,
    tools: Iterable[Mapping[str, Any]] | None = None,
    keep: str = "tail",
    template_options: Mapping[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """The newest messages that fit in ``budget`` tokens, the oldest kept one cut to fit.

    System and developer messages are always kept. An assistant message with tool calls and the
    tool results that follow it are kept or dropped together (never a result without its call).
    The oldest message that does not fit whole, if its content is text, keeps the longest tail
    that fits (``Encoding.split_at_end``), so the request uses the budget exactly. ``ValueError``
    when the pinned messages and tools alone exceed the budget.

    For an open model's encoding, the chat template renders every candidate (see the module
    docstring): whole turns are dropped, oldest first, then the newest dropped turn comes back
    with its first message cut to the longest tail that fits, if any does.
    """
    if keep != "tail":
        raise ValueError(f"keep must be 'tail' (drop the oldest turns), got {keep!r}")
    messages = [dict(m) for m in messages]
    if not isinstance(model, str):
        options = _template_options({**(template_options or {}), "tools": tools})
        return _trim_template(messages, budget, model, options)
    counter = ChatCounter(model, tools)
    counter.extend(messages)
    costs = counter.counts
    pinned = [i for i, m in enumerate(messages) if m.get("role") in _PINNED]
    rest = budget - counter.tools_tokens - counter.priming - sum(costs[i] for i in pinned)
    if rest < 0:
        raise ValueError(
            f"system messages, tools and priming alone need {budget - rest} tokens > {budget}"
        )
    # Units: a message, or an assistant tool-call message with the tool results that follow it.
    units: list[list[int]] = []
    for i, m in enumerate(messages):
        if i in pinned:
            continue
        if m.get("role") in ("tool", "function") and units and _is_call_unit(messages, units[-1]):
            units[-1].append(i)
        else:
            units.append([i])
    kept = set(pinned)
    for unit in reversed(units):
        cost = sum(costs[i] for i in unit)
        if cost <= rest:
            kept.update(unit)
            rest -= cost
            continue
        i = unit[0]
        if len(unit) == 1 and _cuttable(messages[i]):
            text = messages[i]["content"]
            enc = counter._enc
            n = rest - (costs[i] - enc.count(text))
            if n > 0:
                k = enc.split_at_end(text, n)
                if k < len(text):
                    messages[i]["content"] = text[k:]
                    kept.add(i)
        break
    return [m for i, m in enumerate(messages) if i in kept]


def _is_call_unit(messages: list[dict[str, Any]], unit: list[int]) -> bool:
    head = messages[unit[0]]
    return head.get("role") == "assistant" and bool(
        head.get("tool_calls") or head.get("function_call")
    )


def _trim_template(
    messages: list[dict[str, Any]], budget: int, enc: Any, options: dict[str, Any]
) -> list[dict[str, Any]]:
    """``trim_to_budget`` for an open model: every candidate rendered with its chat template."""

    def cost(kept: list[dict[str, Any]]) -> int:
        return len(apply_chat_template(enc, kept, **options)) if kept else 0

    if cost(messages) <= budget:
        return messages
    pinned = [m for m in messages if m.get("role") in _PINNED]
    turns: list[list[dict[str, Any]]] = []
    for m in messages:
        if m.get("role") in _PINNED:
            continue
        if not turns or (
            m.get("role") == "user" and any(x.get("role") == "user" for x in turns[-1])
        ):
            turns.append([m])
        else:
            turns[-1].append(m)

    pinned_ids = {id(m) for m in pinned}

    def keeping(first: int, cut: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        kept = {id(m) for turn in turns[first:] for m in turn} | pinned_ids
        return [
            cut if cut is not None and m is turns[first][0] else m
            for m in messages
            if id(m) in kept
        ]

    # the fewest oldest turns dropped (renders grow with what they keep)
    lo, hi = 1, len(turns)
    if not turns or cost(keeping(hi)) > budget:
        raise ValueError(f"the system messages alone need more than {budget} tokens")
    while lo < hi:
        mid = (lo + hi) // 2
        if cost(keeping(mid)) <= budget:
            hi = mid
        else:
            lo = mid + 1
    dropped = turns[lo - 1]
    first = dropped[0]
    if not _cuttable(first):
        return keeping(lo)
    text = first["content"]

    def with_tail(k: int) -> list[dict[str, Any]]:
        return keeping(lo - 1, {**first, "content": text[k:]})

    if cost(with_tail(len(text))) > budget:
        return keeping(lo)
    # the smallest cut that fits (the count falls as the cut moves right)
    a, b = 0, len(text)
    while a < b:
        mid = (a + b) // 2
        if cost(with_tail(mid)) <= budget:
            b = mid
        else:
            a = mid + 1
    if a >= len(text):
        return keeping(lo)
    return with_tail(a)

"""Token counts of OpenAI-style chat requests: ``count_messages(messages, model, tools)``.

The count follows the rule OpenAI publishes in its cookbook ("How to count tokens with tiktoken",
sections 6 and 7): each message costs ``tokens_per_message`` plus the tokens of each of its string
values (role, content, name, ...); a ``name`` costs ``tokens_per_name`` more; every reply is primed
with 3 tokens (``<|start|>assistant<|message|>``). Function/tool definitions add the cookbook's
per-function, per-property and per-enum-item constants plus the tokens of ``name:description``
and ``property:type:description`` lines. The constants live in ``_FAMILIES`` and nowhere else.

Models newer than the cookbook's list (o1, o3, o4-mini, gpt-4.1, gpt-4.5, gpt-5) use o200k_base,
as tiktoken maps them, and the gpt-4o constants, which OpenAI has not published separately.
OpenAI calls the result an estimate that may change from model to model; it is exact for the
examples the cookbook checked against the API (see tests/bpecore/test_chat.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["count_messages"]


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


#: The one table of published constants (OpenAI cookbook, "How to count tokens with tiktoken").
_FAMILIES: dict[str, _Family] = {
    "gpt-3.5-turbo-0301": _Family("cl100k_base", 4, -1, 3, 10, 3, 3, -3, 3, 12),
    "gpt-3.5-turbo": _Family("cl100k_base", 3, 1, 3, 10, 3, 3, -3, 3, 12),
    "gpt-4": _Family("cl100k_base", 3, 1, 3, 10, 3, 3, -3, 3, 12),
    "gpt-4o": _Family("o200k_base", 3, 1, 3, 7, 3, 3, -3, 3, 12),
}

#: Model name -> family, and name prefix -> family (longest prefix wins), after tiktoken's map.
_MODELS: dict[str, str] = {
    "gpt-3.5-turbo-0301": "gpt-3.5-turbo-0301",
    "gpt-3.5-turbo": "gpt-3.5-turbo",
    "gpt-3.5": "gpt-3.5-turbo",
    "gpt-35-turbo": "gpt-3.5-turbo",
    "gpt-4": "gpt-4",
    "gpt-4o": "gpt-4o",
    "gpt-4o-mini": "gpt-4o",
    "gpt-4.1": "gpt-4o",
    "gpt-5": "gpt-4o",
    "o1": "gpt-4o",
    "o3": "gpt-4o",
    "o4-mini": "gpt-4o",
}
_PREFIXES: dict[str, str] = {
    "gpt-3.5-turbo-": "gpt-3.5-turbo",
    "gpt-35-turbo-": "gpt-3.5-turbo",
    "gpt-4-": "gpt-4",
    "gpt-4o-": "gpt-4o",
    "chatgpt-4o-": "gpt-4o",
    "gpt-4.1-": "gpt-4o",
    "gpt-4.5-": "gpt-4o",
    "gpt-5": "gpt-4o",
    "o1-": "gpt-4o",
    "o3-": "gpt-4o",
    "o4-mini-": "gpt-4o",
    "ft:gpt-3.5-turbo": "gpt-3.5-turbo",
    "ft:gpt-4": "gpt-4",
    "ft:gpt-4o": "gpt-4o",
}


def _family(model: str) -> _Family:
    if model in _MODELS:
        return _FAMILIES[_MODELS[model]]
    for prefix in sorted(_PREFIXES, key=len, reverse=True):
        if model.startswith(prefix):
            return _FAMILIES[_PREFIXES[prefix]]
    known = ", ".join(sorted(_MODELS)) + "; or a name starting with " + ", ".join(sorted(_PREFIXES))
    raise ValueError(f"unknown chat model {model!r}; known models: {known}")


def _value_tokens(enc, key: str, value: Any) -> int:
    if value is None:
        return 0
    if isinstance(value, str):
        return enc.count(value)
    if key == "content" and isinstance(value, list):
        total = 0
        for part in value:
            if (
                isinstance(part, Mapping)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                total += enc.count(part["text"])
            else:
                raise ValueError(
                    f"only text content parts have a published token rule, got {part!r}"
                )
        return total
    raise ValueError(
        f"message field {key!r} has no published token rule (got {type(value).__name__})"
    )


def _tool_tokens(enc, fam: _Family, tools: Iterable[Mapping[str, Any]]) -> int:
    total = 0
    any_tool = False
    for tool in tools:
        any_tool = True
        fn = tool.get("function", tool)
        total += fam.func_init
        desc = (fn.get("description") or "").removesuffix(".")
        total += enc.count(f"{fn['name']}:{desc}")
        properties = (fn.get("parameters") or {}).get("properties") or {}
        if properties:
            total += fam.prop_init
            for key, prop in properties.items():
                total += fam.prop_key
                if "enum" in prop:
                    total += fam.enum_init
                    for item in prop["enum"]:
                        total += fam.enum_item + enc.count(str(item))
                p_desc = (prop.get("description") or "").removesuffix(".")
                total += enc.count(f"{key}:{prop.get('type', '')}:{p_desc}")
    if any_tool:
        total += fam.func_end
    return total


def count_messages(
    messages: Iterable[Mapping[str, Any]],
    model: str = "gpt-4o",
    tools: Iterable[Mapping[str, Any]] | None = None,
) -> int:
    """Prompt tokens of a chat request, by the rule OpenAI publishes for ``model``'s family.

    Args:
        messages: ``{"role": ..., "content": ..., "name": ...}`` dicts. Content may be a string,
            ``None``, or a list of ``{"type": "text", "text": ...}`` parts; every other string
            field counts as text, like ``role``.
        model: a chat model name (``gpt-3.5-turbo``, ``gpt-4``, ``gpt-4o``, ``gpt-4o-mini``,
            ``gpt-4.1``, ``o1``, ``o3``, ``o4-mini``, ``gpt-5``, dated and fine-tuned variants);
            it selects cl100k_base or o200k_base and the overheads.
        tools: optional function/tool definitions (``{"type": "function", "function": {...}}``
            or bare function dicts), counted with the cookbook's function-definition formula.

    Returns:
        The token count. ``ValueError`` for an unknown model or a field with no published rule.

    >>> count_messages([{"role": "user", "content": "Hello!"}], model="gpt-4o")
    9
    """
    from bpecore.registry import get_encoding

    fam = _family(model)
    enc = get_encoding(fam.encoding)
    total = 0
    for message in messages:
        total += fam.tokens_per_message
        for key, value in message.items():
            total += _value_tokens(enc, key, value)
            if key == "name":
                total += fam.tokens_per_name
    total += fam.reply_priming
    if tools:
        try:
            total += _tool_tokens(enc, fam, tools)
        except (
            KeyError,
            TypeError,
            AttributeError,
        ) as e:  # e.g. a tool without a name, a non-object tool
            raise ValueError(f"malformed tool definition ({type(e).__name__}: {e})") from None
    return total

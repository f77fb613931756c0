"""gpt-oss chat requests, counted exactly by rendering them in the harmony format.

The harmony format (OpenAI's format for its open-weight gpt-oss models, spec and reference
renderer in the ``openai-harmony`` package) writes each message as
``<|start|>{author}[ to={recipient}][<|channel|>{channel}][ <|constrain|>{type}]<|message|>{content}<|end|>``
(``<|call|>`` ending an assistant tool call). The reference renderer encodes every text piece
(author, recipient, channel, content, ...) on its own, so the count is the sum of the pieces'
counts plus one per special token; nothing merges across pieces. o200k_harmony is o200k_base's
ranks with the harmony special tokens.

An OpenAI chat request maps onto a harmony conversation as gpt-oss servers do it: a system message
with the default model identity, knowledge cutoff 2024-06, the request's ``reasoning_effort``
(default medium) and the channel rules; a developer message with the request's system and
developer texts as instructions (joined by a blank line) and its ``tools`` as the
``namespace functions { ... }`` TypeScript block; assistant ``reasoning_content`` (or
``reasoning``) on the analysis channel, content on the final channel (commentary when the message
also calls tools), each tool call a commentary message to ``functions.{name}``; a tool result from
``functions.{name}`` to the assistant; the reply primed with ``<|start|>assistant``. As the
reference does, analysis messages before the first final message are dropped when the last
assistant message is a final one.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["HARMONY", "harmony_pieces", "typescript"]

#: The harmony rendering's fixed texts.
HARMONY: dict[str, Any] = {
    "identity": "You are ChatGPT, a large language model trained by OpenAI.",
    "knowledge_cutoff": "2024-06",
    "reasoning_effort": "medium",
    "channels": "# Valid channels: analysis, commentary, final. Channel must be included for every message.",
    "functions_channel": "Calls to these tools must go to the commentary channel: 'functions'.",
}

# A rendered message: (OpenAI message index or -1 for the header, channel, specials, text pieces).
_Msg = tuple[int, str | None, int, list[str]]


def _default(value: Any, schema: Mapping[str, Any]) -> str:
    if isinstance(value, str):
        return f'"{value}"' if not schema.get("enum") else value
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _nullable(schema: Any, text: str) -> str:
    if isinstance(schema, Mapping) and schema.get("nullable") is True and "null" not in text:
        return text + " | null"
    return text


def _variant_comments(variant: Any, skip_desc: str | None, drop_first: bool) -> str:
    if not isinstance(variant, Mapping):
        return ""
    notes = []
    desc = variant.get("description")
    if not drop_first and isinstance(desc, str) and desc != skip_desc:
        notes.append(desc)
    if "default" in variant:
        notes.append("default: " + _default(variant["default"], variant))
    return f" // {' '.join(notes)}" if notes else ""


def typescript(schema: Any, indent: str = "") -> str:
    """A JSON schema as the harmony format's TypeScript type."""
    if not isinstance(schema, Mapping):
        return "any"
    one_of = schema.get("oneOf")
    if isinstance(one_of, list):
        out = ""
        for variant in one_of:
            out += f"\n{indent} | "
            out += _nullable(variant, typescript(variant, indent + "   "))
            out += _variant_comments(variant, None, False)
        return out
    kind = schema.get("type")
    if isinstance(kind, list):
        names = ["number" if t == "integer" else t for t in kind if isinstance(t, str)]
        if names:
            return " | ".join(names)
    if not isinstance(kind, str):
        return "any"
    if kind == "object":
        return _object(schema, indent)
    if kind == "string":
        enum = schema.get("enum")
        values = [f'"{v}"' for v in enum if isinstance(v, str)] if isinstance(enum, list) else []
        return " | ".join(values) if values else "string"
    if kind in ("number", "integer"):
        return "number"
    if kind == "boolean":
        return "boolean"
    if kind == "array":
        return typescript(schema["items"], indent) + "[]" if "items" in schema else "Array<any>"
    return "any"


def _object(schema: Mapping[str, Any], indent: str) -> str:
    out = (
        f"{indent}// {schema['description']}\n"
        if isinstance(schema.get("description"), str)
        else ""
    )
    out += "{\n"
    props = schema.get("properties")
    required = schema.get("required")
    required = {r for r in required if isinstance(r, str)} if isinstance(required, list) else set()
    for key, val in props.items() if isinstance(props, Mapping) else ():
        val = val if isinstance(val, Mapping) else {}
        opt = "" if key in required else "?"
        if isinstance(val.get("title"), str):
            out += f"{indent}// {val['title']}\n{indent}//\n"
        one_of = val.get("oneOf")
        desc = val.get("description") if isinstance(val.get("description"), str) else None
        if one_of is None and desc is not None:
            out += f"{indent}// {desc}\n"
        examples = val.get("examples")
        if isinstance(examples, list) and examples:
            out += f"{indent}// Examples:\n"
            out += "".join(f'{indent}// - "{ex}"\n' for ex in examples if isinstance(ex, str))
        if isinstance(one_of, list):
            first = one_of[0] if one_of else None
            skip = (
                desc is not None and isinstance(first, Mapping) and first.get("description") == desc
            )
            above = desc is not None and not skip
            if above:
                out += f"{indent}// {desc}\n"
            if "default" in val:
                out += f"{indent}// default: {_default(val['default'], val)}\n"
            out += f"{indent}{key}{opt}:\n"
            for i, variant in enumerate(one_of):
                out += f"{indent} | " + _nullable(variant, typescript(variant, indent + "   "))
                out += _variant_comments(variant, desc, i == 0 and above) + "\n"
            out += f"{indent},\n"
            continue
        out += f"{indent}{key}{opt}: " + _nullable(val, typescript(val, indent + "    ")) + ","
        if "default" in val:
            out += " // default: " + _default(val["default"], val)
        out += "\n"
    return out + f"{indent}}}"


def _functions_block(tools: list[Mapping[str, Any]]) -> str:
    lines = ["## functions\n", "namespace functions {\n"]
    for tool in tools:
        fn = tool.get("function", tool)
        if not isinstance(fn.get("name"), str):
            raise ValueError(
                f"malformed tool definition (a function needs a string name): {tool!r}"
            )
        desc = fn.get("description") or ""
        if not isinstance(desc, str):
            raise ValueError(f"malformed tool definition (description must be a string): {tool!r}")
        lines += [f"// {line}" for line in desc.splitlines()]
        params = fn.get("parameters")
        if params is None:
            lines.append(f"type {fn['name']} = () => any;\n")
        else:
            lines.append(f"type {fn['name']} = (_: {typescript(params)}) => any;\n")
    lines.append("} // namespace functions")
    return "# Tools\n\n" + "\n".join(lines)


def _texts(content: Any, index: int) -> list[str]:
    if content is None:
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        out = []
        for part in content:
            if (
                isinstance(part, Mapping)
                and part.get("type") == "text"
                and isinstance(part.get("text"), str)
            ):
                out.append(part["text"])
            else:
                raise ValueError(f"message {index}: gpt-oss takes text content only, got {part!r}")
        return out
    raise ValueError(f"message {index}: content must be text, got {type(content).__name__}")


def harmony_pieces(request: Mapping[str, Any]) -> list[_Msg]:
    """The harmony messages of a chat request, each as (source index, channel, specials, texts).

    Source index -1 is the system and developer header; the reply priming is not included.
    """
    messages = list(request.get("messages") or ())
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            raise ValueError(f"message {i} must be an object, got {type(m).__name__}")
    tools = request.get("tools")
    if tools is None:
        tools = request.get("functions")
    tools = list(tools or ())
    effort = request.get("reasoning_effort") or HARMONY["reasoning_effort"]
    if effort not in ("low", "medium", "high"):
        raise ValueError(f"reasoning_effort must be low, medium or high, got {effort!r}")
    for key in ("response_format", "tool_choice", "function_call"):
        value = request.get(key)
        if value not in (None, "auto") and not (
            key == "response_format" and value == {"type": "text"}
        ):
            raise ValueError(f"gpt-oss: {key} has no harmony rendering here (got {value!r})")
    system = [HARMONY["identity"] + f"\nKnowledge cutoff: {HARMONY['knowledge_cutoff']}"]
    system.append(f"Reasoning: {effort}")
    system.append(HARMONY["channels"] + ("\n" + HARMONY["functions_channel"] if tools else ""))
    out: list[_Msg] = [(-1, None, 3, ["system", "\n\n".join(system)])]
    instructions = []
    for i, m in enumerate(messages):
        if m.get("role") in ("system", "developer"):
            instructions.append("".join(_texts(m.get("content"), i)))
    try:
        functions = [_functions_block(tools)] if tools else []
    except (AttributeError, TypeError, KeyError) as e:  # a tool that is not an object, ...
        raise ValueError(f"malformed tool definition ({type(e).__name__}: {e})") from None
    sections = (["# Instructions", "\n\n".join(instructions)] if instructions else []) + functions
    if sections:
        out.append((-1, None, 3, ["developer", "\n\n".join(sections)]))
    names: dict[str, str] = {}
    for i, m in enumerate(messages):
        role = m.get("role")
        if role in ("system", "developer"):
            continue
        if role == "user":
            author = ["user"] + ([f":{m['name']}"] if isinstance(m.get("name"), str) else [])
            out.append((i, None, 3, author + _texts(m.get("content"), i)))
        elif role == "assistant":
            reasoning = m.get("reasoning_content") or m.get("reasoning")
            calls = list(m.get("tool_calls") or ())
            if m.get("function_call"):
                calls.append({"function": m["function_call"]})
            if reasoning:
                out.append((i, "analysis", 4, ["assistant", "analysis", *_texts(reasoning, i)]))
            texts = _texts(m.get("content"), i)
            if texts:
                channel = "commentary" if calls else "final"
                out.append((i, channel, 4, ["assistant", channel, *texts]))
            for call in calls:
                fn = call.get("function") if isinstance(call, Mapping) else None
                if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str):
                    raise ValueError(f"message {i}: a tool call needs function.name, got {call!r}")
                args = fn.get("arguments") or ""
                args = args if isinstance(args, str) else json.dumps(args)
                if isinstance(call.get("id"), str):
                    names[call["id"]] = fn["name"]
                header = ["assistant", f" to=functions.{fn['name']}", "commentary", " ", "json"]
                out.append((i, "commentary", 5, header + ([args] if args else [])))
        elif role in ("tool", "function"):
            name = m.get("name") if isinstance(m.get("name"), str) else None
            if name is None:
                name = (
                    names.get(m.get("tool_call_id"))
                    if isinstance(m.get("tool_call_id"), str)
                    else None
                )
            if name is None:
                raise ValueError(
                    f"message {i}: a tool result needs the id of an earlier call (or a name)"
                )
            header = [f"functions.{name}", " to=assistant", "commentary"]
            out.append((i, "commentary", 4, header + _texts(m.get("content"), i)))
        else:
            raise ValueError(f"message {i}: role {role!r} has no harmony rendering")
    last = next((c for _, c, _, t in reversed(out) if t and t[0] == "assistant"), None)
    if last == "final":
        first_final = next(k for k, msg in enumerate(out) if msg[1] == "final")
        out = [msg for k, msg in enumerate(out) if not (k < first_final and msg[1] == "analysis")]
    return out

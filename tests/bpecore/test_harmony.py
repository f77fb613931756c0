"""gpt-oss requests: count_request equals the length of openai-harmony's own rendering, token for token.

The conversion from an OpenAI request to harmony messages here is written against the
openai-harmony API (SystemContent, DeveloperContent, channels, recipients), independently of
bpecore.harmony; the renderer and its TypeScript tool schemas are the package's.
"""

from __future__ import annotations

import gzip
import os

import pytest

from bpecore.chat import count_messages, count_request
from bpecore.harmony import typescript

oh = pytest.importorskip("openai_harmony")

SHARED = __import__("pathlib").Path(__file__).resolve().parents[2].parent / "shared"


@pytest.fixture(scope="module")
def harmony(tmp_path_factory):
    # openai-harmony reads o200k_base from TIKTOKEN_ENCODINGS_BASE instead of downloading it.
    d = tmp_path_factory.mktemp("tiktoken")
    (d / "o200k_base.tiktoken").write_bytes(
        gzip.decompress((SHARED / "vocab" / "o200k_base.tiktoken.gz").read_bytes())
    )
    old = os.environ.get("TIKTOKEN_ENCODINGS_BASE")
    os.environ["TIKTOKEN_ENCODINGS_BASE"] = str(d)
    try:
        yield oh.load_harmony_encoding(oh.HarmonyEncodingName.HARMONY_GPT_OSS)
    finally:
        if old is None:
            del os.environ["TIKTOKEN_ENCODINGS_BASE"]
        else:
            os.environ["TIKTOKEN_ENCODINGS_BASE"] = old


def _text(content):
    if isinstance(content, list):
        return "".join(p["text"] for p in content)
    return content or ""


def reference_tokens(enc, request):
    """Tokens of the request rendered by openai-harmony."""
    effort = {"low": oh.ReasoningEffort.LOW, "high": oh.ReasoningEffort.HIGH}.get(
        request.get("reasoning_effort"), oh.ReasoningEffort.MEDIUM
    )
    msgs = [
        oh.Message.from_role_and_content(
            oh.Role.SYSTEM, oh.SystemContent.new().with_reasoning_effort(effort)
        )
    ]
    instructions = [
        _text(m["content"]) for m in request["messages"] if m["role"] in ("system", "developer")
    ]
    dev = oh.DeveloperContent.new()
    if instructions:
        dev = dev.with_instructions("\n\n".join(instructions))
    if request.get("tools"):
        dev = dev.with_function_tools(
            [
                oh.ToolDescription.new(
                    t["function"]["name"],
                    t["function"].get("description", ""),
                    parameters=t["function"].get("parameters"),
                )
                for t in request["tools"]
            ]
        )
    if instructions or request.get("tools"):
        msgs.append(oh.Message.from_role_and_content(oh.Role.DEVELOPER, dev))
    names = {}
    for m in request["messages"]:
        if m["role"] == "user":
            author = (
                oh.Author.new(oh.Role.USER, m["name"])
                if "name" in m
                else oh.Author.new(oh.Role.USER, None)
            )
            msgs.append(oh.Message.from_author_and_content(author, _text(m["content"])))
        elif m["role"] == "assistant":
            calls = m.get("tool_calls") or []
            if m.get("reasoning_content"):
                msgs.append(
                    oh.Message.from_role_and_content(
                        oh.Role.ASSISTANT, m["reasoning_content"]
                    ).with_channel("analysis")
                )
            if m.get("content"):
                channel = "commentary" if calls else "final"
                msgs.append(
                    oh.Message.from_role_and_content(
                        oh.Role.ASSISTANT, _text(m["content"])
                    ).with_channel(channel)
                )
            for c in calls:
                names[c["id"]] = c["function"]["name"]
                msgs.append(
                    oh.Message.from_role_and_content(oh.Role.ASSISTANT, c["function"]["arguments"])
                    .with_channel("commentary")
                    .with_recipient("functions." + c["function"]["name"])
                    .with_content_type("<|constrain|>json")
                )
        elif m["role"] == "tool":
            author = oh.Author.new(oh.Role.TOOL, "functions." + names[m["tool_call_id"]])
            msgs.append(
                oh.Message.from_author_and_content(author, _text(m["content"]))
                .with_channel("commentary")
                .with_recipient("assistant")
            )
    conv = oh.Conversation.from_messages(msgs)
    return enc.render_conversation_for_completion(conv, oh.Role.ASSISTANT)


WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather.\nUse it for any city.",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {
                    "type": "string",
                    "description": "City name",
                    "examples": ["Paris", "Oslo"],
                },
                "unit": {"type": "string", "enum": ["c", "f"], "default": "c"},
                "days": {"type": "integer", "default": 1, "title": "Days"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "raw": {"type": "array"},
                "when": {"type": ["string", "null"], "description": "ISO date"},
                "note": {"type": "string", "nullable": True, "default": "none"},
                "where": {
                    "type": "object",
                    "description": "A place",
                    "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                    "required": ["lat"],
                },
                "mode": {
                    "description": "How",
                    "default": "fast",
                    "oneOf": [
                        {"type": "string", "description": "How"},
                        {"type": "integer", "description": "A level", "nullable": True},
                        {"type": "boolean", "default": False},
                    ],
                },
                "any": {},
            },
            "required": ["city", "mode"],
        },
    },
}
NOW = {"type": "function", "function": {"name": "now", "description": "Time now."}}

CONVERSATIONS = {
    "plain": {"messages": [{"role": "user", "content": "Hello!"}]},
    "system_developer_named_user": {
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "developer", "content": [{"type": "text", "text": "Answer in French."}]},
            {"role": "user", "name": "alice", "content": "Weather?"},
        ],
        "reasoning_effort": "high",
    },
    "tools_calls_reasoning_final": {
        "tools": [WEATHER, NOW],
        "messages": [
            {"role": "system", "content": "You check the weather."},
            {"role": "user", "content": "Weather in Paris and the time, please.  日本語\n\n"},
            {
                "role": "assistant",
                "reasoning_content": "Need two calls.",
                "content": "Checking both.",
                "tool_calls": [
                    {
                        "id": "a",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
                    },
                    {"id": "b", "type": "function", "function": {"name": "now", "arguments": "{}"}},
                ],
            },
            {"role": "tool", "tool_call_id": "a", "content": "18 C, sunny"},
            {"role": "tool", "tool_call_id": "b", "content": "14:02"},
            {
                "role": "assistant",
                "reasoning_content": "Both in.",
                "content": "18 C and sunny; 14:02.",
            },
        ],
    },
    "reasoning_kept_mid_turn": {
        "tools": [NOW],
        "reasoning_effort": "low",
        "messages": [
            {"role": "user", "content": "What time is it?"},
            {
                "role": "assistant",
                "reasoning_content": "Call now().",
                "tool_calls": [
                    {"id": "x", "type": "function", "function": {"name": "now", "arguments": "{}"}}
                ],
            },
            {"role": "tool", "tool_call_id": "x", "content": "09:00"},
        ],
    },
    "second_turn": {
        "messages": [
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "reasoning_content": "Easy.", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
        ]
    },
}


@pytest.mark.parametrize("name", sorted(CONVERSATIONS))
@pytest.mark.parametrize("model", ["gpt-oss-20b", "gpt-oss-120b"])
def test_gpt_oss_equals_openai_harmony(harmony, name, model):
    request = {"model": model, **CONVERSATIONS[name]}
    r = count_request(request)
    assert r.total == len(reference_tokens(harmony, request))
    assert r.exact and r.encoding == "o200k_harmony"
    assert r.total == sum(r.messages) + r.tools + r.priming


def test_typescript_rendering_matches_openai_harmony(harmony):
    conv = oh.Conversation.from_messages(
        [
            oh.Message.from_role_and_content(
                oh.Role.DEVELOPER,
                oh.DeveloperContent.new().with_function_tools(
                    [oh.ToolDescription.new("f", "d", parameters=WEATHER["function"]["parameters"])]
                ),
            )
        ]
    )
    text = harmony.decode_utf8(harmony.render_conversation(conv))
    assert f"type f = (_: {typescript(WEATHER['function']['parameters'])}) => any;" in text


def test_gpt_oss_refuses_what_it_cannot_render():
    with pytest.raises(ValueError, match="text content only"):
        count_messages(
            [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}],
            model="gpt-oss-20b",
        )
    with pytest.raises(ValueError, match="earlier call"):
        count_messages(
            [{"role": "tool", "tool_call_id": "zz", "content": "1"}], model="gpt-oss-20b"
        )
    with pytest.raises(ValueError, match="count_request"):
        __import__("bpecore").ChatCounter("gpt-oss-20b")

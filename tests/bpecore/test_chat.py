"""count_messages against the values OpenAI's cookbook checked against its API, plus structure."""

from __future__ import annotations

import pytest

import bpecore
from bpecore.chat import count_messages

# The cookbook's example request ("How to count tokens with tiktoken", section 6).
EXAMPLE = [
    {
        "role": "system",
        "content": "You are a helpful, pattern-following assistant that translates corporate jargon into plain English.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "New synergies will help drive top-line growth.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Things working well together will increase revenue.",
    },
    {
        "role": "system",
        "name": "example_user",
        "content": "Let's circle back when we have more bandwidth to touch base on opportunities for increased leverage.",
    },
    {
        "role": "system",
        "name": "example_assistant",
        "content": "Let's talk later when we're less busy about how to do better.",
    },
    {
        "role": "user",
        "content": "This late pivot means we don't have time to boil the ocean for the client deliverable.",
    },
]

# Section 7: one tool, two messages.
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_current_weather",
            "description": "Get the current weather in a given location",
            "parameters": {
                "type": "object",
                "properties": {
                    "location": {
                        "type": "string",
                        "description": "The city and state, e.g. San Francisco, CA",
                    },
                    "unit": {
                        "type": "string",
                        "description": "The unit of temperature to return",
                        "enum": ["celsius", "fahrenheit"],
                    },
                },
                "required": ["location"],
            },
        },
    }
]
TOOL_MESSAGES = [
    {
        "role": "system",
        "content": "You are a helpful assistant that can answer to questions about the weather.",
    },
    {"role": "user", "content": "What's the weather like in San Francisco?"},
]


@pytest.mark.parametrize(
    "model,expected",
    [
        ("gpt-3.5-turbo-0301", 127),
        ("gpt-3.5-turbo-0613", 129),
        ("gpt-3.5-turbo", 129),
        ("gpt-4-0314", 129),
        ("gpt-4-0613", 129),
        ("gpt-4", 129),
        ("gpt-4o", 124),
        ("gpt-4o-mini", 124),
        ("gpt-4o-2024-08-06", 124),
        ("gpt-4o-mini-2024-07-18", 124),
    ],
)
def test_cookbook_messages(model, expected):
    assert count_messages(EXAMPLE, model=model) == expected


@pytest.mark.parametrize(
    "model,expected",
    [("gpt-3.5-turbo", 105), ("gpt-4", 105), ("gpt-4o", 101), ("gpt-4o-mini", 101)],
)
def test_cookbook_tools(model, expected):
    assert count_messages(TOOL_MESSAGES, model=model, tools=TOOLS) == expected


def test_bare_function_definitions_count_like_tools():
    functions = [t["function"] for t in TOOLS]
    assert count_messages(TOOL_MESSAGES, "gpt-4o", tools=functions) == count_messages(
        TOOL_MESSAGES, "gpt-4o", tools=TOOLS
    )


@pytest.mark.parametrize(
    "model,encoding",
    [
        ("gpt-3.5-turbo", "cl100k_base"),
        ("gpt-35-turbo-16k", "cl100k_base"),
        ("gpt-4-turbo", "cl100k_base"),
        ("gpt-4-32k-0613", "cl100k_base"),
        ("ft:gpt-4-0613:org::id", "cl100k_base"),
        ("gpt-4o", "o200k_base"),
        ("chatgpt-4o-latest", "o200k_base"),
        ("ft:gpt-4o-mini-2024-07-18:org::id", "o200k_base"),
        ("gpt-4.1", "o200k_base"),
        ("gpt-4.1-mini", "o200k_base"),
        ("gpt-4.5-preview", "o200k_base"),
        ("gpt-5", "o200k_base"),
        ("gpt-5-mini", "o200k_base"),
        ("o1", "o200k_base"),
        ("o1-mini", "o200k_base"),
        ("o3", "o200k_base"),
        ("o3-mini", "o200k_base"),
        ("o4-mini", "o200k_base"),
    ],
)
def test_structure_per_model(model, encoding):
    enc = bpecore.get_encoding(encoding)
    content = "Ünïcode and\nnewlines: 日本語"
    one = count_messages([{"role": "user", "content": content}], model=model)
    assert one == 3 + enc.count("user") + enc.count(content) + 3
    named = count_messages([{"role": "user", "name": "bob", "content": content}], model=model)
    assert named == one + enc.count("bob") + 1
    assert count_messages([], model=model) == 3


def test_structure_0301_name_replaces_role():
    enc = bpecore.get_encoding("cl100k_base")
    msgs = [{"role": "user", "name": "bob", "content": "hi"}]
    assert (
        count_messages(msgs, "gpt-3.5-turbo-0301")
        == 4 + enc.count("user") + enc.count("bob") - 1 + enc.count("hi") + 3
    )


def test_agrees_with_tiktoken_rule():
    tiktoken = pytest.importorskip("tiktoken")
    enc = tiktoken.Encoding(
        "o200k_base",
        pat_str=bpecore.registry.O200K_PATTERN,
        mergeable_ranks=bpecore.get_encoding("o200k_base").mergeable_ranks,
        special_tokens={},
    )
    expected = (
        sum(
            3 + sum(len(enc.encode_ordinary(v)) + (k == "name") for k, v in m.items())
            for m in EXAMPLE
        )
        + 3
    )
    assert count_messages(EXAMPLE, "gpt-4o") == expected


def test_content_parts_and_none():
    parts = [{"type": "text", "text": "Hello"}, {"type": "text", "text": " world"}]
    enc = bpecore.get_encoding("o200k_base")
    assert (
        count_messages([{"role": "user", "content": parts}])
        == 3 + enc.count("user") + enc.count("Hello") + enc.count(" world") + 3
    )
    assert (
        count_messages([{"role": "assistant", "content": None}]) == 3 + enc.count("assistant") + 3
    )


def test_special_token_text_counts_as_plain_text():
    enc = bpecore.get_encoding("cl100k_base")
    msgs = [{"role": "user", "content": "<|endoftext|>"}]
    assert count_messages(msgs, "gpt-4") == 3 + enc.count("user") + enc.count("<|endoftext|>") + 3


def test_unknown_model_lists_known_ones():
    with pytest.raises(ValueError, match="known models:.*gpt-4o"):
        count_messages([{"role": "user", "content": "x"}], model="llama-3")


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
    ],
)
def test_fields_without_published_rule_raise(message):
    with pytest.raises(ValueError, match="published"):
        count_messages([message])

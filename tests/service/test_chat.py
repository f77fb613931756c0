"""/v1/chat/count equals bpecore.chat.count_messages."""

from __future__ import annotations

import pytest

from bpecore.chat import CHAT_RULES, count_messages, count_request

MESSAGES = [
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "name": "alice", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": [{"type": "text", "text": "Let me check."}]},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["c", "f"]},
                },
            },
        },
    }
]


@pytest.mark.parametrize("model", ["gpt-4o", "gpt-4", "gpt-3.5-turbo", "gpt-4o-mini-2024-07-18"])
def test_chat_count_equals_library(client, model):
    r = client.post("/v1/chat/count", json={"messages": MESSAGES, "model": model})
    assert r.status_code == 200, r.text
    assert r.json()["model"] == model
    assert r.json()["count"] == count_messages(MESSAGES, model=model)
    r = client.post("/v1/chat/count", json={"messages": MESSAGES, "model": model, "tools": TOOLS})
    assert r.json()["count"] == count_messages(MESSAGES, model=model, tools=TOOLS)


def test_chat_count_default_model(client):
    r = client.post("/v1/chat/count", json={"messages": [{"role": "user", "content": "Hello!"}]})
    assert r.json()["model"] == "gpt-4o" and r.json()["count"] == 9


def test_chat_count_errors(client):
    r = client.post("/v1/chat/count", json={"messages": MESSAGES, "model": "llama-3"})
    assert r.status_code == 404 and r.json()["error"]["type"] == "model_not_found"
    bad = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]
    r = client.post("/v1/chat/count", json={"messages": bad})
    assert r.status_code == 422 and r.json()["error"]["type"] == "unsupported_message"
    r = client.post("/v1/chat/count", json={"messages": [{"content": "no role"}]})
    assert r.status_code == 422
    r = client.post("/v1/chat/count", json={"messages": [{"role": "user", "content": "x"}] * 9})
    assert r.status_code == 422 and r.json()["error"]["type"] == "limit_exceeded"


def test_chat_count_breakdown_and_exactness(client):
    r = client.post("/v1/chat/count", json={"messages": MESSAGES, "model": "gpt-4o"})
    body = r.json()
    expected = count_request({"messages": MESSAGES, "model": "gpt-4o"})
    assert body["messages"] == list(expected.messages) and body["exact"] is True
    assert body["count"] == sum(body["messages"]) + body["tools"] + body["priming"]
    assert body["rules_version"] == CHAT_RULES["version"] and body["estimated"] == []


FULL_REQUEST = {
    "model": "gpt-4o-2024-08-06",
    "temperature": 0.3,
    "stream": False,
    "max_completion_tokens": 100,
    "messages": [
        {"role": "developer", "content": "Answer briefly."},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "What is in this image, and the weather there?"},
                {
                    "type": "image_url",
                    "image_url": {
                        "url": "https://example.com/a.png",
                        "detail": "high",
                        "width": 2048,
                        "height": 4096,
                    },
                },
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_9",
                    "type": "function",
                    "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_9", "content": "18 C"},
    ],
    "tools": TOOLS,
    "tool_choice": "auto",
    "response_format": {"type": "text"},
}


def test_chat_count_full_openai_request(client):
    r = client.post("/v1/chat/count", json=FULL_REQUEST)
    assert r.status_code == 200, r.text
    body = r.json()
    expected = count_request(FULL_REQUEST)
    assert body["count"] == expected.total and body["messages"] == list(expected.messages)
    assert body["exact"] is False and len(body["estimated"]) == 2
    assert body["messages"][1] >= 1105  # the 2048x4096 image


@pytest.mark.parametrize(
    "message",
    [
        {"role": "user", "content": "x", "weight": 2},
        {"role": "user", "content": [{"type": "text", "text": "x", "cache": True}]},
        {"role": "assistant", "tool_calls": [{"id": "1", "function": {"name": "f"}, "x": 1}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x", "size": 3}}]},
    ],
)
def test_chat_count_refuses_unknown_message_fields(client, message):
    r = client.post("/v1/chat/count", json={"messages": [message]})
    assert r.status_code == 422 and r.json()["error"]["type"] == "validation_error", r.text


def test_chat_count_refuses_what_it_cannot_count(client):
    for part, match in (
        ({"type": "image_url", "image_url": {"url": "https://x/y.png"}}, "not fetched"),
        ({"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}, "duration"),
    ):
        r = client.post("/v1/chat/count", json={"messages": [{"role": "user", "content": [part]}]})
        assert r.status_code == 422 and r.json()["error"]["type"] == "unsupported_message"
        assert match in r.json()["error"]["message"]
    r = client.post(
        "/v1/chat/count",
        json={"messages": [], "response_format": {"type": "json_schema", "json_schema": 5}},
    )
    assert r.status_code == 422 and r.json()["error"]["type"] == "unsupported_message"


def test_chat_count_gpt_oss_is_exact(client):
    body = {
        "model": "gpt-oss-20b",
        "reasoning_effort": "high",
        "messages": [
            {"role": "system", "content": "Be terse."},
            {"role": "user", "content": "2+2?"},
            {"role": "assistant", "reasoning_content": "Easy.", "content": "4"},
            {"role": "user", "content": "And 3+3?"},
        ],
    }
    r = client.post("/v1/chat/count", json=body)
    assert r.status_code == 200, r.text
    expected = count_request(body)
    assert r.json()["count"] == expected.total and r.json()["exact"] is True
    assert r.json()["messages"] == list(expected.messages)
    body["model"] = "gpt-4o"
    r = client.post("/v1/chat/count", json=body)
    assert r.status_code == 422 and "gpt-oss" in r.json()["error"]["message"]

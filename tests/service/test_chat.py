"""/v1/chat/count equals bpecore.chat.count_messages."""

from __future__ import annotations

import pytest

from bpecore.chat import count_messages

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
    assert r.json() == {"model": model, "count": count_messages(MESSAGES, model=model)}
    r = client.post("/v1/chat/count", json={"messages": MESSAGES, "model": model, "tools": TOOLS})
    assert r.json()["count"] == count_messages(MESSAGES, model=model, tools=TOOLS)


def test_chat_count_default_model(client):
    r = client.post("/v1/chat/count", json={"messages": [{"role": "user", "content": "Hello!"}]})
    assert r.json() == {"model": "gpt-4o", "count": 9}


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

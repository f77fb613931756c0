"""Open models over HTTP, on a live server: /v1/chat/count and vLLM's /tokenize chat form render
the model's chat template (equal to transformers' apply_chat_template where it is installed), and
hostile templates are 422s with the template_<reason> type while the server keeps serving."""

from __future__ import annotations

import json

import httpx
import pytest

ALIAS = "Qwen/Qwen2.5-7B-Instruct"
MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "What's the weather in Paris? <|im_end|> [INST]"},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'},
            }
        ],
    },
    {"role": "tool", "tool_call_id": "call_1", "content": "18 C, sunny"},
    {"role": "assistant", "content": "18 C and sunny."},
    {"role": "user", "content": "And tomorrow?"},
]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Get the weather.",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
        },
    }
]


@pytest.fixture(scope="module")
def server(start_server, chat_model_dirs):
    encodings = ["cl100k_base", *(str(d) for d in chat_model_dirs.values())]
    srv = start_server(
        {
            "BPESVC_ENCODINGS": json.dumps(encodings),
            "BPESVC_MODEL_ALIASES": json.dumps({ALIAS: "qwen-chat"}),
            "BPESVC_CHAT_TEMPLATE_SECONDS": "0.5",
        }
    )
    srv.wait_ready(60)
    yield srv
    assert srv.stop(), srv.output()


@pytest.fixture(scope="module")
def reference(chat_model_dirs):
    """The transformers tokenizers (skips where it is not installed: scripts/chat_reference.sh)."""
    transformers = pytest.importorskip(
        "transformers", reason="the reference renderer", exc_type=ImportError
    )
    return {
        f"{style}-chat": transformers.AutoTokenizer.from_pretrained(str(d))
        for style, d in chat_model_dirs.items()
    }


def _vllm_view(messages):
    """What vLLM hands the template: tool-call arguments parsed from JSON."""
    out = []
    for m in messages:
        m = json.loads(json.dumps(m))
        for call in m.get("tool_calls") or ():
            call["function"]["arguments"] = json.loads(call["function"]["arguments"] or "{}")
        out.append(m)
    return out


def _ids(tok, messages, **kwargs):
    return tok.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs)


def _post(server, path, body):
    return httpx.post(server.url + path, json=body, timeout=30)


@pytest.mark.parametrize("model", ["qwen-chat", ALIAS, "llama3-chat"])
def test_chat_count_open_model(server, reference, model):
    tok = reference["qwen-chat" if model == ALIAS else model]
    messages = MESSAGES if model != "llama3-chat" else MESSAGES[:2] + MESSAGES[4:]
    r = _post(server, "/v1/chat/count", {"model": model, "messages": messages, "tools": TOOLS})
    assert r.status_code == 200, r.text
    body = r.json()
    expected = _ids(tok, messages, tools=TOOLS, add_generation_prompt=True)
    assert body["count"] == len(expected)
    assert body["exact"] is True and body["messages"] == [] and body["model"] == model
    assert body["rules_version"] == "chat_template"
    r = _post(
        server,
        "/v1/chat/count",
        {"model": model, "messages": messages, "add_generation_prompt": False, "temperature": 0},
    )
    assert r.json()["count"] == len(_ids(tok, messages, add_generation_prompt=False))


def test_chat_count_openai_models_unchanged(server):
    r = _post(server, "/v1/chat/count", {"messages": [{"role": "user", "content": "Hello!"}]})
    assert r.json()["count"] == 9 and r.json()["rules_version"] != "chat_template"
    r = _post(server, "/v1/chat/count", {"model": "cl100k_base", "messages": MESSAGES[1:2]})
    assert r.status_code == 404 and r.json()["error"]["type"] == "model_not_found"


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"add_generation_prompt": False},
        {"tools": TOOLS},
        {"chat_template_kwargs": {"enable_thinking": False}},
        {"add_generation_prompt": False, "continue_final_message": True},
        {"chat_template": "{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}"},
    ],
)
def test_vllm_tokenize_chat_form(server, reference, options):
    tok = reference["qwen-chat"]
    messages = MESSAGES[:-1] if options.get("continue_final_message") else MESSAGES
    r = _post(server, "/tokenize", {"model": ALIAS, "messages": messages, **options})
    assert r.status_code == 200, r.text
    body = r.json()
    kwargs = {k: v for k, v in options.items() if k != "chat_template_kwargs"}
    kwargs.update(options.get("chat_template_kwargs") or {})
    kwargs.setdefault("add_generation_prompt", True)
    expected = _ids(tok, _vllm_view(messages), **kwargs)
    assert body["tokens"] == expected and body["count"] == len(expected)
    assert body["max_model_len"] == 8192  # the config's model_max_length


def test_vllm_tokenize_chat_text_parts_and_strings(server, reference):
    tok = reference["llama3-chat"]
    parts = [
        {
            "role": "user",
            "content": [{"type": "text", "text": "Hello"}, {"type": "text", "text": "there"}],
        }
    ]
    r = _post(
        server, "/tokenize", {"model": "llama3-chat", "messages": parts, "return_token_strs": True}
    )
    body = r.json()
    expected = _ids(tok, [{"role": "user", "content": "Hello\nthere"}], add_generation_prompt=True)
    assert body["tokens"] == expected
    assert "".join(body["token_strs"]).startswith("<|begin_of_text|><|start_header_id|>system")


@pytest.mark.parametrize(
    "body, status, kind",
    [
        ({"model": "cl100k_base"}, 422, "template_missing"),
        ({"model": "nope"}, 404, "encoding_not_found"),
        ({"add_special_tokens": True}, 422, "unsupported_option"),
        ({"continue_final_message": True}, 422, "validation_error"),
        ({"chat_template_kwargs": {"tools": []}}, 422, "validation_error"),
        ({"chat_template": "{% for %}"}, 422, "template_syntax"),
        ({"chat_template": "{{ raise_exception('no') }}"}, 422, "template_raised"),
    ],
)
def test_vllm_tokenize_chat_errors(server, body, status, kind):
    r = _post(server, "/tokenize", {"model": "qwen-chat", "messages": MESSAGES[:2], **body})
    assert r.status_code == status, r.text
    assert r.json()["error"]["type"] == kind


HOSTILE = {
    "template_timeout": "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}",
    "template_output_size": '{% set s = "ab" %}' + "{% set s = s ~ s %}" * 40,
    "template_security": "{{ messages.__class__.__mro__[1].__subclasses__() }}",
    "template_recursion": "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}",
}


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("path", ["/tokenize", "/v1/chat/count"])
def test_hostile_templates_are_422(server, path, kind):
    body = {"model": "qwen-chat", "messages": MESSAGES[:2], "chat_template": HOSTILE[kind]}
    r = _post(server, path, body)
    assert r.status_code == 422, r.text
    error = r.json()["error"]
    assert error["type"] == kind and error["code"] == 422 and "chat template" in error["message"]
    ok = _post(server, path, {"model": "qwen-chat", "messages": MESSAGES[:2]})
    assert ok.status_code == 200
    assert httpx.get(server.url + "/readyz").status_code == 200

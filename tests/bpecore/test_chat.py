"""count_messages against the values OpenAI's cookbook checked against its API, plus structure."""

from __future__ import annotations

import base64
import io
import random
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

import bpecore
from bpecore.chat import ChatCounter, count_messages, count_request, fits, trim_to_budget
from bpecore.images import image_size, patch_count, tile_count

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
    "message,match",
    [
        (
            {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "http://x"}}]},
            "not fetched",
        ),
        ({"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]}, "function.name"),
        (
            {
                "role": "user",
                "content": [{"type": "input_audio", "input_audio": {"data": "", "format": "wav"}}],
            },
            "duration",
        ),
        ({"role": "user", "content": [{"type": "file", "file": {}}]}, "published"),
        ({"role": "user", "content": "x", "extra": 3}, "published"),
    ],
)
def test_parts_without_rule_raise_clearly(message, match):
    with pytest.raises(ValueError, match=match):
        count_messages([message])


# ------------------------------------------------------------------ part 1: whole requests
def _enc(name="o200k_base"):
    return bpecore.get_encoding(name)


CALL = {
    "id": "call_1",
    "type": "function",
    "function": {"name": "get_current_weather", "arguments": '{"location": "Paris"}'},
}


def _call_tokens(enc, name, args):
    # <|start|>assistant to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>ARGS<|call|>,
    # each text piece encoded on its own
    pieces = ["assistant", f" to=functions.{name}", "commentary", " ", "json", args]
    return 5 + sum(enc.count(p) for p in pieces)


def test_tool_calls_and_results_are_harmony_estimates():
    enc = _enc()
    msgs = TOOL_MESSAGES + [
        {"role": "assistant", "content": None, "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "22 C, sunny"},
    ]
    r = count_request({"model": "gpt-4o", "messages": msgs, "tools": TOOLS})
    assert not r.exact and any("tool calls" in e for e in r.estimated)
    assert r.messages[2] == _call_tokens(enc, "get_current_weather", CALL["function"]["arguments"])
    assert r.messages[3] == (
        4
        + enc.count("functions.get_current_weather")
        + enc.count(" to=assistant")
        + enc.count("commentary")
        + enc.count("22 C, sunny")
    )
    assert r.total == 101 + r.messages[2] + r.messages[3]  # 101: the cookbook's published count
    assert r.total == sum(r.messages) + r.tools + r.priming
    legacy = [
        msgs[2] | {"tool_calls": None, "function_call": CALL["function"]},
        {"role": "function", "name": "get_current_weather", "content": "22 C, sunny"},
    ]
    legacy_r = count_request(
        {"messages": TOOL_MESSAGES + legacy, "functions": [TOOLS[0]["function"]]}
    )
    assert legacy_r.total == r.total


def test_assistant_text_with_tool_calls_counts_both():
    enc = _enc()
    msg = {"role": "assistant", "content": "Checking.", "tool_calls": [CALL]}
    base = 3 + enc.count("assistant") + enc.count("Checking.")
    assert (
        count_messages([msg])
        == base + _call_tokens(enc, "get_current_weather", CALL["function"]["arguments"]) + 3
    )


def test_cookbook_requests_are_exact_and_newer_models_are_not():
    assert count_request({"model": "gpt-4o", "messages": EXAMPLE}).exact
    r = count_request({"model": "gpt-4.1", "messages": EXAMPLE})
    assert not r.exact and r.estimated == ("gpt-4.1: overheads not published (gpt-4o's used)",)
    assert r.total == 124


def test_nested_tool_parameters_use_the_harmony_typescript_rendering():
    enc = _enc()
    fn = {
        "name": "search",
        "description": "Search the docs.",
        "parameters": {
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What to look for"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "mode": {"type": "string", "enum": ["fast", "full"], "default": "fast"},
            },
            "required": ["query"],
        },
    }
    ts = (
        "// Search the docs.\n"
        "type search = (_: {\n"
        "// What to look for\n"
        "query: string,\n"
        "tags?: string[],\n"
        'mode?: "fast" | "full", // default: fast\n'
        "}) => any;\n"
    )
    r = count_request({"messages": [], "tools": [{"type": "function", "function": fn}]})
    assert r.tools == 7 + enc.count(ts) + 12
    assert not r.exact


def test_tool_choice_and_response_format():
    enc = _enc()
    base = count_request({"messages": TOOL_MESSAGES, "tools": TOOLS})
    for choice in ("auto", "none", None):
        assert (
            count_request({"messages": TOOL_MESSAGES, "tools": TOOLS, "tool_choice": choice})
            == base
        )
    forced = count_request(
        {
            "messages": TOOL_MESSAGES,
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": "get_current_weather"}},
        }
    )
    pieces = [" to=functions.get_current_weather", "commentary", " ", "json"]
    assert forced.total - base.total == 2 + sum(enc.count(p) for p in pieces)
    assert not forced.exact
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    fmt = {"type": "json_schema", "json_schema": {"name": "reply", "schema": schema}}
    r = count_request({"messages": TOOL_MESSAGES, "response_format": fmt})
    text = (
        '# Response Formats\n\n## reply\n\n{"type":"object","properties":{"a":{"type":"integer"}}}'
    )
    assert r.tools == enc.count(text)
    with pytest.raises(ValueError, match="tool_choice"):
        count_request({"messages": [], "tool_choice": "sometimes"})


def test_unknown_request_fields_are_ignored():
    body = {"model": "gpt-4o", "messages": EXAMPLE, "temperature": 0.2, "stream": True}
    assert count_request(body).total == 124


# ------------------------------------------------------------------ part 2: images
def _image_msg(**image):
    return [{"role": "user", "content": [{"type": "image_url", "image_url": image}]}]


def _overhead(model="gpt-4o"):
    return count_messages([{"role": "user", "content": ""}], model=model)


@pytest.mark.parametrize(
    "model,w,h,detail,tokens",
    [
        ("gpt-4o", 1024, 1024, "high", 765),  # OpenAI's worked example
        ("gpt-4o", 2048, 4096, "high", 1105),  # OpenAI's worked example
        ("gpt-4o", 4096, 8192, "low", 85),
        ("gpt-4o-2024-08-06", 512, 512, "high", 255),
        ("gpt-4.1", 1024, 1024, "high", 765),
        ("gpt-5", 1024, 1024, "high", 70 + 4 * 140),
        ("gpt-4o-mini", 1024, 1024, "high", 2833 + 4 * 5667),
        ("o1", 1024, 1024, "high", 75 + 4 * 150),
        ("o3", 2048, 4096, "low", 75),
        ("gpt-4.1-mini", 1024, 1024, "high", round(1024 * 1.62)),
        ("gpt-5-nano", 1800, 2400, "low", round(1452 * 2.46)),
        ("o4-mini", 1800, 2400, "high", round(1452 * 1.72)),
    ],
)
def test_image_tokens(model, w, h, detail, tokens):
    msgs = _image_msg(url="https://example.com/cat.png", detail=detail, width=w, height=h)
    r = count_request({"model": model, "messages": msgs})
    assert r.total - _overhead(model) == tokens


def test_image_geometry_worked_examples():
    assert tile_count(1024, 1024) == 4 and tile_count(2048, 4096) == 6
    assert tile_count(100, 100) == 1 and tile_count(768, 2000) == 2 * 4
    assert patch_count(1024, 1024) == 1024 and patch_count(1800, 2400) == 1452
    assert patch_count(10_000, 10_000) <= 1536


def test_auto_detail_is_high_and_an_estimate():
    msgs = _image_msg(url="https://x/y.png", width=1024, height=1024)
    r = count_request({"messages": msgs})
    assert r.total - _overhead() == 765 and not r.exact
    r = count_request({"messages": _image_msg(url="x", width=1024, height=1024, detail="high")})
    assert r.exact


def test_remote_image_is_not_fetched_and_says_what_is_missing():
    with pytest.raises(ValueError, match="not fetched.*width and height"):
        count_request({"messages": _image_msg(url="https://example.com/cat.png", detail="high")})
    with pytest.raises(ValueError, match="no published image token rule"):
        count_messages(_image_msg(url="x", width=1, height=1), model="gpt-3.5-turbo")


@pytest.mark.parametrize(
    "fmt,options",
    [("PNG", {}), ("JPEG", {}), ("GIF", {}), ("WEBP", {}), ("WEBP", {"lossless": True})],
)
@pytest.mark.parametrize("size", [(1, 1), (1024, 1024), (2048, 4096 // 3), (3001, 17)])
def test_data_url_size_from_header(fmt, options, size):
    pil = pytest.importorskip("PIL.Image")
    buf = io.BytesIO()
    pil.new("RGB", size, (200, 30, 30)).save(buf, format=fmt, **options)
    url = f"data:image/{fmt.lower()};base64," + base64.b64encode(buf.getvalue()).decode()
    assert image_size(url) == size
    msgs = _image_msg(url=url, detail="high")
    assert count_messages(msgs) == count_messages(
        _image_msg(url="https://x", detail="high", width=size[0], height=size[1])
    )


def test_jpeg_size_after_a_large_exif_block():
    sof = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 480, 640) + b"\x03" + b"\x00" * 9
    app1 = b"\xff\xe1" + struct.pack(">H", 60_002) + b"\x00" * 60_000
    data = b"\xff\xd8" + app1 + sof + b"\xff\xd9"
    assert image_size("data:image/jpeg;base64," + base64.b64encode(data).decode()) == (640, 480)


def test_data_url_errors():
    with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP"):
        image_size("data:image/png;base64," + base64.b64encode(b"hello world").decode())
    with pytest.raises(ValueError, match="base64"):
        image_size("data:image/png,rawbytes")


# ------------------------------------------------------------------ part 5: growing histories
WORDS = ["hello", " world", "日本語", "\n\n", " the", "  ", "tool", "!", "ünï", " 12345", "code"]


def _history(rng, turns, system=True):
    """A random history: system prompt, user/assistant turns, tool calls with their results."""
    msgs = [{"role": "system", "content": "You are terse."}] if system else []
    for t in range(turns):
        text = "".join(rng.choice(WORDS) for _ in range(rng.randint(0, 12)))
        kind = rng.random()
        if kind < 0.2:
            ids = [f"call_{t}_{j}" for j in range(rng.randint(1, 2))]
            calls = [
                {
                    "id": i,
                    "type": "function",
                    "function": {"name": "get_current_weather", "arguments": '{"x": 1}'},
                }
                for i in ids
            ]
            msgs.append({"role": "assistant", "content": None, "tool_calls": calls})
            msgs += [{"role": "tool", "tool_call_id": i, "content": text} for i in ids]
        else:
            msgs.append({"role": rng.choice(["user", "assistant"]), "content": text})
    return msgs


@pytest.mark.parametrize("seed", range(5))
def test_chat_counter_equals_recounting_every_prefix(seed):
    rng = random.Random(seed)
    msgs = _history(rng, 30)
    counter = ChatCounter("gpt-4o", TOOLS)
    for i, m in enumerate(msgs):
        counter.add(m)
        brute = count_request({"model": "gpt-4o", "messages": msgs[: i + 1], "tools": TOOLS})
        assert counter.total == brute.total
        assert tuple(counter.counts) == brute.messages
        assert counter.result() == brute


def test_fits_agrees_with_the_count_and_stops_once_over():
    msgs = _history(random.Random(7), 20)
    total = count_request({"messages": msgs}).total
    for budget in range(total - 3, total + 3):
        assert fits({"messages": msgs}, budget) == (total <= budget)
    # Over budget after the first message: the malformed second one is never looked at.
    bad = [{"role": "user", "content": "a long message " * 20}, {"role": "user", "content": 5}]
    assert fits({"messages": bad}, 10) is False
    with pytest.raises(ValueError):
        fits({"messages": bad}, 10_000)


def _total(msgs, model="gpt-4o"):
    return count_request({"model": model, "messages": msgs}).total


def _check_trim(msgs, budget, out):
    """The properties trim_to_budget promises, each checked by recounting from scratch.

    ``msgs`` has its one system message first.
    """
    assert _total(out) <= budget
    assert out[0] == msgs[0]  # the system message is never dropped
    tail = out[1:]
    start = len(msgs) - len(tail)
    assert tail[1:] == msgs[start + 1 :]  # the newest messages, whole
    calls = {c["id"] for m in out for c in m.get("tool_calls") or ()}
    assert all(m["tool_call_id"] in calls for m in out if m["role"] == "tool")
    if tail and tail[0] != msgs[start]:  # the oldest kept message was cut
        text, kept = msgs[start]["content"], tail[0]["content"]
        assert kept and text.endswith(kept) and tail[0]["role"] == msgs[start]["role"]
        longer = [msgs[0], {**tail[0], "content": text[len(text) - len(kept) - 1 :]}, *tail[1:]]
        assert _total(longer) > budget  # the cut is the smallest that fits
        return
    unit = start - 1  # the newest dropped turn: a message, or a call with its results
    if unit < 1:
        return
    while msgs[unit]["role"] == "tool":
        unit -= 1
    extra = msgs[unit:start]
    if len(extra) == 1 and isinstance(extra[0]["content"], str) and extra[0]["content"]:
        extra = [{**extra[0], "content": extra[0]["content"][-1:]}]
    assert _total([msgs[0], *extra, *tail]) > budget  # not even its last character fits


@pytest.mark.parametrize("seed", range(6))
def test_trim_to_budget_against_recounting(seed):
    rng = random.Random(seed)
    msgs = _history(rng, 25)
    full = _total(msgs)
    floor = _total(msgs[:1])
    for budget in sorted(
        {floor, floor + 1, *rng.sample(range(floor, full + 5), 25), full, full + 1}
    ):
        out = trim_to_budget(msgs, budget, "gpt-4o")
        _check_trim(msgs, budget, out)
        if budget >= full:
            assert out == msgs


def test_trim_to_budget_errors():
    msgs = [{"role": "system", "content": "x " * 100}, {"role": "user", "content": "hi"}]
    with pytest.raises(ValueError, match="system messages"):
        trim_to_budget(msgs, 20)
    with pytest.raises(ValueError, match="keep"):
        trim_to_budget(msgs, 1000, keep="head")


_KEYS = ["role", "content", "name", "tool_calls", "tool_call_id", "function", "arguments", "id"]
_KEYS += ["type", "text", "image_url", "url", "detail", "width", "height", "parameters"]
_KEYS += ["properties", "enum", "description", "items", "oneOf", "required", "default"]
_KEYS += ["reasoning_content", "json_schema", "schema", "nullable", "title", "examples"]
_ATOMS = ["user", "assistant", "tool", "system", "text", "image_url", "high", "object", "array"]
_JSON = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-5, 5000)
    | st.text(max_size=8)
    | st.sampled_from(_ATOMS),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.sampled_from(_KEYS), c, max_size=4),
    max_leaves=12,
)


@given(
    model=st.sampled_from(["gpt-4o", "gpt-4.1-mini", "gpt-oss-20b", "gpt-3.5-turbo"]),
    messages=st.lists(_JSON, max_size=3),
    tools=st.lists(_JSON, max_size=2),
    choice=st.none() | _JSON,
    fmt=st.none() | st.dictionaries(st.sampled_from(_KEYS), _JSON, max_size=3),
)
def test_hyp_malformed_requests_raise_valueerror(model, messages, tools, choice, fmt):
    request = {"model": model, "messages": messages, "tools": tools}
    request |= {"tool_choice": choice, "response_format": fmt}
    try:
        r = count_request(request)
    except ValueError:
        return
    assert r.total == sum(r.messages) + r.tools + r.priming

"""Chat templates against `transformers`: token for token what apply_chat_template(tokenize=True)
gives, on Llama-3-, Qwen- and Mistral-style templates (tests/conftest.py), and the chat counts of
open models (count_messages, ChatCounter, fits, trim_to_budget).

`transformers` needs a newer `regex` than the test extra pins, so it is not in the test extra:
scripts/chat_reference.sh installs it on the side and runs these tests; elsewhere they skip."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpecore.chat import ChatCounter, count_messages, count_request, fits, trim_to_budget
from bpecore.chat_template import ChatTemplateError, apply_chat_template, render_chat_template
from bpecore.pretrained import from_pretrained

transformers = pytest.importorskip(
    "transformers", reason="transformers is the reference renderer", exc_type=ImportError
)

STYLES = ("llama3", "qwen", "mistral")


@pytest.fixture(scope="module")
def models(chat_model_dirs):
    """Per style: (the bpecore encoding, the transformers tokenizer) of the same directory."""
    return {
        style: (from_pretrained(d), transformers.AutoTokenizer.from_pretrained(str(d)))
        for style, d in chat_model_dirs.items()
    }


# ------------------------------------------------------------------------------ strategies
PIECES = ["<|eot_id|>", "<|im_end|>", "<tool_call>", "[INST]", "</s>", "<s>", "\n", "\n\n", " "]
text = st.lists(
    st.one_of(
        st.text(st.characters(exclude_categories=("Cs",)), max_size=12),
        st.sampled_from(["Hello", " world", "the answer is 42.", "Paris"]),
        st.sampled_from(PIECES),
    ),
    max_size=6,
).map("".join)
name = st.sampled_from(["get_weather", "search", "add"])
arguments = st.one_of(
    st.dictionaries(
        st.sampled_from(["city", "q", "a", "b"]), st.one_of(text, st.integers()), max_size=2
    ),
    st.dictionaries(st.sampled_from(["city", "q"]), text, max_size=2).map(json.dumps),
)


@st.composite
def tool_call(draw):
    return {
        "id": f"call_{draw(st.integers(0, 99))}",
        "type": "function",
        "function": {"name": draw(name), "arguments": draw(arguments)},
    }


tools = st.lists(
    st.builds(
        lambda n, d, props: {
            "type": "function",
            "function": {
                "name": n,
                "description": d,
                "parameters": {
                    "type": "object",
                    "properties": {p: {"type": "string", "description": d} for p in props},
                    "required": props[:1],
                },
            },
        },
        name,
        text,
        st.lists(st.sampled_from(["city", "q", "unit"]), unique=True, max_size=2),
    ),
    min_size=1,
    max_size=2,
)
user = st.builds(lambda t: {"role": "user", "content": t}, text)
assistant = st.builds(lambda t: {"role": "assistant", "content": t}, text)
tool_result = st.builds(
    lambda t: {"role": "tool", "tool_call_id": "call_1", "content": t},
    st.one_of(text, st.dictionaries(st.just("result"), text, min_size=1)),
)
system = st.builds(lambda t: {"role": "system", "content": t}, text)


@st.composite
def llama3_chat(draw):
    one_call = st.builds(
        lambda c: {"role": "assistant", "tool_calls": [c]},
        tool_call(),
    )
    head = draw(st.lists(system, max_size=1))
    return head + draw(
        st.lists(st.one_of(user, assistant, one_call, tool_result), min_size=1, max_size=6)
    )


@st.composite
def qwen_chat(draw):
    reasoning_key = st.sampled_from(["reasoning_content", "reasoning", "thinking"])
    reply = st.builds(
        lambda t, key, r, calls: {
            "role": "assistant",
            **({"content": t} if t is not None else {}),
            **({key: r} if r is not None else {}),
            **({"tool_calls": calls} if calls else {}),
        },
        st.one_of(st.none(), text),
        reasoning_key,
        st.one_of(st.none(), text),
        st.lists(tool_call(), max_size=2),
    )
    plain_results = st.builds(
        lambda t: {"role": "tool", "tool_call_id": "call_1", "content": t}, text
    )
    head = draw(st.lists(system, max_size=1))
    rest = draw(st.lists(st.one_of(user, reply, plain_results), min_size=1, max_size=7))
    return head + rest


@st.composite
def mistral_chat(draw, with_tools: bool):
    head = draw(st.lists(system, max_size=1))
    if not with_tools:
        turns = draw(st.integers(0, 3))
        body = []
        for _ in range(turns):
            body += [draw(user), draw(assistant)]
        return head + body + [draw(user)]
    calls = st.builds(
        lambda cs: {"role": "assistant", "tool_calls": cs},
        st.lists(tool_call(), min_size=1, max_size=2),
    )
    plain_results = st.builds(
        lambda t: {"role": "tool", "tool_call_id": "call_1", "content": t}, text
    )
    return (
        head
        + [draw(user)]
        + draw(st.lists(st.one_of(user, assistant, calls, plain_results), max_size=5))
    )


def _compare(models, style, messages, **kwargs):
    enc, tok = models[style]
    try:
        expected = tok.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs)
    except Exception as e:  # the reference refuses: so must we
        with pytest.raises(ValueError):
            apply_chat_template(enc, messages, **kwargs)
        return type(e).__name__
    got = apply_chat_template(enc, messages, **kwargs)
    assert got == expected, (
        apply_chat_template(enc, messages, tokenize=False, **kwargs),
        tok.apply_chat_template(messages, tokenize=False, **kwargs),
    )
    return None


HYP = settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


@HYP
@given(messages=llama3_chat(), tool_defs=st.one_of(st.none(), tools), prompt=st.booleans())
def test_hyp_llama3_style_equals_transformers(models, messages, tool_defs, prompt):
    _compare(models, "llama3", messages, tools=tool_defs, add_generation_prompt=prompt)


@HYP
@given(
    messages=qwen_chat(),
    tool_defs=st.one_of(st.none(), tools),
    prompt=st.booleans(),
    thinking=st.sampled_from([None, True, False]),
)
def test_hyp_qwen_style_with_tools_equals_transformers(
    models, messages, tool_defs, prompt, thinking
):
    extra = {} if thinking is None else {"enable_thinking": thinking}
    _compare(models, "qwen", messages, tools=tool_defs, add_generation_prompt=prompt, **extra)


@HYP
@given(data=st.data(), with_tools=st.booleans())
def test_hyp_mistral_style_equals_transformers(models, data, with_tools):
    messages = data.draw(mistral_chat(with_tools))
    tool_defs = data.draw(tools) if with_tools else None
    assert _compare(models, "mistral", messages, tools=tool_defs) is None


@HYP
@given(messages=llama3_chat(), style=st.sampled_from(STYLES), partial=text.filter(str.strip))
def test_hyp_continue_final_message_equals_transformers(models, messages, style, partial):
    if style == "mistral":
        messages = [{"role": "user", "content": "Hi"}]
    messages = [m for m in messages if m["role"] != "tool" and "tool_calls" not in m] or [
        {"role": "user", "content": "Hi"}
    ]
    messages = [*messages, {"role": "assistant", "content": partial}]
    _compare(models, style, messages, continue_final_message=True)


def test_mistral_alternation_error_is_the_templates(models):
    enc, _ = models["mistral"]
    bad = [{"role": "user", "content": "a"}, {"role": "user", "content": "b"}]
    assert _compare(models, "mistral", bad) is not None  # transformers refuses it too
    with pytest.raises(ChatTemplateError, match="must alternate") as e:
        apply_chat_template(enc, bad)
    assert e.value.reason == "raised"


def test_no_bos_unless_the_template_writes_it(models):
    qwen, _ = models["qwen"]
    llama, _ = models["llama3"]
    messages = [{"role": "user", "content": "Hi"}]
    assert apply_chat_template(qwen, messages)[0] == qwen.encode_single_token("<|im_start|>")
    ids = apply_chat_template(llama, messages)
    assert ids[0] == llama.encode_single_token("<|begin_of_text|>")
    assert ids.count(ids[0]) == 1


def test_template_variables_from_the_config(models):
    enc, tok = models["qwen"]
    assert enc.chat_template_tokens == {"eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"}
    template = "{{ pad_token }}|{{ eos_token }}|{{ bos_token is defined }}|{{ x }}"
    messages = [{"role": "user", "content": "Hi"}]
    ours = apply_chat_template(enc, messages, chat_template=template, tokenize=False, x=1)
    assert ours == tok.apply_chat_template(messages, chat_template=template, tokenize=False, x=1)
    assert ours == "<|endoftext|>|<|im_end|>|False|1"


def test_template_by_name(tmp_path, chat_model_dirs):
    src = chat_model_dirs["qwen"]
    for f in ("tokenizer.json", "tokenizer_config.json"):
        (tmp_path / f).write_bytes((src / f).read_bytes())
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    config["chat_template"] = [
        {"name": "default", "template": "D{{ messages | length }}"},
        {"name": "tool_use", "template": "T{{ tools | length }}"},
    ]
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config))
    enc = from_pretrained(tmp_path)
    tok = transformers.AutoTokenizer.from_pretrained(str(tmp_path))
    messages = [{"role": "user", "content": "Hi"}]
    for kwargs in ({}, {"tools": [{"name": "f"}]}, {"chat_template": "tool_use", "tools": []}):
        ours = apply_chat_template(enc, messages, tokenize=False, **kwargs)
        assert ours == tok.apply_chat_template(messages, tokenize=False, **kwargs)
    assert apply_chat_template(enc, messages, tokenize=False) == "D1"


def test_helpers_as_transformers_gives_them(models):
    _, tok = models["qwen"]
    template = (
        "{{ messages | tojson }}|{{ messages | tojson(indent=2, sort_keys=true) }}|"
        '{{ {"é": "<b>"} | tojson(ensure_ascii=true, separators=(",", ":")) }}|'
        "{% set ns = namespace(n=0) %}{% for m in messages %}{% set ns.n = ns.n + 1 %}{% endfor %}"
        '{{ ns.n }}|{{ dict(a=1) | tojson }}|{{ dict.fromkeys(["a"], 0) | tojson }}|'
        "{% for i in range(5) %}{% if i == 3 %}{% break %}{% endif %}{{ i }}{% endfor %}|"
        "{% generation %}{{ messages[-1].content }}{% endgeneration %}"
        "  \n{% if true %}\n  x\n{% endif %}\n"
    )
    messages = [{"role": "user", "content": "<b>é</b>", "name": None}]
    ours = render_chat_template(template, messages)
    assert ours == tok.apply_chat_template(messages, chat_template=template, tokenize=False)


# ------------------------------------------------------------------------------ chat counts
def _reference_count(tok, messages, **kwargs):
    kwargs.setdefault("add_generation_prompt", True)
    return len(tok.apply_chat_template(messages, tokenize=True, return_dict=False, **kwargs))


@HYP
@given(messages=qwen_chat(), tool_defs=st.one_of(st.none(), tools))
def test_hyp_count_messages_of_an_open_model(models, messages, tool_defs):
    enc, tok = models["qwen"]
    expected = _reference_count(tok, messages, tools=tool_defs)
    assert count_messages(messages, model=enc, tools=tool_defs) == expected
    r = count_request({"model": "qwen-7b", "messages": messages, "tools": tool_defs}, encoding=enc)
    assert (r.total, r.exact, r.model, r.encoding) == (expected, True, "qwen-7b", enc.name)
    assert fits({"messages": messages, "tools": tool_defs}, expected, encoding=enc)
    assert not fits({"messages": messages, "tools": tool_defs}, expected - 1, encoding=enc)


def test_count_request_template_fields(models):
    enc, tok = models["qwen"]
    messages = [{"role": "user", "content": "Hi"}]
    for request, kwargs in [
        ({"add_generation_prompt": False}, {"add_generation_prompt": False}),
        ({"chat_template_kwargs": {"enable_thinking": False}}, {"enable_thinking": False}),
        (
            {"chat_template": "{{ messages[0].content }}!", "add_generation_prompt": False},
            {"chat_template": "{{ messages[0].content }}!", "add_generation_prompt": False},
        ),
    ]:
        got = count_request({"model": enc, "messages": messages, **request}).total
        assert got == _reference_count(tok, messages, **kwargs)
    last = [*messages, {"role": "assistant", "content": "Hel"}]
    got = count_request({"messages": last, "continue_final_message": True}, encoding=enc).total
    assert got == _reference_count(
        tok, last, continue_final_message=True, add_generation_prompt=False
    )
    with pytest.raises(ValueError, match="chat_template_kwargs may not set"):
        count_request({"messages": messages, "chat_template_kwargs": {"tools": []}}, encoding=enc)


@pytest.mark.parametrize("style", STYLES)
def test_chat_counter_of_an_open_model(models, style):
    enc, tok = models[style]
    history = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is the capital of France?"},
        {"role": "assistant", "content": "Paris."},
        {"role": "user", "content": "And of Italy?"},
    ]
    counter = ChatCounter(enc)
    for i, message in enumerate(history, 1):
        counter.add(message)
        assert counter.total == _reference_count(tok, history[:i]), i
    assert sum(counter.counts) == counter.total and counter.exact
    assert counter.result().rules_version == "chat_template"


@pytest.mark.parametrize("style", STYLES)
def test_trim_to_budget_of_an_open_model(models, style):
    enc, tok = models[style]
    history = [{"role": "system", "content": "Be brief."}]
    for i in range(6):
        history += [
            {"role": "user", "content": f"Question {i}: " + "tell me more about Paris " * (i + 1)},
            {"role": "assistant", "content": f"Answer {i}: it is a city."},
        ]
    history.append({"role": "user", "content": "Last question?"})
    whole = _reference_count(tok, history)
    for budget in (whole, whole - 1, whole // 2, whole // 3, 60):
        kept = trim_to_budget(history, budget, model=enc)
        cost = _reference_count(tok, kept)
        assert cost <= budget and kept[0] == history[0] and kept[-1] == history[-1]
        if budget == whole:
            assert kept == history
            continue
        first = kept[1]
        original = next(m for m in history if m["content"].endswith(first["content"]))
        assert first["role"] == "user" and kept[2:] == history[len(history) - len(kept) + 2 :]
        if first["content"] != original["content"]:  # cut: one more character is over budget
            k = len(original["content"]) - len(first["content"])
            longer = [kept[0], {**first, "content": original["content"][k - 1 :]}, *kept[2:]]
            assert _reference_count(tok, longer) > budget
    with pytest.raises(ValueError, match="system messages alone"):
        trim_to_budget(history, 0, model=enc)

"""Chat templates are code: rendering is bounded in time, output size and nesting, and the sandbox
refuses what it should, each with its ChatTemplateError reason. And the rendered chat is encoded as
`tokenizers` encodes it (the comparison with `transformers` itself is in
test_chat_template_transformers.py)."""

from __future__ import annotations

import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bpecore.chat import ChatCounter, count_messages, fits, trim_to_budget
from bpecore.chat_template import (
    ChatTemplateError,
    apply_chat_template,
    has_chat_template,
    render_chat_template,
)
from bpecore.pretrained import from_pretrained

tokenizers = pytest.importorskip("tokenizers")


def test_no_template(chat_model_dirs):
    import bpecore

    enc = bpecore.get_encoding("cl100k_base")
    assert not has_chat_template(enc)
    with pytest.raises(ChatTemplateError) as e:
        apply_chat_template(enc, [{"role": "user", "content": "Hi"}])
    assert e.value.reason == "missing"


# ------------------------------------------------------------------------------ the sandbox
M = [{"role": "user", "content": "hi"}]
HOSTILE = {
    # loops that never end, with and without calls inside
    "nested loops": (
        "{% set x = range(100000) | list %}"
        "{% for a in x %}{% for b in x %}{% for c in x %}{% endfor %}{% endfor %}{% endfor %}",
        "timeout",
    ),
    "loops with calls": (
        '{% for a in range(100000) %}{% for b in range(100000) %}{{ "" }}{% endfor %}{% endfor %}',
        "timeout",
    ),
    # recursion
    "recursive macro": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "recursion"),
    "recursive loop": ("{% for m in messages recursive %}{{ loop([m]) }}{% endfor %}", "recursion"),
    # attributes and calls the sandbox refuses
    "class of a list": ("{{ messages.__class__.__mro__ }}", "security"),
    "subclasses": ("{{ ''.__class__.__base__.__subclasses__() }}", "security"),
    "function globals": ("{{ raise_exception.__globals__.os }}", "security"),
    "type internals": ("{{ cycler.__init__.__globals__ }}", "security"),
    "mutating a list": ("{{ messages.append(1) }}", "security"),
    "namespace underscore": ("{% set ns = namespace(_x=1) %}", "security"),
    # huge strings, built at once or by doubling
    "repetition": ('{{ "a" * 10 ** 9 }}', "output_size"),
    "namespace doubling": (
        '{% set ns = namespace(s="ab") %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}',
        "output_size",
    ),
    "set doubling": ('{% set s = "ab" %}' + "{% set s = s ~ s %}" * 40, "output_size"),
    "block doubling": (
        '{% set s = "ab" %}' + "{% set s %}{{ s }}{{ s }}{% endset %}" * 40,
        "output_size",
    ),
    "macro doubling": (
        "{% macro f(s, n) %}{% if n %}{{ f(s ~ s, n - 1) }}{% else %}{{ s | length }}{% endif %}"
        '{% endmacro %}{{ f("ab", 40) }}',
        "output_size",
    ),
    "center": ('{{ "x" | center(10 ** 9) }}', "output_size"),
    "percent width": ('{{ "%1000000000d" % 1 }}', "output_size"),
    "format width": ('{{ "{:>{w}}".format(1, w=10 ** 9) }}', "output_size"),
    "ljust": ('{{ "a".ljust(10 ** 9) }}', "output_size"),
    "join": ('{{ range(100000) | list | join("x" * 900000) }}', "output_size"),
    "indent": ('{{ ("\n" * 900000) | indent(900000) }}', "output_size"),
    "replace": ('{% set s = "a" * 900000 %}{{ s.replace("a", s) }}', "output_size"),
    "power": ("{{ 2 ** 100000000 }}", "output_size"),
    "lipsum": ("{{ lipsum(10 ** 9) }}", "output_size"),
    "strftime width": ('{{ strftime_now("%1000000000Y") }}', "output_size"),
    "long output": ('{% for i in range(100000) %}{{ "x" * 1000 }}{% endfor %}', "output_size"),
    # huge texts of containers: a list or dict printed, joined, serialized or concatenated
    "list repetition": ('{% set s = "x" * 900000 %}{{ [s] * 1000000 }}', "output_size"),
    "dict of refs": (
        '{% set s = "x" * 900000 %}{{ dict.fromkeys(range(100000), s) }}',
        "output_size",
    ),
    "printed list": ('{% set s = "x" * 500000 %}{% set l = [s, s, s] %}{{ l }}', "output_size"),
    "concatenated list": ('{% set s = "x" * 500000 %}{{ "a" ~ [s, s, s] }}', "output_size"),
    "serialized list": ('{% set s = "x" * 500000 %}{{ [s, s, s] | tojson }}', "output_size"),
    "nested lists": ('{% set s = "x" * 300000 %}{{ [[s, s], [s, s]] | string }}', "output_size"),
    "format filter width": ('{{ "%1000000000d" | format(1) }}', "output_size"),
    # ordinary failures
    "raise_exception": ('{{ raise_exception("no system messages") }}', "raised"),
    "syntax": ("{% for %}", "syntax"),
    "nested past Python's limit": ("{% for a in messages %}" * 30 + "{% endfor %}" * 30, "syntax"),
    "nested past the parser's": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "syntax"),
    "undefined": ("{{ foo.bar }}", "error"),
}


@pytest.mark.parametrize("case", HOSTILE, ids=list(HOSTILE))
def test_hostile_template_is_stopped(case):
    template, reason = HOSTILE[case]
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError) as e:
        render_chat_template(template, M, seconds=0.5)
    assert e.value.reason == reason, e.value
    assert isinstance(e.value, ValueError)
    assert time.monotonic() - t0 < 3.0
    # the thread is left as it was: no stray interruption later
    assert render_chat_template("{{ messages[0].content }}", M) == "hi"
    time.sleep(0.05)
    assert sum(range(100_000)) == 4_999_950_000


def test_limits_are_parameters():
    template = '{{ "x" * 2000 }}'
    assert len(render_chat_template(template, M, max_chars=2000)) == 2000
    with pytest.raises(ChatTemplateError, match="over the limit of 1,999"):
        render_chat_template(template, M, max_chars=1999)
    slow = "{% for a in range(100000) %}{% for b in range(300) %}{% endfor %}{% endfor %}"
    t0 = time.monotonic()
    with pytest.raises(ChatTemplateError) as e:
        render_chat_template(slow, M, seconds=0.05)
    assert e.value.reason == "timeout" and time.monotonic() - t0 < 1.0


def test_timeouts_in_threads_stop_only_their_own_render():
    """A hostile render in one thread times out while renders in other threads finish."""
    spin = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    results: dict[str, object] = {}

    def hostile():
        try:
            render_chat_template(spin, M, seconds=0.3)
        except ChatTemplateError as e:
            results["hostile"] = e.reason

    def friendly(i):
        out = []
        for _ in range(200):
            out.append(render_chat_template("{{ messages[0].content }}", M, seconds=5))
        results[f"friendly{i}"] = set(out)

    threads = [threading.Thread(target=hostile)] + [
        threading.Thread(target=friendly, args=(i,)) for i in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert results == {"hostile": "timeout", "friendly0": {"hi"}, "friendly1": {"hi"}}


def test_big_numbers_in_plain_text_are_not_widths():
    """Only the width of a conversion spec is bounded, not any number in a formatted text."""
    template = (
        '{{ "order 12345678901: %s" % 5 }} {{ "id 98765432101 {}".format(7) }} '
        '{{ strftime_now("2099999999 %Y")[:10] }} {{ "%d" % 123456789012 }}'
    )
    assert (
        render_chat_template(template, M)
        == "order 12345678901: 5 id 98765432101 7 2099999999 123456789012"
    )


def test_walking_the_inputs_stays_cheap():
    """Containers of the inputs are weighed once: a template that hands the whole history to a
    filter at every message costs about what plain Jinja costs (not a walk of it per call)."""
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    messages = [{"role": "user", "content": "hello " * 20} for _ in range(600)]
    template = (
        "{% for m in messages %}{{ messages | selectattr('role', 'equalto', 'user') | list "
        "| length }}{% endfor %}"
    )
    plain = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    compiled = plain.from_string(template)
    t0 = time.perf_counter()
    expected = compiled.render(messages=messages)
    t_plain = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert render_chat_template(template, messages, seconds=60) == expected
    assert time.perf_counter() - t0 < 4 * t_plain + 0.5


def test_any_variable_name_reaches_the_template():
    template = "{{ enc }}{{ template }}{{ bos_token }}"
    assert render_chat_template(template, M, enc=1, template=2, bos_token="<s>") == "12<s>"


# ------------------------------------------------------------------------------ the rendered chat, encoded
STYLES = ("llama3", "qwen", "mistral")
CALL = {"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"q": "x"}}}
TOOLS = [{"type": "function", "function": {"name": "f", "description": "Find.", "parameters": {}}}]
CONVERSATIONS = {
    "llama3": [
        {"role": "system", "content": "  Be brief.  "},
        {"role": "user", "content": "Hi <|eot_id|> there"},
        {"role": "assistant", "tool_calls": [CALL]},
        {"role": "tool", "content": {"result": "ok"}},
    ],
    "qwen": [
        {"role": "user", "content": "Hi <tool_call> and <|im_end|>"},
        {"role": "assistant", "reasoning": "think", "content": "", "tool_calls": [CALL, CALL]},
        {"role": "tool", "content": "ok"},
        {"role": "tool", "content": "ok too"},
    ],
    "mistral": [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hi [INST] x"},
        {"role": "assistant", "content": " Hello "},
        {"role": "user", "content": "Bye"},
    ],
}


@pytest.fixture(scope="module")
def encodings(chat_model_dirs):
    return {
        style: (
            from_pretrained(d),
            tokenizers.Tokenizer.from_file(str(d / "tokenizer.json")),
        )
        for style, d in chat_model_dirs.items()
    }


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    style=st.sampled_from(STYLES),
    content=st.lists(
        st.one_of(
            st.text(max_size=10),
            st.sampled_from(["<|eot_id|>", "<|im_end|>", "<tool_call>", "[INST]", "<s>", "\n"]),
        ),
        max_size=5,
    ).map("".join),
)
def test_hyp_rendered_chat_is_encoded_as_tokenizers_does(encodings, style, content):
    """Special and added tokens in the rendered text (the template's and the messages') are read
    as tokens, nothing added around: tokenizers' encode(text, add_special_tokens=False)."""
    enc, tok = encodings[style]
    messages = [*CONVERSATIONS[style][:-1], {**CONVERSATIONS[style][-1], "content": content}]
    tools = TOOLS if style != "mistral" else None
    text = apply_chat_template(enc, messages, tools=tools, tokenize=False)
    ids = apply_chat_template(enc, messages, tools=tools)
    assert ids == tok.encode(text, add_special_tokens=False).ids
    assert count_messages(messages, model=enc, tools=tools) == len(
        apply_chat_template(enc, messages, tools=tools, add_generation_prompt=True)
    )


@pytest.mark.parametrize("style", STYLES)
def test_open_model_counts_are_consistent(encodings, style):
    enc, _ = encodings[style]
    history = [{"role": "system", "content": "Be brief."}]
    for i in range(5):
        history += [
            {"role": "user", "content": f"Question {i}: " + "tell me about Paris " * (i + 1)},
            {"role": "assistant", "content": f"Answer {i}."},
        ]
    history.append({"role": "user", "content": "Last?"})
    whole = count_messages(history, model=enc)
    with pytest.raises(ValueError, match="empty conversation"):  # as transformers refuses it
        count_messages([], model=enc)
    counter = ChatCounter(enc)
    counter.extend(history)
    assert counter.total == whole == sum(counter.counts)
    assert fits({"messages": history}, whole, encoding=enc)
    assert not fits({"messages": history}, whole - 1, encoding=enc)
    for budget in (whole - 1, whole // 2, 40):
        kept = trim_to_budget(history, budget, model=enc)
        assert count_messages(kept, model=enc) <= budget and kept[0] == history[0]
        assert kept[-1] == history[-1] or (budget == 40 and kept == history[:1])

"""Shared fixtures: the toy vocabulary of the README, the shipped encodings, tiktoken twins, corpora."""

from __future__ import annotations

import base64
import functools
import gzip
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

import bpecore
from bpecore.registry import CL100K_PATTERN, O200K_PATTERN

settings.register_profile(
    "dev", max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
# CI: fixed examples (derandomize), so a landing never depends on the draw; new inputs come from
# the dev profile, the slow suites and scripts/reliability/fuzz.py.
settings.register_profile(
    "ci",
    max_examples=300,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
CORPORA = sorted(p.name.split(".")[0] for p in (SHARED / "corpora").glob("*.txt.gz"))
PATTERNS = {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}

#: The README's worked example: every byte, then these merges in rank order.
TOY_MERGES = [b"ab", b"cb", b"ac", b"bb", b"cbb", b"acbb"]


def toy_ranks() -> dict[bytes, int]:
    ranks = {bytes([b]): b for b in range(256)}
    for i, token in enumerate(TOY_MERGES):
        ranks[token] = 256 + i
    return ranks


def read_corpus(name: str) -> str:
    return gzip.decompress((SHARED / "corpora" / f"{name}.1mb.txt.gz").read_bytes()).decode("utf-8")


def shared_ranks(name: str) -> dict[bytes, int]:
    data = gzip.decompress((SHARED / "vocab" / f"{name}.tiktoken.gz").read_bytes())
    return {
        base64.b64decode(tok): int(rank)
        for tok, rank in (line.split() for line in data.splitlines() if line)
    }


@pytest.fixture(scope="session")
def toy_encoding() -> bpecore.Encoding:
    return bpecore.Encoding("toy", toy_ranks(), None, {})


@pytest.fixture(scope="session", params=["cl100k_base", "o200k_base"])
def encoding_name(request) -> str:
    return request.param


@pytest.fixture(scope="session")
def corpus():
    cache: dict[str, str] = {}

    def get(name: str) -> str:
        if name not in cache:
            cache[name] = read_corpus(name)
        return cache[name]

    return get


_tiktoken_cache: dict[str, object] = {}


@pytest.fixture(scope="session")
def tiktoken_encoding():
    """tiktoken.Encoding built from ../shared/vocab (no network), or skip when tiktoken is absent."""
    tiktoken = pytest.importorskip("tiktoken")

    def get(name: str):
        if name not in _tiktoken_cache:
            enc = bpecore.get_encoding(name)
            _tiktoken_cache[name] = tiktoken.Encoding(
                name,
                pat_str=PATTERNS[name],
                mergeable_ranks=shared_ranks(name),
                special_tokens=enc.special_tokens,
            )
        return _tiktoken_cache[name]

    return get


@pytest.fixture(scope="session")
def token_bytes():
    """All token byte strings of an encoding, for the token-concatenation strategy."""
    cache: dict[str, list[bytes]] = {}

    def get(name: str) -> list[bytes]:
        if name not in cache:
            cache[name] = bpecore.get_encoding(name).token_byte_values()
        return cache[name]

    return get


def token_concatenation(tokens: list[bytes], max_size: int = 40) -> st.SearchStrategy[str]:
    """Text made by concatenating random vocabulary tokens (the rust-gems create_test_bytes idea)."""
    return st.lists(st.sampled_from(tokens), max_size=max_size).map(
        lambda ts: b"".join(ts).decode("utf-8", "replace")
    )


ADVERSARIAL_CHARS = [
    " ",
    "a",
    "0",
    "\n",
    "\t",
    "'",
    "s",
    "A",
    "\u00a0",
    "\u3000",
    "é",
    "\u0301",
    "😀",
    "中",
    "/",
    "!",
    "\r",
]


_EXACT_ENCODINGS: dict[str, bpecore.Encoding] = {}


#: Characters on both sides of the patterns' cuts, by class: lower and upper case letters, a
#: mark, a CJK letter, digits, whitespace, newlines, apostrophe, punctuation, '/'.
BOUNDARY_CLASSES = ["az\u00e9", "AZ", "\u0301", "\u4e2d", "01", " \t", "\n\r", "'", ".,!", "/"]


@functools.cache
def boundary_ranks() -> dict[bytes, int]:
    """A small vocab whose counts see where pieces end: the 256 bytes, the boundary characters,
    then a token for every pair of them, pairs of two classes ranked before pairs of one. BPE
    merges a pair exactly when no cut falls between its characters, so a scanner or an exact
    operation that cut differently would count differently (cl100k's vocab never merges, e.g.,
    a newline with the spaces after it, so a cut there is invisible to its counts)."""
    ranks = {bytes([b]): b for b in range(256)}
    chars = "".join(BOUNDARY_CLASSES)
    for ch in chars:
        data = ch.encode("utf-8")
        for k in range(2, len(data) + 1):
            ranks.setdefault(data[:k], len(ranks))
    cls = {ch: i for i, group in enumerate(BOUNDARY_CLASSES) for ch in group}
    pairs = sorted(((a, b) for a in chars for b in chars), key=lambda p: cls[p[0]] == cls[p[1]])
    for a, b in pairs:
        ranks.setdefault((a + b).encode("utf-8"), len(ranks))
    return ranks


def assert_exact_operations(enc, text: str, count) -> None:
    """split_at, split_at_end, count_till_limit, interval counts, both counters and the chunker of
    ``enc`` on ``text`` against their definitions over ``count`` (the reference's token count)."""
    for n in (0, 2, 7, 20):
        want = max(k for k in range(len(text) + 1) if count(text[:k]) <= n)
        assert enc.split_at(text, n) == want, (text, n)
        want = min(k for k in range(len(text) + 1) if count(text[k:]) <= n)
        assert enc.split_at_end(text, n) == want, (text, n)
        total = count(text)
        assert enc.count_till_limit(text, n) == (total if total <= n else None)
    ic = enc.interval_counter(text)
    assert all(
        ic.count(i, j) == count(text[i:j])
        for i in range(0, len(text), 7)
        for j in range(i, len(text) + 1, 5)
    )
    app, pre = enc.appendable_counter(), enc.prependable_counter()
    for i in range(0, len(text), 9):
        assert app.push(text[i : i + 9]) == count(text[: i + 9])
    for i in range(len(text), 0, -11):
        assert pre.push(text[max(0, i - 11) : i]) == count(text[max(0, i - 11) :])
    pieces = list(bpecore.chunk(text, enc, max_tokens=12))
    assert pieces
    for piece in pieces:
        assert piece.tokens == count(piece.text) <= 12
        assert text[piece.start : piece.end] == piece.text


def exact_encoding(name: str) -> bpecore.Encoding:
    """The shipped encodings by name, plus vocabularies the exact-operation tests need: r50k's
    pattern over cl100k ("r50k_pattern"; "llama3_pattern", "qwen2_pattern", "tekken_pattern",
    "deepseek3_pattern" likewise),
    a pattern-less cl100k vocab ("cl100k_nopattern"), the toy
    vocab ("toy") and a custom regex pattern ("cl100k_words"). Built once per session."""
    if name not in _EXACT_ENCODINGS:
        if name == "cl100k_nopattern":
            _EXACT_ENCODINGS[name] = bpecore.Encoding(name, shared_ranks("cl100k_base"), None, {})
        elif name == "toy":
            _EXACT_ENCODINGS[name] = bpecore.Encoding(name, toy_ranks(), None, {})
        elif name == "r50k_pattern":
            from bpecore.registry import R50K_PATTERN

            _EXACT_ENCODINGS[name] = bpecore.Encoding(
                name, shared_ranks("cl100k_base"), R50K_PATTERN, {}
            )
        elif name in ("llama3_pattern", "qwen2_pattern", "tekken_pattern", "deepseek3_pattern"):
            from bpecore import pretokenize

            pattern = getattr(pretokenize, name.split("_")[0].upper() + "_PATTERN")
            _EXACT_ENCODINGS[name] = bpecore.Encoding(name, boundary_ranks(), pattern, {})
        elif name == "cl100k_words":
            _EXACT_ENCODINGS[name] = bpecore.Encoding(
                name, shared_ranks("cl100k_base"), r"\S+|\s+", {}
            )
        else:
            _EXACT_ENCODINGS[name] = bpecore.get_encoding(name)
    return _EXACT_ENCODINGS[name]


# ------------------------------------------------------------------------------ chat templates
# Three prompt formats in the styles of Llama 3, Qwen and Mistral models (written for these tests):
# tools, tool calls and results, reasoning, special tokens, trim and tojson, raise_exception.
LLAMA3_STYLE_TEMPLATE = """{{- bos_token }}
{%- if not date_string is defined %}{% set date_string = strftime_now("%d %b %Y") %}{% endif %}
{%- if messages and messages[0].role == "system" %}
    {%- set system_text = messages[0].content | trim %}
    {%- set rest = messages[1:] %}
{%- else %}
    {%- set system_text = "" %}
    {%- set rest = messages %}
{%- endif %}
<|start_header_id|>system<|end_header_id|>

{% if tools is not none %}Environment: ipython
{% endif %}Today Date: {{ date_string }}

{% if tools is not none %}Call a function by replying with JSON {"name": name, "parameters": args}.

{% for t in tools %}{{ t | tojson(indent=4) }}

{% endfor %}{% endif %}{{ system_text }}<|eot_id|>
{%- for m in rest %}
    {%- if m.role == "assistant" and m.tool_calls is defined %}
        {%- if m.tool_calls | length != 1 %}{{ raise_exception("one tool call per message") }}{% endif %}
        {%- set call = m.tool_calls[0].function %}
<|start_header_id|>assistant<|end_header_id|>

{"name": "{{ call.name }}", "parameters": {{ call.arguments | tojson }}}<|eot_id|>
    {%- elif m.role == "tool" %}
<|start_header_id|>ipython<|end_header_id|>

{{ m.content | tojson if m.content is mapping else m.content }}<|eot_id|>
    {%- else %}
<|start_header_id|>{{ m.role }}<|end_header_id|>

{{ m.content | trim }}<|eot_id|>
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
<|start_header_id|>assistant<|end_header_id|>

{% endif %}"""

QWEN_STYLE_TEMPLATE = """{%- if tools %}
<|im_start|>system
{% if messages[0].role == "system" %}{{ messages[0].content }}

{% endif %}# Tools

You may call functions. Their signatures, inside <tools></tools>:
<tools>
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}</tools>

Return each call as JSON inside <tool_call></tool_call>.<|im_end|>
{% elif messages[0].role == "system" %}
<|im_start|>system
{{ messages[0].content }}<|im_end|>
{% endif %}
{%- set ns = namespace(last_user=-1) %}
{%- for m in messages %}{% if m.role == "user" %}{% set ns.last_user = loop.index0 %}{% endif %}{% endfor %}
{%- for m in messages %}
  {%- if m.role == "user" or (m.role == "system" and not loop.first) %}
<|im_start|>{{ m.role }}
{{ m.content }}<|im_end|>
{% elif m.role == "assistant" %}
<|im_start|>assistant
{% if m.reasoning_content and loop.index0 > ns.last_user %}<think>
{{ m.reasoning_content | trim }}
</think>

{% endif %}{{ m.content if m.content is string else "" }}
    {%- for call in m.tool_calls or [] %}
{% if not loop.first or m.content %}

{% endif %}<tool_call>
{"name": "{{ call.function.name }}", "arguments": {{ call.function.arguments if call.function.arguments is string else call.function.arguments | tojson }}}
</tool_call>
    {%- endfor %}<|im_end|>
{% elif m.role == "tool" %}
    {%- if loop.first or loop.previtem.role != "tool" %}<|im_start|>user{% endif %}

<tool_response>
{{ m.content }}
</tool_response>
    {%- if loop.last or loop.nextitem.role != "tool" %}<|im_end|>
{% endif %}
  {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<|im_start|>assistant
{% if enable_thinking is defined and not enable_thinking %}<think>

</think>

{% endif %}
{%- endif %}"""

MISTRAL_STYLE_TEMPLATE = """{%- if messages[0].role == "system" %}
    {%- set system = messages[0].content %}
    {%- set chat = messages[1:] %}
{%- else %}
    {%- set chat = messages %}
{%- endif %}
{%- set users = chat | selectattr("role", "equalto", "user") | list %}
{{- bos_token }}
{%- for m in chat %}
    {%- if tools is none and (m.role == "user") != (loop.index0 % 2 == 0) %}
        {{- raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif %}
    {%- if m.role == "user" %}
        {%- if tools is not none and m is sameas users[-1] %}
            {{- "[AVAILABLE_TOOLS]" }}{{ tools | tojson }}{{ "[/AVAILABLE_TOOLS]" }}
        {%- endif %}
        {%- if system is defined and m is sameas users[-1] %}
            {{- "[INST]" + system + "\\n\\n" + m.content + "[/INST]" }}
        {%- else %}
            {{- "[INST]" + m.content + "[/INST]" }}
        {%- endif %}
    {%- elif m.role == "assistant" and m.tool_calls is defined %}
        {{- "[TOOL_CALLS][" }}
        {%- for c in m.tool_calls %}
            {{- {"name": c.function.name, "arguments": c.function.arguments} | tojson }}
            {%- if not loop.last %}{{ ", " }}{% endif %}
        {%- endfor %}
        {{- "]" + eos_token }}
    {%- elif m.role == "assistant" %}
        {{- " " + m.content | trim + eos_token }}
    {%- elif m.role == "tool" %}
        {{- "[TOOL_RESULTS]" + m.content + "[/TOOL_RESULTS]" }}
    {%- else %}
        {{- raise_exception("Only user, assistant and tool roles follow the system message") }}
    {%- endif %}
{%- endfor %}"""

#: (template, special tokens, non-special added tokens, tokenizer_config extras) per style.
CHAT_STYLES = {
    "llama3": (
        LLAMA3_STYLE_TEMPLATE,
        ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>"]
        + ["<|eot_id|>", "<|eom_id|>"],
        [],
        {"bos_token": "<|begin_of_text|>", "eos_token": "<|eot_id|>"},
    ),
    "qwen": (
        QWEN_STYLE_TEMPLATE,
        ["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        ["<tool_call>", "</tool_call>", "<think>", "</think>"],
        {"bos_token": None, "eos_token": "<|im_end|>", "pad_token": "<|endoftext|>"},
    ),
    "mistral": (
        MISTRAL_STYLE_TEMPLATE,
        ["<unk>", "<s>", "</s>", "[INST]", "[/INST]", "[TOOL_CALLS]", "[AVAILABLE_TOOLS]"]
        + ["[/AVAILABLE_TOOLS]", "[TOOL_RESULTS]", "[/TOOL_RESULTS]"],
        [],
        {"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>"},
    ),
}


@pytest.fixture(scope="session")
def chat_model_dirs(tmp_path_factory) -> dict[str, Path]:
    """A model directory per chat style: a small byte-level BPE tokenizer.json (trained here)
    with the style's special tokens, and a tokenizer_config.json with its chat template."""
    import json

    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import AddedToken, decoders, models, pre_tokenizers, trainers

    out = {}
    for style, (template, specials, added, extra) in CHAT_STYLES.items():
        tok = tokenizers.Tokenizer(models.BPE())
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=700,
            show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        )
        tok.train_from_iterator([read_corpus("english")[:40_000]], trainer)
        tok.add_special_tokens([AddedToken(t, normalized=False) for t in specials])
        tok.add_tokens([AddedToken(t, normalized=False, special=False) for t in added])
        directory = tmp_path_factory.mktemp("chat") / f"{style}-chat"
        directory.mkdir()
        (directory / "tokenizer.json").write_text(tok.to_str(), encoding="utf-8")
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "chat_template": template,
            "model_max_length": 8192,
            **extra,
        }
        (directory / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
        out[style] = directory
    return out

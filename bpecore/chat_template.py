"""Open models' chat templates, rendered as `transformers` renders them, in a bounded sandbox.

A model directory ships its prompt format as a Jinja template (``chat_template`` in
``tokenizer_config.json``, ``chat_template.jinja`` or ``chat_template.json``; ``from_pretrained``
keeps it). ``apply_chat_template(enc, messages, ...)`` renders it and encodes the result as
`transformers`' ``tokenizer.apply_chat_template(messages, ..., tokenize=True)`` does:

- the template runs in Jinja2's ``ImmutableSandboxedEnvironment`` with ``trim_blocks`` and
  ``lstrip_blocks``, the ``loopcontrols`` extension and the ``{% generation %}`` tag, and the
  helpers `transformers` gives it: ``raise_exception(message)``, ``strftime_now(format)``, a
  ``tojson`` filter with ``ensure_ascii``, ``indent``, ``separators`` and ``sort_keys`` (no HTML
  escaping), ``dict`` and a ``namespace`` that refuses ``_``-prefixed names;
- its variables: ``messages`` (keys whose value is None dropped; a message's reasoning under
  ``reasoning_content``, ``thinking`` or ``reasoning`` is given under the first two as well),
  ``tools``, ``documents``, ``add_generation_prompt``, the named special tokens of
  ``tokenizer_config.json`` (``bos_token``, ``eos_token``, ``pad_token``, ``unk_token``, any other
  ``*_token`` and ``extra_special_tokens``) and any extra keyword (``enable_thinking``, ...);
- ``continue_final_message`` leaves the last message open, as `transformers` cuts it;
- the rendered text is encoded with its special and added tokens read as tokens (what
  ``encode(text, allowed_special="all")`` does) and nothing added around it: a BOS is there only
  when the template writes one.

Templates are code shipped inside model directories, so rendering is bounded (a limit is a
``ChatTemplateError``, a ``ValueError``, whose ``reason`` says which):

- ``timeout``: the render takes more than ``seconds`` (default 2): a watchdog thread interrupts
  the rendering thread, also in a loop that calls nothing;
- ``output_size``: the output, or any string, list or namespace value the template builds, passes
  ``max_chars`` (default 1,000,000 plus 8 times the characters of the inputs); repetition
  (``*``), ``%``/``format`` widths, ``center``, ``indent``, ``join``, ``replace`` and the like are
  checked before they allocate;
- ``recursion``: macro calls (or recursive loops) nest deeper than 64;
- ``security``: the sandbox refused an attribute or a call (``__class__``, ``mro``, a method that
  mutates);
- ``raised``: the template called ``raise_exception``; ``syntax``: it does not parse; ``error``:
  any other failure while rendering (an undefined value used, a type error); ``missing``: the
  encoding has no template, or none by the name asked.
"""

from __future__ import annotations

import ctypes
import heapq
import itertools
import json
import math
import os
import re
import threading
import time
from collections.abc import Mapping, Sequence
from contextvars import ContextVar
from datetime import datetime
from functools import lru_cache, update_wrapper
from typing import Any

__all__ = [
    "DEFAULT_SECONDS",
    "MAX_DEPTH",
    "ChatTemplateError",
    "apply_chat_template",
    "has_chat_template",
    "render_chat_template",
    "template_variables",
]

#: Default time limit of one render, in seconds.
DEFAULT_SECONDS = 2.0
#: The output limit is this many characters plus ``_INPUT_FACTOR`` times those of the inputs.
_BASE_CHARS = 1_000_000
_INPUT_FACTOR = 8
#: Deepest nesting of macro calls and recursive loops.
MAX_DEPTH = 64
#: Widest ``tojson`` indent (real templates use 2 or 4).
_MAX_JSON_INDENT = 16
#: Largest integer power a template may compute, in bits.
_MAX_POWER_BITS = 1 << 20
#: `transformers` appends this to the message to continue, then cuts the render there.
_CONTINUE_TAG = "CONTINUE_FINAL_MESSAGE_TAG "
#: Where a message's reasoning may be; templates read the first.
_REASONING_KEYS = ("reasoning_content", "thinking", "reasoning")
_STANDARD_TOKENS = (
    "bos_token",
    "eos_token",
    "unk_token",
    "sep_token",
    "pad_token",
    "cls_token",
    "mask_token",
)


class ChatTemplateError(ValueError):
    """A chat template could not be rendered; ``reason`` is one of ``missing``, ``syntax``,
    ``raised``, ``error``, ``security``, ``timeout``, ``output_size``, ``recursion``."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class _Timeout(BaseException):
    """Raised inside a rendering thread by the watchdog; a BaseException so that nothing the
    template reaches (Jinja's own ``except Exception`` clauses) swallows it."""


# ------------------------------------------------------------------------------ time limit
def _async_raise(thread_id: int, exc: type[BaseException] | None) -> None:
    """Raise ``exc`` in thread ``thread_id`` at its next bytecode (None: cancel a pending one)."""
    ctypes.pythonapi.PyThreadState_SetAsyncExc(
        ctypes.c_ulong(thread_id), exc and ctypes.py_object(exc)
    )


class _Watchdog:
    """One daemon thread interrupting the renders that overrun their deadline.

    ``arm`` registers the calling thread with a deadline; past it, the watchdog raises
    ``_Timeout`` in that thread. ``disarm`` unregisters and, if the watchdog fired but the
    exception is not delivered yet, cancels it, so it never lands outside the render.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int]] = []
        self._armed: dict[int, int] = {}  # ticket -> thread id
        self._fired: dict[int, int] = {}
        self._tickets = itertools.count()
        self._pid = -1

    def arm(self, seconds: float) -> int:
        with self._cond:
            if self._pid != os.getpid():  # first use, or a forked child: no thread yet
                self._heap, self._armed, self._fired = [], {}, {}
                threading.Thread(
                    target=self._run, name="bpecore-template-watchdog", daemon=True
                ).start()
                self._pid = os.getpid()
            ticket = next(self._tickets)
            self._armed[ticket] = threading.get_ident()
            heapq.heappush(self._heap, (time.monotonic() + seconds, ticket))
            self._cond.notify()
            return ticket

    def disarm(self, ticket: int) -> None:
        with self._cond:
            if self._armed.pop(ticket, None) is None:
                thread_id = self._fired.pop(ticket, None)
                if thread_id is not None:
                    _async_raise(thread_id, None)

    def _run(self) -> None:
        with self._cond:
            while True:
                now = time.monotonic()
                while self._heap and (
                    self._heap[0][0] <= now or self._heap[0][1] not in self._armed
                ):
                    _, ticket = heapq.heappop(self._heap)
                    thread_id = self._armed.pop(ticket, None)
                    if thread_id is not None:
                        self._fired[ticket] = thread_id
                        _async_raise(thread_id, _Timeout)
                self._cond.wait(self._heap[0][0] - now if self._heap else None)


_WATCHDOG = _Watchdog()


# ------------------------------------------------------------------------------ size limits
#: Per formatting style: (its conversion specs, a spec that takes its width from the arguments).
_FORMAT_SPECS = {
    "printf": (
        re.compile(r"%(?:\([^)]*\))?[#0\- +]*(?:\d+)?(?:\.\d*)?"),
        re.compile(r"%[^a-zA-Z%]*\*"),
    ),
    "format": (re.compile(r"\{[^{}:]*:[^{}]*"), re.compile(r"\{[^{}]*\{")),
    "strftime": (re.compile(r"%[-_0^#]*\d+"), re.compile(r"(?!)")),
}
_CONTAINERS = (list, tuple, dict)
#: The text of a number, a boolean or None, counted generously.
_SCALAR = 8


def _weights(roots: Sequence[Any]) -> dict[int, int]:
    """The text weight (``_Budget.weight``) of every container in the inputs, by id: they stay
    alive during the render, so a template walking ``messages`` again costs one lookup."""
    out: dict[int, int] = {}
    stack = [(r, False) for r in roots if isinstance(r, _CONTAINERS)]
    while stack:
        value, children_done = stack.pop()
        if id(value) in out:
            continue
        items = [*value.keys(), *value.values()] if isinstance(value, dict) else value
        if not children_done:
            stack.append((value, True))
            stack.extend((c, False) for c in items if isinstance(c, _CONTAINERS))
            continue
        out[id(value)] = 2 + sum(
            out[id(c)]
            if isinstance(c, _CONTAINERS)
            else len(c) + 2
            if isinstance(c, str)
            else _SCALAR
            for c in items
        )
    return out


class _Budget:
    """The limits of the render in progress (one per thread, in a ContextVar)."""

    __slots__ = ("max_chars", "depth", "known")

    def __init__(self, max_chars: int, known: dict[int, int] | None = None) -> None:
        self.max_chars = max_chars
        self.depth = 0
        self.known = known or {}

    def weight(self, value: Any) -> int:
        """About the length of ``value``'s text (``str()``, ``tojson``): a string's length, a
        container's elements' weights (walked until past the limit; inputs looked up)."""
        if isinstance(value, str):
            return len(value)
        if not isinstance(value, _CONTAINERS):
            return _SCALAR
        known, limit = self.known, self.max_chars
        total, stack = 0, [value]
        while stack and total <= limit:
            v = stack.pop()
            if isinstance(v, str):
                total += len(v) + 2
            elif isinstance(v, _CONTAINERS):
                w = known.get(id(v))
                if w is not None:
                    total += w
                elif isinstance(v, dict):
                    total += 2
                    stack.extend(v.keys())
                    stack.extend(v.values())
                else:
                    total += 2
                    stack.extend(v)
            else:
                total += _SCALAR
        return total

    def over(self, what: str, size: int) -> ChatTemplateError:
        return ChatTemplateError(
            "output_size",
            f"chat template {what} would be {size:,} long, over the limit of {self.max_chars:,} "
            "characters",
        )

    def check(self, value: Any, what: str = "value") -> Any:
        """``value``, unless its text would pass the limit (a container by its elements)."""
        if isinstance(value, str):
            if len(value) > self.max_chars:
                raise self.over(what, len(value))
        elif isinstance(value, _CONTAINERS):
            weight = self.weight(value)
            if weight > self.max_chars:
                raise self.over(what, weight)
        return value

    def check_size(self, size: int, what: str) -> None:
        if size > self.max_chars:
            raise self.over(what, size)

    def check_digits(self, fmt: str, args: Any, style: str = "printf") -> None:
        """Formatting with ``fmt`` (``printf``: ``%``; ``format``: ``str.format``; ``strftime``):
        no width or precision over the limit, written in it or taken from ``args``."""
        spec, from_args = _FORMAT_SPECS[style]
        for match in spec.finditer(fmt):
            for digits in re.findall(r"\d+", match.group(0)):
                if len(digits) > 18 or int(digits) > self.max_chars:
                    raise self.over("format width", int(digits[:19]))
        if not from_args.search(fmt):
            return
        values = args.values() if isinstance(args, Mapping) else args
        if not isinstance(values, (tuple, list)) and not isinstance(args, Mapping):
            values = (values,)
        for value in values:
            if isinstance(value, int) and value > self.max_chars:
                raise self.over("format width", value)


_BUDGET: ContextVar[_Budget | None] = ContextVar("bpecore_template_budget", default=None)


def _budget() -> _Budget:
    budget = _BUDGET.get()
    if budget is None:  # a compiled template used outside render_chat_template
        raise ChatTemplateError("error", "chat templates render only through render_chat_template")
    return budget


def _joined_size(sep: str, items: Any) -> int | None:
    if not isinstance(items, (list, tuple, str)):
        return None
    return len(sep) * max(len(items) - 1, 0) + sum(len(x) for x in items if isinstance(x, str))


def _check_str_method(budget: _Budget, s: str, name: str, args: tuple, kwargs: dict) -> None:
    """Refuse a ``str`` method call whose result would pass the limit, before it allocates."""
    if name in ("ljust", "rjust", "center", "zfill") and args and isinstance(args[0], int):
        budget.check_size(args[0], f"str.{name} width")
    elif name == "expandtabs":
        tab = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(tab, int):
            budget.check_size(len(s) + s.count("\t") * tab, "str.expandtabs result")
    elif (
        name == "replace"
        and len(args) >= 2
        and isinstance(args[0], str)
        and isinstance(args[1], str)
    ):
        old, new = args[0], args[1]
        n = s.count(old) if old else len(s) + 1
        if len(args) > 2 and isinstance(args[2], int) and args[2] >= 0:
            n = min(n, args[2])
        budget.check_size(len(s) + n * (len(new) - len(old)), "str.replace result")
    elif name == "join" and args:
        size = _joined_size(s, args[0])
        if size is not None:
            budget.check_size(size, "str.join result")
    elif name in ("format", "format_map"):
        values = kwargs or (args[0] if name == "format_map" and args else args)
        budget.check_digits(s, values, "format")


# ------------------------------------------------------------------------------ environment
#: Filters that turn their input into text (a container: its whole text).
_STRINGIFYING = frozenset(
    "string tojson pprint join trim upper lower title capitalize center indent wordwrap truncate "
    "replace format striptags urlize escape e forceescape urlencode safe wordcount".split()
)


def _finalize(value: Any) -> Any:
    """Every ``{{ value }}`` passes here before it becomes text: a container is weighed first."""
    budget = _BUDGET.get()  # None when Jinja folds a constant while compiling
    if budget is not None and isinstance(value, _CONTAINERS):
        budget.check(value, "printed value")
    return value


def _filter_checks(budget: _Budget, name: str, args: tuple, kwargs: dict) -> None:
    """Refuse a filter call whose result would pass the limit, before it allocates."""

    def arg(i: int, key: str, default: Any = None) -> Any:
        return args[i] if len(args) > i else kwargs.get(key, default)

    value = args[0] if args else None
    if name in _STRINGIFYING and isinstance(value, _CONTAINERS):
        budget.check(value, f"{name} input")
    if name == "center":
        width = arg(1, "width", 80)
        if isinstance(width, int):
            budget.check_size(width, "center width")
    elif name == "indent" and isinstance(value, str):
        width = arg(1, "width", 4)
        step = width if isinstance(width, int) else len(str(width))
        budget.check_size(len(value) + (value.count("\n") + 1) * step, "indent result")
    elif name in ("batch", "slice"):
        n = arg(1, "linecount" if name == "batch" else "slices")
        if isinstance(n, int):
            budget.check_size(n, f"{name} size")
    elif name == "format" and isinstance(value, str):
        budget.check_digits(value, kwargs or args[1:])
    elif name == "replace" and isinstance(value, str):
        old, new, count = arg(1, "old"), arg(2, "new"), arg(3, "count")
        if isinstance(old, str) and isinstance(new, str):
            n = value.count(old) if old else len(value) + 1
            if isinstance(count, int) and count >= 0:
                n = min(n, count)
            budget.check_size(len(value) + n * (len(new) - len(old)), "replace result")
    elif name == "join":
        sep = arg(1, "d", "")
        items = value if isinstance(value, (list, tuple, str)) else None
        if isinstance(sep, str) and items is not None:
            budget.check_size(len(sep) * max(len(items) - 1, 0), "join result")
    elif name == "tojson":
        indent = arg(2, "indent")
        width = indent if isinstance(indent, int) else len(indent) if isinstance(indent, str) else 0
        if width > _MAX_JSON_INDENT:
            raise ChatTemplateError(
                "output_size", f"tojson indent {width} is wider than {_MAX_JSON_INDENT}"
            )


def _bounded_filter(name: str, fn: Any) -> Any:
    def bounded(*args: Any, **kwargs: Any) -> Any:
        budget = _budget()
        # a pass_context/pass_environment filter gets that object first
        plain = args[1:] if getattr(fn, "jinja_pass_arg", None) is not None else args
        _filter_checks(budget, name, plain, kwargs)
        return budget.check(fn(*args, **kwargs), f"{name} result")

    return update_wrapper(bounded, fn)


def _tojson(x: Any, ensure_ascii=False, indent=None, separators=None, sort_keys=False) -> str:
    # What `transformers` gives templates: json.dumps, no HTML escaping, its four options.
    return json.dumps(
        x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys
    )


def _raise_exception(message: Any) -> None:
    raise ChatTemplateError("raised", f"chat template error: {message}")


def _strftime_now(fmt: str) -> str:
    _budget().check_digits(str(fmt), (), "strftime")
    return datetime.now().strftime(fmt)


@lru_cache(maxsize=1)
def _environment():
    """The sandbox (built once): `transformers`' environment, options and helpers, bounded."""
    import jinja2
    import jinja2.compiler
    import jinja2.ext
    import jinja2.nodes
    from jinja2.exceptions import SecurityError
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    from jinja2.utils import Namespace, generate_lorem_ipsum

    class Generation(jinja2.ext.Extension):
        """``{% generation %}...{% endgeneration %}`` marks the assistant's text; it renders
        its body unchanged (transformers uses it for assistant token masks)."""

        tags = {"generation"}

        def parse(self, parser):
            lineno = next(parser.stream).lineno
            body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
            return jinja2.nodes.CallBlock(self.call_method("_body"), [], [], body).set_lineno(
                lineno
            )

        def _body(self, caller):
            return caller()

    class TemplateNamespace(Namespace):
        """``namespace(...)``: no ``_``-prefixed names (the sandbox's reach into CPython), and
        every value stored within the size limit."""

        def __init__(*args: Any, **kwargs: Any) -> None:  # noqa: N805 (Namespace's own trick)
            self, rest = args[0], args[1:]
            attrs = dict(*rest, **kwargs)
            for key, value in attrs.items():
                TemplateNamespace._check(key, value)
            Namespace.__init__(self, attrs)

        def __setitem__(self, name: str, value: Any) -> None:
            TemplateNamespace._check(name, value)
            Namespace.__setitem__(self, name, value)

        @staticmethod
        def _check(name: Any, value: Any) -> None:
            if isinstance(name, str) and name.startswith("_"):
                raise SecurityError(f"namespace attribute {name!r} starts with an underscore")
            _budget().check(value, f"namespace value {name!r}")

    class TemplateDict:
        """``dict(...)`` and ``dict.fromkeys``, without the type itself (no reach into it)."""

        def __call__(self, *args: Any, **kwargs: Any) -> dict:
            return dict(*args, **kwargs)

        def fromkeys(self, *args: Any, **kwargs: Any) -> dict:
            return dict.fromkeys(*args, **kwargs)

    class Generator(jinja2.compiler.CodeGenerator):
        """Compiles ``a ~ b`` to a size-checked join (the one string operator not intercepted):
        containers weighed before ``str()``, the result after."""

        def visit_Concat(self, node, frame):
            if frame.eval_ctx.volatile or frame.eval_ctx.autoescape:  # Markup joins: as Jinja
                self.write("environment.checked(")
                super().visit_Concat(node, frame)
                self.write(")")
                return
            self.write("environment.joined((")
            for arg in node.nodes:
                self.visit(arg, frame)
                self.write(", ")
            self.write("))")

    class Sandbox(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset({"+", "*", "**", "%"})
        code_generator_class = Generator

        @staticmethod
        def concat(parts):
            """Joins the output of a macro, a block ``set`` or a ``filter`` block: checked."""
            return _budget().check("".join(parts), "block output")

        @staticmethod
        def checked(value):
            return _budget().check(value, "concatenation")

        @staticmethod
        def joined(parts):
            """Jinja's ``str_join`` (``"".join(map(str, parts))``), weighed first."""
            budget = _budget()
            for part in parts:
                if isinstance(part, _CONTAINERS):
                    budget.check(part, "concatenated value")
            return budget.check("".join(map(str, parts)), "concatenation")

        def call_binop(self, context, operator, left, right):
            budget = _budget()
            if operator == "*":
                for seq, n in ((left, right), (right, left)):
                    if isinstance(seq, (str, list, tuple)) and isinstance(n, int):
                        budget.check_size(budget.weight(seq) * n, "repetition")
            elif operator == "**":
                if isinstance(left, int) and isinstance(right, int) and abs(left) > 1 and right > 0:
                    if right * math.log2(abs(left)) > _MAX_POWER_BITS:
                        raise ChatTemplateError(
                            "output_size",
                            f"chat template power {left} ** {right} has over {_MAX_POWER_BITS:,} bits",
                        )
            elif operator == "%" and isinstance(left, str):
                budget.check_digits(left, right)
            return budget.check(super().call_binop(context, operator, left, right), operator)

        def call(self, context, obj, /, *args, **kwargs):
            budget = _budget()
            target = getattr(obj, "__wrapped__", obj)  # str.format comes wrapped by the sandbox
            owner = getattr(target, "__self__", None)
            if isinstance(owner, str):
                _check_str_method(budget, owner, target.__name__, args, kwargs)
            elif obj is generate_lorem_ipsum:
                n = args[0] if args else kwargs.get("n", 5)
                words = args[3] if len(args) > 3 else kwargs.get("max", 100)
                if isinstance(n, int) and isinstance(words, int):
                    budget.check_size(n * words * 12, "lipsum")
            for value in itertools.chain(args, kwargs.values()):
                budget.check(value, "argument")
            budget.depth += 1
            try:
                if budget.depth > MAX_DEPTH:
                    raise ChatTemplateError(
                        "recursion", f"chat template calls nest deeper than {MAX_DEPTH}"
                    )
                result = super().call(context, obj, *args, **kwargs)
            finally:
                budget.depth -= 1
            return budget.check(result, "call result")

    env = Sandbox(
        trim_blocks=True,
        lstrip_blocks=True,
        extensions=[Generation, jinja2.ext.loopcontrols],
        finalize=_finalize,
    )
    env.filters["tojson"] = _tojson
    for name, fn in list(env.filters.items()):
        env.filters[name] = _bounded_filter(name, fn)
    env.globals["raise_exception"] = _raise_exception
    env.globals["strftime_now"] = _strftime_now
    env.globals["dict"] = TemplateDict()
    env.globals["namespace"] = TemplateNamespace
    return env


@lru_cache(maxsize=64)
def _compile(template: str):
    from jinja2.exceptions import TemplateSyntaxError

    try:
        return _environment().from_string(template)
    except TemplateSyntaxError as e:
        raise ChatTemplateError(
            "syntax", f"chat template syntax error, line {e.lineno}: {e.message}"
        ) from None
    except RecursionError:
        raise ChatTemplateError("syntax", "chat template nests too deeply to parse") from None
    except (SyntaxError, MemoryError, ValueError, OverflowError) as e:  # Python's own compile
        raise ChatTemplateError("syntax", f"chat template does not compile: {e}") from None


# ------------------------------------------------------------------------------ inputs
def _plain(value: Any, where: str) -> Any:
    """A copy of ``value`` made of JSON types only (what the template may see)."""
    if value is None or type(value) in (str, int, float, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int.__int__(value)
    if isinstance(value, float):
        return float.__float__(value)
    if isinstance(value, Mapping):
        return {_plain(k, where): _plain(v, where) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, where) for v in value]
    raise ValueError(f"{where}: {type(value).__name__} values cannot go to a chat template")


def _messages(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, Mapping):
            raise ValueError(f"a message must be an object, got {type(message).__name__}")
        m = {k: _plain(v, f"message {i}") for k, v in message.items() if v is not None}
        reasoning = next((m[k] for k in _REASONING_KEYS if m.get(k) is not None), None)
        if reasoning is not None:
            m = {"thinking": reasoning, **m, "reasoning_content": reasoning}
        out.append(m)
    return out


def _chars(value: Any) -> int:
    if isinstance(value, str):
        return len(value)
    if isinstance(value, Mapping):
        return sum(_chars(k) + _chars(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return sum(_chars(v) for v in value)
    return 8


def _continue(messages: list[dict[str, Any]], field: str, template: str) -> str:
    """Tag the last message's ``field`` as `transformers` does; returns the text continued."""
    if not messages:
        raise ValueError("continue_final_message needs a message to continue")
    last = messages[-1]
    text = last.get(field)
    if text is None:
        raise ValueError(f"continue_final_message: the final message has no {field!r}")
    fields = [field]
    if field in _REASONING_KEYS:
        fields = [k for k in _REASONING_KEYS if last.get(k) == text]
    if not any(f in template for f in fields):
        raise ValueError(f"continue_final_message: the chat template never reads {field!r}")
    if isinstance(text, list):
        for part in reversed(text):
            if isinstance(part, dict) and "text" in part:
                continued = part["text"]
                part["text"] = continued + _CONTINUE_TAG
                return continued
        raise ValueError("continue_final_message: the final message has no text part")
    if not isinstance(text, str):
        raise ValueError(f"continue_final_message: the final {field!r} is not text")
    for f in fields:
        last[f] = last[f] + _CONTINUE_TAG
    return text


def _cut_continued(rendered: str, continued: str) -> str:
    tag = _CONTINUE_TAG.strip()
    if continued.strip() not in rendered or tag not in rendered:
        raise ValueError(
            "continue_final_message: the chat template dropped part of the final message"
        )
    at = rendered.rindex(tag)
    if rendered[at : at + len(_CONTINUE_TAG)] == _CONTINUE_TAG:
        return rendered[:at]
    return rendered[:at].rstrip()


# ------------------------------------------------------------------------------ rendering
def render_chat_template(
    template: str,
    messages: Sequence[Mapping[str, Any]],
    /,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    seconds: float = DEFAULT_SECONDS,
    max_chars: int | None = None,
    **variables: Any,
) -> str:
    """The text ``template`` renders for this conversation, as `transformers` renders it.

    ``variables`` are the template's other variables (special tokens, ``enable_thinking``, ...).
    ``ChatTemplateError`` when the template fails or passes a limit (see the module docstring);
    ``ValueError`` for inputs that cannot go to a template.

    >>> render_chat_template(
    ...     "{% for m in messages %}<|{{ m.role }}|>{{ m.content }}{% endfor %}",
    ...     [{"role": "user", "content": "Hi"}],
    ... )
    '<|user|>Hi'
    """
    if continue_final_message and add_generation_prompt:
        raise ValueError("continue_final_message and add_generation_prompt exclude each other")
    if not isinstance(template, str):
        raise ChatTemplateError("missing", "the chat template must be a string")
    chat = _messages(messages)
    tools = _plain(tools, "tools")
    documents = _plain(documents, "documents")
    if documents is not None and not all(isinstance(d, dict) for d in documents):
        raise ValueError("documents must be objects (title, text)")
    variables = _plain(variables, "template variables")
    continued = None
    if continue_final_message:
        field = continue_final_message if isinstance(continue_final_message, str) else "content"
        continued = _continue(chat, field, template)
    if max_chars is None:
        max_chars = _BASE_CHARS + _INPUT_FACTOR * (
            _chars(chat) + _chars(tools) + _chars(documents) + _chars(variables)
        )
    budget = _Budget(max_chars, _weights([chat, tools, documents, variables]))
    context = {
        **variables,
        "messages": chat,
        "tools": tools,
        "documents": documents,
        "add_generation_prompt": add_generation_prompt,
    }
    rendered = _bounded(template, context, budget, seconds)
    if continued is not None:
        rendered = _cut_continued(rendered, continued)
    return rendered


def _bounded(template: str, context: dict[str, Any], budget: _Budget, seconds: float) -> str:
    """Compile (cached) and render ``template`` within the limits; the time limit covers both."""
    from jinja2.exceptions import SecurityError, TemplateError

    reset = _BUDGET.set(budget)
    ticket = _WATCHDOG.arm(seconds)
    try:
        try:
            parts: list[str] = []
            size = 0
            for piece in _compile(template).generate(**context):
                size += len(piece)
                if size > budget.max_chars:
                    raise budget.over("output", size)
                parts.append(piece)
            return "".join(parts)
        finally:
            _WATCHDOG.disarm(ticket)
    except _Timeout:
        raise ChatTemplateError(
            "timeout", f"chat template rendering took more than {seconds:g} s"
        ) from None
    except ChatTemplateError:
        raise
    except SecurityError as e:
        raise ChatTemplateError("security", f"chat template refused by the sandbox: {e}") from None
    except RecursionError:
        raise ChatTemplateError("recursion", "chat template recursion too deep") from None
    except MemoryError:
        raise budget.over("output", -1) from None
    except TemplateError as e:
        raise ChatTemplateError("error", f"chat template error: {e}") from None
    except Exception as e:
        raise ChatTemplateError("error", f"chat template error: {type(e).__name__}: {e}") from None
    finally:
        _BUDGET.reset(reset)


# ------------------------------------------------------------------------------ encodings
def has_chat_template(enc: Any) -> bool:
    """Whether ``enc`` carries a model's chat template (``from_pretrained`` keeps it)."""
    return getattr(enc, "chat_template", None) is not None


def _select(enc: Any, chat_template: str | None, tools: Any) -> str:
    """The template `transformers` would pick: a name among the model's templates or a template
    given, else ``tool_use`` when there are tools and the model has one, else ``default``."""
    own = getattr(enc, "chat_template", None)
    if isinstance(own, Mapping):
        if chat_template is not None and chat_template in own:
            return own[chat_template]
        if chat_template is None:
            if tools is not None and "tool_use" in own:
                return own["tool_use"]
            if "default" in own:
                return own["default"]
            raise ChatTemplateError(
                "missing", f"{enc.name} has several chat templates ({sorted(own)}) and no default"
            )
    if chat_template is not None:
        return chat_template
    if own is None:
        raise ChatTemplateError("missing", f"encoding {enc.name!r} has no chat template")
    return own


def template_variables(enc: Any) -> dict[str, str]:
    """The named special tokens a template of ``enc`` sees (``bos_token``, ``eos_token``, ...)."""
    out = dict(getattr(enc, "chat_template_tokens", None) or {})
    for key in ("bos_token", "eos_token"):
        value = getattr(enc, key, None)
        if isinstance(value, str):
            out.setdefault(key, value)
    return out


def apply_chat_template(
    enc: Any,
    messages: Sequence[Mapping[str, Any]],
    /,
    *,
    tools: Sequence[Mapping[str, Any]] | None = None,
    documents: Sequence[Mapping[str, Any]] | None = None,
    chat_template: str | None = None,
    add_generation_prompt: bool = False,
    continue_final_message: bool | str = False,
    tokenize: bool = True,
    seconds: float = DEFAULT_SECONDS,
    max_chars: int | None = None,
    **kwargs: Any,
) -> list[int] | str:
    """`transformers`' ``tokenizer.apply_chat_template(messages, ..., tokenize=True)`` for an
    encoding with a chat template: the token ids (``tokenize=False``: the rendered text).

    ``chat_template`` is a template or the name of one of the model's templates; ``kwargs`` go to
    the template as variables and override the special-token ones.
    """
    if not messages:
        raise ValueError("cannot apply a chat template to an empty conversation")
    template = _select(enc, chat_template, tools)
    text = render_chat_template(
        template,
        messages,
        tools=tools,
        documents=documents,
        add_generation_prompt=add_generation_prompt,
        continue_final_message=continue_final_message,
        seconds=seconds,
        max_chars=max_chars,
        **{**template_variables(enc), **kwargs},
    )
    if not tokenize:
        return text
    return enc.encode(text, allowed_special="all")

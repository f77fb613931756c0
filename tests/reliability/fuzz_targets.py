"""Fuzz targets for the core: each ``check_<target>(...)`` raises AssertionError on a wrong answer and
lets any other unexpected exception escape (a crash); each ``gen_<target>(rng)`` draws one input
from a ``random.Random``. Shared by the hypothesis suites (tests/reliability/test_fuzz_core.py),
the runner (scripts/reliability/fuzz.py) and its atheris mode.

Oracles: ``regex.findall`` for the pre-tokenizers; ``bpecore.reference`` (the slow merge loop) for
the encoders; ``enc.count`` of the slice for split_at / split_at_end / count_till_limit / interval
counts / appending / prepending; the token byte table for decode (an unknown id: ValueError, never
anything else); for vocab loaders: a malformed file raises VocabError (or ValueError), never another
exception, and a file that loads gives the reference encoding of its own ranks.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import random
import tempfile
from functools import cache

import regex

import bpecore
from bpecore import pretokenize, reference, registry

PATTERNS = {
    "cl100k": registry.CL100K_PATTERN,
    "o200k": registry.O200K_PATTERN,
    "r50k": registry.R50K_PATTERN,
}
ENCODINGS = ("cl100k_base", "o200k_base")

# Characters chosen to sit on every edge the shipped patterns care about: case-insensitive
# contractions (ſ and K fold to s and k), letters of each general category (Lu Ll Lt Lm Lo), marks
# (Mn Mc Me), numbers (Nd No Nl), every kind of whitespace and line break, apostrophes, symbols,
# emoji with ZWJ, CJK, controls, private use and an unassigned code point.
ALPHABET = list(
    "aZsStTdDmMlLvVeErR'’ſK\u212aİıß"
    "éÉǅʰ東한กक\u094d\u0301\u0903\u20dd"
    "0179٣½Ⅻ"
    " \t\n\r\x0b\x0c\u00a0\u1680\u2028\u2029\u3000\u0085"
    '.,!?-_()"#$%&*+/:;<=>@[\\]^`{|}~'
    "😀\u200d👍🏽\x00\x1b\ue000\U000e0001\U0010ffff"
)
CHUNKS = [
    "'s",
    "'LL",
    "'Ve",
    " the",
    "  ",
    "\r\n",
    "\n\n",
    "123456",
    " 12",
    "don't",
    "HELLO",
    "Hello",
    "  \n",
    "...",
    "\t\t",
    "😀😀",
    "東京",
    "a1b2",
    " '",
    "'s'",
]


def gen_text(rng: random.Random, max_len: int = 40) -> str:
    """A short adversarial text: characters and fragments from ALPHABET/CHUNKS, sometimes any code point."""
    n = rng.randrange(max_len + 1)
    out: list[str] = []
    mode = rng.random()
    while len(out) < n:
        r = rng.random()
        if mode < 0.15 and r < 0.5:  # any code point but surrogates
            cp = rng.randrange(0x110000 - 0x800)
            out.append(chr(cp if cp < 0xD800 else cp + 0x800))
        elif r < 0.25:
            out.append(rng.choice(CHUNKS))
        elif r < 0.3 and out:  # repeat: runs of one character
            out.append(out[-1] * rng.randrange(1, 8))
        else:
            out.append(rng.choice(ALPHABET))
    return "".join(out)[: max_len * 2]


# ----------------------------------------------------------------- pre-tokenizers vs regex
def check_pretokenize(kind: str, text: str) -> None:
    pattern = PATTERNS[kind]
    want = regex.findall(pattern, text)
    got = pretokenize.split(pattern, text)
    assert got == want, f"pretokenize {kind} {text!r}: {got!r} != regex {want!r}"


def gen_pretokenize(rng: random.Random) -> tuple[str, str]:
    return rng.choice(list(PATTERNS)), gen_text(rng, rng.choice([16, 64, 256]))


# ----------------------------------------------------------------- encoders vs reference
@cache
def encoding(name: str) -> bpecore.Encoding:
    return bpecore.get_encoding(name)


@cache
def ranks(name: str) -> dict[bytes, int]:
    return dict(encoding(name).mergeable_ranks)


def check_encode(name: str, text: str) -> None:
    enc = encoding(name)
    want = reference.encode_ordinary(ranks(name), enc.pattern, text)
    got = enc.encode_ordinary(text)
    assert got == want, f"encode {name} {text!r}: {got} != reference {want}"
    assert enc.count(text) == len(want), f"count {name} {text!r}"
    assert enc.encode(text, disallowed_special=()) == want, f"encode(disallowed=()) {name} {text!r}"
    assert enc.decode(got) == text, f"round trip {name} {text!r}"


def gen_encode(rng: random.Random) -> tuple[str, str]:
    return rng.choice(ENCODINGS), gen_text(rng, 32)


# ----------------------------------------------------------------- exact operations vs brute force
def check_exact(name: str, text: str, seed: int) -> None:
    enc = encoding(name)
    rng = random.Random(seed)
    L = len(text)
    prefix = [enc.count(text[:k]) for k in range(L + 1)]
    suffix = [enc.count(text[k:]) for k in range(L + 1)]
    top = max(prefix + suffix) + 1
    for n in {0, 1, 2, top, rng.randrange(top + 1), rng.randrange(top + 1)}:
        want = max(k for k in range(L + 1) if prefix[k] <= n)
        got = enc.split_at(text, n)
        assert got == want, f"split_at {name} {text!r} n={n}: {got} != {want}"
        want = min(k for k in range(L + 1) if suffix[k] <= n)
        got = enc.split_at_end(text, n)
        assert got == want, f"split_at_end {name} {text!r} n={n}: {got} != {want}"
        got = enc.count_till_limit(text, n)
        want = prefix[L] if prefix[L] <= n else None
        assert got == want, f"count_till_limit {name} {text!r} limit={n}: {got} != {want}"
    ic = enc.interval_counter(text)
    pairs = [(0, L)] + [
        tuple(sorted((rng.randrange(L + 1), rng.randrange(L + 1)))) for _ in range(6)
    ]
    for i, j in pairs:
        got = ic.count(i, j)
        assert got == enc.count(text[i:j]), f"interval {name} {text!r} [{i}:{j}]: {got}"
    # appending: str pieces, then the UTF-8 bytes cut anywhere (inside characters too)
    cuts = sorted(rng.sample(range(L + 1), min(L + 1, rng.randrange(1, 6))))
    counter = enc.appendable_counter()
    last = 0
    for k in cuts + [L]:
        got = counter.push(text[last:k])
        assert got == prefix[k], f"append {name} {text!r} up to {k}: {got} != {prefix[k]}"
        last = k
    data = text.encode("utf-8")
    counter = enc.appendable_counter()
    ends = {len(text[:k].encode("utf-8")): k for k in range(L + 1)}
    bcuts = sorted(rng.sample(range(len(data) + 1), min(len(data) + 1, rng.randrange(1, 8)))) + [
        len(data)
    ]
    last = 0
    for b in bcuts:
        got = counter.push(data[last:b])
        if b in ends:
            assert got == prefix[ends[b]], f"append bytes {name} {text!r} up to byte {b}: {got}"
        last = b
    assert counter.count == prefix[L], f"append bytes {name} {text!r}: total {counter.count}"
    # prepending: pieces pushed at the front
    counter = enc.prependable_counter()
    last = L
    for k in sorted(cuts, reverse=True) + [0]:
        got = counter.push(text[k:last])
        assert got == suffix[k], f"prepend {name} {text!r} from {k}: {got} != {suffix[k]}"
        last = k


def gen_exact(rng: random.Random) -> tuple[str, str, int]:
    return rng.choice(ENCODINGS), gen_text(rng, 24), rng.randrange(2**32)


# ----------------------------------------------------------------- decode of arbitrary ids
@cache
def token_table(name: str) -> dict[int, bytes]:
    enc = encoding(name)
    table = {i: b for b, i in enc.mergeable_ranks.items()}
    table.update({i: s.encode() for s, i in enc.special_tokens.items()})
    return table


def gen_ids(rng: random.Random) -> tuple[str, list[int]]:
    name = rng.choice(ENCODINGS)
    enc = encoding(name)
    edges = [
        -1,
        0,
        enc.n_vocab - 1,
        enc.n_vocab,
        enc.n_vocab + 1,
        2**31 - 1,
        2**31,
        2**32 - 1,
        2**32,
        2**63 - 1,
        2**63,
        2**64,
        -(2**63),
        -(2**64),
        10**30,
        *enc.special_tokens.values(),
    ]
    ids = []
    for _ in range(rng.randrange(0, 12)):
        r = rng.random()
        ids.append(
            rng.randrange(enc.n_vocab)
            if r < 0.7
            else rng.choice(edges)
            if r < 0.95
            else rng.randrange(-(2**70), 2**70)
        )
    return name, ids


def check_decode(name: str, ids: list[int]) -> None:
    enc = encoding(name)
    table = token_table(name)
    if all(i in table for i in ids):
        want = b"".join(table[i] for i in ids)
        assert enc.decode_bytes(ids) == want, f"decode_bytes {name} {ids}"
        assert enc.decode(ids) == want.decode("utf-8", "replace"), f"decode {name} {ids}"
        return
    for call in (enc.decode_bytes, enc.decode):
        try:
            call(ids)
        except ValueError:
            continue
        raise AssertionError(f"{call.__name__} {name} {ids}: no ValueError for an unknown id")


# ----------------------------------------------------------------- vocab loaders
BASE_TOKENS = [bytes([b]) for b in range(256)] + [
    b"he",
    b"ll",
    b"hell",
    b"hello",
    b" w",
    b"or",
    b" wor",
    b" world",
    b"\xc3\xa9",
    b"  ",
    b"\n\n",
]


def tiktoken_text(tokens: list[bytes]) -> bytes:
    return b"".join(
        base64.b64encode(t) + b" " + str(i).encode() + b"\n" for i, t in enumerate(tokens)
    )


def mutate_bytes(rng: random.Random, data: bytes) -> bytes:
    data = bytearray(data)
    for _ in range(rng.randrange(1, 4)):
        op = rng.randrange(7)
        pos = rng.randrange(len(data) + 1)
        if op == 0:
            del data[pos:]  # truncate
        elif op == 1 and data:
            data[min(pos, len(data) - 1)] = rng.randrange(256)  # flip a byte
        elif op == 2:
            data[pos:pos] = bytes([rng.choice([0x80, 0xC3, 0xFF, 0xFE, 0x00, 0xED])])  # non-UTF-8
        elif op == 3:
            data[pos:pos] = rng.choice(
                [b"\n", b"\r\n", b" ", b"  ", b"=", b"-1", b"99999999999999999999", b"\t"]
            )
        elif op == 4 and data:
            i = rng.randrange(len(data))
            data[pos:pos] = data[i : i + rng.randrange(1, 40)]  # duplicate a stretch
        elif op == 5:
            i = rng.randrange(len(data) + 1)
            del data[min(i, pos) : max(i, pos)]
        elif op == 6:
            data[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 8)))
    return bytes(data)


def gen_tiktoken(rng: random.Random) -> bytes:
    tokens = list(BASE_TOKENS)
    kind = rng.randrange(10)
    lines = tiktoken_text(tokens).splitlines(keepends=True)
    if kind == 0:  # duplicated rank
        i, j = rng.sample(range(len(lines)), 2)
        lines[j] = lines[j].split(b" ")[0] + b" " + lines[i].split(b" ")[1]
    elif kind == 1:  # duplicated token
        i, j = rng.sample(range(len(lines)), 2)
        lines[j] = lines[i].split(b" ")[0] + b" " + lines[j].split(b" ")[1]
    elif kind == 2:  # shuffled, gaps, dropped single bytes, unreachable tokens
        rng.shuffle(lines)
        del lines[rng.randrange(len(lines))]
        extra = bytes(rng.randrange(256) for _ in range(rng.randrange(2, 5)))
        lines.append(
            base64.b64encode(extra) + b" " + str(rng.randrange(260, 10**6)).encode() + b"\n"
        )
    elif kind == 3:  # odd ranks
        i = rng.randrange(len(lines))
        rank = rng.choice(
            [
                b"-1",
                b"4294967295",
                b"4294967296",
                b"1e3",
                b"0x10",
                b"",
                b"\xff",
                b"1.0",
                b"+1",
                b"\xd9\xa3",
                b"\xef\xbc\x91",
                b"1_0",
                b" 5",
            ]
        )  # Arabic-Indic and fullwidth digits
        lines[i] = lines[i].split(b" ")[0] + b" " + rank + b"\n"
    elif kind == 4:  # odd base64
        i = rng.randrange(len(lines))
        tok = rng.choice(
            [b"", b"=", b"a", b"YQ", b"YQ=", b"Y Q==", b"\xff\xfe", b"!!!!", b"YWJj\n"]
        )
        lines[i] = tok + b" " + lines[i].split(b" ")[1]
    data = b"".join(lines)
    if kind >= 5:
        data = mutate_bytes(rng, data)
    if rng.random() < 0.1:
        data = gzip.compress(data)
        if rng.random() < 0.5:
            data = data[: rng.randrange(len(data) + 1)]
    return data


def _hf_doc() -> dict:
    from bpecore.load import bytes_to_unicode

    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    merges = [
        ("h", "e"),
        ("l", "l"),
        ("he", "ll"),
        ("hell", "o"),
        ("Ġ", "w"),
        ("o", "r"),
        ("Ġw", "or"),
    ]
    for left, right in merges:
        vocab[left + right] = len(vocab)
    return {
        "version": "1.0",
        "added_tokens": [{"id": len(vocab), "content": "<|end|>", "special": True}],
        "normalizer": None,
        "pre_tokenizer": {
            "type": "ByteLevel",
            "add_prefix_space": False,
            "trim_offsets": True,
            "use_regex": True,
        },
        "model": {"type": "BPE", "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]},
    }


ODD_VALUES = [
    None,
    True,
    False,
    0,
    -1,
    1.5,
    2**64,
    -(2**63),
    "",
    "x",
    "Ġ",
    [],
    {},
    [1],
    {"a": 1},
    [["h", "e"]],
    float("nan"),
    "h e",
    ["h"],
    ["h", "e", "x"],
    {"type": "BPE"},
]


def _mutate_json(rng: random.Random, node, depth: int = 0):
    if isinstance(node, dict) and node and rng.random() < 0.7:
        node = dict(node)
        key = rng.choice(list(node))
        r = rng.random()
        if r < 0.25:
            del node[key]
        elif r < 0.55:
            node[key] = rng.choice(ODD_VALUES)
        else:
            node[key] = _mutate_json(rng, node[key], depth + 1)
        return node
    if isinstance(node, list) and node and rng.random() < 0.7:
        node = list(node)
        i = rng.randrange(len(node))
        r = rng.random()
        if r < 0.2:
            del node[i]
        elif r < 0.4:
            node.append(node[i])  # duplicate
        elif r < 0.6:
            node[i] = rng.choice(ODD_VALUES)
        else:
            node[i] = _mutate_json(rng, node[i], depth + 1)
        return node
    return rng.choice(ODD_VALUES) if rng.random() < 0.5 else node


def gen_hf(rng: random.Random) -> bytes:
    doc = _hf_doc()
    kind = rng.randrange(10)
    if kind < 5:
        for _ in range(rng.randrange(1, 4)):
            doc = _mutate_json(rng, doc)
        data = json.dumps(doc).encode()
    elif kind == 5:  # duplicated ids in the vocab / an added token reusing an id
        vocab = doc["model"]["vocab"]
        keys = list(vocab)
        a, b = rng.sample(keys, 2)
        vocab[b] = vocab[a]
        data = json.dumps(doc).encode()
    elif kind == 6:  # deep nesting
        depth = rng.choice([10, 1000, 100_000])
        where = rng.choice(["top", "normalizer", "pre_tokenizer", "vocab"])
        deep = "[" * depth + "]" * depth
        if where == "top":
            data = deep.encode()
        else:
            data = (
                json.dumps(doc)
                .replace(
                    '"normalizer": null',
                    f'"normalizer": {deep}' if where == "normalizer" else '"normalizer": null',
                )
                .encode()
            )
            if where == "pre_tokenizer":
                data = data.replace(
                    b'"pre_tokenizer": {', b'"pre_tokenizer": {"x": ' + deep.encode() + b", "
                )
            elif where == "vocab":
                data = data.replace(b'"vocab": {', b'"vocab": {"zz": ' + deep.encode() + b", ")
    else:
        data = mutate_bytes(rng, json.dumps(doc).encode())
    return data


_TMP = tempfile.mkdtemp(
    prefix="bpecore-fuzz-", dir="/dev/shm" if os.path.isdir("/dev/shm") else None
)


def _exercise(enc: bpecore.Encoding, ranks_: dict[bytes, int]) -> None:
    """A loaded encoding must encode like the reference over its own ranks, and round-trip."""
    for text in ("hello world", "héllo\n\nworld  ", "", "hhhhelllo wor"):
        try:
            want = reference.encode_ordinary(ranks_, enc.pattern, text)
        except (KeyError, ValueError):
            want = None  # the reference cannot encode it (a byte with no token): bpecore must refuse too
        try:
            got = enc.encode_ordinary(text)
        except ValueError:
            assert want is None, f"encode refused {text!r} which the reference encodes as {want}"
            continue
        assert want is not None and got == want, f"encode {text!r}: {got} != reference {want}"
        assert enc.decode_bytes(got) == text.encode(), f"round trip {text!r}"


def check_tiktoken(data: bytes) -> None:
    path = os.path.join(_TMP, f"v{os.getpid()}.tiktoken")
    with open(path, "wb") as f:
        f.write(data)
    try:
        enc = bpecore.load_tiktoken(path, name="fuzz")
    except ValueError:  # VocabError is a ValueError
        return
    _exercise(enc, dict(enc.mergeable_ranks))


def check_hf(data: bytes) -> None:
    path = os.path.join(_TMP, f"h{os.getpid()}", "tokenizer.json")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    try:
        enc = bpecore.load_hf(path)
    except ValueError:
        return
    from bpecore.hf import HFEncoding

    if isinstance(
        enc, HFEncoding
    ):  # a normalizer or pre-tokenizer pipeline: `tokenizers` is the oracle
        _exercise_pipeline(enc, path)
        return
    _exercise(enc, dict(enc.mergeable_ranks))


def _exercise_pipeline(enc: bpecore.Encoding, path: str) -> None:
    try:
        import tokenizers

        hf = tokenizers.Tokenizer.from_file(path)
    except Exception:  # no reference here, or a file it reads more strictly than bpecore
        return
    hf.encode_special_tokens = True
    for text in ("hello world", "héllo\n\nworld  ", "", "hhhhelllo wor"):
        want = hf.encode(text, add_special_tokens=False).ids
        assert enc.encode_ordinary(text) == want, (
            f"encode {text!r}: {enc.encode_ordinary(text)} != tokenizers {want}"
        )
        assert enc.count(text) == len(want)


def warm_up(target: str) -> None:
    """Load what a target's oracle needs (encodings, rank dicts, token tables) before timing it."""
    if target in ("encode", "exact", "decode"):
        for name in ENCODINGS:
            encoding(name)
            if target == "encode":
                ranks(name)
            if target == "decode":
                token_table(name)


# name -> (generator, checker); the runner and the atheris mode go through this table
TARGETS = {
    "pretokenize": (gen_pretokenize, check_pretokenize),
    "encode": (gen_encode, check_encode),
    "exact": (gen_exact, check_exact),
    "decode": (gen_ids, check_decode),
    "load_tiktoken": (gen_tiktoken, check_tiktoken),
    "load_hf": (gen_hf, check_hf),
}

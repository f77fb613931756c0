"""encode_ordinary / count throughput: bpecore vs tiktoken and the other exact tokenizers installed.

    python benches/bench_encode.py [--size 200000] [--reps 3] [--quick] [--clock cpu] [--corpora a,b]
                                   [--batches] [--peers-only] [--families [all|a,b]]

Peers (the ``bench`` extra; each one that is importable is used): tiktoken (len(encode_ordinary)
for count), bpe-openai (rust-gems' `bpe-openai`; its raw binding, which has a native count),
riptoken, fastokens (``len()`` of its Encoding for count), gigatoken (count: ``len()`` of the numpy
array of ``backend.encode``; encode: ``backend.encode_batch_list([text], parallel=False)[0]``, a
list built in Rust), toktok-rs (``count``) and quicktok-v1 (``count``). Every peer is built offline
from the rank files in ../shared/vocab: tiktoken, riptoken, fastokens and gigatoken read them (the
last two from an uncompressed copy in a temporary directory), toktok-rs and quicktok-v1 load the
same ranks rewritten in their own vocabulary format (u32 count, then u16 length, bytes, u32 rank
per token) beside quicktok's Unicode class tables, and bpe-openai ships its own cl100k/o200k
files. All run single-threaded: RAYON_NUM_THREADS=1 and FASTOKENS_BPE_THREADS=1 are set before
any peer is imported, and gigatoken's list call is made with parallel=False.

Main table, on FIRST-SEEN text. Several peers (gigatoken, fastokens, toktok-rs, quicktok-v1) keep caches
across calls, so timing the same text again measures their cache, not their tokenizer. Each
corpus (1 MB in ../shared/corpora) is cut into ``2 * reps + 1`` disjoint consecutive slices of
``min(--size, len(corpus) // (2 * reps + 1))`` characters: slice 0 warms every library up, slices
1..reps are the count repetitions and the next ``reps`` the encode repetitions. A slice equal to
an earlier one (adv_repeat_a: one letter, so every slice is the same string) drops trailing
characters until it is new (there: 1, 2, ... characters shorter), which leaves the work per byte
as it was; without this, a peer that keeps results across calls answered repetitions from its
cache (gigatoken and fastokens counted the same 150,000 'a' at 12 and 10 MB/s the first time,
2,890 and 1,892 MB/s the second, and again at 12 and 11 MB/s for 150,001). In a repetition
every library gets the same slice (each its own fresh copy of the str, so no library inherits
another's UTF-8 conversion), in an order rotated from one repetition to the next, and no library
has encoded that slice before in the process; the cell is the median MB/s (UTF-8 bytes) over the
repetitions. The two encodings reuse the slices: their caches are separate. Before any timing,
a subprocess (so the timing process has not seen the text) checks every library on every slice,
count and encode, against tiktoken; a library that is not exact on a corpus is reported as
such there and not timed. The last column divides bpecore's rate by the fastest exact peer's.

Cold and many small texts (not with --quick or --corpora): one fresh subprocess per (library,
encoding, operation) imports the library, builds it, times its first call on a ~12 KB text (the
last 4,000 characters of english, code and multilingual), then 10,000 calls on distinct ~1 KB
texts: 1,000-character windows at evenly spaced offsets of the rest of those three corpora (3 MB
of text gives 10,000 windows only by overlapping: each character is in about 3 windows), in a
shuffled order. The results are checked against tiktoken after the timing, in the same
subprocess.

``--families`` (only that table; english, code, multilingual or ``--corpora``): each open-model
family (GPT-2, GPT-NeoX, Falcon, StarCoder2, Qwen2, Qwen3.5, DeepSeek-Coder v1, DeepSeek V3,
DeepSeek LLM, Llama 3, Llama 4, Tekken), built offline by ``bench_open_models.py``'s loaders, as
``load_hf`` of a tokenizer.json against Hugging Face `tokenizers` on the same file, and for Llama
3, Llama 4 and Tekken also ``get_encoding`` against Meta's tokenizer / mistral-common: count and
encode MB/s and their ratios to the reference's encode, on the main table's first-seen slices,
exactness checked first in a subprocess.

Then (not with --quick, --corpora or --peers-only): small inputs (bpecore vs tiktoken, repeated
text), worst cases (time per byte across sizes), batch threads, and resident memory after loading
both encodings (fresh subprocess each). ``--clock cpu`` times the main table, the first calls and
the small texts in process CPU time instead of wall time: on a loaded machine a call's wall time
mostly measures how often it was preempted, and process (not thread) time still charges a peer
that hands its work to a pool thread.
"""

from __future__ import annotations

import os

# Before any peer is imported: the Rust peers size their thread pools when they load.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["FASTOKENS_BPE_THREADS"] = "1"

import argparse
import base64
import gzip
import importlib.metadata
import json
import random
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bpecore  # noqa: E402
from bpecore.pretokenize import CL100K_PATTERN, O200K_PATTERN  # noqa: E402

SHARED = ROOT.parent / "shared"
CORPORA = [
    "english",
    "code",
    "multilingual",
    "adv_base64",
    "adv_digits",
    "adv_repeat_a",
    "adv_unicode",
    "adv_whitespace",
]
ENCODINGS = {"cl100k_base": CL100K_PATTERN, "o200k_base": O200K_PATTERN}
PEERS = ["tiktoken", "bpe-openai", "riptoken", "fastokens", "gigatoken", "toktok-rs", "quicktok-v1"]
LIBRARIES = ["bpecore", *PEERS]
# The distribution each library is installed as (for its version in the tables).
DISTRIBUTIONS = {
    "bpecore": "bpecore",
    "tiktoken": "tiktoken",
    "bpe-openai": "bpe-openai",
    "riptoken": "riptoken",
    "fastokens": "fastokens",
    "gigatoken": "gigatoken",
    "toktok-rs": "toktok-rs",
    "quicktok-v1": "quicktok-v1",
}
SHORT_NAMES = {"cl100k_base": "cl100k", "o200k_base": "o200k"}  # toktok-rs / quicktok-v1 file names
SMALL_TEXTS, SMALL_CHARS, COLD_CHARS = 10_000, 1_000, 4_000


def shared_ranks(name: str) -> dict[bytes, int]:
    data = gzip.decompress((SHARED / "vocab" / f"{name}.tiktoken.gz").read_bytes())
    return {
        base64.b64decode(tok): int(rank)
        for tok, rank in (line.split() for line in data.splitlines() if line)
    }


def corpus(name: str) -> str:
    return gzip.decompress((SHARED / "corpora" / f"{name}.1mb.txt.gz").read_bytes()).decode("utf-8")


def version(lib: str) -> str:
    try:
        return importlib.metadata.version(DISTRIBUTIONS[lib])
    except importlib.metadata.PackageNotFoundError:
        return "?"


def write_peer_vocab(directory: str) -> None:
    """Write the shared rank files into ``directory`` in the forms the file-reading peers load.

    ``<name>.tiktoken`` (uncompressed) for fastokens and gigatoken; ``<short>.vocab`` and an empty
    ``<short>.special`` (u32 count, then per token u16 length, bytes, u32 rank) plus quicktok's
    Unicode class tables for toktok-rs and quicktok-v1.
    """
    for name in ENCODINGS:
        ranks = shared_ranks(name)
        raw = gzip.decompress((SHARED / "vocab" / f"{name}.tiktoken.gz").read_bytes())
        Path(directory, f"{name}.tiktoken").write_bytes(raw)
        with open(Path(directory, f"{SHORT_NAMES[name]}.vocab"), "wb") as f:
            f.write(struct.pack("<I", len(ranks)))
            f.writelines(
                struct.pack("<H", len(token)) + token + struct.pack("<I", rank)
                for token, rank in sorted(ranks.items(), key=lambda kv: kv[1])
            )
        Path(directory, f"{SHORT_NAMES[name]}.special").write_bytes(struct.pack("<I", 0))
    try:
        import quicktok
    except ImportError:
        return
    tables = Path(quicktok.__file__).parent / "data"
    for table in ("uniclass.bin", "uniclass_o200k.bin"):
        shutil.copyfile(tables / table, Path(directory, table))


_VOCAB_DIR: list[str] = []


def peer_vocab_dir() -> str:
    """A temporary directory (removed at exit) holding write_peer_vocab's files, made once."""
    if not _VOCAB_DIR:
        import atexit

        directory = tempfile.mkdtemp(prefix="bench-encode-vocab-")
        atexit.register(shutil.rmtree, directory, True)
        write_peer_vocab(directory)
        _VOCAB_DIR.append(directory)
    return _VOCAB_DIR[0]


def make_peer(peer: str, name: str, vocab_dir: str | None = None) -> dict[str, object] | None:
    """{"encode": f, "count": f} for one peer built offline from shared/vocab, or None if not installed."""
    pattern = ENCODINGS[name]
    try:
        if peer == "tiktoken":
            import tiktoken

            tk = tiktoken.Encoding(
                name, pat_str=pattern, mergeable_ranks=shared_ranks(name), special_tokens={}
            )
            return {
                "encode": tk.encode_ordinary,
                "count": lambda t, f=tk.encode_ordinary: len(f(t)),
            }
        if peer == "bpe-openai":
            import bpe_openai  # ships its own cl100k/o200k files: no download

            backend = bpe_openai.get_encoding(
                name
            )._backend  # the Encoding wrapper refuses >= 1M chars
            return {"encode": backend.encode, "count": backend.count}
        if peer == "riptoken":
            import riptoken

            rp = riptoken.CoreBPE(shared_ranks(name), {}, pattern)
            return {
                "encode": rp.encode_ordinary,
                "count": lambda t, f=rp.encode_ordinary: len(f(t)),
            }
        vocab_dir = vocab_dir or peer_vocab_dir()
        if peer == "fastokens":
            import fastokens

            # encoding= picks its preset for the shipped pattern (the same as ENCODINGS[name]).
            ft = fastokens.Tokenizer.from_tiktoken(
                str(Path(vocab_dir, f"{name}.tiktoken")), encoding=name, special_tokens={}
            )
            return {
                "encode": lambda t, f=ft.encode_ordinary: f(t).ids,
                "count": lambda t, f=ft.encode_ordinary: len(f(t)),
            }
        if peer == "gigatoken":
            import gigatoken

            gt = gigatoken.Tokenizer.from_tiktoken(
                str(Path(vocab_dir, f"{name}.tiktoken")),
                pretokenizer={"cl100k_base": "gpt4", "o200k_base": "o200k"}[name],
                special_tokens=None,
            ).backend
            return {
                "encode": lambda t, f=gt.encode_batch_list: f([t], parallel=False)[0],
                "count": lambda t, f=gt.encode: len(f(t)),
            }
        if peer == "toktok-rs":
            import toktok

            if not Path(vocab_dir, "uniclass.bin").exists():
                return None  # its class tables are taken from quicktok-v1's package
            tt = toktok._toktok.Tokenizer(name, vocab_dir)
            return {"encode": tt.encode_ordinary, "count": tt.count}
        if peer == "quicktok-v1":
            import quicktok

            qt = quicktok.Tokenizer(name, vocab_dir)
            return {"encode": qt.encode_ordinary, "count": qt.count}
    except ImportError:
        return None
    raise ValueError(peer)


def peers(name: str, only: tuple[str, ...] = tuple(PEERS)) -> dict[str, dict[str, object]]:
    """{peer: {"encode": f, "count": f}} for the installed peers among ``only``, built offline from shared/vocab."""
    out = {}
    for peer in only:
        fs = make_peer(peer, name)
        if fs is not None:
            out[peer] = fs
    return out


def library(lib: str, name: str, vocab_dir: str | None = None) -> dict[str, object] | None:
    if lib == "bpecore":
        enc = bpecore.get_encoding(name)
        return {"encode": enc.encode_ordinary, "count": enc.count}
    return make_peer(lib, name, vocab_dir)


def interleaved(
    funcs: dict[str, object], arg, reps: int, clock=time.perf_counter
) -> dict[str, float]:
    """Median seconds of each function over ``reps`` rounds, one call of each per round."""
    times: dict[str, list[float]] = {k: [] for k in funcs}
    for f in funcs.values():
        f(arg)  # warm up (and build the UTF-8 cache of ``arg``)
    for _ in range(reps):
        for k, f in funcs.items():
            t0 = clock()
            f(arg)
            times[k].append(clock() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


def first_seen_slices(text: str, size: int, reps: int) -> list[str]:
    """``2 * reps + 1`` disjoint consecutive slices of ``text``: warm-up, ``reps`` for count, ``reps`` for encode.

    A slice equal to an earlier one (every slice of a corpus with a period, such as adv_repeat_a)
    loses trailing characters until it differs from all of them, so no library can answer it from
    a cache kept across calls; slices of the natural corpora are never equal and stay as cut.
    """
    n = 2 * reps + 1
    length = min(size, len(text) // n)
    seen: set[str] = set()
    out = []
    for i in range(n):
        piece = text[i * length : (i + 1) * length]
        while piece in seen:
            piece = piece[:-1]
        seen.add(piece)
        out.append(piece)
    return out


def fresh(text: str) -> str:
    """An equal str object that has not been converted to UTF-8 by anyone yet."""
    return (text + " ")[:-1]


def call_check(ref: list[int], fs: dict[str, object], text: str) -> str | None:
    """None if count and encode of ``text`` equal tiktoken's, else why not."""
    try:
        ids = list(fs["encode"](text))
        count = fs["count"](text)
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException as e:  # noqa: BLE001  (a Rust panic is a BaseException)
        return f"fails ({type(e).__name__})"
    if ids != ref:
        return "not exact (encode)"
    if count != len(ref):
        return "not exact (count)"
    return None


def check_exact(
    name: str, size: int, reps: int, names: list[str], vocab_dir: str
) -> dict[str, dict[str, str | None]]:
    """{corpus: {library: None or why not exact}} over every slice the main table will time."""
    import tiktoken

    tk = tiktoken.Encoding(
        name, pat_str=ENCODINGS[name], mergeable_ranks=shared_ranks(name), special_tokens={}
    )
    libs = {lib: fs for lib in LIBRARIES if (fs := library(lib, name, vocab_dir)) is not None}
    out: dict[str, dict[str, str | None]] = {}
    for cname in names:
        verdict: dict[str, str | None] = dict.fromkeys(libs)
        for piece in first_seen_slices(corpus(cname), size, reps):
            ref = tk.encode_ordinary(piece)
            for lib, fs in libs.items():
                if verdict[lib] is None:
                    verdict[lib] = call_check(ref, fs, piece)
        out[cname] = verdict
    return out


def main_table(size: int, reps: int, names: list[str], clock=time.perf_counter) -> None:
    what = "process CPU time" if clock is time.process_time else "wall time"
    vocab_dir = peer_vocab_dir()
    print(
        f"## Throughput on first-seen text, MB/s (UTF-8 bytes, {what}), median of {reps} slices of up to "
        f"{size:,} chars per cell"
    )
    print("Versions: " + ", ".join(f"{lib} {version(lib)}" for lib in LIBRARIES) + ".")
    print(
        "x best peer: bpecore / the fastest exact peer in the row (named). 'not exact': checked against tiktoken on"
    )
    print("every slice first, and not timed. '-': not installed.\n")
    print(
        "| encoding | corpus | op | slice | "
        + " | ".join(LIBRARIES)
        + " | x tiktoken | x best peer |"
    )
    print("|---|---|---|---:|" + "---:|" * len(LIBRARIES) + "---:|---:|")
    for name in ENCODINGS:
        check = subprocess.run(
            [
                sys.executable,
                __file__,
                "--_check",
                name,
                str(size),
                str(reps),
                ",".join(names),
                vocab_dir,
            ],
            check=False,
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            raise SystemExit(f"exactness check failed:\n{check.stderr}")
        verdicts = json.loads(check.stdout.strip().splitlines()[-1])
        libs = {lib: fs for lib in LIBRARIES if (fs := library(lib, name, vocab_dir)) is not None}
        for cname in names:
            slices = first_seen_slices(corpus(cname), size, reps)
            exact = {lib: fs for lib, fs in libs.items() if verdicts[cname].get(lib) is None}
            for fs in exact.values():  # warm up: the first slice, never timed
                fs["count"](fresh(slices[0]))
                fs["encode"](fresh(slices[0]))
            for k, op in enumerate(("count", "encode")):
                rates: dict[str, list[float]] = {lib: [] for lib in exact}
                order = list(exact)
                for r in range(reps):
                    text = slices[1 + k * reps + r]
                    mb = len(text.encode("utf-8")) / 1e6
                    copies = {lib: fresh(text) for lib in order}
                    for lib in order:
                        f = exact[lib][op]
                        t0 = clock()
                        f(copies[lib])
                        rates[lib].append(mb / (clock() - t0))
                    order = order[1:] + order[:1]
                rate = {lib: statistics.median(v) for lib, v in rates.items()}
                cells = []
                for lib in LIBRARIES:
                    if lib in rate:
                        cells.append(f"{rate[lib]:.1f}")
                    elif lib in libs:
                        cells.append(verdicts[cname][lib])
                    else:
                        cells.append("-")
                peer_rates = {p: rate[p] for p in PEERS if p in rate}
                x_tk = (
                    f"{rate['bpecore'] / rate['tiktoken']:.2f}"
                    if "bpecore" in rate and "tiktoken" in rate
                    else "-"
                )
                best = max(peer_rates, key=peer_rates.get) if peer_rates else None
                x_best = (
                    f"{rate['bpecore'] / peer_rates[best]:.2f} ({best})"
                    if best and "bpecore" in rate
                    else "-"
                )
                kb = len(slices[1].encode("utf-8")) / 1e3
                print(
                    f"| {name} | {cname} | {op} | {kb:.0f} KB | "
                    + " | ".join(cells)
                    + f" | {x_tk} | {x_best} |",
                    flush=True,
                )


def cold_and_small_texts() -> tuple[str, list[str]]:
    """The cold call's text and the 10,000 small texts (see the module docstring)."""
    sources = [corpus(c) for c in ("english", "code", "multilingual")]
    cold = "".join(src[-COLD_CHARS:] for src in sources)
    texts = []
    per = -(-SMALL_TEXTS // len(sources))
    for src in sources:
        body = src[:-COLD_CHARS]
        step = (len(body) - SMALL_CHARS) // (per - 1)
        texts += [body[i * step : i * step + SMALL_CHARS] for i in range(per)]
    texts = texts[:SMALL_TEXTS]
    random.Random(0).shuffle(texts)
    return cold, texts


def cold_small_worker(
    lib: str, name: str, op: str, vocab_dir: str, clock=time.perf_counter
) -> dict[str, object]:
    """In a fresh process: build ``lib``, time its first call and then the small texts; check them after."""
    cold, texts = cold_and_small_texts()
    texts = [fresh(t) for t in texts]
    fs = library(lib, name, vocab_dir)
    if fs is None:
        return {"installed": False}
    f = fs[op]
    t0 = clock()
    cold_out = f(cold)
    first = clock() - t0
    outs = []
    t0 = clock()
    for t in texts:
        outs.append(f(t))
    small = clock() - t0
    import tiktoken

    tk = tiktoken.Encoding(
        name, pat_str=ENCODINGS[name], mergeable_ranks=shared_ranks(name), special_tokens={}
    )
    want = [tk.encode_ordinary(t) for t in (cold, *texts)]
    got = [cold_out, *outs]
    if op == "count":
        exact = all(g == len(w) for g, w in zip(got, want))
    else:
        exact = all(list(g) == w for g, w in zip(got, want))
    return {
        "installed": True,
        "exact": exact,
        "first_s": first,
        "small_s": small,
        "cold_mb": len(cold.encode()) / 1e6,
        "small_mb": sum(len(t.encode()) for t in texts) / 1e6,
    }


def cold_and_small(libs: list[str], clock_name: str = "wall") -> None:
    cold, texts = cold_and_small_texts()
    what = "process CPU time" if clock_name == "cpu" else "wall time"
    print(f"\n## Cold and many small texts ({what}; a fresh process per library, encoding and op)")
    print(
        f"first call: ms for the first call after building, on {len(cold.encode()) / 1e3:.0f} KB (english, code,"
    )
    print(
        f"multilingual). small: MB/s over {len(texts):,} calls, one per distinct text of ~{SMALL_CHARS:,} chars"
    )
    print(
        "(windows of the same three corpora, overlapping), in the same process after the first call. Checked against"
    )
    print(
        "tiktoken after timing; 'not exact' replaces the figure. x best peer: bpecore against the fastest exact peer.\n"
    )
    print("| encoding | op | figure | " + " | ".join(libs) + " | x best peer |")
    print("|---|---|---|" + "---:|" * len(libs) + "---:|")
    vocab_dir = peer_vocab_dir()
    for name in ENCODINGS:
        for op in ("count", "encode"):
            res = {}
            for lib in libs:
                r = subprocess.run(
                    [sys.executable, __file__, "--_cold", lib, name, op, vocab_dir, clock_name],
                    check=False,
                    capture_output=True,
                    text=True,
                )
                if r.returncode != 0:
                    res[lib] = {
                        "installed": True,
                        "error": (r.stderr.strip().splitlines() or ["?"])[-1],
                    }
                else:
                    res[lib] = json.loads(r.stdout.strip().splitlines()[-1])
            for figure in ("first call ms", "small MB/s"):
                vals: dict[str, float] = {}
                cells = []
                for lib in libs:
                    d = res[lib]
                    if not d["installed"]:
                        cells.append("-")
                    elif "error" in d:
                        cells.append(f"fails ({d['error'][:40]})")
                    elif not d["exact"]:
                        cells.append("not exact")
                    else:
                        v = (
                            d["first_s"] * 1e3
                            if figure == "first call ms"
                            else d["small_mb"] / d["small_s"]
                        )
                        vals[lib] = v
                        cells.append(f"{v:.2f}" if figure == "first call ms" else f"{v:.1f}")
                peer_vals = {p: v for p, v in vals.items() if p != "bpecore"}
                x = "-"
                if "bpecore" in vals and peer_vals:
                    if figure == "first call ms":  # lower is better: the ratio of speeds
                        best = min(peer_vals, key=peer_vals.get)
                        x = f"{peer_vals[best] / vals['bpecore']:.2f} ({best})"
                    else:
                        best = max(peer_vals, key=peer_vals.get)
                        x = f"{vals['bpecore'] / peer_vals[best]:.2f} ({best})"
                print(
                    f"| {name} | {op} | {figure} | " + " | ".join(cells) + f" | {x} |", flush=True
                )


def small_inputs(reps: int) -> None:
    print(
        "\n## Small inputs (below the 4 KB piece-cache threshold or just above), english+code+multilingual, MB/s"
    )
    print("| encoding | chunk | op | bpecore | tiktoken | x tiktoken |")
    print("|---|---:|---|---:|---:|---:|")
    for name in ENCODINGS:
        enc = bpecore.get_encoding(name)
        tk = peers(name, only=("tiktoken",)).get("tiktoken")
        text = "".join(corpus(c)[:300_000] for c in ("english", "code", "multilingual"))
        for chunk in (1_000, 64_000):
            chunks = [text[i : i + chunk] for i in range(0, len(text), chunk)]
            mb = len(text.encode()) / 1e6
            for op, ours in (("count", enc.count), ("encode", enc.encode_ordinary)):
                funcs = {"bpecore": lambda cs, f=ours: [f(c) for c in cs]}
                if tk:
                    funcs["tiktoken"] = lambda cs, f=tk[op]: [f(c) for c in cs]
                t = interleaved(funcs, chunks, reps)
                ours_rate = mb / t["bpecore"]
                tk_rate = mb / t["tiktoken"] if tk else float("nan")
                print(
                    f"| {name} | {chunk:,} | {op} | {ours_rate:.1f} | {tk_rate:.1f} | {ours_rate / tk_rate:.2f} |",
                    flush=True,
                )


def worst_cases(reps: int) -> None:
    # Thread CPU time, not wall time: on a loaded box a 1 MB call is preempted far more often than a
    # 10 KB one, which doubled the wall-clock ratio of an input whose instruction count is exactly
    # linear (callgrind: 71 Ir/byte for 'a' * 10**4 and 'a' * 10**6 alike).
    print("\n## Worst cases: encode_ordinary thread-CPU ns per byte (linear = flat across sizes)")
    print("| encoding | input | 10 KB | 100 KB | 1 MB | max/min | tiktoken 1 MB |")
    print("|---|---|---:|---:|---:|---:|---:|")
    rng = random.Random(0)
    b64 = base64.b64encode(rng.randbytes(800_000)).decode()[:1_000_000]
    for name in ENCODINGS:
        enc = bpecore.get_encoding(name)
        tk = peers(name, only=("tiktoken",)).get("tiktoken")
        for label, make in (("'a' * n", lambda n: "a" * n), ("random base64", lambda n: b64[:n])):
            per_byte = []
            for n in (10_000, 100_000, 1_000_000):
                text = make(n)
                per_byte.append(
                    interleaved({"b": enc.encode_ordinary}, text, reps, time.thread_time)["b"]
                    / n
                    * 1e9
                )
            tk_ns = (
                interleaved({"t": tk["encode"]}, make(1_000_000), 1, time.thread_time)["t"]
                / 1e6
                * 1e9
                if tk
                else float("nan")
            )
            print(
                f"| {name} | {label} | "
                + " | ".join(f"{x:.1f}" for x in per_byte)
                + f" | {max(per_byte) / min(per_byte):.2f} | {tk_ns:.1f} |",
                flush=True,
            )


def batches(reps: int) -> None:
    print("\n## Batches: 2 threads vs 1 (english+code+multilingual, 2,000 texts of ~2.5 KB), MB/s")
    print(
        "CPU/wall = process CPU seconds per wall second in the 2-thread run: below ~1.8 the box did not"
    )
    print(
        "give us two cores, and the speed-up is bounded by it, not by the GIL (held only for the lists)."
    )
    print(
        "Speed-up: median over rounds of (1-thread time / 2-thread time), the two calls side by side."
    )
    print("| encoding | op | 1 thread | 2 threads | speed-up | CPU/wall (2 threads) |")
    print("|---|---|---:|---:|---:|---:|")
    text = "".join(corpus(c)[:1_700_000] for c in ("english", "code", "multilingual"))
    texts = [text[i : i + 2_500] for i in range(0, len(text), 2_500)][:2_000]
    mb = sum(len(t.encode()) for t in texts) / 1e6
    # A call takes 50-150 ms, and a neighbour that takes the second core for a moment spoils a
    # 2-thread call: the speed-up is the median of per-round ratios (one 1-thread and one 2-thread
    # call side by side, so both see the same load) over at least 15 rounds.
    rounds = max(reps, 15)
    for name in ENCODINGS:
        enc = bpecore.get_encoding(name)
        for op in ("count_batch", "encode_batch"):
            f = getattr(enc, op)
            f(texts, num_threads=2)  # warm up
            one, two = [], []
            for _ in range(rounds):
                for n, out in ((1, one), (2, two)):
                    t0 = time.perf_counter()
                    f(texts, num_threads=n)
                    out.append(time.perf_counter() - t0)
            t = {1: statistics.median(one), 2: statistics.median(two)}
            speedup = statistics.median(a / b for a, b in zip(one, two))
            cpu = interleaved({2: lambda ts: f(ts, num_threads=2)}, texts, reps, time.process_time)[
                2
            ]
            print(
                f"| {name} | {op} | {mb / t[1]:.1f} | {mb / t[2]:.1f} | {speedup:.2f} | {cpu / t[2]:.2f} |",
                flush=True,
            )


RSS_SNIPPET = """
import sys, json
sys.path.insert(0, {root!r})
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
before = rss()
which = {which!r}
if which == "bpecore":
    import bpecore
    encs = [bpecore.get_encoding(n) for n in ("cl100k_base", "o200k_base")]
    encs[0].count("warm up"); encs[1].count("warm up")
elif which == "tiktoken":
    import tiktoken
    sys.path.insert(0, {bench!r})
    from bench_encode import shared_ranks, ENCODINGS
    encs = [tiktoken.Encoding(n, pat_str=p, mergeable_ranks=shared_ranks(n), special_tokens={{}}) for n, p in ENCODINGS.items()]
    encs[0].encode_ordinary("warm up"); encs[1].encode_ordinary("warm up")
else:
    import bpe_openai
    encs = [bpe_openai.get_encoding(n) for n in ("cl100k_base", "o200k_base")]
    encs[0].encode_ordinary("warm up"); encs[1].encode_ordinary("warm up")
print(json.dumps([before, rss()]))
"""


def memory() -> None:
    print(
        "\n## Resident memory after loading cl100k_base + o200k_base (fresh subprocess each, VmRSS)"
    )
    print("| library | RSS before | RSS after | delta |")
    print("|---|---:|---:|---:|")
    for which in ("bpecore", "tiktoken", "bpe-openai"):
        code = RSS_SNIPPET.format(root=str(ROOT), which=which, bench=str(ROOT / "benches"))
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
        if r.returncode != 0:
            print(
                f"| {which} | - | - | failed: {r.stderr.strip().splitlines()[-1] if r.stderr else '?'} |"
            )
            continue
        before, after = json.loads(r.stdout.strip().splitlines()[-1])
        print(
            f"| {which} | {before / 2**20:.0f} MB | {after / 2**20:.0f} MB | {(after - before) / 2**20:.0f} MB |",
            flush=True,
        )


# ---------------------------------------------------------------------------------- --families
#: (row label, bench_open_models family, reference). "tokenizers": Hugging Face `tokenizers` on
#: the tokenizer.json the row's bpecore encoding is ``load_hf`` of; "own": the family's own
#: tokenizer (Meta's tiktoken Encoding, mistral-common's Tekkenizer) against ``get_encoding``.
FAMILY_ROWS = [
    ("GPT-2", "gpt2", "tokenizers"),
    ("GPT-NeoX", "gpt-neox", "tokenizers"),
    ("Falcon", "falcon", "tokenizers"),
    ("StarCoder2", "starcoder", "tokenizers"),
    ("Qwen2", "qwen2", "tokenizers"),
    ("Qwen3.5", "qwen35", "tokenizers"),
    ("DeepSeek-Coder v1", "deepseek-coder", "tokenizers"),
    ("DeepSeek V3", "deepseek", "tokenizers"),
    ("DeepSeek LLM", "deepseek-llm", "tokenizers"),
    ("Llama 3", "llama-bpe", "tokenizers"),
    ("Llama 3", "llama3", "own"),
    ("Llama 4", "llama4", "tokenizers"),
    ("Llama 4", "llama4", "own"),
    ("Tekken", "tekken", "tokenizers"),
    ("Tekken", "tekken", "own"),
]


def _open_models():
    """benches/bench_open_models.py, whose loaders build every family offline."""
    sys.path.insert(0, str(ROOT / "benches"))
    import bench_open_models

    return bench_open_models


def family(key: str, reference: str, directory: str):
    """(bpecore encoding, reference encode, reference name, file) of a FAMILY_ROWS row;
    ImportError when its package or GGUF file is missing. A "tokenizers" row's encoding is
    ``load_hf`` of the very file `tokenizers` reads (bench_open_models writes the GGUF families'
    files as ``<family>.json``; Llama 4 and Tekken are their named encodings' ``save_hf``)."""
    bom = _open_models()
    if reference == "own":
        enc, ref, name = bom.build(key, directory)
        return enc, ref, name, "tokenizer.model" if key.startswith("llama") else "tekken.json"
    if key in ("llama4", "tekken"):
        if key == "tekken":
            import mistral_common  # noqa: F401  (the vendored file's reference package)
        else:
            import llama_models  # noqa: F401
        path = os.path.join(directory, f"{key}.json")
        bpecore.get_encoding(key).save_hf(path)
        return bpecore.load_hf(path), bom._hf_reference(path), "tokenizers", "save_hf"
    enc, ref, name = bom.build(key, directory)
    if key in bom.GGUF_FAMILIES:
        enc = bpecore.load_hf(os.path.join(directory, f"{key}.json"))
        return enc, ref, name, "GGUF -> tokenizer.json"
    return enc, ref, name, "tokenizer.json"


def family_check(key: str, reference: str, size: int, reps: int, names: list[str]) -> dict:
    """{corpus: None or why not exact} over every slice the families table times."""
    with tempfile.TemporaryDirectory() as directory:
        enc, ref, _, _ = family(key, reference, directory)
        out: dict[str, str | None] = {}
        for cname in names:
            out[cname] = None
            for piece in first_seen_slices(corpus(cname), size, reps):
                want = ref(piece)
                if enc.encode_ordinary(piece) != want:
                    out[cname] = "not exact (encode)"
                elif enc.count(piece) != len(want):
                    out[cname] = "not exact (count)"
                if out[cname]:
                    break
        return out


def families_table(
    size: int, reps: int, names: list[str], only: set[str] | None, clock=time.perf_counter
) -> None:
    """bpecore against `tokenizers` (and the family's own tokenizer) per open-model family."""
    what = "process CPU time" if clock is time.process_time else "wall time"
    print(
        f"\n## Open-model families, MB/s (UTF-8 bytes, {what}), median of {reps} first-seen slices "
        f"of up to {size:,} chars"
    )
    print(
        "Slices as in the main table: slice 0 warms up, the count slices time bpecore count and "
        "the reference's encode, the encode slices bpecore encode and the reference's encode "
        "(order rotated per slice); the reference cell is the median of both. Exactness (ids "
        "and count equal to the reference's on every slice) is checked first in a subprocess "
        "that has not seen the text; a row that is not exact is not timed. Single thread."
    )
    print(f"tokenizers {importlib.metadata.version('tokenizers')}.\n")
    print(
        "| family | file | corpus | bpecore path | count | encode | reference | ref encode "
        "| count / ref | encode / ref |"
    )
    print("|---|---|---|---|---:|---:|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as directory:
        for label, key, reference in FAMILY_ROWS:
            if only and key not in only and label not in only:
                continue
            check = subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--_family_check",
                    key,
                    reference,
                    str(size),
                    str(reps),
                    ",".join(names),
                ],
                check=False,
                capture_output=True,
                text=True,
            )
            if check.returncode != 0:
                last = check.stderr.strip().splitlines()[-1:] or ["?"]
                print(f"| {label} | | | | | | {reference}: skipped ({last[0]}) | | | |", flush=True)
                continue
            verdicts = json.loads(check.stdout.strip().splitlines()[-1])
            enc, ref, ref_name, source = family(key, reference, directory)
            for cname in names:
                head = f"| {label} | {source} | {cname} | {type(enc).__name__} |"
                if verdicts[cname]:
                    print(f"{head} {verdicts[cname]} | | {ref_name} | | | |", flush=True)
                    continue
                slices = first_seen_slices(corpus(cname), size, reps)
                enc.count(fresh(slices[0])), enc.encode_ordinary(fresh(slices[0]))
                ref(fresh(slices[0]))
                rates: dict[str, list[float]] = {"count": [], "encode": [], "ref": []}
                for k, op in enumerate(("count", "encode")):
                    ours = enc.count if op == "count" else enc.encode_ordinary
                    pair = [(op, ours), ("ref", ref)]
                    for r in range(reps):
                        text = slices[1 + k * reps + r]
                        mb = len(text.encode("utf-8")) / 1e6
                        for row_key, func in pair if r % 2 == 0 else pair[::-1]:
                            copy = fresh(text)
                            t0 = clock()
                            func(copy)
                            rates[row_key].append(mb / (clock() - t0))
                rate = {k: statistics.median(v) for k, v in rates.items()}
                print(
                    f"{head} {rate['count']:.1f} | {rate['encode']:.1f} | {ref_name} | "
                    f"{rate['ref']:.1f} | {rate['count'] / rate['ref']:.1f}x | "
                    f"{rate['encode'] / rate['ref']:.1f}x |",
                    flush=True,
                )
            del enc, ref


def main() -> None:
    if sys.argv[1:2] == ["--_check"]:  # the exactness subprocess of main_table
        name, size, reps, names, vocab_dir = sys.argv[2:7]
        print(json.dumps(check_exact(name, int(size), int(reps), names.split(","), vocab_dir)))
        return
    if sys.argv[1:2] == ["--_family_check"]:  # the exactness subprocess of families_table
        key, reference, size, reps, names = sys.argv[2:7]
        verdict = family_check(key, reference, int(size), int(reps), names.split(","))
        print(json.dumps(verdict))
        return
    if sys.argv[1:2] == ["--_cold"]:  # one subprocess of cold_and_small
        lib, name, op, vocab_dir, clock_name = sys.argv[2:7]
        clock = time.process_time if clock_name == "cpu" else time.perf_counter
        print(json.dumps(cold_small_worker(lib, name, op, vocab_dir, clock)))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--size", type=int, default=200_000, help="characters of each timed slice, at most"
    )
    ap.add_argument(
        "--reps",
        type=int,
        default=3,
        help="timed slices per cell (the corpus is cut in 2 * reps + 1)",
    )
    ap.add_argument(
        "--quick", action="store_true", help="english, code, multilingual only; no extra sections"
    )
    ap.add_argument(
        "--clock",
        choices=("wall", "cpu"),
        default="wall",
        help="main, cold and small-texts tables: wall or process CPU time",
    )
    ap.add_argument(
        "--corpora", help="comma-separated corpora for the main table (implies no extra sections)"
    )
    ap.add_argument("--batches", action="store_true", help="only the batch table (2 threads vs 1)")
    ap.add_argument(
        "--families",
        nargs="?",
        const="all",
        help="only the open-model families table (all, or comma-separated families / labels)",
    )
    ap.add_argument(
        "--peers-only",
        action="store_true",
        help="only the main table and the cold / small-texts table",
    )
    args = ap.parse_args()
    clock = time.process_time if args.clock == "cpu" else time.perf_counter
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT
    ).stdout.strip()
    print(f"# bench_encode at {commit}, python {sys.version.split()[0]}, {os.cpu_count()} CPUs\n")
    print(f"load average before: {os.getloadavg()[0]:.2f}\n")
    if args.families:
        only = None if args.families == "all" else set(args.families.split(","))
        names = args.corpora.split(",") if args.corpora else CORPORA[:3]
        families_table(args.size, args.reps, names, only, clock)
        print(f"\nload average after: {os.getloadavg()[0]:.2f}")
        return
    if args.batches:
        batches(args.reps)
        print(f"load average after: {os.getloadavg()[0]:.2f}")
        return
    names = args.corpora.split(",") if args.corpora else CORPORA[:3] if args.quick else CORPORA
    main_table(args.size, args.reps, names, clock)
    if not (args.quick or args.corpora):
        cold_and_small(LIBRARIES, args.clock)
        if not args.peers_only:
            small_inputs(args.reps)
            worst_cases(args.reps)
            batches(args.reps)
            memory()
    print(f"\nload average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()

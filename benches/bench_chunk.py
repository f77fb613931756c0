"""Chunking: bpecore.chunk vs semantic-text-splitter and LangChain, side by side in one run.

Usage: python benches/bench_chunk.py [--corpora english code multilingual] [--limits 128 512 2048]
                                     [--size BYTES] [--runs N] [--splitters NAME ...] [--clock wall|cpu]
                                     [--count]
       python benches/bench_chunk.py --sets prose code [--limits 128 256 512 1024] [--runs N]
For each corpus (the first --size bytes of ../shared/corpora/<name>.1mb.txt.gz, default the whole
file), each limit and each splitter it reports MB/s (UTF-8 input bytes / best of --runs; the runs
of the splitters alternate, so a change in the machine's load hits them alike), the number of
chunks, the mean fill (tokens / limit, counted by tiktoken) and how many chunks exceed the limit
by tiktoken's count. ``--clock cpu`` times with the process's CPU time instead of the wall clock:
steadier on a shared, loaded machine (every contender runs in one thread). ``--count`` also
prints bpecore's ``count`` of each whole corpus in MB/s, the floor under chunking (which makes
one interval-counter pass over the text, then a few queries per chunk). Every contender counts
with cl100k_base:
  bpecore           bpecore.chunk(text, "cl100k_base", limit)          (trim, no overlap)
  sts               semantic_text_splitter.TextSplitter.from_tiktoken_model("gpt-4", limit)
                    (its Rust tiktoken, vocab compiled in: no network)
  sts-callback      TextSplitter.from_callback(len(tiktoken.encode_ordinary(s)), limit)
  langchain-token   langchain_text_splitters.TokenTextSplitter(encoding_name="cl100k_base")
  langchain-recursive  RecursiveCharacterTextSplitter.from_tiktoken_encoder(...)
``--sets`` instead times bpecore alone against its own ``count``, on the texts of
``bench_chunk_quality.py`` (prose: Chroma's five documents; code: the parseable prefix of the
code corpus): per set, mode (the default; ``balance=True``; ``markdown=True`` on prose,
``language="text"`` on code) and limit, the MB/s of ``count`` and of ``chunk`` over all the
set's texts (process CPU time, medians of --runs, the two interleaved) and their ratio.
tiktoken is built from ../shared/vocab (no download) and put in tiktoken's registry cache so the
LangChain splitters find it. Splitters that are not installed are skipped.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the in-place build, if not installed
import bpecore
from bpecore.registry import CL100K_PATTERN

SHARED = Path(__file__).resolve().parents[2] / "shared"


def load_tiktoken():
    import tiktoken
    import tiktoken.registry

    data = gzip.decompress((SHARED / "vocab" / "cl100k_base.tiktoken.gz").read_bytes())
    ranks = {
        base64.b64decode(t): int(r) for t, r in (line.split() for line in data.splitlines() if line)
    }
    enc = tiktoken.Encoding(
        "cl100k_base",
        pat_str=CL100K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=bpecore.get_encoding("cl100k_base").special_tokens,
    )
    tiktoken.registry.ENCODINGS["cl100k_base"] = (
        enc  # so get_encoding("cl100k_base") needs no network
    )
    return enc


def splitters(tik) -> dict[str, Callable[[int], Callable[[str], list[str]]]]:
    """name -> (limit -> (text -> chunk texts)); construction is outside the timed call."""
    out: dict[str, Callable[[int], Callable[[str], list[str]]]] = {}
    enc = bpecore.get_encoding("cl100k_base")
    out["bpecore"] = lambda n: lambda text: [c.text for c in bpecore.chunker.chunk(text, enc, n)]
    try:
        from semantic_text_splitter import TextSplitter

        out["sts"] = lambda n: TextSplitter.from_tiktoken_model("gpt-4", n).chunks
        out["sts-callback"] = lambda n: (
            TextSplitter.from_callback(lambda s: len(tik.encode_ordinary(s)), n).chunks
        )
    except ImportError:
        print("# semantic-text-splitter not installed: skipped", file=sys.stderr)
    try:
        from langchain_text_splitters import RecursiveCharacterTextSplitter, TokenTextSplitter

        out["langchain-token"] = lambda n: (
            TokenTextSplitter(encoding_name="cl100k_base", chunk_size=n, chunk_overlap=0).split_text
        )
        out["langchain-recursive"] = lambda n: (
            RecursiveCharacterTextSplitter.from_tiktoken_encoder(
                encoding_name="cl100k_base", chunk_size=n, chunk_overlap=0
            ).split_text
        )
    except ImportError:
        print("# langchain-text-splitters not installed: skipped", file=sys.stderr)
    return out


def _timed(clock: Callable[[], float], f: Callable[[str], object], text: str) -> float:
    t0 = clock()
    f(text)
    return clock() - t0


def against_count(sets: list[str], limits: list[int], runs: int) -> None:
    """``chunk`` against ``count`` on the quality bench's texts (see the module docstring)."""
    import statistics

    import bench_chunk_quality as quality

    from bpecore.chunker import chunk

    enc = bpecore.get_encoding("cl100k_base")
    modes = {
        "prose": {"default": {}, "balance": {"balance": True}, "markdown": {"markdown": True}},
        "code": {"default": {}, "balance": {"balance": True}, "text": {"language": "text"}},
    }
    print(f"# process CPU time, medians of {runs}, load average {os.getloadavg()[0]:.1f}")
    print("| set   | mode     | limit | count MB/s | chunk MB/s | chunk / count |")
    print("|-------|----------|------:|-----------:|-----------:|--------------:|")
    for name in sets:
        texts = list(
            (quality.prose_set() if name == "prose" else quality.code_set(1 << 20))[0].values()
        )
        mb = sum(len(t.encode("utf-8")) for t in texts) / 1e6
        for mode, kwargs in modes[name].items():
            for limit in limits:
                t_count, t_chunk = [], []
                for _ in range(runs):
                    t0 = time.process_time()
                    for t in texts:
                        enc.count(t)
                    t1 = time.process_time()
                    for t in texts:
                        chunk(t, enc, limit, **kwargs)
                    t_count.append(t1 - t0)
                    t_chunk.append(time.process_time() - t1)
                c, k = mb / statistics.median(t_count), mb / statistics.median(t_chunk)
                print(
                    f"| {name:5} | {mode:8} | {limit:5d} | {c:10.1f} | {k:10.1f} | {k / c:13.2f} |",
                    flush=True,
                )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpora", nargs="+", default=["english", "code", "multilingual"])
    ap.add_argument("--limits", nargs="+", type=int, default=[128, 512, 2048])
    ap.add_argument("--size", type=int, default=0, help="bytes of each corpus to use (0: all)")
    ap.add_argument("--runs", type=int, default=1, help="report the best of this many runs")
    ap.add_argument("--splitters", nargs="+", default=None, help="subset of contenders to run")
    ap.add_argument(
        "--clock", choices=["wall", "cpu"], default="wall", help="wall clock or process CPU time"
    )
    ap.add_argument(
        "--count",
        action="store_true",
        help="also time bpecore's count of each whole corpus (the floor chunking builds on)",
    )
    ap.add_argument(
        "--sets",
        nargs="+",
        choices=["prose", "code"],
        help="time chunk against count on the quality bench's texts instead (bpecore only)",
    )
    args = ap.parse_args()
    if args.sets:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        against_count(args.sets, args.limits, max(args.runs, 3))
        return

    import bpecore.chunker  # noqa: F401  (the name used by the bpecore contender)

    tik = load_tiktoken()
    contenders = splitters(tik)
    if args.splitters:
        contenders = {k: v for k, v in contenders.items() if k in args.splitters}
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).parent,
    ).stdout.strip()
    enc = bpecore.get_encoding("cl100k_base")
    clock = time.perf_counter if args.clock == "wall" else time.process_time
    print(
        f"# {platform.processor() or platform.machine()}, Python {platform.python_version()}, commit {commit}, "
        f"interval_counter={'yes' if hasattr(enc, 'interval_counter') else 'no (slow exact adapter)'}, "
        f"clock={args.clock}, load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"| {'corpus':12} | {'limit':>5} | {'splitter':19} | {'MB/s':>7} | {'chunks':>6} | {'mean fill':>9} | {'over limit':>10} |"
    )
    print(f"|{'-' * 14}|{'-' * 7}|{'-' * 21}|{'-' * 9}|{'-' * 8}|{'-' * 11}|{'-' * 12}|")
    for name in args.corpora:
        text = gzip.decompress((SHARED / "corpora" / f"{name}.1mb.txt.gz").read_bytes()).decode(
            "utf-8"
        )
        if args.size:
            text = text.encode("utf-8")[: args.size].decode("utf-8", "ignore")
        mb = len(text.encode("utf-8")) / 1e6
        if args.count:
            best_count = min(_timed(clock, enc.count, text) for _ in range(max(3, args.runs)))
            print(f"# {name}: count(text) alone {mb / best_count:.2f} MB/s", flush=True)
        for limit in args.limits:
            split = {label: make(limit) for label, make in contenders.items()}
            best = dict.fromkeys(split, float("inf"))
            chunked = {}
            for _ in range(args.runs):
                for label, f in split.items():
                    t0 = clock()
                    chunked[label] = f(text)
                    best[label] = min(best[label], clock() - t0)
            for label in split:
                chunks = chunked[label]
                counts = [len(tik.encode_ordinary(c)) for c in chunks]
                fill = sum(counts) / len(counts) / limit if counts else 0.0
                over = sum(c > limit for c in counts)
                print(
                    f"| {name:12} | {limit:5d} | {label:19} | {mb / best[label]:7.2f} | {len(chunks):6d} | {fill:9.3f} | {over:10d} |",
                    flush=True,
                )


if __name__ == "__main__":
    main()

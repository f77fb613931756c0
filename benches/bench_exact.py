"""Exact operations vs the naive way (re-encode per query with tiktoken), side by side in one run.

    python benches/bench_exact.py [--quick]

- 10,000 random interval counts on a 1 MB document: IntervalCounter vs tiktoken on each slice;
- appending a 100 KB document in 1-character pushes: AppendableCounter vs one-shot count;
- split_at(text, 512) on 10 KB, 1 MB and 10 MB documents (flat in document size);
- count_till_limit(10 MB text, 1000) vs count of the whole text;
- worst case: 1 MB of one letter pushed a character at a time.
Medians of repeated runs; the machine is shared, so compare ratios.
"""

from __future__ import annotations

import argparse
import base64
import gzip
import random
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
SHARED = ROOT.parent / "shared"

import bpecore  # noqa: E402
from bpecore.registry import CL100K_PATTERN  # noqa: E402


def corpus(name: str) -> str:
    return gzip.decompress((SHARED / "corpora" / f"{name}.1mb.txt.gz").read_bytes()).decode()


def tiktoken_cl100k():
    try:
        import tiktoken
    except ImportError:
        return None
    data = gzip.decompress((SHARED / "vocab" / "cl100k_base.tiktoken.gz").read_bytes())
    ranks = {
        base64.b64decode(t): int(r) for t, r in (line.split() for line in data.splitlines() if line)
    }
    return tiktoken.Encoding(
        "cl100k_base", pat_str=CL100K_PATTERN, mergeable_ranks=ranks, special_tokens={}
    )


def median_time(fn, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="fewer repeats")
    args = ap.parse_args()
    repeat = 3 if args.quick else 5
    enc = bpecore.get_encoding("cl100k_base")
    tik = tiktoken_cl100k()
    rows = []
    english = corpus("english")
    doc = english[:1_000_000]

    # intervals
    rng = random.Random(0)
    ranges = []
    for _ in range(10_000):
        i = rng.randrange(len(doc))
        ranges.append((i, min(len(doc), i + rng.randrange(1, 2000))))
    t_build = median_time(lambda: enc.interval_counter(doc), repeat)
    ic = enc.interval_counter(doc)
    t_ours = median_time(lambda: ic.count_many(ranges), repeat)
    t_ours_calls = median_time(lambda: [ic.count(i, j) for i, j in ranges], repeat)
    assert [ic.count(i, j) for i, j in ranges[:300]] == [
        enc.count(doc[i:j]) for i, j in ranges[:300]
    ]
    t_naive = median_time(lambda: [enc.count(doc[i:j]) for i, j in ranges], 1)
    rows.append(
        (
            "10k intervals on 1 MB: build + queries",
            t_build + t_ours,
            "bpecore re-count each slice",
            t_naive,
        )
    )
    if tik is not None:
        t_tik = median_time(lambda: [len(tik.encode_ordinary(doc[i:j])) for i, j in ranges], 1)
        rows.append(
            (
                "10k intervals on 1 MB: build + queries",
                t_build + t_ours,
                "tiktoken re-encode each slice",
                t_tik,
            )
        )
        rows.append(
            (
                "10k intervals on 1 MB: queries (count_many)",
                t_ours,
                "tiktoken re-encode each slice",
                t_tik,
            )
        )
        rows.append(
            (
                "10k intervals on 1 MB: queries (count each)",
                t_ours_calls,
                "tiktoken re-encode each slice",
                t_tik,
            )
        )
    uniform = [
        tuple(sorted((rng.randrange(len(doc) + 1), rng.randrange(len(doc) + 1))))
        for _ in range(10_000)
    ]
    t_uni = median_time(lambda: ic.count_many(uniform), repeat)
    assert ic.count_many(uniform[:20]) == [enc.count(doc[i:j]) for i, j in uniform[:20]]
    if tik is not None:
        sample = uniform[:50]
        t_tik_uni = median_time(
            lambda: [len(tik.encode_ordinary(doc[i:j])) for i, j in sample], 1
        ) * (len(uniform) / len(sample))
        rows.append(
            (
                "10k uniform intervals (avg 330 KB): queries",
                t_uni,
                "tiktoken, 50 timed, x200",
                t_tik_uni,
            )
        )
    rows.append(
        (
            "interval counter build (one pass, 1 MB)",
            t_build,
            "count(1 MB)",
            median_time(lambda: enc.count(doc), repeat),
        )
    )
    print(
        f"interval counter memory: {ic.memory_bytes() / len(doc.encode()):.1f} bytes per text byte"
    )

    # appending
    text100k = english[:100_000]

    def append_all(text=text100k):
        ac = enc.appendable_counter()
        for ch in text:
            ac.push(ch)
        return ac.count

    ac = enc.appendable_counter()
    for ch in text100k:
        ac.push(ch)
    print(
        f"appending counter memory after 100 KB: {ac.memory_bytes() / len(text100k.encode()):.2f} bytes per text byte"
    )
    t_app = median_time(append_all, repeat)
    t_once = median_time(lambda: enc.count(text100k), repeat)
    assert append_all() == enc.count(text100k)
    rows.append(("append 100 KB, 1-char pushes", t_app, "one-shot count", t_once))
    vocab = enc._vocab

    def call_floor(text=text100k):
        # the floor under any per-character API: one call of a trivial Cython method per char
        reachable = vocab.is_reachable
        for _ in text:
            reachable(0)

    rows.append(
        (
            "floor: 100 KB, a no-op Cython call per char",
            median_time(call_floor, repeat),
            "one-shot count",
            t_once,
        )
    )
    if tik is not None:
        t_tik1 = median_time(lambda: len(tik.encode_ordinary(text100k)), repeat)
        rows.append(("append 100 KB, 1-char pushes", t_app, "tiktoken one-shot encode", t_tik1))

    run = "a" * 1_000_000
    t_run = median_time(lambda: append_all(run), 1)
    t_run_once = median_time(lambda: enc.count(run), 3)
    rows.append(("append 1 MB of 'a', 1-char pushes", t_run, "one-shot count", t_run_once))

    # split_at and count_till_limit, flat in size
    big = (english * 10)[:10_000_000]
    for size, label in ((10_000, "10 KB"), (1_000_000, "1 MB"), (10_000_000, "10 MB")):
        text = big[:size]
        enc.split_at(
            text, 0
        )  # the str caches its UTF-8 form on first use (ASCII text: none needed)
        t = median_time(lambda: enc.split_at(text, 512), repeat)
        rows.append((f"split_at(text, 512), {label}", t, "", None))
    for size, label in ((10_000, "10 KB"), (10_000_000, "10 MB")):
        text = big[:size]
        t = median_time(lambda: enc.split_at_end(text, 512), repeat)
        rows.append((f"split_at_end(text, 512), {label}", t, "", None))
    t_lim = median_time(lambda: enc.count_till_limit(big, 1000), repeat)
    t_full = median_time(lambda: enc.count(big), 1)
    rows.append(("count_till_limit(10 MB, 1000)", t_lim, "count(10 MB)", t_full))
    if tik is not None:
        t_tikfull = median_time(lambda: len(tik.encode_ordinary(big)), 1)
        rows.append(("count_till_limit(10 MB, 1000)", t_lim, "tiktoken encode(10 MB)", t_tikfull))

    print(
        f"{'operation':42s} {'bpecore':>11s}  {'baseline':32s} {'baseline':>11s} {'speed-up':>9s}"
    )
    for op, ours, base_name, base in rows:
        tail = f"{base_name:32s} {base * 1e3:9.2f}ms {base / ours:8.1f}x" if base else ""
        print(f"{op:42s} {ours * 1e3:9.3f}ms  {tail}")


if __name__ == "__main__":
    main()

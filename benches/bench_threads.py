"""One long text on several threads: count / encode with num_threads 1, 2 and 4.

    python benches/bench_threads.py [--sizes 1,10] [--reps 5] [--corpora english,code,...]
                                    [--encodings cl100k_base,o200k_base] [--cache off|on]

For each encoding, corpus, size (MB of UTF-8) and operation (``Encoding.count`` and
``Encoding.encode_long`` with ``num_threads``), ``--reps`` rounds; in each round every thread
count gets the round's text once, in an order rotated from round to round (interleaved A/B/C), as
a fresh str (no UTF-8 cached in it by an earlier call). The text of round r is the corpus (1 MB
in ../shared/corpora) read from an offset r * len / (reps + 1) on, wrapping around, up to the
size: no round repeats an earlier round's text from the same place (10 MB repeats the corpus
itself ten times: the corpora are 1 MB). A warm-up call of 1 and 2 threads on round 0's text is
not timed. Every result is checked against the one-thread one.

Columns, medians over the rounds: MB/s (wall clock) per thread count; the wall-clock speed-up over
one thread (median of the per-round ratios); the CPU overhead (process CPU of the call, summed
over its threads, over the one-thread call's, minus 1: the work threading adds, whatever the
load); and CPU/wall of the multi-thread call (near the thread count only when the cores were
free for it). The load average before and after each table is printed: on a machine whose other
jobs take the cores, the wall-clock speed-up measures the scheduler, not this code.

``--cache off`` (default) sets the piece cache to 0, so no call inherits pieces an earlier call
learnt (the corpora's words are all known after one call otherwise); ``--cache on`` keeps the
default cache, warm after the warm-up.
"""

from __future__ import annotations

import argparse
import gzip
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import bpecore  # noqa: E402

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
THREADS = (1, 2, 4)


def corpus(name: str) -> str:
    return gzip.decompress((SHARED / "corpora" / f"{name}.1mb.txt.gz").read_bytes()).decode()


def round_text(body: str, size_bytes: int, r: int, reps: int) -> str:
    """The corpus from offset r * len / (reps + 1) on, wrapping around, up to ``size_bytes`` of
    UTF-8 (approximately: whole characters)."""
    start = r * len(body) // (reps + 1)
    rotated = body[start:] + body[:start]
    per_char = len(body.encode("utf-8")) / len(body)
    chars = int(size_bytes / per_char)
    copies = -(-chars // len(rotated))
    return (rotated * copies)[:chars]


def fresh(text: str) -> str:
    """An equal str with no UTF-8 cached in it."""
    return (text + " ")[:-1]


def timed(fn, text: str, n: int) -> tuple[float, float, object]:
    """(wall seconds, process CPU seconds, result) of fn(text, num_threads=n)."""
    w0, c0 = time.perf_counter(), time.process_time()
    out = fn(text, num_threads=n)
    c1, w1 = time.process_time(), time.perf_counter()
    return w1 - w0, c1 - c0, out


def cell(fn, body: str, size: int, reps: int) -> dict:
    """Medians over ``reps`` interleaved rounds for each thread count."""
    wall: dict[int, list[float]] = {n: [] for n in THREADS}
    cpu: dict[int, list[float]] = {n: [] for n in THREADS}
    warm = round_text(body, size, 0, reps)
    for n in (1, 2):
        fn(fresh(warm), num_threads=n)
    nbytes = 0
    for r in range(reps):
        text = round_text(body, size, r + 1, reps + 1)
        nbytes = len(text.encode("utf-8"))
        order = THREADS[r % len(THREADS) :] + THREADS[: r % len(THREADS)]
        results = {}
        for n in order:
            w, c, results[n] = timed(fn, fresh(text), n)
            wall[n].append(w)
            cpu[n].append(c)
        for n in THREADS:
            if results[n] != results[1]:
                raise SystemExit(f"{n} threads differ from one thread (round {r})")
    out = {"mb": nbytes / 1e6}
    for n in THREADS:
        out[f"mbs{n}"] = nbytes / 1e6 / statistics.median(wall[n])
        if n > 1:
            out[f"speedup{n}"] = statistics.median(a / b for a, b in zip(wall[1], wall[n]))
            out[f"overhead{n}"] = statistics.median(cpu[n]) / statistics.median(cpu[1]) - 1
            out[f"busy{n}"] = statistics.median(c / w for c, w in zip(cpu[n], wall[n]))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", default="1,10", help="MB of text per call, comma-separated")
    ap.add_argument("--reps", type=int, default=5, help="timed rounds per cell")
    ap.add_argument("--corpora", default=",".join(CORPORA))
    ap.add_argument("--encodings", default="cl100k_base,o200k_base")
    ap.add_argument("--ops", default="count,encode")
    ap.add_argument("--cache", choices=("off", "on"), default="off")
    args = ap.parse_args()
    if args.cache == "off":
        bpecore.set_cache_size(0)
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    print(
        f"## One text on 1/2/4 threads: bpecore {commit}, {os.cpu_count()} CPUs, "
        f"piece cache {args.cache}, medians of {args.reps} interleaved rounds\n"
    )
    print(f"load average before: {os.getloadavg()[0]:.1f}\n")
    print(
        "| encoding | corpus | MB | op | 1 thr MB/s | 2 thr MB/s | 4 thr MB/s | 2 thr speed-up "
        "| 4 thr speed-up | 2 thr CPU overhead | 4 thr CPU overhead | 2 thr CPU/wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.encodings.split(","):
        enc = bpecore.get_encoding(name)
        ops = {"count": enc.count, "encode": enc.encode_long}
        for cname in args.corpora.split(","):
            body = corpus(cname)
            for size_mb in args.sizes.split(","):
                size = int(float(size_mb) * 1_000_000)
                for op in args.ops.split(","):
                    c = cell(ops[op], body, size, args.reps)
                    print(
                        f"| {name} | {cname} | {c['mb']:.1f} | {op} | {c['mbs1']:.0f} "
                        f"| {c['mbs2']:.0f} | {c['mbs4']:.0f} | {c['speedup2']:.2f}x "
                        f"| {c['speedup4']:.2f}x | {c['overhead2']:+.1%} | {c['overhead4']:+.1%} "
                        f"| {c['busy2']:.2f} |",
                        flush=True,
                    )
    print(f"\nload average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
